package client

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// A credential of a tenant has no JetStream API (wire.TenantRolePermissions:
// a consumer's filter is the client's to choose, and a direct get reads any
// record), so its Client follows a session otherwise: the records the log
// republishes on the session's live feed (wire.LiveSubject) as they are
// stored, and the tenant's events API for the records the feed did not
// bring: those before it was subscribed, those published while the
// connection was lost, and any other gap, which a record's
// Nats-Last-Sequence header shows (the sequence of the session's record
// before it).

// liveCatchUpPage is how many events one request of a catch-up asks for.
const liveCatchUpPage = 500

// liveRetry is how long a Follower waits before it tries a failed catch-up
// again (the node restarting, say); each record of the feed tries at once.
const liveRetry = time.Second

// followLive starts f on the session's live feed: subscribed before its
// loop reads what came before from f.next on.
func (f *Follower) followLive() error {
	f.liveMsgs = make(chan *nats.Msg, 256)
	sub, err := f.c.nc.Subscribe(wire.LiveSubject(f.sid), func(m *nats.Msg) {
		select { // the subscription's own queue holds what waits here
		case f.liveMsgs <- m:
		case <-f.ctx.Done():
		}
	})
	if err != nil {
		return fmt.Errorf("follow the events of %s: subscribe %s: %w", f.sid, wire.LiveSubject(f.sid), err)
	}
	// Unlimited: a record is never dropped for a slow reader (it would
	// only be read again from the API).
	_ = sub.SetPendingLimits(-1, -1)
	fctx, cancel := context.WithTimeout(f.ctx, f.c.opts.RequestTimeout)
	defer cancel()
	if err := f.c.nc.FlushWithContext(fctx); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("follow the events of %s: subscribe: %w", f.sid, err)
	}
	f.live = sub
	f.behind = true // what came before the subscription: the loop reads it first
	return nil
}

// liveLoop is loop for a Follower on the live feed.
func (f *Follower) liveLoop() {
	defer func() {
		f.stopSource()
		f.finish()
	}()
	retry := time.NewTimer(0) // the first catch-up, at once
	defer retry.Stop()
	catchUp := func() bool {
		ok, err := f.catchUp()
		if err != nil {
			retry.Reset(liveRetry)
		}
		return ok
	}
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-retry.C:
			if !catchUp() {
				return
			}
		case m := <-f.liveMsgs:
			seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
			if err != nil || seq < f.next {
				continue // delivered already, from the API
			}
			prev, err := strconv.ParseUint(m.Header.Get(jetstream.LastSequenceHeader), 10, 64)
			if err != nil || prev >= f.next {
				f.behind = true // a record of the session between the last delivered and this one
			}
			if f.behind {
				if !catchUp() {
					return
				}
				if f.behind || seq < f.next {
					continue // the API had it (or is to be asked again)
				}
			}
			evs, err := event.DecodeRecord(m.Data, seq)
			if err != nil {
				continue // as the consumer does: not a record
			}
			f.next = seq + 1
			if f.copyOfLast(m.Header.Get(wire.HeaderMsgID), seq) {
				continue
			}
			if !f.deliver(evs) {
				return
			}
		case s := <-f.status:
			if s == nats.CLOSED {
				return
			}
			// Records published while the connection was lost did not come.
			f.behind = true
			if !catchUp() {
				return
			}
		}
	}
}

// catchUp delivers the session's records from f.next to its end, as the
// tenant's events API has them, and clears f.behind once it got to the end.
// It returns false when the Follower was closed; err when a request
// failed, to be tried again.
func (f *Follower) catchUp() (bool, error) {
	if !f.behind {
		return true, nil
	}
	for {
		ctx, cancel := context.WithTimeout(f.ctx, f.c.opts.RequestTimeout)
		rep, err := f.c.Events(ctx, wire.EventsRequest{Session: f.sid, FromSeq: f.next, Limit: liveCatchUpPage})
		cancel()
		if f.ctx.Err() != nil {
			return false, f.ctx.Err()
		}
		if err != nil {
			return true, err
		}
		before := f.next
		for evs := rep.Events; len(evs) > 0; {
			n := 1 // one record: its events share its sequence
			for n < len(evs) && evs[n].Seq == evs[0].Seq {
				n++
			}
			if evs[0].Seq >= f.next {
				f.next = evs[0].Seq + 1
				f.lastID, f.lastSeq = "", evs[0].Seq // the API drops copies, and gives no ids
				if !f.deliver(evs[:n]) {
					return false, nil
				}
			}
			evs = evs[n:]
		}
		// The end, or a page that brought nothing new (which would
		// otherwise be asked for again and again).
		if len(rep.Events) == 0 || f.next > rep.LastSeq || f.next == before {
			f.behind = false
			return true, nil
		}
	}
}

// sessionEnd is the sequence after the last record of session sid: where a
// Follower of what it does from now on starts. A Client with JetStream
// reads the end of the session's shard of the log (no later than the
// session's end); a tenant's, the session's own end through its API.
func (c *Client) sessionEnd(ctx context.Context, sid string) (uint64, error) {
	if c.opts.Tenant == "" {
		k, err := c.shardOf(ctx, sid)
		if err != nil {
			return 0, err
		}
		return c.logEnd(ctx, k)
	}
	rep, err := c.Events(ctx, wire.EventsRequest{Session: sid, FromSeq: math.MaxUint64})
	if err != nil {
		return 0, fmt.Errorf("the end of %s's events: %w", sid, err)
	}
	return rep.LastSeq + 1, nil
}
