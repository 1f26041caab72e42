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
	// ErrNoReadModel: a request to one of ReadModelEndpoints that no node
	// answers while nodes do run: every node is a worker (read_model=false),
	// and none holds the read model those endpoints answer from. Start a
	// node with read_model=true (the default), or set it on one.
	ErrNoReadModel = errors.New("no node holds the read model (read_model=false everywhere)")
)
