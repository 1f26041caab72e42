package client

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"

	"github.com/nats-io/nats.go"
)

// denials tells the operations under way that NATS refused a publish of
// theirs. A publish the credential may not make (an observer's input, say)
// gets no answer: the server drops it and says so only in an asynchronous
// "Permissions Violation" error on the connection, and the operation would
// wait for its deadline. The connection's error handler hands those errors
// here, and each operation that watches the subject ends at once.
type denials struct {
	mu sync.Mutex
	// watching maps a subject to the cancel functions of the operations
	// that publish on it.
	watching map[string]map[*context.CancelCauseFunc]struct{}
}

// publishDenied reads the subject out of the server's error, as nats.go
// words it: `nats: permissions violation: Permissions Violation for
// Publish to "<subject>"`.
var publishDenied = regexp.MustCompile(`(?i)permissions violation for publish to "([^"]+)"`)

// handle is the connection's error handler.
func (d *denials) handle(_ *nats.Conn, _ *nats.Subscription, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	m := publishDenied.FindStringSubmatch(err.Error())
	if m == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for cancel := range d.watching[m[1]] {
		(*cancel)(fmt.Errorf("NATS refused this credential's publish on %s: %w", m[1], ErrPermissionDenied))
	}
}

// watched holds the denials of each connection of a caller's that a Client
// was made over (New), so that the Clients of one connection share the one
// step watchDenials put before its error handler, however many come and
// go. A connection's entry goes once the connection is closed.
var watched = struct {
	sync.Mutex
	by map[*nats.Conn]*denials
}{by: map[*nats.Conn]*denials{}}

// watchDenials returns the denials of nc, a connection of the caller's
// (New), putting it before nc's error handler the first time: every error
// still reaches the caller's handler (or none, as before), and the refusals
// also end the operations of the Clients over nc. A handler the caller sets
// afterwards replaces the step: the refusals then end nothing, and the
// operations wait for their deadlines, as they did before this step.
func watchDenials(nc *nats.Conn) *denials {
	watched.Lock()
	defer watched.Unlock()
	for c := range watched.by {
		if c.IsClosed() {
			delete(watched.by, c)
		}
	}
	if d := watched.by[nc]; d != nil {
		return d
	}
	d := &denials{}
	next := nc.ErrorHandler()
	nc.SetErrorHandler(func(c *nats.Conn, s *nats.Subscription, err error) {
		d.handle(c, s, err)
		if next != nil {
			next(c, s, err)
		}
	})
	watched.by[nc] = d
	return d
}

// guard runs op with a context that ends, with ErrPermissionDenied as its
// cause, when NATS refuses a publish on subj while op runs; op's error is
// then that one. Without denials, op runs as it is.
func (d *denials) guard(ctx context.Context, subj string, op func(context.Context) error) error {
	if d == nil {
		return op(ctx)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	d.mu.Lock()
	if d.watching == nil {
		d.watching = map[string]map[*context.CancelCauseFunc]struct{}{}
	}
	if d.watching[subj] == nil {
		d.watching[subj] = map[*context.CancelCauseFunc]struct{}{}
	}
	d.watching[subj][&cancel] = struct{}{}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.watching[subj], &cancel)
		if len(d.watching[subj]) == 0 {
			delete(d.watching, subj)
		}
		d.mu.Unlock()
	}()
	err := op(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, ErrPermissionDenied) {
		return cause
	}
	return err
}
