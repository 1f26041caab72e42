package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// Outcome is how a command's work ended: what its sender is told (the
// wire.Outcome; Wire fills in the failure from Err) and the error that stopped
// the work, for the node that settles the input.
type Outcome struct {
	wire.Outcome
	// Err is the error that stopped the work; nil when it ended (a turn that
	// failed in the log ended too: see Status).
	Err error
}

// Wire is o as published on the input's reply subject: Failure and
// FailureCode say why the command could not be carried out, from Err.
func (o Outcome) Wire() wire.Outcome {
	out := o.Outcome
	if o.Err == nil {
		return out
	}
	out.Failure = o.Err.Error()
	switch {
	case errors.Is(o.Err, ErrUnknownSession):
		out.FailureCode = wire.FailureUnknownSession
	case errors.Is(o.Err, ErrBusy):
		out.FailureCode = wire.FailureBusy
	case errors.Is(o.Err, ErrNothingToResume):
		out.FailureCode = wire.FailureNothingToResume
	case errors.Is(o.Err, ErrStopped):
		out.FailureCode = wire.FailureStopped
	case o.Fenced:
		out.FailureCode = wire.FailureFenced
	default:
		out.FailureCode = wire.FailureError
	}
	return out
}

// AgentContext is what a Loop works with: the session's state, the model, the
// tools, and the one way to change the session, Append.
type AgentContext struct {
	Session  string
	Config   Config
	Provider llm.Provider
	Tools    *Tools

	state  *projection.State
	writer *bus.SessionWriter
	deltas *bus.DeltaPublisher
	log    *slog.Logger
	now    func() time.Time
	steps  int // ids handed out in this epoch
}

// appendTimeout bounds one append, acknowledgement and read-back included.
const appendTimeout = 30 * time.Second

// errFenced is returned by Append once the writer lost ownership.
var errFenced = bus.ErrFenced

// State is the session's folded state; it includes every event appended so far.
// A Loop reads it and never changes it other than through Append.
func (a *AgentContext) State() *projection.State { return a.state }

// Append writes one event to the log and folds it into the state. Events that
// end a turn are written even after ctx is cancelled, with a deadline of their
// own, so that a cancel is recorded.
func (a *AgentContext) Append(ctx context.Context, typ event.Type, payload any) error {
	ev, err := event.New(a.Session, typ, payload)
	if err != nil {
		return fmt.Errorf("session %s: %w", a.Session, err)
	}
	ev.Time = a.now()
	ev.Epoch = a.writer.Epoch()
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrStopped) {
		// The node is shutting down: record nothing more, so that the next owner
		// resumes the turn where the log stops.
		return ErrStopped
	}
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), errFenced) {
		// Another node claimed the session: nothing more is ours to record.
		return fmt.Errorf("session %s: %w", a.Session, errFenced)
	}
	// A cancel must not interrupt an append half way: an append whose outcome
	// cannot be confirmed leaves the writer unusable. Appends take a moment, so
	// they run on a deadline of their own instead of the turn's context.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), appendTimeout)
	defer cancel()
	evs := []event.Event{ev}
	if _, err := a.writer.Append(ctx, evs...); err != nil {
		return err
	}
	if err := projection.Apply(a.state, evs[0]); err != nil {
		// The loop wrote something the fold refuses: a bug of TAH. The event is in
		// the log and every reader will report it the same way.
		a.log.Error("event appended but not folded", "session", a.Session, "type", typ, "err", err)
	}
	return nil
}

// NewStepID returns a step id unique in the session: the epoch and a counter,
// so that a resumed session never reuses an id of its previous owner.
func (a *AgentContext) NewStepID(kind string) string {
	a.steps++
	return fmt.Sprintf("%s%d.%d", kind, a.writer.Epoch(), a.steps)
}

// Delta publishes a piece of a streamed answer to watchers. It never fails the
// turn: deltas are a courtesy, the log has the final text.
func (a *AgentContext) Delta(ctx context.Context, stepID string, d llm.Delta) {
	if a.deltas == nil {
		return
	}
	if err := a.deltas.Publish(ctx, stepID, d); err != nil && ctx.Err() == nil {
		a.log.Debug("delta not published", "session", a.Session, "err", err)
	}
}

// outcome describes the session's state as the outcome of its last turn.
func (a *AgentContext) outcome(err error) Outcome {
	st := a.state
	o := Outcome{Outcome: wire.Outcome{Session: a.Session, Turn: st.Turn, Status: st.Status, Steps: st.TurnLLMCalls,
		Usage: st.Usage, LastSeq: st.LastSeq}, Err: err}
	switch st.Status {
	case projection.StatusCompleted:
		o.Content = st.LastOutput
	case projection.StatusFailed, projection.StatusCancelled:
		o.Error, o.Code = st.LastError, st.LastCode
	}
	if errors.Is(err, errFenced) {
		o.Fenced = true
	}
	return o
}
