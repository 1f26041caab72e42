package node

import (
	"context"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/actors/toolrunner"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools"
)

// resultFinder finds a result a remote runner stored by call id
// (tools/remote.Registry implements it).
type resultFinder interface {
	Await(ctx context.Context, session, callID string) (tools.Result, error)
}

// runnerTools gives the session loop a node's tools: the catalog for schemas
// and abilities, the tool-runner actor for execution.
type runnerTools struct {
	cat    tools.Catalog
	runner *toolrunner.Runner
	finder resultFinder // nil without remote tools
	// metrics, when set, records every call.
	metrics *Metrics
}

var (
	_ session.Tools            = (*runnerTools)(nil)
	_ session.ToolResultFinder = (*runnerTools)(nil)
)

func (t *runnerTools) Schemas() []llm.ToolSchema { return t.cat.Schemas() }

func (t *runnerTools) Idempotent(name string) bool {
	tool, ok := t.cat.Tool(name)
	return ok && tools.IsIdempotent(tool)
}

// Execute runs the calls in the runner actor and waits for the batch: the
// session's work goroutine waits, never its actor.
func (t *runnerTools) Execute(ctx context.Context, sid string, calls []llm.ToolCall) []session.ToolResult {
	out := make([]session.ToolResult, len(calls))
	res, err := t.runner.Execute(ctx, toolrunner.ExecuteBatch{Session: sid, Calls: calls})
	if err != nil {
		for i := range out {
			out[i] = session.ToolResult{Output: "the tool runner is not available: " + err.Error(), IsError: true, Code: event.CodeInternal}
			if ctx.Err() != nil {
				out[i].Code = event.CodeCancelled
			}
		}
		return out
	}
	for i := range out {
		if i >= len(res.Results) {
			out[i] = session.ToolResult{Output: "the tool runner returned no result for this call", IsError: true, Code: event.CodeInternal}
			continue
		}
		r := res.Results[i]
		if t.metrics != nil {
			t.metrics.toolCall(calls[i].Name, r.Result.IsError, r.Result.Code, r.Duration)
		}
		out[i] = session.ToolResult{Output: r.Result.Output, IsError: r.Result.IsError, Code: r.Result.Code,
			Artifact: r.Result.Artifact, DurationMS: r.Duration.Milliseconds()}
	}
	return out
}

// Lookup finds the result of a call that a remote runner stored before its
// owner died.
func (t *runnerTools) Lookup(ctx context.Context, sid, callID string) (session.ToolResult, bool) {
	if t.finder == nil {
		return session.ToolResult{}, false
	}
	r, err := t.finder.Await(ctx, sid, callID)
	if err != nil {
		return session.ToolResult{}, false
	}
	return session.ToolResult{Output: r.Output, IsError: r.IsError, Code: r.Code, Artifact: r.Artifact}, true
}
