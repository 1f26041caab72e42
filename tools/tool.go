package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/tah-dev/tah/wire"
)

// Tool is something the model can call.
//
// Run receives the call's input as the model wrote it, already validated against
// Schema. It must honour ctx: when ctx is done (a cancel, a timeout, the owner
// stopping) it returns promptly, and what it returns then is reported as cancelled
// or timed out. A tool reports a failure either by returning an error (the model
// sees its message) or by returning a Result with IsError set. Run may be called
// concurrently unless the tool declares itself Exclusive.
type Tool interface {
	// Name is 1 to 64 letters, digits, '_' or '-'; unique in a registry.
	Name() string
	// Description tells the model what the tool does and when to use it.
	Description() string
	// Schema is the JSON Schema of the input object. Nil means any object.
	Schema() json.RawMessage
	Run(ctx context.Context, input json.RawMessage) (Result, error)
}

// IdempotentTool is the optional ability of a tool that may be run again with the
// same input without harm. On resume, a call that started but has no result is run
// again only if its tool is idempotent; otherwise it gets an "interrupted" result.
type IdempotentTool interface {
	Tool
	Idempotent() bool
}

// TimeoutTool is the optional ability of a tool that needs a time limit other than
// the executor's default. A zero or negative duration means the default.
type TimeoutTool interface {
	Tool
	Timeout() time.Duration
}

// ExclusiveTool is the optional ability of a tool that must run alone: within a
// batch of calls, the calls before it finish before it starts, and the calls after
// it start after it finished. Tools with side effects (write_file) declare it, so
// that a batch keeps the order the model wrote its calls in.
type ExclusiveTool interface {
	Tool
	Exclusive() bool
}

// RemoteTool is the optional ability of a tool that runs elsewhere: Runner names
// where (for the log's tool.started event), wire.RemoteRunner of its service,
// such as "remote:tah-tool-shout".
type RemoteTool interface {
	Tool
	Runner() string
}

// ApprovalTool is the optional ability of a tool that asks for a person's
// approval of its calls by default: a tool of an MCP server that does not say
// it is read-only, say. The approval policy's rules, when one names the tool
// (by name or glob), decide instead.
type ApprovalTool interface {
	Tool
	AsksApproval() bool
}

// AsksApproval reports whether t asks for approval of its calls by default.
func AsksApproval(t Tool) bool {
	a, ok := t.(ApprovalTool)
	return ok && a.AsksApproval()
}

// IsIdempotent reports whether t declares itself idempotent.
func IsIdempotent(t Tool) bool {
	i, ok := t.(IdempotentTool)
	return ok && i.Idempotent()
}

// IsExclusive reports whether t must run alone.
func IsExclusive(t Tool) bool {
	e, ok := t.(ExclusiveTool)
	return ok && e.Exclusive()
}

// TimeoutOf returns t's own timeout, or def when it has none.
func TimeoutOf(t Tool, def time.Duration) time.Duration {
	if tt, ok := t.(TimeoutTool); ok {
		if d := tt.Timeout(); d > 0 {
			return d
		}
	}
	return def
}

// RunnerOf names where t runs: wire.ToolRunnerLocal, or what a RemoteTool
// says.
func RunnerOf(t Tool) string {
	if r, ok := t.(RemoteTool); ok {
		if s := r.Runner(); s != "" {
			return s
		}
	}
	return wire.ToolRunnerLocal
}

// RunnerIn names where a call of the tool named name in cat runs: RunnerOf
// its tool, or wire.ToolRunnerLocal for a tool cat does not hold (the
// executor reports it unknown, here).
func RunnerIn(cat Catalog, name string) string {
	if t, ok := cat.Tool(name); ok {
		return RunnerOf(t)
	}
	return wire.ToolRunnerLocal
}

// Result is the outcome of one tool call: Output is what the model sees,
// IsError and Code (an event.Code* constant) mark a failure, Artifact refers
// to data the call stored in the object store. It is wire.ToolResult: the
// same value is a tool service's reply and a stored call's result
// (docs/protocol.md), so a result crosses the bus without conversion.
type Result = wire.ToolResult

// Text returns a successful result with output s.
func Text(s string) Result { return Result{Output: s} }

// Failed returns a failed result with code and output msg.
func Failed(code, msg string) Result { return Result{Output: msg, IsError: true, Code: code} }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidName reports, as an error wrapping ErrInvalidName, whether name can name a
// tool: 1 to 64 letters, digits, '_' or '-'.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("tool name %q: %w: use 1 to 64 letters, digits, '_' or '-'", name, ErrInvalidName)
	}
	return nil
}

// CallInfo identifies the call a tool runs for. Execute puts it in the context it
// passes to Run; remote tools send it along.
type CallInfo struct {
	ID      string // the model's call id
	Name    string // the tool's name
	Session string // the session the call belongs to; may be empty
}

type callKey struct{}

// WithCall returns ctx carrying info.
func WithCall(ctx context.Context, info CallInfo) context.Context {
	return context.WithValue(ctx, callKey{}, info)
}

// CallFrom returns the CallInfo that ctx carries.
func CallFrom(ctx context.Context) (CallInfo, bool) {
	info, ok := ctx.Value(callKey{}).(CallInfo)
	return info, ok
}
