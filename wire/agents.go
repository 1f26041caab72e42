package wire

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tah-dev/tah/event"
)

// The Synadia Agent Protocol for NATS (v0.3) as TAH speaks it: TAH's sessions
// are agents that any caller of that protocol discovers and prompts
// (docs/agent-protocol.md). The subjects, chunks and payloads below are the
// protocol's; what TAH adds (the controller instance, the session field of an
// envelope, the status tokens, the durable answers of queries) is said where
// it is defined.
const (
	// AgentsService is the micro service name every agent registers under.
	AgentsService = "agents"
	// AgentsQueueGroup is the queue group of the prompt and status endpoints.
	AgentsQueueGroup = "agents"
	// AgentsProtocolVersion is the protocol version TAH implements
	// (metadata protocol_version).
	AgentsProtocolVersion = "0.3"
	// AgentName is TAH's agent identifier: metadata.agent and the third token
	// of its subjects.
	AgentName = "tah"
	// AgentController is the instance name of the controller: a prompt to it
	// starts a new session, or continues the one its envelope names.
	AgentController = "new"
	// AgentsPrefix starts every subject of the protocol.
	AgentsPrefix = "agents."
	// AgentsHeartbeats is the filter of every agent's heartbeats.
	AgentsHeartbeats = "agents.hb.*.*.*"

	// ReplyAgents is the Input.Reply of a run whose turn is answered as an
	// agent protocol stream on its Tah-Reply-To (see Caller).
	ReplyAgents = "agents/0.3"

	// AnswerStream is the stream that keeps the answers to query chunks
	// until a node turned them into an approve or a deny input.
	AnswerStream = "TAH_ANSWERS"
	// AnswerSubjects is the filter of AnswerStream's subjects.
	AnswerSubjects = "tah.sess.*.answer.*"
	// AnswerConsumer is the durable consumer the nodes share on AnswerStream.
	AnswerConsumer = "tah_answers"
)

// Verbs of the protocol's subjects: agents.<verb>.<agent>.<owner>.<name>.
const (
	AgentVerbPrompt    = "prompt"
	AgentVerbStatus    = "status"
	AgentVerbHeartbeat = "hb"
)

// AgentSubject is the subject of verb for the instance name of TAH's agent
// owned by owner: agents.<verb>.tah.<owner>.<name>.
func AgentSubject(verb, owner, name string) string {
	return AgentsPrefix + verb + "." + AgentName + "." + owner + "." + name
}

// AgentInstance returns the owner and the instance name of a subject of
// TAH's agent (agents.<verb>.tah.<owner>.<name>), or false.
func AgentInstance(subj string) (owner, name string, ok bool) {
	parts := strings.Split(subj, ".")
	if len(parts) != 5 || parts[0] != "agents" || parts[2] != AgentName {
		return "", "", false
	}
	return parts[3], parts[4], true
}

// AnswerSubject is where the answer to the query chunk of call callID of
// session sid is published: tah.sess.<sid>.answer.<token of callID>. It is a
// subject of AnswerStream: the answer is stored when it is published, and a
// node turns it into an approve or a deny of the call.
func AnswerSubject(sid, callID string) string { return "tah.sess." + sid + ".answer." + Token(callID) }

// AnswerCall returns the session and the call id of an AnswerSubject (a
// tenant's session's too: tah.sess.<tenant>.<id>.answer.<call>), or false.
func AnswerCall(subj string) (sid, callID string, ok bool) {
	parts := strings.Split(subj, ".")
	if n := len(parts); n < 5 || n > 6 || parts[0] != "tah" || parts[1] != "sess" || parts[n-2] != "answer" {
		return "", "", false
	}
	sid = strings.Join(parts[2:len(parts)-2], ".")
	callID, err := FromToken(parts[len(parts)-1])
	if err != nil || ValidSessionID(sid) != nil {
		return "", "", false
	}
	return sid, callID, true
}

// Caller is who waits for a turn's answer, and how (event.Caller): its
// Protocol is ReplyAgents.
type Caller = event.Caller

// Chunk types of a response stream.
const (
	ChunkResponse = "response"
	ChunkStatus   = "status"
	ChunkQuery    = "query"
)

// Status tokens of status chunks. ack is the protocol's; the others are
// TAH's (callers pass unknown tokens through or ignore them).
const (
	// StatusAck is the first chunk of every stream.
	StatusAck = "ack"
	// StatusSessionPrefix starts the token that names the session a
	// controller's prompt runs in: "session:<sid>".
	StatusSessionPrefix = "session:"
	// StatusRestarted: the node that ran the turn stopped (a crash) and
	// another resumed it; the text received so far is superseded: the whole
	// answer follows, from its start.
	StatusRestarted = "restarted"
	// StatusToolPrefix starts the token of a tool call that starts: "tool:<name>".
	StatusToolPrefix = "tool:"
	// StatusWorking is the keep-alive: the turn runs and has said nothing
	// for a while.
	StatusWorking = "working"
	// StatusAwaitingApproval follows the query chunks of a turn that waits
	// for approval.
	StatusAwaitingApproval = "awaiting_approval"
	// StatusAwaitingAgents follows the tool chunks of a turn that waits
	// for its sub-agents' sessions (and again every keep-alive): the
	// stream stays open, and the turn's answer follows once they answered.
	StatusAwaitingAgents = "awaiting_agents"
	// StatusCancelled: the turn was cancelled; the terminator follows.
	StatusCancelled = "cancelled"
	// StatusSteered: the prompt (envelope when_busy "steer") joined the
	// turn that was running; what follows is that turn's answer from there.
	StatusSteered = "steered"
)

// Chunk is a non-terminating message of a response stream: {"type","data"}.
type Chunk struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

// Query is the data of a query chunk: a question the caller answers with
// one message on ReplySubject (yes approves the call; anything else denies
// it, and is told to the model).
type Query struct {
	ID           string `json:"id"`
	ReplySubject string `json:"reply_subject"`
	Prompt       string `json:"prompt"`
}

// EncodeChunk is the body of a chunk of type typ with data.
func EncodeChunk(typ string, data any) []byte {
	b, err := json.Marshal(Chunk{Type: typ, Data: data})
	if err != nil { // data is a string or a Query
		panic(fmt.Sprintf("wire: chunk %s: %v", typ, err))
	}
	return b
}

// AgentHeartbeat is the payload of a heartbeat and of a status reply.
type AgentHeartbeat struct {
	Agent      string `json:"agent"`
	Owner      string `json:"owner"`
	Session    string `json:"session,omitempty"`
	InstanceID string `json:"instance_id"`
	TS         string `json:"ts"`
	IntervalS  int    `json:"interval_s"`
}

// AgentError is the JSON body of an error message of a stream.
type AgentError struct {
	// Error is TAH's code (the refusal or failure codes, or one of the
	// agent errors below).
	Error       string `json:"error"`
	Message     string `json:"message,omitempty"`
	Session     string `json:"session,omitempty"`
	RetryAfterS int    `json:"retry_after_s,omitempty"`
}

// Error codes of AgentError that are not TAH's refusal or failure codes.
const (
	AgentErrBadRequest  = "bad_request"
	AgentErrTooLarge    = "too_large"
	AgentErrNotFound    = "not_found"
	AgentErrRateLimited = "rate_limited"
	AgentErrInternal    = "internal"
	AgentErrTurnFailed  = "turn_failed"
)

// Envelope is a prompt request as JSON (a plain-text request is the prompt
// alone). Session is TAH's: on the controller it names the session to
// continue. Fields not listed are accepted and ignored.
type Envelope struct {
	Prompt      string       `json:"prompt"`
	Attachments []Attachment `json:"attachments,omitempty"`
	Session     string       `json:"session,omitempty"`
	// WhenBusy, TAH's, says what a prompt to a busy session does instead of
	// failing with 409: WhenBusySteer joins the running turn, and
	// WhenBusyInterrupt cancels it and runs next (RunOptions.WhenBusy).
	WhenBusy WhenBusy `json:"when_busy,omitempty"`
}

// Attachment is a file of a prompt: its name and its content in standard,
// padded base64.
type Attachment struct {
	Filename string `json:"filename"`
	Content  string `json:"content"`
}

// Status codes of agent protocol errors (the Nats-Service-Error-Code
// header), the protocol's taxonomy.
const (
	AgentStatusBadRequest  = 400
	AgentStatusForbidden   = 403
	AgentStatusNotFound    = 404
	AgentStatusConflict    = 409
	AgentStatusRateLimited = 429
	AgentStatusInternal    = 500
)

// AgentStatusOf is the agent protocol status code of a TAH refusal or
// failure code: a malformed or too large input 400, an unknown session 404,
// a session that cannot take the prompt now 409, a tenant's quota reached
// 429, anything else 500.
func AgentStatusOf(code string) int {
	switch code {
	case CodeMalformedInput, CodeReplySubject, CodeInputTooLarge, AgentErrBadRequest, AgentErrTooLarge:
		return AgentStatusBadRequest
	case CodeUnknownSession, AgentErrNotFound:
		return AgentStatusNotFound
	case FailureBusy, FailureNothingToResume, FailureNotPending, FailureAlreadyDecided, FailureWithdrawn:
		return AgentStatusConflict
	case AgentErrRateLimited, CodeQuotaExceeded:
		return AgentStatusRateLimited
	}
	return AgentStatusInternal
}
