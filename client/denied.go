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

// guard runs op with a context that ends, with ErrPermissionDenied as its
// cause, when NATS refuses a publish on subj while op runs; op's error is
// then that one. Without denials (a Client over its caller's connection,
// whose error handler is the caller's), op runs as it is.
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
