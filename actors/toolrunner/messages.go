package toolrunner

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/trace"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools"
)

// ExecuteBatch asks a runner to execute the tool calls of one model response.
// The runner answers with exactly one *BatchResult, sent to ReplyTo or, when that
// is nil, to the sender (use ctx.Request or RequestFuture, not Send).
type ExecuteBatch struct {
	// ID names the batch in CancelBatch and in the result; the runner makes one up
	// when it is empty.
	ID string
	// Session is the session the calls belong to; tools see it in their
	// tools.CallInfo and remote tools send it along.
	Session string
	// Calls are run concurrently where their tools allow it (see
	// tools.ExclusiveTool); results come back in this order.
	Calls []llm.ToolCall
	// Deadline, when not zero, bounds the whole batch: a call still running then
	// ends with a timeout result. Each call also has its tool's own timeout.
	Deadline time.Time
	// ReplyTo receives the BatchResult instead of the sender.
	ReplyTo *actor.PID
	// Spans, when set, are the calls' spans (one per call, in order): each
	// call runs in a context holding its own, so that a remote tool gets
	// the trace context with the call. The runner neither starts nor ends
	// them.
	Spans []trace.SpanContext
	// Catalog, when set, holds the calls' tools instead of the runner's
	// executor's (a tenant's session's: its tenant's tools too); the runner's
	// executor options apply.
	Catalog tools.Catalog

	// reply, set by a Runner handle, receives the BatchResult instead of an
	// actor (a channel with room for it): a caller that is not an actor
	// waits on it without a future of the actor system (a process
	// registered and removed, a timer and a goroutine, each batch).
	reply chan<- *BatchResult
}

// BatchResult answers an ExecuteBatch: one result per call, in call order.
type BatchResult struct {
	ID      string
	Session string
	Results []CallResult
}

// CallResult is the outcome of one call of a batch.
type CallResult struct {
	Call llm.ToolCall
	// Result is what the model sees; a failure has IsError and a Code.
	Result tools.Result
	// Runner says where the call ran: wire.ToolRunnerLocal, or
	// wire.RemoteRunner of the tool service (tools.RunnerIn).
	Runner string
	// Started is when the call started running (zero if it never did), and
	// Duration how long it ran.
	Started  time.Time
	Duration time.Duration
}

// Cancel cancels the call with this id, if it is running or waiting. Its result,
// with code "cancelled", comes back in its batch's BatchResult.
type Cancel struct{ CallID string }

// CancelBatch cancels every call of the batch with this id.
type CancelBatch struct{ ID string }

// CancelAll cancels every call the runner holds.
type CancelAll struct{}

// batchDone tells the runner that a batch's goroutine has delivered its result.
type batchDone struct{ id string }
