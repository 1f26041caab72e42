package bus

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// TailFunc receives the events of a session's Tail, one at a time, in log
// order (a message that is not a record comes as in RecordFunc). Returning an error stops the tail; Tail.Err reports it. It must not
// call the tail's Stop.
type TailFunc func(event.Event) error

// RecordFunc receives the records of TailAll, one at a time: the shard of the
// log, the record's sequence in it and its events (one session's, all at
// seq), in each shard's stream order. A message whose body is not a record
// this build reads (malformed, or of a newer log schema) comes as one event
// without a Type, with its Seq and Session and its body as Data:
// event.DecodeRecord(Data, Seq) says what is wrong with it (see
// projection.RecordFault). A copy of its session's record before it, stored
// twice by the stream (see dropDuplicate), comes with no events: a reader
// that keeps its position moves it past seq, and folds nothing. Returning an
// error stops the tail; Tail.Err reports it. It must not call the tail's
// Stop.
type RecordFunc func(shard int, seq uint64, evs []event.Event) error

// FoldedFunc tells a TailAll that starts after the beginning of the log
// the sequence of session sid's last record its reader folded before the
// tail's start (0 for none, or when it cannot tell). It is asked once per
// session, at the session's first record after the start, and lets the
// tail recognise a copy of a record folded before the start (a reader
// restarted between a record and its copy, see dropDuplicate), which it
// otherwise has nothing to compare with.
type FoldedFunc func(sid string) uint64

// Tail is a running live watch of the log: one ordered consumer per shard it
// follows, on the Bus's connection for tails (see Config.Conns). Stop it when
// done; Close of the Bus stops it too.
type Tail struct {
	b  *Bus
	fn RecordFunc

	mu   sync.Mutex // held while fn runs
	last []uint64   // per shard, the last sequence delivered
	// prevIDs is the message id of the last message seen per session, to drop
	// a duplicate stored by the stream (see dropDuplicate).
	prevIDs map[string]string
	// folded, when set, tells a session's last record folded before the
	// start; resumed says, per shard, that the tail started after the
	// shard's first sequence (only then is there a before to ask about).
	folded  FoldedFunc
	resumed []bool
	stopped bool
	err     error
	ccs     []jetstream.ConsumeContext
	once    sync.Once
	done    chan struct{}
}

// Tail watches session sid's events from sequence fromSeq on (0 or 1: from the
// start), first those already in the log, then new ones as they are appended,
// calling fn for each exactly once and in order: there is no seam between
// history and live. It runs an ordered consumer of the session's shard
// filtered on tah.evt.<k>.<sid>, which the client library recreates from the
// last delivered sequence after any gap or reconnect.
func (b *Bus) Tail(ctx context.Context, sid string, fromSeq uint64, fn TailFunc) (*Tail, error) {
	if err := event.ValidSessionID(sid); err != nil {
		return nil, err
	}
	from := make([]uint64, b.Shards())
	k := b.ShardOf(sid)
	from[k] = fromSeq
	return b.tail(ctx, from, map[int]string{k: wire.ShardSubject(k, sid)}, nil, func(_ int, _ uint64, evs []event.Event) error {
		for _, e := range evs {
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	})
}

// TailAll follows every session in every shard: the feed of a read model,
// which stores, for each shard, the last sequence it applied and restarts
// from the next one. from[k] is the first sequence wanted of shard k (0 or 1:
// from its start); a nil from starts every shard at its start, and otherwise
// from has one entry per shard. fn gets whole records. The consumers are
// ordered ones rather than durable: the read model's own store is the one
// place that remembers how far it got, so a restart can neither skip nor
// repeat what was committed with it, and no consumer state outlives a node.
// folded (nil: none) is how the reader tells what it folded before from:
// with it, a copy of a record folded before the start comes without
// events, as one met after its original does (RecordFunc).
func (b *Bus) TailAll(ctx context.Context, from []uint64, folded FoldedFunc, fn RecordFunc) (*Tail, error) {
	if from == nil {
		from = make([]uint64, b.Shards())
	}
	if len(from) != b.Shards() {
		return nil, fmt.Errorf("tail all: %d start sequences for a log of %d shards", len(from), b.Shards())
	}
	filters := make(map[int]string, b.Shards())
	for k := range b.Shards() {
		filters[k] = wire.ShardSubjects(k)
	}
	return b.tail(ctx, from, filters, folded, fn)
}

// tail starts an ordered consumer on each shard of filters, from from[k].
func (b *Bus) tail(ctx context.Context, from []uint64, filters map[int]string, folded FoldedFunc, fn RecordFunc) (*Tail, error) {
	t := &Tail{b: b, fn: fn, done: make(chan struct{}), prevIDs: map[string]string{}, last: make([]uint64, len(from)),
		folded: folded, resumed: make([]bool, len(from))}
	for k, seq := range from {
		if seq > 0 {
			t.last[k] = seq - 1
		}
		t.resumed[k] = seq > 1
	}
	if err := b.track(t); err != nil {
		return nil, err
	}
	t.mu.Lock() // no delivery before every consumer is in t.ccs
	defer t.mu.Unlock()
	for k, filter := range filters {
		cc, err := b.consumeShard(ctx, k, from[k], filter, t.deliver)
		if err != nil {
			t.stopLocked()
			b.untrack(t)
			return nil, err
		}
		t.ccs = append(t.ccs, cc)
	}
	return t, nil
}

// consumeShard runs an ordered consumer of shard k on filter from sequence
// fromSeq, handing its messages to deliver. It runs on the tails' connection
// (pool.go), so that a read model catching up does not hold up the appends.
func (b *Bus) consumeShard(ctx context.Context, k int, fromSeq uint64, filter string, deliver func(int, jetstream.Msg)) (jetstream.ConsumeContext, error) {
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	if fromSeq > 1 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = fromSeq
	}
	oc, err := b.tailLink.js.OrderedConsumer(ctx, wire.EventShardStream(k), cfg)
	if err != nil {
		return nil, fmt.Errorf("tail %s: %w", filter, err)
	}
	cc, err := oc.Consume(func(m jetstream.Msg) { deliver(k, m) })
	if err != nil {
		return nil, fmt.Errorf("tail %s: %w", filter, err)
	}
	return cc, nil
}

func (t *Tail) deliver(k int, m jetstream.Msg) {
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
	if seq <= t.last[k] {
		return // never repeat
	}
	sid := wire.SessionFromSubject(m.Subject())
	id := m.Headers().Get(wire.HeaderMsgID)
	prev, seen := t.prevIDs[sid]
	dup := dropDuplicate(&prev, id)
	if !dup && !seen && t.resumed[k] && t.folded != nil {
		dup = wire.CopyBefore(sid, id, t.folded(sid))
	}
	t.prevIDs[sid] = prev
	var evs []event.Event
	if !dup {
		if evs, err = event.DecodeRecord(m.Data(), seq); err != nil {
			// One session's bad record must not stop the tail of every other.
			evs = []event.Event{{Seq: seq, Session: sid, Data: m.Data()}}
		}
	}
	t.last[k] = seq
	if err := t.fn(k, seq, evs); err != nil {
		t.fail(err)
	}
}

// fail stops the tail with err; t.mu is held.
func (t *Tail) fail(err error) {
	t.err = err
	t.stopLocked()
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
	t.stopLocked()
}

// stopLocked stops every consumer; t.mu is held. The consumers stop in the
// background, which Bus.Close waits for: nats.go's Stop of an ordered
// consumer waits while the consumer is being made again (after a missed
// heartbeat: a request of up to 10 s, tried again and again while the
// stream has no leader), and a node closing beside a dead server waited
// 15 s and more there for its projector to stop. t.stopped already keeps fn
// from being called again.
func (t *Tail) stopLocked() {
	if !t.stopped {
		t.stopped = true
		ccs := t.ccs
		t.b.stopping.Go(func() {
			for _, cc := range ccs {
				cc.Stop()
			}
		})
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

// Positions is, for each shard of the log, the sequence of the last record
// delivered (0 for none; a session's Tail delivers only its shard's).
func (t *Tail) Positions() []uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]uint64(nil), t.last...)
}
