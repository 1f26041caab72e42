package wire

import (
	"encoding/json"
	"time"

	"github.com/tah-dev/tah/event"
)

// ToolRequest is the body of a call of a tool service, sent to
// tah.tool.<name> with a reply subject (and the headers Tah-Call-Id,
// Tah-Session and Tah-Deadline repeating its fields).
type ToolRequest struct {
	// CallID is the model's tool call id.
	CallID  string `json:"call_id" jsonschema:"minLength=1"`
	Session string `json:"session,omitempty"`
	Tool    string `json:"tool"`
	// Attempt is unique to this request; the service copies it into the
	// stored call, so that a caller tells its own attempt from an earlier one.
	Attempt string `json:"attempt,omitempty"`
	// Input is the model's arguments, already valid against the tool's schema.
	Input json.RawMessage `json:"input" jsonschema:"type=object"`
	// Deadline is when the caller stops waiting; the service stops then too.
	Deadline time.Time `json:"deadline,omitzero"`
}

// ToolResult is the outcome of one tool call: the body of a tool service's
// reply, the result of a stored call, and what the model sees (tools.Result
// is this type).
type ToolResult struct {
	// Output is what the model sees; on failure, an explanation it can act on.
	Output string `json:"output"`
	// IsError marks a failed call.
	IsError bool `json:"is_error,omitempty"`
	// Code classifies a failure: one of the event.Code* constants
	// (invalid_input, unknown_tool, tool_error, timeout, cancelled,
	// interrupted, internal).
	Code string `json:"code,omitempty"`
	// Artifact refers to data the call stored in the object store: the full
	// output when Output is a preview, or a file the tool produced.
	Artifact *event.ArtifactRef `json:"artifact,omitempty"`
}

// ToolCancel is the body of a message on tah.tool.cancel.<call token>. The
// body may be empty; when Session (or Attempt) is set, only the calls with
// that session (or attempt) are cancelled.
type ToolCancel struct {
	CallID  string `json:"call_id"`
	Session string `json:"session,omitempty"`
	// Attempt, when set, names the request to cancel. A service remembers it
	// for a while when it has not seen that request yet: a cancel can
	// overtake its call.
	Attempt string `json:"attempt,omitempty"`
	// Reason is CancelReasonCancelled or CancelReasonTimeout; the result's
	// code follows it.
	Reason string `json:"reason,omitempty"`
}

// The reasons of a ToolCancel.
const (
	CancelReasonCancelled = "cancelled" // the caller cancelled the call (a cancelled turn)
	CancelReasonTimeout   = "timeout"   // the caller's deadline passed
)

// StoredCall is the value of a call's key (ResultKey) in ToolResultBucket. A
// service puts it with State "running" when it starts the call (optional, but
// it lets callers notice a runner that died), and with State "done" and the
// Result before it replies.
type StoredCall struct {
	CallID  string `json:"call_id"`
	Session string `json:"session,omitempty"`
	Tool    string `json:"tool"`
	// Attempt is copied from the request.
	Attempt string `json:"attempt,omitempty"`
	State   string `json:"state" jsonschema:"enum=running,enum=done"`
	// Service and Instance are the micro service's name and id: a caller pings
	// $SRV.PING.<service>.<instance> to learn whether a running call's runner
	// is still there.
	Service  string      `json:"service,omitempty"`
	Instance string      `json:"instance,omitempty"`
	Started  time.Time   `json:"started,omitzero"`
	Finished time.Time   `json:"finished,omitzero"`
	Result   *ToolResult `json:"result,omitempty"`
}

// The states of a StoredCall.
const (
	CallRunning = "running"
	CallDone    = "done"
)

// ToolRunnerLocal is the runner of the node's own tools in tool.started; a
// tool service's is RemoteRunner(service).
const ToolRunnerLocal = "local"

// RemoteRunner names a tool service as the runner of a call:
// "remote:tah-tool-<name>".
func RemoteRunner(service string) string { return "remote:" + service }

// ToolErrorStatus is the micro error code a service sends with a failed
// result of code code.
func ToolErrorStatus(code string) string {
	switch code {
	case event.CodeInvalidInput:
		return "400"
	case event.CodeUnknownTool:
		return "404"
	case event.CodeTimeout:
		return "408"
	case event.CodeCancelled:
		return "499"
	case event.CodeToolUnavailable:
		return "503"
	}
	return "500"
}

// ToolCodeOf maps a tool service's micro error code to a result code: a TAH
// code passes as it is, 400 is invalid_input, 404 unknown_tool, 408 and 504
// timeout, 499 cancelled, 503 tool_unavailable (the service cannot take the
// call now, and did not run it), and anything else tool_error.
func ToolCodeOf(status string) string {
	switch status {
	case event.CodeInvalidInput, event.CodeUnknownTool, event.CodeTimeout, event.CodeCancelled,
		event.CodeToolError, event.CodeInternal, event.CodeInterrupted, event.CodeToolUnavailable:
		return status
	case "400":
		return event.CodeInvalidInput
	case "404":
		return event.CodeUnknownTool
	case "408", "504":
		return event.CodeTimeout
	case "499":
		return event.CodeCancelled
	case "503":
		return event.CodeToolUnavailable
	}
	return event.CodeToolError
}
