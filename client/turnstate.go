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
// It belongs to the Turn's goroutine.
type turnState struct {
	asked
	ours bool // the events are this turn's now
	over bool // this turn's events are over
	end  *event.Event

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
	if ev.Type == event.TurnStarted {
		d, _ := event.DecodeAs[event.TurnStartedData](ev)
		switch {
		case s.command == wire.CommandRun && d.InputID == s.inputID:
			s.ours = true
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
