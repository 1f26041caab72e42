package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/natsx"
	"github.com/tah-dev/tah/wire"
)

// Follower delivers the events of one session as they are appended, in
// order and once each, from a stream sequence on. When the connection comes
// back after a loss, it follows again from the event after the last one it
// delivered (an ordered consumer notices a gap only after missed heartbeats,
// seconds later). Close stops it.
type Follower struct {
	c      *Client
	sid    string
	events chan event.Event
	msgs   chan jetstream.Msg // from the consumer's callback
	status chan nats.Status
	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the loop has ended

	// Owned by the loop.
	cc   jetstream.ConsumeContext
	next uint64 // the first sequence not delivered yet
}

// Follow delivers session sid's events from stream sequence from on (0: the
// events appended from now on) on the Follower's Events. It fails with
// ErrNoNode when NATS has no TAH event stream.
func (c *Client) Follow(ctx context.Context, sid string, from uint64) (*Follower, error) {
	if err := validSession(sid); err != nil {
		return nil, err
	}
	if from == 0 {
		var err error
		if from, err = c.logEnd(ctx); err != nil {
			return nil, err
		}
	}
	f := &Follower{c: c, sid: sid, events: make(chan event.Event), msgs: make(chan jetstream.Msg, 256),
		done: make(chan struct{}), next: from}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.status = c.nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
	cc, err := f.consume(ctx, from)
	if err == nil {
		err = c.track(f)
		if err != nil {
			cc.Stop()
		}
	}
	if err != nil {
		f.cancel()
		c.nc.RemoveStatusListener(f.status)
		return nil, err
	}
	f.cc = cc
	go f.loop()
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

// logEnd is the sequence the next event of any session will have.
func (c *Client) logEnd(ctx context.Context) (uint64, error) {
	var s jetstream.Stream
	err := natsx.Retry(ctx, natsx.PublishTry, func(ctx context.Context) error {
		var err error
		s, err = c.js.Stream(ctx, wire.EventStream)
		return err
	}, c.retrying("read the event stream"))
	if err != nil {
		return 0, streamError(c, err)
	}
	return s.CachedInfo().State.LastSeq + 1, nil
}

func streamError(c *Client, err error) error {
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("NATS at %s has no TAH streams (%s): %w", c.URL(), wire.EventStream, ErrNoNode)
	case natsx.Temporary(err):
		return fmt.Errorf("the event stream %s: %v: %w", wire.EventStream, err, ErrUnavailable)
	}
	return fmt.Errorf("the event stream %s: %w", wire.EventStream, err)
}

// followerInactive is how long the server keeps a Follower's consumer once
// nothing pulls from it.
const followerInactive = 10 * time.Second

// consume starts an ordered consumer of the session's events from sequence
// from, feeding f.msgs.
func (f *Follower) consume(ctx context.Context, from uint64) (jetstream.ConsumeContext, error) {
	var cc jetstream.ConsumeContext
	err := natsx.Retry(ctx, natsx.PublishTry, func(ctx context.Context) error {
		cons, err := f.c.js.OrderedConsumer(ctx, wire.EventStream, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{wire.SessionEvents(f.sid)},
			DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:    from,
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
		return nil, fmt.Errorf("follow the events of %s: %w", f.sid, streamError(f.c, err))
	}
	return cc, nil
}

// loop delivers the consumer's events until Close or the connection's end.
func (f *Follower) loop() {
	defer func() {
		f.cc.Stop()
		f.c.nc.RemoveStatusListener(f.status)
		close(f.events)
		f.c.untrack(f)
		close(f.done)
	}()
	for {
		select {
		case <-f.ctx.Done():
			return
		case m := <-f.msgs:
			ev, ok := decodeEvent(m)
			if !ok || ev.Seq < f.next {
				continue // delivered already, by the consumer that ran before a reconnect
			}
			f.next = ev.Seq + 1
			select {
			case f.events <- ev:
			case <-f.ctx.Done():
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
	f.cc.Stop()
	f.cc = cc
}

// decodeEvent reads the event of a message of TAH_EVT.
func decodeEvent(m jetstream.Msg) (event.Event, bool) {
	md, err := m.Metadata()
	if err != nil {
		return event.Event{}, false
	}
	ev, err := event.Unmarshal(m.Data(), md.Sequence.Stream)
	return ev, err == nil
}
