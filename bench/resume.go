package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
)

// ResumeResult is row 4: how long a fresh node takes from a session's first
// input to its first LLM call, against the length of the session's history.
type ResumeResult struct {
	Durability    string         `json:"durability"`
	Others        int            `json:"other_sessions"`
	StreamEvents  uint64         `json:"stream_events"`
	ContextBudget int            `json:"context_chars"`
	Build         time.Duration  `json:"build_ns"`
	Lengths       []ResumeLength `json:"lengths"`
	// Ratio is the resume at RatioEvents (the longest history of at most
	// 10,000 events: the target's) over the resume at the shortest.
	Ratio       float64 `json:"ratio_to_shortest"`
	RatioEvents int     `json:"ratio_events"`
	Repeats     int     `json:"repeats"`
}

// ResumeLength is one history length.
type ResumeLength struct {
	Events int `json:"events"`
	// FirstCall is the median time from client.Run to the first LLM call on
	// a node started afresh (a new Manager, actor and server). (Not from
	// client.Run's return: the node has often made the call by then.)
	FirstCall    time.Duration `json:"first_call_ns"`
	FirstCallMin time.Duration `json:"first_call_min_ns"`
	FirstCallMax time.Duration `json:"first_call_max_ns"`
	// ClientRun is the median time client.Run took: the client's
	// subscriptions, its consumer of the session's log and the input's
	// publish, which do not depend on the history.
	ClientRun time.Duration `json:"client_run_ns,omitempty"`
	// TurnEnd is the median time from the resumed turn's last LLM answer to
	// its outcome: agent.finished and the end-of-turn checkpoint.
	TurnEnd time.Duration `json:"turn_end_ns"`
	// Checkpoint is what the resume found: the snapshot's size and the events
	// it covers; the rest of the history (Tail) is replayed.
	CheckpointBytes  int `json:"checkpoint_bytes"`
	CheckpointEvents int `json:"checkpoint_events"`
	Tail             int `json:"tail_events"`
	StateMessages    int `json:"messages"`
	// WindowMessages is how many messages the checkpoint holds; the others
	// (ElidedMessages) are in its segments, read only for a compaction.
	WindowMessages  int `json:"window_messages"`
	ElidedMessages  int `json:"elided_messages"`
	LLMStartedBytes int `json:"last_llm_started_bytes"`

	// Where the time goes, measured apart: decoding the checkpoint found;
	// Load is what the actor does before its claim: get and decode the
	// checkpoint, replay and fold the tail after it.
	CheckpointDecode time.Duration `json:"checkpoint_decode_ns"`
	Load             time.Duration `json:"load_ns"`
	// StateBytes is the JSON of the whole state folded from the log: what a
	// checkpoint would be without its window (and was, before it).
	StateBytes int `json:"state_bytes"`
}

// resumeTargetEvents is the history the target of row 4 is set at: resume
// at 10,000 events at most twice as long as at 100. Longer ones (100,000) are
// reported, and must resume.
const resumeTargetEvents = 10_000

// resumeScenario is row 4: sessions of several history lengths, resumed
// each by a node started afresh.
type resumeScenario struct {
	cfg Config
	p   *probe
	st  *stack
	// sids are the measured sessions, one per length; others the sessions
	// interleaved with them.
	sids, others []string
	// perTurn is how many events a measured session's turn writes.
	perTurn int
	// tmpl is the events of the other sessions' turn.
	tmpl  []event.Event
	build time.Duration
}

// The sessions of row 4 that are not measured: one resumed first on each
// fresh node, so that the measured resumes do not pay for the node's first
// turn, and the one whose first turn is the template of the others' turns.
const (
	resumeWarm  = "s_reswarm"
	resumeModel = "s_resmodel"
)

// The other sessions' turns have five LLM calls (about 26 events); the
// measured sessions' turns 20 (about 100 events), so that building 10,000
// events takes fewer turns, each ending with a checkpoint.
const (
	otherSteps  = 4
	resumeSteps = 19
)

func (s *resumeScenario) Name() string {
	return fmt.Sprintf("row 4: resume after %v events, among %d other sessions (building the histories)", s.cfg.ResumeLengths, s.cfg.ResumeOthers)
}

// Setup builds the histories with fsync every 2 minutes, to build fast.
func (s *resumeScenario) Setup(ctx context.Context, env Env) error {
	tool, final := scriptedMocks(0)
	s.p = newProbe(tool, final, true)
	var err error
	s.st, err = startStack(env, s.cfg.Tmp, stackOpts{sync: 2 * time.Minute, provider: s.p, session: session.Config{ContextChars: s.cfg.ResumeBudget}})
	if err != nil {
		return err
	}
	begin := time.Now()
	if err := s.createSessions(ctx); err != nil {
		return err
	}
	if err := s.buildRounds(ctx, env); err != nil {
		return err
	}
	if err := s.topUp(ctx); err != nil {
		return err
	}
	s.p.reset()
	s.build = time.Since(begin)
	return nil
}

func (s *resumeScenario) Teardown(context.Context) error {
	s.st.close()
	return nil
}

// createSessions creates every session, runs the warm-up session's first
// turn and the template's, and the first turn of the shortest history,
// which says how many events a turn writes.
func (s *resumeScenario) createSessions(ctx context.Context) error {
	st := s.st
	for _, sid := range []string{resumeWarm, resumeModel} {
		if err := st.create(ctx, sid); err != nil {
			return err
		}
	}
	if _, _, err := st.run(ctx, resumeWarm, input(resumeWarm, 0)); err != nil {
		return err
	}
	s.sids = make([]string, len(s.cfg.ResumeLengths))
	for i, l := range s.cfg.ResumeLengths {
		s.sids[i] = fmt.Sprintf("s_res%06d", l)
		if err := st.create(ctx, s.sids[i]); err != nil {
			return err
		}
	}
	s.others = make([]string, s.cfg.ResumeOthers)
	for i := range s.others {
		s.others[i] = fmt.Sprintf("s_oth%06d", i)
	}
	if err := parallel(ctx, len(s.others), 32, func(i int) error { return st.create(ctx, s.others[i]) }); err != nil {
		return err
	}
	if _, _, err := st.run(ctx, resumeModel, input(resumeModel, otherSteps)); err != nil {
		return err
	}
	all, err := readLog(ctx, st.cl, resumeModel, 0)
	if err != nil {
		return err
	}
	s.tmpl = all[1:] // from session.claimed on
	if _, _, err := st.run(ctx, s.sids[0], input(s.sids[0], resumeSteps)); err != nil {
		return err
	}
	first, err := readLog(ctx, st.cl, s.sids[0], 0)
	if err != nil {
		return err
	}
	s.perTurn = len(first) - 2 // less session.created and session.claimed
	return nil
}

// buildRounds runs the measured sessions' turns in rounds: the longest
// history's turns; every target spreads its turns evenly over them, and each
// round appends a turn of some other sessions, so that every history is
// interleaved with the others' from start to end.
func (s *resumeScenario) buildRounds(ctx context.Context, env Env) error {
	targets := s.cfg.ResumeLengths
	rounds := targets[len(targets)-1]/s.perTurn + 1
	turnsOf := make([]int, len(targets))
	for i, l := range targets {
		turnsOf[i] = max(1, (l+s.perTurn-1)/s.perTurn)
	}
	turnsOf[0]-- // the first turn, run already
	done := make([]int, len(targets))
	nextOther := 0
	for r := range rounds {
		for i, sid := range s.sids {
			if done[i] < turnsOf[i] && done[i]*rounds <= r*turnsOf[i] {
				if _, _, err := s.st.run(ctx, sid, input(sid, resumeSteps)); err != nil {
					return err
				}
				done[i]++
				s.p.take(sid)
			}
		}
		// Each other session gets one turn (the template's events), the
		// turns spread evenly over the rounds.
		upto := min(len(s.others), (r+1)*len(s.others)/rounds)
		if err := parallel(ctx, upto-nextOther, 8, func(j int) error { return s.appendTemplate(ctx, s.others[nextOther+j]) }); err != nil {
			return fmt.Errorf("other sessions: %w", err)
		}
		nextOther = upto
		if r%100 == 99 {
			env.Note("round %d of %d", r+1, rounds)
		}
	}
	return nil
}

// appendTemplate appends the template turn's events to session sid, as its
// owner would.
func (s *resumeScenario) appendTemplate(ctx context.Context, sid string) error {
	b := s.st.node().Bus()
	last, err := b.LastSeq(ctx, sid)
	if err != nil {
		return err
	}
	w, err := b.Writer(sid, 1, last)
	if err != nil {
		return err
	}
	for _, e := range s.tmpl {
		e.Session, e.Seq, e.Epoch = sid, 0, 0
		if _, err := w.Append(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// topUp runs turns until each history has the length asked (turns vary by
// an event or two).
func (s *resumeScenario) topUp(ctx context.Context) error {
	for i, l := range s.cfg.ResumeLengths {
		sid := s.sids[i]
		for {
			n, err := eventCount(ctx, s.st.node().Bus(), sid)
			if err != nil {
				return err
			}
			if n+s.perTurn/2 >= l {
				break
			}
			for range (l - n + s.perTurn - 1) / s.perTurn {
				if _, _, err := s.st.run(ctx, sid, input(sid, resumeSteps)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// eventCount is how many events session sid has: those its checkpoint
// covers and the tail after it (reading a long history whole would take
// longer than building it).
func eventCount(ctx context.Context, b *bus.Bus, sid string) (int, error) {
	var snap projection.State
	if e, err := b.Checkpoints().Get(ctx, sid); err == nil {
		if err := json.Unmarshal(e.Value(), &snap); err != nil {
			return 0, fmt.Errorf("checkpoint of %s: %w", sid, err)
		}
	}
	tail, _, err := b.Replay(ctx, sid, snap.LastSeq+1)
	if err != nil {
		return 0, err
	}
	return snap.Events + len(tail), nil
}

// Run resumes each session, cfg.ResumeRepeats times, each on the node
// started afresh with fsync on every write.
func (s *resumeScenario) Run(ctx context.Context, rep *Report) error {
	c := s.cfg
	res := &ResumeResult{Durability: durabilityName(0), Others: c.ResumeOthers, ContextBudget: c.ResumeBudget, Repeats: c.ResumeRepeats, Build: s.build}
	res.Lengths = make([]ResumeLength, len(s.sids))
	times, ends, runs := make([]sample, len(s.sids)), make([]sample, len(s.sids)), make([]sample, len(s.sids))
	for r := range c.ResumeRepeats {
		if err := s.freshNode(ctx, res); err != nil {
			return err
		}
		for k := range s.sids {
			i := (k + r) % len(s.sids) // a different order each time
			sid := s.sids[i]
			if r == 0 {
				if err := describe(ctx, s.st.node().Bus(), sid, &res.Lengths[i]); err != nil {
					return err
				}
			}
			t, o, err := s.st.run(ctx, sid, input(sid, 0))
			if err != nil {
				return err
			}
			calls := s.p.take(sid)
			if len(calls) == 0 {
				return fmt.Errorf("resume of %s: no LLM call", sid)
			}
			times[i] = append(times[i], calls[0].start.Sub(t.sent))
			ends[i] = append(ends[i], o.at.Sub(calls[len(calls)-1].end))
			runs[i] = append(runs[i], t.stored.Sub(t.sent))
		}
	}
	for i := range s.sids {
		l := &res.Lengths[i]
		l.FirstCall, l.FirstCallMin, l.FirstCallMax = medianDur(times[i]), times[i].pct(0), times[i].pct(100)
		l.TurnEnd, l.ClientRun = medianDur(ends[i]), medianDur(runs[i])
	}
	at := 0
	for i, l := range c.ResumeLengths {
		if l <= resumeTargetEvents {
			at = i
		}
	}
	res.RatioEvents = res.Lengths[at].Events
	res.Ratio = float64(res.Lengths[at].FirstCall) / float64(res.Lengths[0].FirstCall)
	rep.Resume = res
	return nil
}

// freshNode restarts the node with fsync on every write, lets the read
// model catch up and its integrity check end (their work is not the
// resume's: the node runs the check beside its start) and has the warm-up
// session take the node's first turn.
func (s *resumeScenario) freshNode(ctx context.Context, res *ResumeResult) error {
	if err := s.st.restart(0); err != nil {
		return err
	}
	info, err := s.st.logState(ctx)
	if err != nil {
		return err
	}
	res.StreamEvents = info.records
	if err := s.st.node().WaitReadModelLog(ctx, info.lastSeqs); err != nil {
		return err
	}
	for rm := s.st.node().ReadModel(); rm != nil && rm.Unchecked(); {
		select {
		case <-ctx.Done():
			return fmt.Errorf("the read model's integrity check: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	_, _, err = s.st.run(ctx, resumeWarm, input(resumeWarm, 0))
	return err
}

// describe reports what a resume of sid finds: its history's length, the
// checkpoint's size and coverage, and what decoding it and replaying the
// rest cost.
func describe(ctx context.Context, b *bus.Bus, sid string, l *ResumeLength) error {
	evs, _, err := b.Replay(ctx, sid, 1)
	if err != nil {
		return err
	}
	l.Events = len(evs)
	for j := len(evs) - 1; j >= 0; j-- {
		if evs[j].Type == event.LLMStarted {
			body, _ := event.EncodeRecord(evs[j : j+1])
			l.LLMStartedBytes = len(body)
			break
		}
	}
	full, _ := projection.Fold(evs)
	l.StateMessages = len(full.Messages)
	fb, _ := json.Marshal(full)
	l.StateBytes = len(fb)

	if e, err := b.Checkpoints().Get(ctx, sid); err == nil {
		l.CheckpointBytes = len(e.Value())
		var snap projection.State
		if err := json.Unmarshal(e.Value(), &snap); err == nil {
			l.CheckpointEvents = snap.Events
			l.WindowMessages, l.ElidedMessages = len(snap.Messages), snap.Elided.Messages
		}
		l.CheckpointDecode = timeMedian(3, func() { var s projection.State; _ = json.Unmarshal(e.Value(), &s) })
	}
	l.Tail = l.Events - l.CheckpointEvents
	var lerr error
	l.Load = timeMedian(3, func() {
		var st projection.State
		from := uint64(1)
		e, err := b.Checkpoints().Get(ctx, sid)
		if err == nil && json.Unmarshal(e.Value(), &st) == nil {
			from = st.LastSeq + 1
		}
		var tail []event.Event
		if tail, _, lerr = b.Replay(ctx, sid, from); lerr == nil {
			_ = projection.FoldInto(&st, tail)
		}
	})
	return lerr
}

// timeMedian runs fn n times and returns the median duration.
func timeMedian(n int, fn func()) time.Duration {
	ds := make([]time.Duration, n)
	for i := range ds {
		t := time.Now()
		fn()
		ds[i] = time.Since(t)
	}
	return medianDur(ds)
}
