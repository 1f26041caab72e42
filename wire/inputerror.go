package wire

import "github.com/tah-dev/tah/projection"

// InputError reports an input that was refused: the body of a message on the
// core NATS subject tah.sess.<sid>.err (and, for a malformed input, on its
// Tah-Reply-To subject too when that is one a client may own: see
// CheckReplySubject), with the header Tah-Input-Id when the id could be read.
// Not stored: subscribe before publishing the input. A refused input is
// acknowledged: it is never delivered again.
type InputError struct {
	Session string `json:"session"`
	// InputID is the refused input's id, when it could be read.
	InputID string `json:"input_id,omitempty"`
	// Command is the Tah-Command header of the refused message.
	Command Command `json:"command,omitempty"`
	// Seq is the refused message's sequence in TAH_IN.
	Seq uint64 `json:"seq,omitempty"`
	// Code classifies the error: one of the Code* input error codes.
	Code string `json:"code" jsonschema:"enum=malformed_input,enum=reply_subject_refused,enum=input_too_large,enum=unknown_session,enum=corrupt_log,enum=rejected"`
	// Error says what was wrong, for people.
	Error string `json:"error"`
}

// The codes of an InputError.
const (
	// CodeMalformedInput: the message was not an input (ErrMalformedInput).
	CodeMalformedInput = "malformed_input"
	// CodeReplySubject: the input's Tah-Reply-To is not under a client's
	// inbox (ErrReplySubject). Reported on tah.sess.<sid>.err only.
	CodeReplySubject = "reply_subject_refused"
	// CodeInputTooLarge: the user message of a run is over the node's input
	// size limit (agent.max_input_bytes).
	CodeInputTooLarge = "input_too_large"
	// CodeCorruptLog: the session's log holds a record or event its owner
	// cannot fold (SessionFault): the session is failed until it is repaired
	// (see docs/operations.md), and takes no input.
	CodeCorruptLog = projection.FaultCorruptLog
	// CodeUnknownSession: the input names a session that does not exist.
	CodeUnknownSession = FailureUnknownSession
	// CodeRejected: the node could not hand the input to its session.
	CodeRejected = "rejected"
)
