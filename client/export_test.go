package client

import (
	"context"

	"github.com/tah-dev/tah/wire"
)

// LoseReplies unsubscribes t from its reply subject, as a client that was
// reconnecting when the outcome was published misses it.
func LoseReplies(t *Turn) {
	for _, s := range t.subs {
		if s.Subject != wire.ErrorSubject(t.a.sid) && s.Subject != wire.DeltaSubject(t.a.sid) {
			_ = s.Unsubscribe()
		}
	}
}

// Barrier returns once session sid's node has taken every input published
// before it: a cancel that names no input there is answered at once, after
// them (one session's inputs are taken in order).
func Barrier(ctx context.Context, c *Client, sid string) error {
	_, err := c.await(ctx, sid, wire.Input{Command: wire.CommandCancel, InputID: "in_barrier"})
	return err
}
