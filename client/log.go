package client

import (
	"context"
	"errors"
	"iter"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// logPage is how many events one tah.api.events request of Log asks for at
// first.
const logPage = 200

// Log yields session sid's events from stream sequence from on (0: from its
// first), read a page at a time through tah.api.events, with smaller pages
// when a page would not fit in a message. It stops at the first error, which
// it yields with a zero event.
func (c *Client) Log(ctx context.Context, sid string, from uint64) iter.Seq2[event.Event, error] {
	return func(yield func(event.Event, error) bool) {
		next, limit := from, logPage
		for {
			r, err := c.Events(ctx, wire.EventsRequest{Session: sid, FromSeq: next, Limit: limit})
			if errors.Is(err, ErrTooLarge) && limit > 1 {
				limit /= 2
				continue
			}
			if err != nil {
				yield(event.Event{}, err)
				return
			}
			for _, ev := range r.Events {
				if !yield(ev, nil) {
					return
				}
			}
			if len(r.Events) == 0 || r.Events[len(r.Events)-1].Seq >= r.LastSeq {
				return
			}
			next = r.Events[len(r.Events)-1].Seq + 1
		}
	}
}
