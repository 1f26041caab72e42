package wire

// InputError reports an input that was refused: the body of a message on the
// core NATS subject tah.sess.<sid>.err (and on the input's Tah-Reply-To
// subject, if it had one), with the header Tah-Input-Id when the id could be
// read. Not stored: subscribe before publishing the input.
type InputError struct {
	Session string `json:"session"`
	// InputID is the refused input's id, when it could be read.
	InputID string `json:"input_id,omitempty"`
	// Command is the Tah-Command header of the refused message.
	Command Command `json:"command,omitempty"`
	// Seq is the refused message's sequence in TAH_IN.
	Seq uint64 `json:"seq,omitempty"`
	// Code classifies the error: one of the Code* input error codes.
	Code string `json:"code"`
	// Error says what was wrong, for people.
	Error string `json:"error"`
}

// The codes of an InputError.
const (
	// CodeMalformedInput: the message was not an input (ErrMalformedInput).
	CodeMalformedInput = "malformed_input"
	// CodeUnknownSession: the input names a session that does not exist.
	CodeUnknownSession = FailureUnknownSession
	// CodeRejected: the node could not hand the input to its session.
	CodeRejected = "rejected"
)
