package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Exit codes of tahctl, as documented by `tahctl help` and the README.
const (
	exitOK          = 0 // done; for send and resume: the turn completed
	exitFailed      = 1 // the turn failed, or the command could not be carried out
	exitUsage       = 2 // bad usage or input: an unknown command or flag, an invalid id, an empty or oversized input
	exitNotFound    = 3 // no such session, or no such artifact, step or credential
	exitUnavailable = 4 // no node: nothing answers, the credentials were refused or may not do this, or the connection was lost
	exitCancelled   = 5 // the turn was cancelled (by tahctl cancel, or another client)
	// exitAwaitingApproval: the turn waits for a tool call's approval
	// (send, resume, approve without a terminal to ask on).
	exitAwaitingApproval = 6
	// exitDiverged: a replay departs from the recorded session (replay).
	exitDiverged    = 7
	exitInterrupted = 130 // interrupted by Ctrl-C (send and resume cancel their own turn first, or withdraw their queued input)
)

const exitCodesHelp = `Exit status:
  0    done (send, resume: the turn completed)
  1    the turn failed, or the command could not be carried out
  2    bad usage or input: unknown command or flag, invalid session id, empty or oversized input
  3    no such session, or no such artifact or step of it, or credential (creds revoke), or tenant (tenant rm, creds add --tenant)
  4    no node: nothing answers, the credentials were refused or may not do this
       (permission denied), or the connection was lost
  5    the turn was cancelled
  6    the turn waits for a tool call's approval (tahctl approve / deny ID CALL decide)
  7    replay: the replay departs from the recorded session (the divergence is shown)
  130  interrupted by Ctrl-C (send and resume cancel their own turn first,
       or withdraw their input if it has not started)
`

// cliError is an error with the exit code it means and what to do next.
type cliError struct {
	code int
	err  error
	try  string
}

func (e *cliError) Error() string { return e.err.Error() }
func (e *cliError) Unwrap() error { return e.err }

func errorf(code int, try, format string, args ...any) error {
	return &cliError{code: code, err: fmt.Errorf(format, args...), try: try}
}

func usageError(try, format string, args ...any) error {
	return errorf(exitUsage, try, format, args...)
}

// exitStatus is an outcome that is not an error to report but sets the exit
// code (a failed or cancelled turn, already shown).
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// exitCode is the process exit code for err.
func exitCode(err error) int {
	var ce *cliError
	var es exitStatus
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &es):
		return int(es)
	case errors.As(err, &ce):
		return ce.code
	}
	return exitFailed
}

// report writes err for people: "Error: ..." then, when known, "Try: ...".
func report(w io.Writer, err error) {
	var es exitStatus
	if err == nil || errors.As(err, &es) {
		return
	}
	msg := strings.TrimSpace(err.Error())
	fmt.Fprintf(w, "Error: %s\n", strings.ReplaceAll(msg, "\n", "\n  "))
	var ce *cliError
	if errors.As(err, &ce) && ce.try != "" {
		fmt.Fprintf(w, "Try: %s\n", ce.try)
	}
}
