package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/store"
)

// Projector feeds the SQLite read model from the log: it follows every shard
// of the log from the position the store committed last for it, and applies
// whole records in batches, each batch with the shards' new positions in one
// transaction, so that every event is applied exactly once across restarts.
type Projector struct {
	b   *bus.Bus
	s   *store.Store
	log *slog.Logger
	// onClaim is told of every session.claimed as soon as the tail delivers
	// it, before it is applied.
	onClaim func(sid string, epoch uint64)

	tail *bus.Tail
	ch   chan record
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	applied  []uint64 // per shard, the position after the last committed batch
	waiters  []waiter
	problems atomic.Int64
}

// record is one record of the log, from shard shard.
type record struct {
	shard int
	evs   []event.Event
}

type waiter struct {
	shard int
	seq   uint64
	ch    chan struct{}
}

// projectorBatch bounds the events of one transaction (a record is never
// split: a batch may pass it by one record's events).
const projectorBatch = 512

// StartProjector starts tailing the log into s, whose positions must be of
// b's shards (store.Options.Shards). onClaim, when not nil, is called with
// every session.claimed the tail delivers (a node stops its own actor of a
// session another node claimed).
func StartProjector(ctx context.Context, b *bus.Bus, s *store.Store, log *slog.Logger, onClaim func(sid string, epoch uint64)) (*Projector, error) {
	pos, err := s.Positions(ctx, store.DefaultConsumer)
	if err != nil {
		return nil, fmt.Errorf("projector: %w", err)
	}
	p := &Projector{b: b, s: s, log: log, onClaim: onClaim, ch: make(chan record, 4*projectorBatch),
		stop: make(chan struct{}), applied: pos}
	from := make([]uint64, len(pos))
	for k, seq := range pos {
		from[k] = seq + 1
	}
	p.wg.Add(1)
	go p.run()
	tail, err := b.TailAll(ctx, from, func(k int, evs []event.Event) error {
		p.claims(evs)
		select {
		case p.ch <- record{k, evs}:
			return nil
		case <-p.stop:
			return bus.ErrClosed
		}
	})
	if err != nil {
		close(p.stop)
		p.wg.Wait()
		return nil, fmt.Errorf("projector: %w", err)
	}
	p.tail = tail
	return p, nil
}

// claims hands the session.claimed events of a record to onClaim.
func (p *Projector) claims(evs []event.Event) {
	if p.onClaim == nil {
		return
	}
	for _, e := range evs {
		if e.Type == event.SessionClaimed && e.Epoch > 0 {
			p.onClaim(e.Session, e.Epoch)
		}
	}
}

// run applies what the tail delivered, a batch of records at a time.
func (p *Projector) run() {
	defer p.wg.Done()
	batch := make([]event.Event, 0, projectorBatch)
	for {
		select {
		case <-p.stop:
			return
		case r := <-p.ch:
			batch = append(batch[:0], r.evs...)
			linger := time.NewTimer(projectorLinger)
		fill:
			for len(batch) < projectorBatch {
				select {
				case r := <-p.ch:
					batch = append(batch, r.evs...)
				case <-linger.C:
					break fill
				case <-p.stop:
					break fill
				}
			}
			linger.Stop()
			p.apply(batch)
		}
	}
}

// projectorLinger is how long a batch waits for more records once it has
// one: a transaction's cost is mostly its own (the commit, the sessions'
// states written back), so a session writing a record a millisecond shares
// one with the next few, and the read model stays a few milliseconds behind.
const projectorLinger = 5 * time.Millisecond

// apply commits one batch, retrying while the store is merely busy: an event is
// never dropped, and the tail waits (its channel fills) until the store takes it.
func (p *Projector) apply(batch []event.Event) {
	for attempt := 0; ; attempt++ {
		res, err := p.s.Apply(context.Background(), batch)
		if err == nil {
			for _, pr := range res.Problems {
				p.problems.Add(1)
				level := slog.LevelWarn
				if errors.Is(pr.Err, projection.ErrFaulted) {
					level = slog.LevelDebug // reported once, at the fault
				}
				p.log.Log(context.Background(), level, "event not folded into the read model", "session", pr.Session, "seq", pr.Seq, "index", pr.Index, "err", pr.Err)
			}
			p.advance(res.Positions)
			return
		}
		p.log.Error("read model: batch not applied; retrying", "events", len(batch), "attempt", attempt, "err", err)
		select {
		case <-p.stop:
			return
		case <-time.After(min(time.Duration(attempt+1)*100*time.Millisecond, 5*time.Second)):
		}
	}
}

// Positions is, for each shard of the log, the last stream sequence the read
// model has applied.
func (p *Projector) Positions() []uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]uint64(nil), p.applied...)
}

// Problems counts the events not folded since start.
func (p *Projector) Problems() int64 { return p.problems.Load() }

// WaitFor returns once the read model has applied session sid's shard of the
// log up to seq, or ctx ends.
func (p *Projector) WaitFor(ctx context.Context, sid string, seq uint64) error {
	return p.waitShard(ctx, p.b.ShardOf(sid), seq)
}

// WaitForLog returns once the read model has applied every shard k of the
// log up to last[k], or ctx ends.
func (p *Projector) WaitForLog(ctx context.Context, last []uint64) error {
	for k, seq := range last {
		if err := p.waitShard(ctx, k, seq); err != nil {
			return err
		}
	}
	return nil
}

// waitShard returns once the read model has applied shard k up to seq.
func (p *Projector) waitShard(ctx context.Context, k int, seq uint64) error {
	p.mu.Lock()
	if p.applied[k] >= seq {
		p.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	p.waiters = append(p.waiters, waiter{shard: k, seq: seq, ch: ch})
	p.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("read model behind the log (at %d in shard %d, want %d): %w", p.Positions()[k], k, seq, ctx.Err())
	}
}

// advance records the positions a batch committed and wakes the waiters they
// satisfy.
func (p *Projector) advance(pos []uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	copy(p.applied, pos)
	kept := p.waiters[:0]
	for _, w := range p.waiters {
		if w.seq <= p.applied[w.shard] {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	p.waiters = kept
}

// Close stops the tail and waits for the batch in progress to commit.
func (p *Projector) Close() {
	if p.tail != nil {
		p.tail.Stop()
	}
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wg.Wait()
}
