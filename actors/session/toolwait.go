package session

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tah-dev/tah/actors/toolrunner"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// ServiceWaiter waits for the service of a remote tool that is absent
// (tools/remote.Registry is one): a call to a tool the model was offered
// waits for it rather than failing as unknown. A waiter that also says which
// absent tools it still expects (serviceExpecter, as the registry does
// after a node starts) makes a step wait, before it asks the model, for the
// tools the session's last request offered (awaitOffered).
type ServiceWaiter interface {
	// ServiceWait is the longest a call waits for its tool's service.
	ServiceWait() time.Duration
	// WaitFor returns nil once a service of the tool named name is there,
	// or ctx's error.
	WaitFor(ctx context.Context, name string) error
}

// serviceExpecter is a ServiceWaiter that also knows the absent tools whose
// services a node that just started still expects
// (tools/remote.Registry.Expected).
type serviceExpecter interface {
	// Expected reports whether a service of the tool named name, not
	// listed, may still be on its way, and until when to wait for it.
	Expected(name string) (until time.Time, ok bool)
}

// awaitOffered is the wait of an LLM step, before it builds its request,
// for the tools the session's last request offered that the node does not
// list but expects: a node that restarted before a tool service reconnected
// waits for the service (up to when the waiter still expects it) rather
// than drop the tool from the request, so that the model is offered the
// tools it was, and its calls of them run. It returns when each such tool
// is back or no longer expected, or ctx is done.
func awaitOffered(ctx context.Context, a *AgentContext) {
	e, ok := a.Tools.waiter.(serviceExpecter)
	if !ok {
		return
	}
	for _, name := range lastOffered(a.State()) {
		if _, listed := a.Tools.catalog.Tool(name); listed || a.subAgent(name) != nil {
			continue // a sub-agent's tool is the session's own, in no catalog
		}
		until, ok := e.Expected(name)
		if !ok {
			continue
		}
		a.log.Info("a step waits for the tool service of a tool the session's last request offered",
			"session", a.Session, "tool", name, "until", until)
		wctx, cancel := context.WithDeadline(ctx, until)
		err := a.Tools.waiter.WaitFor(wctx, name)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			a.log.Warn("a tool service did not come back: the step does not offer its tool", "session", a.Session, "tool", name)
		}
	}
}

// lastOffered names the tools that the session's last request offered: its
// last LLM step's, compactions aside (they offer none).
func lastOffered(st *projection.State) []string {
	for i := len(st.Steps) - 1; i >= 0; i-- {
		s := st.Steps[i]
		if s.Type == projection.StepLLM && !s.Compaction && s.RequestRef != nil {
			return s.RequestRef.Tools
		}
	}
	return nil
}

// runCalls executes calls, whose tool.started (at steps ids) is in the log.
// A call whose tool the model was offered and whose service is absent waits
// for the service, with a tool.waiting in the log, for up to the waiter's
// ServiceWait (one wait for the whole batch), and runs when the service is
// back; one still waiting then ends with code tool_unavailable, and one a
// cancel stops while it waits, cancelled. With flush, the calls'
// tool.started are staged, and flush writes them once the batch has run for
// quietFor (runTools).
func runCalls(ctx context.Context, a *AgentContext, ids []string, calls []llm.ToolCall, spans []trace.SpanContext, flush func() error) ([]toolrunner.CallResult, error) {
	results, err := a.Tools.executeQuiet(ctx, a.Session, calls, spans, a.quietFor(), flush)
	if err != nil {
		return nil, err
	}
	w := a.Tools.waiter
	if w == nil {
		return results, nil
	}
	var wctx context.Context
	for {
		var waiting []int
		for i, r := range results {
			if absent(a.State(), r) {
				waiting = append(waiting, i)
			}
		}
		if len(waiting) == 0 {
			return results, nil
		}
		if wctx == nil && ctx.Err() == nil {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(ctx, w.ServiceWait())
			defer cancel()
			for n, i := range waiting {
				if err := announceWait(ctx, a, ids[i], calls[i], n == len(waiting)-1); err != nil {
					return nil, err
				}
			}
		}
		if ctx.Err() != nil || wctx.Err() != nil {
			for _, i := range waiting {
				results[i] = unavailable(ctx, calls[i], w.ServiceWait())
			}
			return results, nil
		}
		// One tool's wait at a time: the others run again with it, and
		// those whose service is back meanwhile are done.
		_ = w.WaitFor(wctx, calls[waiting[0]].Name)
		again := a.Tools.Execute(ctx, a.Session, pick(calls, waiting), pickSpans(spans, waiting))
		for j, i := range waiting {
			results[i] = again[j]
		}
	}
}

// awaitService is the wait of a resumed turn's call at step stepID that its
// previous owner left running: when the tool was offered and its service is
// absent, it waits for it (tool.waiting) before the call is looked up. It
// reports whether the service is there (or the tool is not remote).
func awaitService(ctx context.Context, a *AgentContext, stepID string, call llm.ToolCall) (bool, error) {
	w := a.Tools.waiter
	if _, ok := a.Tools.catalog.Tool(call.Name); ok || w == nil || !offered(a.State(), call.ID, call.Name) {
		return true, nil
	}
	if err := announceWait(ctx, a, stepID, call, true); err != nil {
		return false, err
	}
	wctx, cancel := context.WithTimeout(ctx, w.ServiceWait())
	defer cancel()
	return w.WaitFor(wctx, call.Name) == nil, nil
}

// announceWait records that the call at step stepID waits for its service:
// staged, or appended (flush) so that watchers see it now.
func announceWait(ctx context.Context, a *AgentContext, stepID string, call llm.ToolCall, flush bool) error {
	d := event.ToolWaitingData{StepID: stepID, CallID: call.ID, Name: call.Name, WaitMS: a.Tools.waiter.ServiceWait().Milliseconds()}
	a.log.Info("a tool call waits for its tool service", "session", a.Session, "tool", call.Name, "call", call.ID, "wait", a.Tools.waiter.ServiceWait())
	if flush {
		return a.Append(ctx, event.ToolWaiting, d)
	}
	return a.Stage(event.ToolWaiting, d)
}

// absent reports whether r is the result of a call whose service was not
// there: no runner answered (tool_unavailable), or the tool is not listed
// although the model was offered it.
func absent(st *projection.State, r toolrunner.CallResult) bool {
	switch r.Result.Code {
	case event.CodeToolUnavailable:
		return true
	case event.CodeUnknownTool:
		return offered(st, r.Call.ID, r.Call.Name)
	}
	return false
}

// offered reports whether the request that the model answered with call
// callID offered it the tool named name (llm.started records the names).
func offered(st *projection.State, callID, name string) bool {
	for i := len(st.Steps) - 1; i >= 0; i-- {
		s := st.Steps[i]
		if s.Type != projection.StepLLM || s.Response == nil || s.RequestRef == nil {
			continue
		}
		if slices.ContainsFunc(s.Response.ToolCalls, func(c llm.ToolCall) bool { return c.ID == callID }) {
			return slices.Contains(s.RequestRef.Tools, name)
		}
	}
	return false
}

// unavailable is the result of a call whose service did not come back in
// time, or, when ctx is done, of one cancelled while it waited.
func unavailable(ctx context.Context, call llm.ToolCall, wait time.Duration) toolrunner.CallResult {
	if ctx.Err() != nil {
		return settled(call, event.CodeCancelled, fmt.Sprintf("Error: the call to %s was cancelled while it waited for its tool service.", call.Name))
	}
	return settled(call, event.CodeToolUnavailable, fmt.Sprintf(
		"Error: tool %s is unavailable: its service did not come back within %v. The call did not run; it may succeed if you try again later.", call.Name, wait))
}

func pick(calls []llm.ToolCall, at []int) []llm.ToolCall {
	out := make([]llm.ToolCall, len(at))
	for j, i := range at {
		out[j] = calls[i]
	}
	return out
}

// pickSpans is the span contexts of the calls at indexes idx (nil when not
// tracing).
func pickSpans(spans []trace.SpanContext, idx []int) []trace.SpanContext {
	if spans == nil {
		return nil
	}
	out := make([]trace.SpanContext, len(idx))
	for j, i := range idx {
		out[j] = spans[i]
	}
	return out
}
