package wire

import "errors"

// Errors of this package.
var (
	// ErrMalformedInput: an input that cannot be understood: no or an unknown
	// command, a body that is not the command's JSON, fields the command does
	// not take. A node terminates such a message and reports it with an
	// InputError of code CodeMalformedInput.
	ErrMalformedInput = errors.New("malformed input")
)
