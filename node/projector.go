package node

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/store"
)

// Projector feeds the SQLite read model from the log: it tails every session's
// events from the position the store committed last, and applies them in
// batches, each batch with the new position in one transaction, so that every
// event is applied exactly once across restarts.
type Projector struct {
	b   *bus.Bus
	s   *store.Store
	log *slog.Logger

	tail    *bus.Tail
	ch      chan event.Event
	stop    chan struct{}
	wg      sync.WaitGroup
	applied atomic.Uint64 // the position after the last committed batch

	mu       sync.Mutex
	waiters  []waiter
	problems atomic.Int64
}

type waiter struct {
	seq uint64
	ch  chan struct{}
}

// projectorBatch bounds one transaction.
const projectorBatch = 512

// StartProjector starts tailing the log into s.
func StartProjector(ctx context.Context, b *bus.Bus, s *store.Store, log *slog.Logger) (*Projector, error) {
	pos, err := s.Position(ctx, store.DefaultConsumer)
	if err != nil {
		return nil, fmt.Errorf("projector: %w", err)
	}
	p := &Projector{b: b, s: s, log: log, ch: make(chan event.Event, 4*projectorBatch), stop: make(chan struct{})}
	p.applied.Store(pos)
	p.wg.Add(1)
	go p.run()
	tail, err := b.TailAll(ctx, pos+1, func(e event.Event) error {
		select {
		case p.ch <- e:
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

// run applies what the tail delivered, a batch at a time.
func (p *Projector) run() {
	defer p.wg.Done()
	batch := make([]event.Event, 0, projectorBatch)
	for {
		select {
		case <-p.stop:
			return
		case e := <-p.ch:
			batch = append(batch[:0], e)
		fill:
			for len(batch) < projectorBatch {
				select {
				case e := <-p.ch:
					batch = append(batch, e)
				default:
					break fill
				}
			}
			p.apply(batch)
		}
	}
}

// apply commits one batch, retrying while the store is merely busy: an event is
// never dropped, and the tail waits (its channel fills) until the store takes it.
func (p *Projector) apply(batch []event.Event) {
	for attempt := 0; ; attempt++ {
		res, err := p.s.Apply(context.Background(), batch)
		if err == nil {
			for _, pr := range res.Problems {
				p.problems.Add(1)
				p.log.Warn("event stored but not folded into the read model", "session", pr.Session, "seq", pr.Seq, "err", pr.Err)
			}
			p.applied.Store(res.Position)
			p.wake(res.Position)
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

// Position is the last stream sequence the read model has applied.
func (p *Projector) Position() uint64 { return p.applied.Load() }

// Problems counts events stored but not folded since start.
func (p *Projector) Problems() int64 { return p.problems.Load() }

// WaitFor returns once the read model has applied the log up to seq, or ctx ends.
func (p *Projector) WaitFor(ctx context.Context, seq uint64) error {
	if p.applied.Load() >= seq {
		return nil
	}
	ch := make(chan struct{})
	p.mu.Lock()
	if p.applied.Load() >= seq {
		p.mu.Unlock()
		return nil
	}
	p.waiters = append(p.waiters, waiter{seq: seq, ch: ch})
	p.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("read model behind the log (at %d, want %d): %w", p.applied.Load(), seq, ctx.Err())
	}
}

func (p *Projector) wake(pos uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.waiters[:0]
	for _, w := range p.waiters {
		if w.seq <= pos {
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
