package session

import (
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// A Watcher follows, as it happens on this node, the work on a turn whose
// caller waits for a stream (turn.started caller): the events the work
// writes, the deltas of its LLM steps, and the end of the work. Its methods
// are called one at a time, in that order (a step's deltas from its model
// call's goroutine while the work waits for it), and must not block:
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
// The callers of the turn's steers that joined it (turn.steered caller) are
// watched too: live from the step they joined at, and, as the turn's own
// caller, on from an approval and from the start again when the work takes
// the turn over.
func (m *Manager) watch(a *AgentContext, restarted bool) {
	st := a.state
	a.openWatch = m.cfg.Watch
	if m.cfg.Watch == nil {
		return
	}
	if st.TurnCaller != nil {
		a.watcher = m.cfg.Watch(a.Session, st.TurnCaller, restarted, st)
	}
	for _, c := range st.TurnSteerCallers {
		a.watchSteer(&c, restarted)
	}
}

// watchSteer opens the watcher of a steer's caller.
func (a *AgentContext) watchSteer(caller *event.Caller, restarted bool) {
	if a.openWatch == nil || caller == nil {
		return
	}
	if w := a.openWatch(a.Session, caller, restarted, a.state); w != nil {
		a.steerWatchers = append(a.steerWatchers, w)
	}
}

// unwatch ends a's watchers, if any are open, with out.
func (a *AgentContext) unwatch(out Outcome) {
	for _, w := range a.steerWatchers {
		w.End(a.state, out.Err)
	}
	a.steerWatchers = nil
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

// observe tells the watchers of the events just written.
func (a *AgentContext) observe(evs []event.Event) {
	for _, ev := range evs {
		if a.watcher != nil {
			a.watcher.Event(a.state, ev)
		}
		for _, w := range a.steerWatchers {
			w.Event(a.state, ev)
		}
	}
}
