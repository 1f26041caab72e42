package wire

import "github.com/tah-dev/tah/projection"

// StatusRefused is the Status of a refusal: an Outcome saying that a node
// dropped an input without carrying it out (Refusal).
const StatusRefused projection.Status = "refused"

// The failure codes of a refusal (an Outcome of Status StatusRefused).
const (
	// CodeMalformedInput: the message was not an input (ErrMalformedInput).
	CodeMalformedInput = "malformed_input"
	// CodeReplySubject: the input's Tah-Reply-To is not under a client's
	// inbox (ErrReplySubject). Reported on tah.sess.<sid>.err only.
	CodeReplySubject = "bad_reply_subject"
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
	// CodeQuotaExceeded: the input is over its tenant's inputs per second
	// (the refusal's Quota says which quota, its limit and when it resets).
	CodeQuotaExceeded = "quota_exceeded"
)

// Refusal is the outcome of an input that a node refused (code, one of the
// Code* refusal codes, and what was wrong): the one body it publishes on the
// session's error subject tah.sess.<sid>.err and on the input's Tah-Reply-To
// subject (unless that is not one a client may own: see CheckReplySubject),
// with the header Tah-Input-Id when the input's id could be read (its body's
// id, or the id its Nats-Msg-Id names). Neither is stored: subscribe before publishing.
// A refused input is acknowledged: it is never delivered again.
func Refusal(sid, inputID, code, why string) Outcome {
	return Outcome{Session: sid, InputID: inputID, Status: StatusRefused, Failure: why, FailureCode: code}
}

// Refused reports whether o is a refusal (Refusal).
func (o Outcome) Refused() bool { return o.Status == StatusRefused }
