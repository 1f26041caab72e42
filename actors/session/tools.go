package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"go.opentelemetry.io/otel/trace"

	"github.com/tah-dev/tah/actors/toolrunner"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
)

// ToolConfig says which tools a Manager's sessions may call and how their
// calls run.
type ToolConfig struct {
	// Catalog lists the tools offered to the model and says what each can do
	// (idempotent, exclusive, where it runs). Nil: the sessions have no tools,
	// and a call the model makes anyway fails as an unknown tool.
	Catalog tools.Catalog
	// Options configure how a call runs: timeouts, output limits, where large
	// outputs go. A nil Options.Logger means the Manager's logger.
	Options tools.Options
	// MaxConcurrent bounds the calls running at once, over every session of
	// the Manager; 0 means toolrunner.DefaultMaxConcurrent.
	MaxConcurrent int
	// Finder, when set, finds the results that tool services stored: on
	// resume, a call its previous owner left running may have finished there.
	Finder ResultFinder
	// Waiter, when set, lets a call to a tool the model was offered, whose
	// service is absent, wait for it (see ServiceWaiter). Nil: the Finder,
	// when it is a ServiceWaiter too (tools/remote.Registry is both).
	Waiter ServiceWaiter
	// Observe, when set, is told of every call the runner ran (a node's
	// metrics); see toolrunner.Config.Observe.
	Observe func(toolrunner.CallResult)
	// Approval says which calls wait for a person's approval; the zero
	// policy approves every call.
	Approval ApprovalPolicy
	// ForTenant, when set, gives the tools of a tenant's sessions (ids
	// <tenant>.<id>) instead of Catalog, and the waiter of their services
	// instead of Waiter: Catalog's and the tenant's own (a node merges
	// tools/remote.Registry.Tenant's), which no other session is offered.
	// Called once per session loaded.
	ForTenant func(tenant string) (tools.Catalog, ServiceWaiter)
}

// ResultFinder finds the result a tool service stored for a call
// (tools/remote.Registry is one).
type ResultFinder interface {
	// Await returns the stored result of the call, waiting while its service
	// still runs it; an error when nothing is stored.
	Await(ctx context.Context, session, callID string) (tools.Result, error)
}

// Tools is the sessions' way to their tools: the catalog answers what the
// model may call and how (schemas, idempotence, where a call runs), the tool
// runner actor executes the calls, and the finder reads what tool services
// stored. A Manager makes one, beside its session actors; a Loop uses it
// through AgentContext.Tools.
type Tools struct {
	catalog  tools.Catalog
	runner   *toolrunner.Runner
	finder   ResultFinder
	waiter   ServiceWaiter
	approval ApprovalPolicy
	// own is set on a tenant's session's Tools (forSession): its catalog is
	// not the runner's, so each batch names it.
	own       bool
	forTenant func(tenant string) (tools.Catalog, ServiceWaiter)
}

// startTools spawns the tool runner under root.
func startTools(root *actor.RootContext, tc ToolConfig, log *slog.Logger) (*Tools, error) {
	if err := tc.Approval.Validate(); err != nil {
		return nil, fmt.Errorf("session manager: %w", err)
	}
	cat := tc.Catalog
	if cat == nil {
		cat = tools.Merge() // no tools: the executor reports every call unknown
	}
	opts := tc.Options
	if opts.Logger == nil {
		opts.Logger = log
	}
	r, err := toolrunner.Spawn(root, toolrunner.Config{Executor: tools.NewExecutor(cat, opts),
		MaxConcurrent: tc.MaxConcurrent, Logger: log, Observe: tc.Observe})
	if err != nil {
		return nil, fmt.Errorf("session manager: tool runner: %w", err)
	}
	waiter := tc.Waiter
	if w, ok := tc.Finder.(ServiceWaiter); ok && waiter == nil {
		waiter = w
	}
	return &Tools{catalog: cat, runner: r, finder: tc.Finder, waiter: waiter, approval: tc.Approval, forTenant: tc.ForTenant}, nil
}

// forSession is the Tools of session sid: these, or for a tenant's session
// with ToolConfig.ForTenant set, the same runner over the tenant's catalog
// and waiter.
func (t *Tools) forSession(sid string) *Tools {
	tenant := event.TenantOf(sid)
	if tenant == "" || t.forTenant == nil {
		return t
	}
	own := *t
	own.catalog, own.waiter = t.forTenant(tenant)
	own.own = true
	return &own
}

// Schemas lists the tools offered to the model, in a stable order.
func (t *Tools) Schemas() []llm.ToolSchema { return t.catalog.Schemas() }

// Idempotent reports whether a call of the named tool may run again on resume.
func (t *Tools) Idempotent(name string) bool {
	tool, ok := t.catalog.Tool(name)
	return ok && tools.IsIdempotent(tool)
}

// NeedsApproval reports whether a call of the named tool waits for a
// person's approval: by the policy's rules, or else by what the tool asks.
func (t *Tools) NeedsApproval(name string) bool {
	tool, _ := t.catalog.Tool(name)
	return t.approval.NeedsTool(name, tool)
}

// Runner names where a call of the named tool runs, for tool.started:
// wire.ToolRunnerLocal or wire.RemoteRunner of its tool service.
func (t *Tools) Runner(name string) string { return tools.RunnerIn(t.catalog, name) }

// Execute runs calls of session sid in the tool runner (concurrently where the
// tools allow) and waits for them: the caller is a work goroutine, never an
// actor's Receive. It returns one result per call, in call order. Cancelling
// ctx reaches every running tool at once; a cancelled call's result has code
// event.CodeCancelled. Failures are results, never an error.
func (t *Tools) Execute(ctx context.Context, sid string, calls []llm.ToolCall, spans []trace.SpanContext) []toolrunner.CallResult {
	return t.execute(ctx, sid, calls, spans, 0, nil)
}

// execute is Execute that calls slow (on the caller's goroutine) if the
// batch runs for after.
func (t *Tools) execute(ctx context.Context, sid string, calls []llm.ToolCall, spans []trace.SpanContext, after time.Duration, slow func()) []toolrunner.CallResult {
	batch := toolrunner.ExecuteBatch{Session: sid, Calls: calls, Spans: spans}
	if t.own {
		batch.Catalog = t.catalog
	}
	res, err := t.runner.ExecuteNoting(ctx, batch, after, slow)
	if err == nil {
		return res.Results
	}
	// Only a stopped runner fails a batch, and a Manager stops its runner
	// after its sessions: this is a bug, told to the model as such.
	code := event.CodeInternal
	if ctx.Err() != nil {
		code = event.CodeCancelled
	}
	out := make([]toolrunner.CallResult, len(calls))
	for i, c := range calls {
		out[i] = toolrunner.CallResult{Call: c, Runner: t.Runner(c.Name),
			Result: tools.Failed(code, fmt.Sprintf("Error: the call to %s did not run: %v.", c.Name, err))}
	}
	return out
}

// executeQuiet is Execute that, with flush, calls flush on the caller's
// goroutine (the session's: the batch runs in the runner's) if the batch
// runs for after, and then waits for it still. Its error is flush's: the
// log could not be written, so the step's results cannot be either.
func (t *Tools) executeQuiet(ctx context.Context, sid string, calls []llm.ToolCall, spans []trace.SpanContext, after time.Duration, flush func() error) ([]toolrunner.CallResult, error) {
	if flush == nil {
		return t.Execute(ctx, sid, calls, spans), nil
	}
	var err error
	res := t.execute(ctx, sid, calls, spans, after, func() { err = flush() })
	return res, err
}

// Lookup returns the result a tool service stored for a call that a previous
// owner of session sid left running. A result of code event.CodeCancelled
// does not count: that owner's stop cancelled the call, so its outcome is
// unknown.
func (t *Tools) Lookup(ctx context.Context, sid, callID string) (tools.Result, bool) {
	if t.finder == nil {
		return tools.Result{}, false
	}
	r, err := t.finder.Await(ctx, sid, callID)
	if err != nil || r.Code == event.CodeCancelled {
		return tools.Result{}, false
	}
	return r, true
}

// stop stops the runner, cancelling the calls it still holds, and waits for
// them until ctx is done.
func (t *Tools) stop(ctx context.Context) error { return t.runner.Stop(ctx) }

// toolFinished is the tool.finished of step stepID: the one place a call's
// result becomes an event, whether the runner ran the call, a tool service
// stored its result, or the call is settled without running (interrupted,
// not executed).
func toolFinished(stepID string, r toolrunner.CallResult) event.ToolFinishedData {
	return event.ToolFinishedData{StepID: stepID, CallID: r.Call.ID, Name: r.Call.Name,
		Output: r.Result.Output, IsError: r.Result.IsError, Code: r.Result.Code, Artifact: r.Result.Artifact,
		DurationMS: r.Duration.Milliseconds()}
}

// settled is the result of a call that does not run: code and output say why.
func settled(call llm.ToolCall, code, output string) toolrunner.CallResult {
	return toolrunner.CallResult{Call: call, Result: tools.Failed(code, output)}
}

// stepCall is the call a tool step records.
func stepCall(s projection.Step) llm.ToolCall {
	return llm.ToolCall{ID: s.CallID, Name: s.Tool, Arguments: s.Input}
}

// ownerStopping reports whether ctx was cancelled because this owner stops
// (its node stops, or another node took the session over), not by a cancel
// of the turn: a call it stopped keeps no result, since the next owner looks
// up or runs again what the call did.
func ownerStopping(ctx context.Context) bool {
	cause := context.Cause(ctx)
	return errors.Is(cause, ErrStopped) || errors.Is(cause, bus.ErrFenced)
}
