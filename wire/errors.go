package wire

import "errors"

// Errors of this package.
var (
	// ErrMalformedInput: an input that cannot be understood: no or an unknown
	// command, a body that is not the command's JSON, fields the command does
	// not take. A node terminates such a message and reports it with a
	// Refusal of code CodeMalformedInput.
	ErrMalformedInput = errors.New("malformed input")
	// ErrReplySubject: a Tah-Reply-To that is not a subject under a client's
	// inbox prefix (CheckReplySubject). An input that names one is malformed
	// (its error wraps ErrMalformedInput too); a node refuses it with a
	// Refusal of code CodeReplySubject on tah.sess.<sid>.err only, and
	// publishes nothing on that subject.
	ErrReplySubject = errors.New("reply subject refused")
)
