package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// A checkpoint is the session's state with a window of its history
// (projection.Elided): the turns no request can send any more are stored
// once, in segments of the checkpoint bucket (bus.CheckpointStore), and the
// snapshot holds the turns after them, the current turn's steps and the
// counters. Its size and the time to decode it do not grow with the history,
// and neither does the actor's memory. Segments are read back only when a
// compaction, or a request the window cannot make (a larger budget), needs
// the whole history.

// elide leaves out of a's state the turns ElisionCut allows, after storing
// them in cps as segments.
func elide(ctx context.Context, cps *bus.CheckpointStore, a *AgentContext) error {
	st := a.state
	at, n := st.ElisionCut(st.Config.ContextChars)
	if n == 0 {
		return nil
	}
	sizes, err := cps.PutHistory(ctx, a.Session, st.Elided.Messages, st.Messages[at:at+n])
	if err != nil {
		return err
	}
	if _, err := st.Elide(at, n); err != nil {
		return err
	}
	st.Elided.Segments = append(st.Elided.Segments, sizes...)
	return nil
}

// wholeHistory gives a's state back the messages its window left out, read
// from their segments. A compaction needs them, and a request the window
// cannot make.
func (a *AgentContext) wholeHistory(ctx context.Context) error {
	if a.state.Elided.Messages == 0 {
		return nil
	}
	msgs, err := readHistory(ctx, a.segments, a.Session, a.state.Elided)
	if err != nil {
		return err
	}
	return a.state.Restore(msgs)
}

// readHistory reads the messages e says session sid's window left out,
// from their segments in cps.
func readHistory(ctx context.Context, cps *bus.CheckpointStore, sid string, e projection.Elided) ([]llm.Message, error) {
	if cps == nil {
		return nil, fmt.Errorf("session %s: %d messages of its history are in segments and no checkpoint bucket is open", sid, e.Messages)
	}
	return cps.History(ctx, sid, e)
}

// compactionView is projection.CompactionView of a's state, the whole
// history read back first when the window does not hold what the
// compaction covers.
func (a *AgentContext) compactionView(ctx context.Context) ([]llm.Message, int, error) {
	if msgs, offset, ok := a.state.CompactionView(); ok {
		return msgs, offset, nil
	}
	if err := a.wholeHistory(ctx); err != nil {
		return nil, 0, err
	}
	return a.state.Messages, 0, nil
}

// nextRequest is projection.NextRequest of a's state, the whole history
// read back first when the window cannot make it.
func (a *AgentContext) nextRequest(ctx context.Context, tools []llm.ToolSchema) (projection.StepRequest, error) {
	next, err := projection.NextRequest(a.state, tools, &a.hasher)
	if !errors.Is(err, projection.ErrHistoryNeeded) {
		return next, err
	}
	if err := a.wholeHistory(ctx); err != nil {
		return next, err
	}
	return projection.NextRequest(a.state, tools, &a.hasher)
}

// needsWholeHistory reports whether folding evs into a state with a window
// needs the history it left out: a summary goes where the history says.
func needsWholeHistory(st *projection.State, evs []event.Event) bool {
	if st.Elided.Messages == 0 {
		return false
	}
	for _, e := range evs {
		if e.Type == event.SummaryAdded {
			return true
		}
	}
	return false
}
