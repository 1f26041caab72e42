package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/gopool"
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
	case errors.Is(o.Err, ErrBudgetExceeded):
		out.FailureCode = wire.FailureBudgetExceeded
	case errors.Is(o.Err, ErrQuotaExceeded):
		out.FailureCode = wire.FailureQuotaExceeded
	case errors.Is(o.Err, ErrStopped):
		out.FailureCode = wire.FailureStopped
	case errors.Is(o.Err, ErrNotPending):
		out.FailureCode = wire.FailureNotPending
	case errors.Is(o.Err, ErrAlreadyDecided):
		out.FailureCode = wire.FailureAlreadyDecided
	case errors.Is(o.Err, ErrWithdrawn):
		out.FailureCode = wire.FailureWithdrawn
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
	def    definitionMemo // the last definition() (definition.go)
	bus    *bus.Bus       // other sessions' logs and inputs: sub-agents (subagents.go)
	writer *bus.SessionWriter
	deltas *bus.DeltaPublisher
	// segments is the store of the checkpoints, where the history a
	// checkpoint's window leaves out is kept (history.go); nil without one.
	segments *bus.CheckpointStore
	// hasher hashes the requests of the session's steps, each taking up
	// the previous one's hash (event.RequestHasher).
	hasher event.RequestHasher
	// memo keeps the provider's encoding of the history from one request
	// to the next (llm.Memo): a request encodes what the step added.
	memo  llm.Memo
	log   *slog.Logger
	now   func() time.Time
	steps int // ids handed out in this epoch
	// checkpointed is the event count of the checkpoint the load read (0
	// without one): the next checkpoint is counted from it.
	checkpointed int
	// counted is the usage the tenant's quotas counted (quota.go), and
	// artifactBytes the sizes of the artifacts the session's events refer
	// to (withArtifacts).
	counted       countedUse
	artifactBytes atomic.Int64
	// staged are events folded into state and not written yet: the next
	// Append writes them, in one record with its own event.
	staged []event.Event
	// claimed is set once this node claimed the session (Manager.claim):
	// before that, the context answers from the log and writes nothing.
	claimed bool
	// lost is set when staged events could not be written: the state holds
	// events the log does not, and the actor must load the session again.
	lost bool
	// steers are the steers waiting for the running turn, which the loop
	// takes at its step boundaries (steer.go); nil in a context that runs
	// no actor's work.
	steers *steerBox
	// watcher follows the work on the current turn for its caller, and
	// steerWatchers for the callers of the steers that joined it (watch.go).
	watcher       Watcher
	steerWatchers []Watcher
	// openWatch opens a Watcher (Config.Watch); nil when the node watches
	// no turns.
	openWatch WatchFunc
	// loop names the agent loop, for the definition each turn records.
	loop string
	// calls runs the model calls (askModel) on goroutines the Manager
	// keeps; nil in a context without a Manager: a goroutine each.
	calls *gopool.Pool
	// endStreamed is the input whose turn's end a watcher of this context
	// told its caller: its redelivery (the resume of a taken-over turn ran
	// first) must not stream that end a second time.
	endStreamed string
}

// spawn runs fn on a goroutine: one of a.calls where the context has them.
func (a *AgentContext) spawn(fn func()) {
	if a.calls == nil {
		go fn()
		return
	}
	a.calls.Go(fn)
}

// appendTimeout bounds one append, acknowledgement and read-back included.
const appendTimeout = 30 * time.Second

// errFenced is returned by Append once the writer lost ownership.
var errFenced = bus.ErrFenced

// State is the session's folded state; it includes every event appended so far.
// A Loop reads it and never changes it other than through Append.
func (a *AgentContext) State() *projection.State { return a.state }

// Append writes the staged events and one more to the log, in one record (one
// durable write), and folds the new one into the state. Events that end a
// turn are written even after ctx is cancelled, with a deadline of their own,
// so that a cancel is recorded.
//
// An event that refers to an artifact is followed, in the same record, by
// its artifact.created (artifactsOf).
func (a *AgentContext) Append(ctx context.Context, typ event.Type, payload any) error {
	own, payloads, err := a.withArtifacts(typ, payload)
	if err != nil {
		return err
	}
	evs, err := a.write(ctx, append(a.staged, own...))
	if err != nil {
		return err
	}
	for i, ev := range evs[len(evs)-len(own):] { // with their sequences
		if err := projection.ApplyTyped(a.state, ev, payloads[i]); err != nil {
			// The loop wrote something the fold refuses: a bug of TAH. The event is in
			// the log and every reader will report it the same way.
			a.log.Error("event appended but not folded", "session", a.Session, "type", ev.Type, "err", err)
		}
	}
	projection.Stamp(a.state, evs[len(evs)-1].Seq)
	a.staged = nil
	a.observe(evs)
	a.spent(ctx)
	return nil
}

// withArtifacts is the event of typ and payload, and the artifact.created
// of each artifact it refers to, with the payload of each (folded with
// projection.ApplyTyped: what was just encoded is not decoded again). A
// failure it records is logged (logFailure).
func (a *AgentContext) withArtifacts(typ event.Type, payload any) ([]event.Event, []any, error) {
	ev, err := a.newEvent(typ, payload)
	if err != nil {
		return nil, nil, err
	}
	a.logFailure(payload)
	evs, payloads := []event.Event{ev}, []any{payload}
	for _, art := range a.artifactsOf(payload) {
		// Counted in the tenant's storage with the next record, whoever
		// stored it: this node (an answer or a result too large for the
		// log), the executor, or a tool service (a file a tool wrote).
		a.artifactBytes.Add(art.Ref.Size)
		ev, err := a.newEvent(event.ArtifactCreated, art)
		if err != nil {
			return nil, nil, err
		}
		evs, payloads = append(evs, ev), append(payloads, art)
	}
	return evs, payloads, nil
}

// Stage adds an event to the session without writing it yet: it is folded
// into the state at once, so that the loop goes on from it, and the next
// Append writes it, in the same record as its own event. A step so costs one
// durable write where it would cost several; the loop stages only what may
// wait for the next write (a model's answer, for the tool.started that
// follows it; tool results, for the next llm.started; a turn's start, for its
// first LLM step). A crash before that write loses the staged events with
// the state: the next owner resumes from the log, as if they never happened.
func (a *AgentContext) Stage(typ event.Type, payload any) error {
	evs, payloads, err := a.withArtifacts(typ, payload)
	if err != nil {
		return err
	}
	for i, ev := range evs {
		if err := projection.ApplyTyped(a.state, ev, payloads[i]); err != nil {
			return fmt.Errorf("session %s: staged %s not folded: %w", a.Session, ev.Type, err)
		}
		a.staged = append(a.staged, ev)
	}
	return nil
}

// Flush writes the staged events, if any, as one record.
func (a *AgentContext) Flush(ctx context.Context) error {
	if len(a.staged) == 0 {
		return nil
	}
	evs, err := a.write(ctx, a.staged)
	if err != nil {
		return err
	}
	projection.Stamp(a.state, evs[len(evs)-1].Seq)
	a.staged = nil
	a.observe(evs)
	a.spent(ctx)
	return nil
}

func (a *AgentContext) newEvent(typ event.Type, payload any) (event.Event, error) {
	ev, err := event.New(a.Session, typ, payload)
	if err != nil {
		return ev, fmt.Errorf("session %s: %w", a.Session, err)
	}
	ev.Time = a.now()
	ev.Epoch = a.writer.Epoch()
	return ev, nil
}

// write appends evs as one record and returns them with their sequences; a
// record too large for one message is written as several (see
// appendRecords). On an error the staged events are lost to the log (see
// lost).
func (a *AgentContext) write(ctx context.Context, evs []event.Event) (_ []event.Event, err error) {
	defer func() {
		if err != nil && len(a.staged) > 0 {
			a.lost = true
		}
	}()
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrStopped) {
		// The node is shutting down: record nothing more, so that the next owner
		// resumes the turn where the log stops.
		return nil, ErrStopped
	}
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), errFenced) {
		// Another node claimed the session: nothing more is ours to record.
		return nil, fmt.Errorf("session %s: %w", a.Session, errFenced)
	}
	// A cancel must not interrupt an append half way: an append whose outcome
	// cannot be confirmed leaves the writer unusable. Appends take a moment, so
	// they run on a deadline of their own instead of the turn's context.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), appendTimeout)
	defer cancel()
	return evs, a.appendRecords(ctx, evs)
}

// appendRecords appends evs as one record or, when that is too large for one
// message, in halves, in order, each halved again while it is too large.
// After each part but the last, the steps not stamped yet take its sequence
// (a step staged into a later part too, so that in such a split record a
// step's sequence may be an earlier part's).
// Any prefix of the events is a log the loop could have written (each of
// them was once a record of its own), so a crash between two parts leaves a
// log that a resume continues. An event too large on its own fails with
// bus.ErrPayloadTooLarge: the loop keeps answers and tool results under a
// share of the max payload (see completed and fitResult).
func (a *AgentContext) appendRecords(ctx context.Context, evs []event.Event) error {
	_, err := a.writer.Append(ctx, evs...)
	if !errors.Is(err, bus.ErrPayloadTooLarge) || len(evs) == 1 {
		return err
	}
	// Nothing was written: the record is refused before it is sent.
	half := len(evs) / 2
	if err := a.appendRecords(ctx, evs[:half]); err != nil {
		return err
	}
	projection.Stamp(a.state, evs[half-1].Seq)
	return a.appendRecords(ctx, evs[half:])
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
	if a.watcher != nil {
		a.watcher.Delta(stepID, d)
	}
	for _, w := range a.steerWatchers {
		w.Delta(stepID, d)
	}
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
		Usage: st.TurnUsage, SessionUsage: st.Usage, Cost: st.TurnCost, SessionCost: st.Cost, LastSeq: st.LastSeq}, Err: err}
	switch st.Status {
	case projection.StatusCompleted:
		o.Content = st.LastOutput
	case projection.StatusFailed, projection.StatusCancelled:
		o.Error, o.Code, o.Budget, o.Quota = st.LastError, st.LastCode, st.LastBudget, st.LastQuota
	}
	awaiting(&o.Outcome, st)
	if errors.Is(err, errFenced) {
		o.Fenced = true
	}
	return o
}
