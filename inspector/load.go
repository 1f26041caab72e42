package inspector

import (
	"context"
	"errors"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/wire"
)

// load folds session sid's whole log into a timeline, reading it through
// tah.api.events in as few requests as fit in a message (Limit 0: all that
// fit), and halving the page when a reply would not.
func load(ctx context.Context, c *client.Client, sid string) (*timeline, error) {
	t := &timeline{}
	next, limit := uint64(0), 0
	for {
		r, err := c.Events(ctx, wire.EventsRequest{Session: sid, FromSeq: next, Limit: limit})
		if errors.Is(err, client.ErrTooLarge) && limit != 1 {
			limit = halve(limit)
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range r.Events {
			t.add(e)
		}
		if len(r.Events) == 0 || r.Events[len(r.Events)-1].Seq >= r.LastSeq {
			return t, nil
		}
		next = r.Events[len(r.Events)-1].Seq + 1
	}
}

// halve is the next smaller page after a reply that did not fit: 1,000
// events after "all that fit", then half of the last.
func halve(limit int) int {
	if limit == 0 {
		return 1000
	}
	return max(1, limit/2)
}
