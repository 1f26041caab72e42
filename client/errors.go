package client

import (
	"errors"
	"fmt"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/wire"
)

// Errors of this package. Methods wrap them with %w and say what they were
// doing; test for them with errors.Is.
var (
	// ErrInvalidOptions: Options that Validate refuses.
	ErrInvalidOptions = errors.New("invalid client options")
	// ErrNoServer: Connect found no NATS server at the URL: nothing listens
	// there, or it cannot be reached.
	ErrNoServer = errors.New("no NATS server answers")
	// ErrAuth: the NATS server refused the credentials (or wanted some and got
	// none).
	ErrAuth = errors.New("NATS refused the credentials")
	// ErrTLS: the TLS handshake failed: the server's certificate is not
	// signed by a CA the Client trusts (give its CA: Options.TLSCAFile,
	// tahctl --tls-ca), does not name the host of the URL, or the server
	// wants a client certificate (Options.TLSCertFile) it did not get.
	ErrTLS = errors.New("TLS handshake with the NATS server failed")
	// ErrPermissionDenied: NATS refused to let the Client's credential
	// publish what the operation needs (a request, an input) under its
	// role's permissions: an observer's input or create, say. Told at once
	// by a Client that Connect made (the server's permissions violation);
	// a Client over its caller's connection (New) waits for its deadline.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrNoNode: NATS answers, but no TAH node does: nobody serves the API
	// (tah.api.*), or TAH's streams are not there. Start a node.
	ErrNoNode = errors.New("no TAH node serves the API")
	// ErrNoReadModel is wire.ErrNoReadModel: TAH nodes run, but every one is
	// a worker (read_model=false), so none serves the reads that answer
	// from the read model (list, get, steps, messages, artifacts). Start a
	// node with read_model=true, the default.
	ErrNoReadModel = wire.ErrNoReadModel
	// ErrUnavailable: TAH did not answer in time, even after the tries that a
	// temporary unavailability deserves (a busy node, a stream electing a
	// leader for longer than usual).
	ErrUnavailable = errors.New("TAH did not answer in time")
	// ErrNotFound: no such session: the API said 404, or a node refused an
	// input for a session that does not exist (unknown_session).
	ErrNotFound = errors.New("session not found")
	// ErrBadRequest: the API refused the request as not valid (400).
	ErrBadRequest = errors.New("bad request")
	// ErrConflict: the session to create exists already (409).
	ErrConflict = errors.New("session exists already")
	// ErrTooLarge: the API's reply would not fit in one NATS message (413):
	// ask for less (a limit, a later from_seq, brief steps).
	ErrTooLarge = errors.New("reply too large")
	// ErrQuotaExceeded: the request is over one of its tenant's quotas:
	// an API call (429: its *APIError's Quota says which, its limit and
	// when it resets) or an input over the inputs per second (a
	// *CommandError, whose Outcome's Quota says so) (docs/tenancy.md).
	ErrQuotaExceeded = errors.New("quota exceeded")
	// ErrPayloadTooLarge: an input larger than the server's max payload, not
	// sent, or one a node refused as over its input limit (input_too_large).
	// Put large texts in a file the agent reads.
	ErrPayloadTooLarge = natsx.ErrPayloadTooLarge
	// ErrMalformedInput is wire.ErrMalformedInput: an input that does not
	// validate (not sent), or that a node refused (malformed_input, or
	// bad_reply_subject: a Tah-Reply-To outside the client's inbox).
	ErrMalformedInput = wire.ErrMalformedInput
	// ErrBusy: a compaction asked while a turn runs (failure busy).
	ErrBusy = errors.New("session is running a turn")
	// ErrNothingToResume: a resume of a session that has no unfinished turn
	// (failure nothing_to_resume).
	ErrNothingToResume = errors.New("nothing to resume")
	// ErrBudgetExceeded: a resume of a turn that failed at its budget (code
	// budget_exceeded), which a limit still stops (failure
	// budget_exceeded; the CommandError's Message says which limit and
	// what to run): raise it first (SetBudget), or, for a limit of the
	// node's configuration, there. Nothing was written. A turn that runs
	// and reaches a limit is not this error: its outcome has Status failed,
	// Code budget_exceeded and the limit in Budget.
	ErrBudgetExceeded = errors.New("budget exceeded")
	// ErrWithdrawn: the input was cancelled (Turn.Cancel) while it waited
	// behind other work of its session: it never ran (withdrawn).
	ErrWithdrawn = errors.New("input withdrawn before it started")
	// ErrRejected: the node could not hand the input to its session
	// (rejected); the node's log says why.
	ErrRejected = errors.New("input rejected")
	// ErrCorruptLog: the session's log holds a record its owner cannot fold
	// (corrupt_log): the session is failed and takes no input. `tahctl show`
	// says where; docs/operations.md says how to repair or fork it.
	ErrCorruptLog = errors.New("session log is corrupt")
	// ErrClosed: the Client, the Turn or the Follower is closed, or its NATS
	// connection is.
	ErrClosed = errors.New("closed")
)

// ConnectError is a Connect that failed: the URL and NATS's error. It
// unwraps to ErrNoServer, ErrAuth or ErrTLS when it is one of those, and to
// NATS's error.
type ConnectError struct {
	URL string
	// Kind is ErrNoServer, ErrAuth, ErrTLS or nil.
	Kind error
	// Err is what NATS said.
	Err error
}

func (e *ConnectError) Error() string {
	if e.Kind != nil {
		return fmt.Sprintf("connect to %s: %v (%v)", e.URL, e.Kind, e.Err)
	}
	return fmt.Sprintf("connect to %s: %v", e.URL, e.Err)
}

func (e *ConnectError) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// APIError is an error reply of the API: the endpoint, the code
// (wire.APIErr*) and the node's description, which says what to do. It
// unwraps to ErrBadRequest, ErrNotFound, ErrConflict or ErrTooLarge by code.
type APIError struct {
	Endpoint string
	Code     string
	Message  string
	// Quota, for code 429 (ErrQuotaExceeded), is the tenant's quota the
	// request was over.
	Quota *event.QuotaReached
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s: %s (%s)", wire.APISubject(e.Endpoint), e.Message, e.Code)
}

func (e *APIError) Unwrap() error {
	switch e.Code {
	case wire.APIErrBadRequest:
		return ErrBadRequest
	case wire.APIErrNotFound:
		return ErrNotFound
	case wire.APIErrConflict:
		return ErrConflict
	case wire.APIErrTooLarge:
		return ErrTooLarge
	case wire.APIErrQuota:
		return ErrQuotaExceeded
	}
	return nil
}

// CommandError is a command that a node could not carry out: the Failure of
// its outcome, or its refusal (an outcome of Status refused). (A turn that
// ran and failed is not one: its outcome says so in Status.) It unwraps to ErrNotFound,
// ErrBusy, ErrNothingToResume, ErrBudgetExceeded, ErrMalformedInput,
// ErrPayloadTooLarge, ErrCorruptLog, ErrRejected or ErrWithdrawn by code.
type CommandError struct {
	Session string
	InputID string
	Command wire.Command
	// Code is the outcome's FailureCode: a wire.Failure* code, or a
	// wire.Code* refusal code.
	Code string
	// Message is the node's description.
	Message string
	// Outcome is the outcome that said so.
	Outcome wire.Outcome
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.Command, e.Session, e.Message)
}

func (e *CommandError) Unwrap() error {
	switch e.Code {
	case wire.FailureUnknownSession:
		return ErrNotFound
	case wire.FailureBusy:
		return ErrBusy
	case wire.FailureNothingToResume:
		return ErrNothingToResume
	case wire.FailureBudgetExceeded:
		return ErrBudgetExceeded
	case wire.CodeMalformedInput, wire.CodeReplySubject:
		return ErrMalformedInput
	case wire.CodeInputTooLarge:
		return ErrPayloadTooLarge
	case wire.CodeCorruptLog:
		return ErrCorruptLog
	case wire.CodeRejected:
		return ErrRejected
	case wire.FailureWithdrawn:
		return ErrWithdrawn
	case wire.CodeQuotaExceeded:
		return ErrQuotaExceeded
	}
	return nil
}
