package inspector

import (
	"context"
	"errors"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// load folds session sid's whole log into a timeline.
func load(ctx context.Context, c *client.Client, sid string) (*timeline, error) {
	t := &timeline{}
	err := readLog(ctx, c, sid, 0, 0, func(evs []event.Event, _ uint64) bool {
		for _, e := range evs {
			t.add(e)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// readLog reads session sid's log from sequence from through tah.api.events,
// a reply at a time (each of whole records), and gives each reply's events
// and the log's last sequence to each until it returns false or the log
// ends. It asks for limit events
// a reply (0: as many as fit in a message), halving the page when a reply
// would not fit.
func readLog(ctx context.Context, c *client.Client, sid string, from uint64, limit int, each func(evs []event.Event, last uint64) bool) error {
	for {
		r, err := c.Events(ctx, wire.EventsRequest{Session: sid, FromSeq: from, Limit: limit})
		if errors.Is(err, client.ErrTooLarge) && limit != 1 {
			limit = halve(limit)
			continue
		}
		if err != nil {
			return err
		}
		if len(r.Events) == 0 || !each(r.Events, r.LastSeq) || r.Events[len(r.Events)-1].Seq >= r.LastSeq {
			return nil
		}
		from = r.Events[len(r.Events)-1].Seq + 1
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
