package client

import (
	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// maxPending bounds the deltas a Turn holds while it does not know yet
// whether their LLM step is of its turn.
const maxPending = 10000

// turnState tells a Turn's own events and deltas from the others' of its
// session: the events of a run's turn start at the turn.started that records
// its input id (a turn left open by a dead node may end first), or, for a
// steer, at the turn.steered that records it joining a turn; a resume's,
// an approve's or a deny's are those of the turn open when it was published, so the events from then
// on, until the end of that turn or the start of another. Session-level
// events (claims, checkpoints) are no turn's. A delta belongs to
// the turn of its LLM step's llm.started; deltas of steps not seen yet wait.
//
// A resume's first turn.started is the one case the log alone cannot tell:
// the turn may have begun before the resume was published (its node calls
// the model while it writes the turn's first record, so the log read when
// the resume was published may not show it yet; the node answers the resume
// once that turn is over) or after the resume was answered (another's).
// Its events wait as a candidate until the node's answer says which (answer).
// It belongs to the Turn's goroutine.
type turnState struct {
	asked
	ours  bool // the events are this turn's now
	over  bool // this turn's events are over
	began bool // an event of this turn was read
	end   *event.Event

	cand       *candidate
	adopted    uint64 // the sequence of the candidate's turn.started, once it is this turn's
	answered   bool   // the node answered the input; answerTurn is its outcome's turn
	answerTurn int

	lastSeq  uint64
	llmCalls int
	usage    llm.Usage
	cost     pricing.Cost

	deltas  natsx.DeltaFilter
	steps   map[string]bool // LLM steps seen, and whether they are this turn's
	pending map[string][]Delta
	held    int
}

// newTurnState is the state of a Turn whose input was published after the
// log's sequence last.
// sessionLevel are the events of a session that are no turn's, even when
// they come in the middle of one (a new owner's claim after a failover).
var sessionLevel = map[event.Type]bool{
	event.SessionCreated: true, event.SessionForked: true, event.TurnForked: true, event.SessionEdited: true,
	event.SessionClaimed: true, event.CheckpointCreated: true,
}

func newTurnState(a asked, last uint64) *turnState {
	return &turnState{asked: a, ours: continuesTurn(a.command), lastSeq: last, deltas: natsx.DeltaFilter{Session: a.sid},
		steps: map[string]bool{}, pending: map[string][]Delta{}}
}

// event reads the next event of the session. It reports whether ev is of
// this turn, and returns the held deltas that ev shows to be.
func (s *turnState) event(ev event.Event) (ours bool, released []Delta) {
	s.lastSeq = max(s.lastSeq, ev.Seq)
	if s.over {
		return false, nil
	}
	if s.cand != nil {
		s.cand.read(ev)
		return false, nil
	}
	if ev.Type == event.TurnStarted {
		d, _ := event.DecodeAs[event.TurnStartedData](ev)
		switch {
		case s.command == wire.CommandRun && d.InputID == s.inputID:
			s.ours = true
		case ev.Seq == s.adopted: // the candidate, which is this turn
		case s.ours && s.command == wire.CommandResume && !s.began:
			s.cand = &candidate{start: ev.Seq, turn: d.Turn, evs: []event.Event{ev}}
			return false, nil
		case s.ours: // a resume's turn was over before it was resumed; this one is another's
			s.ours, s.over = false, true
			return false, nil
		}
	}
	if ev.Type == event.TurnSteered && s.command == wire.CommandRun && !s.ours {
		// A steer's turn is the one it joined, from there on.
		if d, _ := event.DecodeAs[event.TurnSteeredData](ev); d.InputID == s.inputID {
			s.ours = true
		}
	}
	if ev.Type == event.LLMStarted {
		d, _ := event.DecodeAs[event.LLMStartedData](ev)
		s.steps[d.StepID] = s.ours
		if s.ours {
			released = s.pending[d.StepID]
		}
		s.held -= len(s.pending[d.StepID])
		delete(s.pending, d.StepID)
	}
	if !s.ours || sessionLevel[ev.Type] {
		return false, nil
	}
	s.began = true
	switch ev.Type {
	case event.LLMStarted:
		s.llmCalls++
	case event.LLMCompleted:
		d, _ := event.DecodeAs[event.LLMCompletedData](ev)
		s.usage = s.usage.Add(d.Response.Usage)
		if d.Cost != nil {
			s.cost = s.cost.Add(*d.Cost)
		}
	case event.AgentFinished, event.AgentFailed, event.AgentCancelled:
		s.end, s.over = &ev, true
	}
	return true, released
}

// candidate is a resume's first turn.started and the events after it, until
// the node's answer says whether that turn is the resume's.
type candidate struct {
	start uint64 // its turn.started's sequence
	turn  int
	evs   []event.Event
	// closed: another turn began after it, so nothing later is its.
	closed bool
}

func (c *candidate) read(ev event.Event) {
	switch {
	case c.closed:
	case ev.Type == event.TurnStarted:
		c.closed = true
	default:
		c.evs = append(c.evs, ev)
	}
}

// answer records the node's final answer to the input (the session's last
// turn when it answered: Outcome.Turn), which decides a resume's candidate.
func (s *turnState) answer(o wire.Outcome) {
	if !s.answered {
		s.answered, s.answerTurn = true, o.Turn
	}
}

// decide settles the candidate once both it and the answer are known: the
// turn is the resume's when the node answered after it began (its outcome
// names that turn or a later one: "nothing to resume" once it was over, or
// the turn the resume carried on), another's otherwise. It returns the
// candidate's events and held deltas that are this turn's.
func (s *turnState) decide() (evs []event.Event, released []Delta) {
	c := s.cand
	if c == nil || !s.answered {
		return nil, nil
	}
	s.cand = nil
	if s.answerTurn < c.turn {
		s.ours, s.over = false, true
		return nil, nil
	}
	s.adopted = c.start
	for _, ev := range c.evs {
		ours, ds := s.event(ev)
		if ours {
			evs = append(evs, ev)
		}
		released = append(released, ds...)
	}
	if c.closed {
		s.ours, s.over = false, true
	}
	return evs, released
}

// delta reads a delta message; it returns the delta when it is of this
// turn's step, and holds it while its step is not known.
func (s *turnState) delta(m *nats.Msg) (Delta, bool) {
	d, ok := s.deltas.Accept(m)
	if !ok {
		return d, false
	}
	ours, known := s.steps[d.StepID]
	if !known && !s.over && s.held < maxPending {
		s.pending[d.StepID] = append(s.pending[d.StepID], d)
		s.held++
	}
	return d, ours
}

// eventsOver reports whether this turn's events are over, given its outcome
// (nil while it has none): the end is in, or the log is read up to the
// outcome's last sequence, or the command failed and ran no turn.
func (s *turnState) eventsOver(o *wire.Outcome, failed bool) bool {
	return s.over || failed || (o != nil && o.LastSeq > 0 && s.lastSeq >= o.LastSeq)
}

// outcomeOfEnd is the outcome that the end of the turn in the log tells,
// for when the outcome message was lost (a client reconnecting when it was
// published).
func (s *turnState) outcomeOfEnd() wire.Outcome {
	o := EndOutcome(*s.end)
	o.Session, o.InputID = s.sid, s.inputID
	if o.Steps == 0 { // agent.cancelled records none
		o.Steps = s.llmCalls
	}
	if s.end.Type != event.AgentFinished {
		o.Usage, o.Cost = s.usage, s.cost
	} else {
		d, _ := event.DecodeAs[event.AgentFinishedData](*s.end)
		if d.SessionUsage == nil {
			o.Usage = s.usage // an older agent.finished: its usage was the session's
		}
		if d.Cost == nil {
			o.Cost = s.cost // an older agent.finished: no cost, its steps' if they have one
		}
	}
	return o
}

// EndOutcome is the outcome that an end of a turn (agent.finished,
// agent.failed or agent.cancelled) tells: its Status, Turn, LastSeq (the
// event's), Content or Error and Code, Steps, Usage and Cost as recorded. Another
// event gives an outcome without a Status.
func EndOutcome(end event.Event) wire.Outcome {
	o := wire.Outcome{Session: end.Session, LastSeq: end.Seq}
	switch end.Type {
	case event.AgentFinished:
		d, _ := event.DecodeAs[event.AgentFinishedData](end)
		o.Status, o.Turn, o.Content, o.Steps = projection.StatusCompleted, d.Turn, d.Content, d.Steps
		if u, ok := d.TurnUsage(); ok {
			o.Usage, o.SessionUsage = u, *d.SessionUsage
		} else {
			o.SessionUsage = d.Usage // an older agent.finished: the session's total
		}
		if d.Cost != nil && d.SessionCost != nil { // absent before costs were recorded: unknown
			o.Cost, o.SessionCost = *d.Cost, *d.SessionCost
		}
	case event.AgentFailed:
		d, _ := event.DecodeAs[event.AgentFailedData](end)
		o.Status, o.Turn, o.Error, o.Code, o.Steps = projection.StatusFailed, d.Turn, d.Error, d.Code, d.Steps
	case event.AgentCancelled:
		d, _ := event.DecodeAs[event.AgentCancelledData](end)
		o.Status, o.Turn, o.Error, o.Code = projection.StatusCancelled, d.Turn, d.Reason, event.CodeCancelled
	}
	return o
}

// continuesTurn reports whether cmd moves on the turn open when it is
// published, rather than starting one.
func continuesTurn(cmd wire.Command) bool {
	return cmd == wire.CommandResume || cmd == wire.CommandApprove || cmd == wire.CommandDeny
}
