package tools

import (
	"errors"
	"fmt"
)

// Errors of this package. Execute never returns them: it turns every failure into a
// failed Result. They reach callers of Registry methods, and tools may wrap them.
var (
	// ErrUnknownTool: no tool of that name is registered.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrDuplicateTool: a tool of that name is already registered.
	ErrDuplicateTool = errors.New("duplicate tool")
	// ErrInvalidName: a tool name that is not 1 to 64 letters, digits, '_' or '-'.
	// Names are NATS subject tokens and provider function names.
	ErrInvalidName = errors.New("invalid tool name")
	// ErrInvalidSchema: a tool's input schema is not a JSON Schema of an object.
	ErrInvalidSchema = errors.New("invalid tool schema")
	// ErrInvalidInput: a call's input is not JSON or fails the tool's schema.
	ErrInvalidInput = errors.New("invalid tool input")
	// ErrTimeout: the call ran out of time.
	ErrTimeout = errors.New("tool call timed out")
	// ErrCancelled: the call was cancelled.
	ErrCancelled = errors.New("tool call cancelled")
	// ErrPanic: the tool panicked.
	ErrPanic = errors.New("tool panicked")
)

// ToolError is a failure of one tool call, with the code the model and the log see.
//
// A tool may return a *ToolError from Run to choose the code of its failure (for
// example event.CodeInvalidInput for a path outside its root); any other error
// becomes event.CodeToolError.
type ToolError struct {
	Tool   string // the tool's name; may be empty when the tool returns it
	CallID string // the call's id; may be empty when the tool returns it
	Code   string // one of the event.Code* constants
	Err    error
}

func (e *ToolError) Error() string {
	msg := "<nil>"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	switch {
	case e.Tool != "" && e.CallID != "":
		return fmt.Sprintf("tool %s (call %s): %s", e.Tool, e.CallID, msg)
	case e.Tool != "":
		return fmt.Sprintf("tool %s: %s", e.Tool, msg)
	}
	return msg
}

func (e *ToolError) Unwrap() error { return e.Err }

// Errorf returns a *ToolError with code and a formatted message; %w wraps as in
// fmt.Errorf.
func Errorf(code, format string, args ...any) *ToolError {
	return &ToolError{Code: code, Err: fmt.Errorf(format, args...)}
}
