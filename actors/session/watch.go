package session

import (
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// A Watcher follows, as it happens on this node, the work on a turn whose
// caller waits for a stream (turn.started caller): the events the work
// writes, the deltas of its LLM steps, and the end of the work. Its methods
// are called from the work goroutine, in that order, and must not block:
// the node's agent protocol stream (package agents) is one.
type Watcher interface {
	// Event is called for each event written, after it was folded into st.
	Event(st *projection.State, ev event.Event)
	// Delta is called for each delta of LLM step stepID.
	Delta(stepID string, d llm.Delta)
	// End is called once, when the work on the turn ends here: the turn
	// ended (st's status says how), waits for approval, or is left to the
	// next owner (err says why: ErrStopped, a fence, ...).
	End(st *projection.State, err error)
}

// WatchFunc opens the Watcher of the turn of session sid that caller waits
// for, as the work on it begins here. restarted says the work takes the turn
// over from where a stopped node (or an interrupted turn) left it: what the
// caller received of it so far is superseded. It may return nil.
type WatchFunc func(sid string, caller *event.Caller, restarted bool, st *projection.State) Watcher

// watch opens the watcher of a's current turn when its caller waits for a
// stream and the node watches turns; the previous one must have ended.
func (m *Manager) watch(a *AgentContext, restarted bool) {
	st := a.state
	if m.cfg.Watch == nil || st.TurnCaller == nil {
		return
	}
	a.watcher = m.cfg.Watch(a.Session, st.TurnCaller, restarted, st)
}

// unwatch ends a's watcher, if one is open, with out.
func (a *AgentContext) unwatch(out Outcome) {
	if a.watcher == nil {
		return
	}
	w := a.watcher
	a.watcher = nil
	w.End(a.state, out.Err)
	if out.Err == nil && !a.state.Status.Active() {
		a.endStreamed = a.state.LastInputID
	}
}

// observe tells the watcher of the events just written.
func (a *AgentContext) observe(evs []event.Event) {
	if a.watcher == nil {
		return
	}
	for _, ev := range evs {
		a.watcher.Event(a.state, ev)
	}
}
