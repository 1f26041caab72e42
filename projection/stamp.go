package projection

// Stamp gives the events folded without a sequence (a writer's staged events,
// folded before the record that holds them was written) the sequence seq of
// that record, as if they had been folded with it: the steps they started or
// ended, the checkpoints and artifacts they added. An event read from the log
// always has a sequence, so a zero one is a staged event's. Folding staged
// events and then stamping their record's sequence gives the state that
// folding the record gives (TestStampIsFoldingTheRecord).
//
// Only the steps from the first one that was open at the last Stamp are
// looked at: those before it had ended then, and were stamped (a step that
// has ended never changes again), so that a writer's step costs the same
// however many steps its turn has made.
func Stamp(s *State, seq uint64) {
	from := s.stampFrom
	if from > len(s.Steps) {
		from = 0 // Steps were replaced
	}
	open := len(s.Steps)
	for i := from; i < len(s.Steps); i++ {
		st := &s.Steps[i]
		if st.StartSeq == 0 {
			st.StartSeq = seq
		}
		if st.Status.Done() && st.EndSeq == 0 {
			st.EndSeq = seq
		}
		if !st.Status.Done() {
			open = min(open, i)
		}
	}
	s.stampFrom = open
	for i := range s.Checkpoints {
		if s.Checkpoints[i].Seq == 0 {
			s.Checkpoints[i].Seq = seq
		}
	}
	for i := range s.Artifacts {
		if s.Artifacts[i].Seq == 0 {
			s.Artifacts[i].Seq = seq
		}
	}
}
