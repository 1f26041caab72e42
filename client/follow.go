package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/wire"
)

// Follower delivers the events of one session as they are appended, in
// order and once each (a copy of a record that the stream stored twice is
// dropped: docs/protocol.md, appending, rule 5), from a stream sequence of
// the session's shard of the log on. When the connection comes back after
// a loss, it follows again from the record after the last one it
// delivered (an ordered consumer notices a gap only after missed
// heartbeats, seconds later). A Client of a tenant's
// credential, which has no JetStream API, follows the session's live feed
// and reads what it missed through its tenant's events API instead
// (live.go), with the same guarantees. Close stops it.
type Follower struct {
	c      *Client
	sid    string
	shard  int
	events chan event.Event
	// records, when not nil, gets whole records instead of events (a Turn's
	// Follower: a Turn must see the record of its end whole).
	records chan []event.Event
	msgs    chan jetstream.Msg // from the consumer's callback
	status  chan nats.Status
	ctx     context.Context // ends with Close
	cancel  context.CancelFunc
	done    chan struct{} // closed when the loop has ended

	// A tenant's Client follows the session's live feed instead of a
	// consumer (live.go): its subscription, and the records it brings.
	live     *nats.Subscription
	liveMsgs chan *nats.Msg

	// Owned by the loop.
	cc     jetstream.ConsumeContext
	next   uint64 // the first sequence not delivered yet
	behind bool   // on the live feed: records before the next one may be missing
	// lastID is the Nats-Msg-Id of the last record delivered ("" when it
	// came through the events API, which drops copies itself but gives no
	// ids), and lastSeq its sequence (0: none yet).
	lastID  string
	lastSeq uint64
}

// Follow delivers session sid's events from stream sequence from of its
// shard on (0: the events appended from now on) on the Follower's Events. It
// fails with ErrNoNode when NATS has no TAH event log.
func (c *Client) Follow(ctx context.Context, sid string, from uint64) (*Follower, error) {
	return c.follow(ctx, sid, from, false)
}

// follow is Follow, delivering whole records on Follower.records when
// records is set.
func (c *Client) follow(ctx context.Context, sid string, from uint64, records bool) (*Follower, error) {
	if err := validSession(sid); err != nil {
		return nil, err
	}
	f := &Follower{c: c, sid: sid, events: make(chan event.Event), done: make(chan struct{})}
	if records {
		f.records = make(chan []event.Event)
	}
	if c.opts.Tenant == "" {
		k, err := c.shardOf(ctx, sid)
		if err != nil {
			return nil, err
		}
		f.shard = k
	}
	if from == 0 {
		var err error
		if from, err = c.sessionEnd(ctx, sid); err != nil {
			return nil, err
		}
	}
	f.next = from
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.status = c.nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
	var err error
	if c.opts.Tenant != "" {
		err = f.followLive()
	} else {
		f.msgs = make(chan jetstream.Msg, 256)
		f.cc, err = f.consume(ctx, from)
	}
	if err == nil {
		if err = c.track(f); err != nil {
			f.stopSource()
		}
	}
	if err != nil {
		f.cancel()
		c.nc.RemoveStatusListener(f.status)
		return nil, err
	}
	if f.live != nil {
		go f.liveLoop()
	} else {
		go f.loop()
	}
	return f, nil
}

// Events delivers the events; it is closed when the Follower stops (Close,
// or the connection closed for good).
func (f *Follower) Events() <-chan event.Event { return f.events }

// Close stops the Follower and waits until it has.
func (f *Follower) Close() {
	f.cancel()
	<-f.done
}

// shardOf is the shard of the log that holds session sid's records. The
// log's shard count, fixed when the log was created, is read once from its
// shard 0's metadata and kept.
func (c *Client) shardOf(ctx context.Context, sid string) (int, error) {
	if n := c.shards.Load(); n > 0 {
		return wire.Shard(sid, int(n)), nil
	}
	info, err := c.shardInfo(ctx, 0)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(info.Config.Metadata[wire.MetaShards])
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s has no shard count (metadata %s = %q): start a TAH node of this version against %s: %w",
			wire.EventShardStream(0), wire.MetaShards, info.Config.Metadata[wire.MetaShards], c.URL(), ErrNoNode)
	}
	c.shards.Store(int32(n))
	return wire.Shard(sid, n), nil
}

// logEnd is the sequence the next record of shard k will have.
func (c *Client) logEnd(ctx context.Context, k int) (uint64, error) {
	info, err := c.shardInfo(ctx, k)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq + 1, nil
}

// shardInfo reads the stream of shard k, trying again while NATS is
// temporarily unavailable.
func (c *Client) shardInfo(ctx context.Context, k int) (*jetstream.StreamInfo, error) {
	name := wire.EventShardStream(k)
	var s jetstream.Stream
	err := natsx.Retry(ctx, natsx.PublishTry, func(ctx context.Context) error {
		var err error
		s, err = c.js.Stream(ctx, name)
		return err
	}, c.retrying("read the event log"))
	if err != nil {
		return nil, streamError(c, name, err)
	}
	return s.CachedInfo(), nil
}

func streamError(c *Client, stream string, err error) error {
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("NATS at %s has no TAH event log (%s): %w", c.URL(), stream, ErrNoNode)
	case natsx.Temporary(err):
		return fmt.Errorf("the event log %s: %v: %w", stream, err, ErrUnavailable)
	}
	return fmt.Errorf("the event log %s: %w", stream, err)
}

// followerInactive is how long the server keeps a Follower's consumer once
// nothing pulls from it.
const followerInactive = 10 * time.Second

// consume starts an ordered consumer of the session's records from sequence
// from, feeding f.msgs. It starts one message earlier: when that is the
// session's record before from, its id tells a copy of it stored right
// after it (loop does not deliver it).
func (f *Follower) consume(ctx context.Context, from uint64) (jetstream.ConsumeContext, error) {
	var cc jetstream.ConsumeContext
	stream := wire.EventShardStream(f.shard)
	err := natsx.Retry(ctx, natsx.PublishTry, func(ctx context.Context) error {
		cons, err := f.c.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{wire.ShardSubject(f.shard, f.sid)},
			DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:    max(from, 2) - 1,
			// A stopped consumer (or a client gone) is removed by the
			// server soon, rather than after nats.go's five minutes: a
			// thousand turns would otherwise leave a thousand consumers
			// behind. A Follower that pulls is never inactive.
			InactiveThreshold: followerInactive,
		})
		if err != nil {
			return err
		}
		cc, err = cons.Consume(func(m jetstream.Msg) {
			select {
			case f.msgs <- m:
			case <-f.ctx.Done():
			}
		})
		return err
	}, f.c.retrying("follow the log of "+f.sid))
	if err != nil {
		return nil, fmt.Errorf("follow the events of %s: %w", f.sid, streamError(f.c, stream, err))
	}
	return cc, nil
}

// loop delivers the consumer's events until Close or the connection's end.
func (f *Follower) loop() {
	defer func() {
		f.cancel() // the consumer's handler, if it runs on, hands nothing more
		f.c.stopping.Go(f.cc.Stop)
		f.finish()
	}()
	for {
		select {
		case <-f.ctx.Done():
			return
		case m := <-f.msgs:
			evs, ok := decodeRecord(m)
			if !ok {
				continue
			}
			if evs[0].Seq < f.next {
				// Delivered already, by the consumer that ran before a
				// reconnect, or the record before the first one asked for.
				f.lastID, f.lastSeq = m.Headers().Get(wire.HeaderMsgID), evs[0].Seq
				continue
			}
			f.next = evs[0].Seq + 1
			if f.copyOfLast(m.Headers().Get(wire.HeaderMsgID), evs[0].Seq) {
				continue
			}
			if !f.deliver(evs) {
				return
			}
		case s := <-f.status:
			if s == nats.CLOSED {
				return
			}
			f.refollow()
		}
	}
}

// stopSource stops what brings the Follower its records.
func (f *Follower) stopSource() {
	if f.live != nil {
		_ = f.live.Unsubscribe()
	}
	if f.cc != nil {
		f.c.stopping.Go(f.cc.Stop)
	}
}

// finish is the end of a Follower's loop, once its source has stopped.
func (f *Follower) finish() {
	f.c.nc.RemoveStatusListener(f.status)
	close(f.events)
	if f.records != nil {
		close(f.records)
	}
	f.c.untrack(f)
	close(f.done)
}

// copyOfLast reports whether the record at seq with message id id is a
// copy of the last one delivered, which the stream stored twice (a retried
// append around a leader change: docs/protocol.md, appending, rule 5), and
// remembers it as the last otherwise. After records from the events API,
// which gives no ids, it goes by the position the id names instead: a
// copy's names one before the last record delivered, the next record's
// that record itself (wire.CopyBefore).
func (f *Follower) copyOfLast(id string, seq uint64) bool {
	if id != "" && id == f.lastID {
		return true
	}
	if f.lastID == "" && wire.CopyBefore(f.sid, id, f.lastSeq) {
		return true
	}
	f.lastID, f.lastSeq = id, seq
	return false
}

// deliver hands a record on, whole or an event at a time; false when the
// Follower was closed first.
func (f *Follower) deliver(evs []event.Event) bool {
	if f.records != nil {
		select {
		case f.records <- evs:
			return true
		case <-f.ctx.Done():
			return false
		}
	}
	for _, ev := range evs {
		select {
		case f.events <- ev:
		case <-f.ctx.Done():
			return false
		}
	}
	return true
}

// refollow replaces the consumer by one from the first event not delivered
// yet, once that one runs. When it cannot be made, the old one goes on: an
// ordered consumer recovers by itself, only later.
func (f *Follower) refollow() {
	ctx, cancel := context.WithTimeout(f.ctx, f.c.opts.RequestTimeout)
	defer cancel()
	cc, err := f.consume(ctx, f.next)
	if err != nil {
		return
	}
	f.c.stopping.Go(f.cc.Stop)
	f.cc = cc
}

// decodeRecord reads the events of a message of the log.
func decodeRecord(m jetstream.Msg) ([]event.Event, bool) {
	md, err := m.Metadata()
	if err != nil {
		return nil, false
	}
	evs, err := event.DecodeRecord(m.Data(), md.Sequence.Stream)
	return evs, err == nil
}
