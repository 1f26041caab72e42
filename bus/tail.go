package bus

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// TailFunc receives the events of a tail, one at a time, in stream order.
// Returning an error stops the tail; Tail.Err reports it. It must not call the
// tail's Stop.
type TailFunc func(event.Event) error

// Tail is a running live watch of the log. Stop it when done; Close of the Bus
// stops it too.
type Tail struct {
	b    *Bus
	fn   TailFunc
	last uint64 // the last sequence delivered; guarded by mu
	// prevIDs is the message id of the last message seen per session, to drop
	// a duplicate stored by the stream (see dropDuplicate).
	prevIDs map[string]string

	mu      sync.Mutex // held while fn runs
	stopped bool
	err     error
	cc      jetstream.ConsumeContext
	once    sync.Once
	done    chan struct{}
}

// Tail watches session sid's events from sequence fromSeq on (0 or 1: from the
// start), first those already in the log, then new ones as they are appended,
// calling fn for each exactly once and in order: there is no seam between
// history and live. It runs an ordered consumer filtered on
// tah.sess.<sid>.evt.>, which the client library recreates from the last
// delivered sequence after any gap or reconnect.
func (b *Bus) Tail(ctx context.Context, sid string, fromSeq uint64, fn TailFunc) (*Tail, error) {
	if err := event.ValidSessionID(sid); err != nil {
		return nil, err
	}
	return b.tail(ctx, wire.SessionEvents(sid), fromSeq, fn)
}

// TailAll is Tail over every session (tah.sess.*.evt.>): the feed of a read
// model, which stores the last sequence it applied and restarts from the next
// one. It is an ordered consumer rather than a durable one: the read model's
// own store is the one place that remembers how far it got, so a restart can
// neither skip nor repeat what was committed with it, and no consumer state
// outlives a node.
func (b *Bus) TailAll(ctx context.Context, fromSeq uint64, fn TailFunc) (*Tail, error) {
	return b.tail(ctx, wire.EventSubjects, fromSeq, fn)
}

func (b *Bus) tail(ctx context.Context, filter string, fromSeq uint64, fn TailFunc) (*Tail, error) {
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	if fromSeq > 1 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = fromSeq
	}
	oc, err := b.evt.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("tail %s: %w", filter, err)
	}
	t := &Tail{b: b, fn: fn, done: make(chan struct{}), prevIDs: map[string]string{}}
	if fromSeq > 0 {
		t.last = fromSeq - 1
	}
	if err := b.track(t); err != nil {
		return nil, err
	}
	t.mu.Lock() // no delivery before cc is set
	defer t.mu.Unlock()
	cc, err := oc.Consume(t.deliver)
	if err != nil {
		b.untrack(t)
		return nil, fmt.Errorf("tail %s: %w", filter, err)
	}
	t.cc = cc
	return t, nil
}

func (t *Tail) deliver(m jetstream.Msg) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	md, err := m.Metadata()
	if err != nil {
		t.fail(fmt.Errorf("tail: message metadata: %w", err))
		return
	}
	seq := md.Sequence.Stream
	if seq <= t.last {
		return // never repeat
	}
	sid := wire.SessionFromSubject(m.Subject())
	prev := t.prevIDs[sid]
	dup := dropDuplicate(&prev, m.Headers().Get(wire.HeaderMsgID))
	t.prevIDs[sid] = prev
	if dup {
		t.last = seq
		return
	}
	ev, err := event.Unmarshal(m.Data(), seq)
	if err != nil {
		t.fail(err)
		return
	}
	t.last = seq
	if err := t.fn(ev); err != nil {
		t.fail(err)
	}
}

// fail stops the tail with err; t.mu is held.
func (t *Tail) fail(err error) {
	t.err = err
	t.stopped = true
	t.cc.Stop()
	t.once.Do(func() { close(t.done) })
	go t.b.untrack(t)
}

// Stop stops the tail and waits until fn is no longer running; fn is not
// called after Stop returns.
func (t *Tail) Stop() {
	t.stop()
	t.b.untrack(t)
}

func (t *Tail) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		if t.cc != nil {
			t.cc.Stop()
		}
	}
	t.once.Do(func() { close(t.done) })
}

// Done is closed when the tail stops, by Stop or because fn returned an error.
func (t *Tail) Done() <-chan struct{} { return t.done }

// Err is the error that stopped the tail, nil if none (or if Stop did).
func (t *Tail) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// LastSeq is the sequence of the last event delivered.
func (t *Tail) LastSeq() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}
