package remote

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strconv"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools"
)

// The wire contract of tool services, version 1. docs/protocol.md ("Tool
// services") describes it for implementers in any language.
const (
	// ProtocolVersion is the value of the service metadata key MetaProtocol.
	ProtocolVersion = "1"
	// SubjectPrefix starts the subject of every tool endpoint: tah.tool.<name>.
	SubjectPrefix = "tah.tool."
	// CancelPrefix starts the subject on which a call is cancelled:
	// tah.tool.cancel.<call token>.
	CancelPrefix = "tah.tool.cancel."
	// QueueGroup is the queue group of every tool endpoint, so that the instances
	// of a service share its calls.
	QueueGroup = "tah-tools"
	// ServicePrefix starts the conventional service name: tah-tool-<name>.
	ServicePrefix = "tah-tool-"
	// ResultsBucket is the KV bucket where services store calls under their key
	// (ResultKey) before they reply.
	ResultsBucket = "tah_tool_results"
	// DefaultResultTTL is how long stored calls live when a service creates the
	// bucket.
	DefaultResultTTL = 24 * time.Hour
)

// Request headers (the body carries the same values; it wins when both are set).
const (
	HeaderCallID   = "Tah-Call-Id"
	HeaderSession  = "Tah-Session"
	HeaderDeadline = "Tah-Deadline" // RFC 3339 with nanoseconds, UTC
)

// Metadata keys. MetaProtocol is service metadata; the others are endpoint
// metadata (all values are strings, as micro requires).
const (
	MetaProtocol    = "tah_protocol"
	MetaDescription = "description"
	MetaSchema      = "schema"     // the input's JSON Schema, as JSON text
	MetaIdempotent  = "idempotent" // "true" or "false"
	MetaExclusive   = "exclusive"  // "true" or "false"
	MetaTimeoutMS   = "timeout_ms" // the tool's own time limit in milliseconds
)

// The states of a stored call.
const (
	StateRunning = "running"
	StateDone    = "done"
)

// Request is the body of a call, sent to tah.tool.<name>.
type Request struct {
	CallID  string `json:"call_id"`
	Session string `json:"session,omitempty"`
	Tool    string `json:"tool"`
	// Attempt is unique to this request; the service copies it into the stored
	// call, so that a caller tells its own attempt from an earlier one.
	Attempt string          `json:"attempt,omitempty"`
	Input   json.RawMessage `json:"input"`
	// Deadline is when the caller stops waiting; the service should stop then.
	Deadline time.Time `json:"deadline,omitzero"`
}

// Reply is the body of a reply: a tools.Result as JSON,
// {"output": "...", "is_error": false, "code": "", "artifact": {...}}.
type Reply = tools.Result

// CancelNotice is the body of a message on tah.tool.cancel.<call token>. The
// body may be empty; when Session (or Attempt) is set, only the calls with that
// session (or attempt) are cancelled.
type CancelNotice struct {
	CallID  string `json:"call_id"`
	Session string `json:"session,omitempty"`
	// Attempt, when set, names the request to cancel (Request.Attempt). A service
	// should remember it for a while when it has not seen that request yet: a
	// cancel can overtake its call.
	Attempt string `json:"attempt,omitempty"`
	// Reason is ReasonCancelled or ReasonTimeout; the service gives the call's
	// result the matching code ("cancelled" or "timeout").
	Reason string `json:"reason,omitempty"`
}

// The reasons of a CancelNotice.
const (
	ReasonCancelled = "cancelled" // the caller cancelled the call (a cancelled turn)
	ReasonTimeout   = "timeout"   // the caller's deadline passed
)

// Stored is the value of a call's key in ResultsBucket. A service puts it with
// State "running" when it starts the call (optional, but it lets callers notice a
// runner that died), and with State "done" and the Result before it replies.
type Stored struct {
	CallID  string `json:"call_id"`
	Session string `json:"session,omitempty"`
	Tool    string `json:"tool"`
	Attempt string `json:"attempt,omitempty"`
	State   string `json:"state"`
	// Service and Instance are the micro service's name and id: a caller pings
	// $SRV.PING.<service>.<instance> to learn whether a running call's runner is
	// still there.
	Service  string        `json:"service,omitempty"`
	Instance string        `json:"instance,omitempty"`
	Started  time.Time     `json:"started,omitzero"`
	Finished time.Time     `json:"finished,omitzero"`
	Result   *tools.Result `json:"result,omitempty"`
}

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// Token turns an id into a NATS subject token and KV key part: the id itself when
// it is 1 to 128 letters, digits, '_' or '-', otherwise "=" followed by the
// unpadded base64url of its bytes.
func Token(id string) string {
	if tokenRE.MatchString(id) {
		return id
	}
	return "=" + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// Subject is the endpoint subject of the tool named name.
func Subject(name string) string { return SubjectPrefix + name }

// CancelSubject is the subject on which the call callID is cancelled.
func CancelSubject(callID string) string { return CancelPrefix + Token(callID) }

// ResultKey is the key of a call in ResultsBucket: <session token>.<call token>,
// with "_" for an empty session.
func ResultKey(session, callID string) string {
	s := "_"
	if session != "" {
		s = Token(session)
	}
	return s + "." + Token(callID)
}

// ErrorStatus is the micro error code (header Nats-Service-Error-Code) a service
// sends with a failed result of code code.
func ErrorStatus(code string) string {
	switch code {
	case event.CodeInvalidInput:
		return "400"
	case event.CodeUnknownTool:
		return "404"
	case event.CodeTimeout:
		return "408"
	case event.CodeCancelled:
		return "499"
	}
	return "500"
}

// CodeOf maps a micro error code to a result code: a TAH code passes as it is,
// 400 is invalid_input, 404 unknown_tool, 408 and 504 timeout, 499 cancelled, and
// anything else tool_error.
func CodeOf(status string) string {
	switch status {
	case event.CodeInvalidInput, event.CodeUnknownTool, event.CodeTimeout, event.CodeCancelled,
		event.CodeToolError, event.CodeInternal, event.CodeInterrupted:
		return status
	case "400":
		return event.CodeInvalidInput
	case "404":
		return event.CodeUnknownTool
	case "408", "504":
		return event.CodeTimeout
	case "499":
		return event.CodeCancelled
	}
	return event.CodeToolError
}

// Metadata returns the endpoint metadata that describes t.
func Metadata(t tools.Tool) map[string]string {
	m := map[string]string{
		MetaDescription: t.Description(),
		MetaSchema:      string(tools.SchemaOf(t)),
		MetaIdempotent:  strconv.FormatBool(tools.IsIdempotent(t)),
		MetaExclusive:   strconv.FormatBool(tools.IsExclusive(t)),
	}
	if d := tools.TimeoutOf(t, 0); d > 0 {
		m[MetaTimeoutMS] = strconv.FormatInt(d.Milliseconds(), 10)
	}
	return m
}
