package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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
//
// A read model found damaged (a batch fails with store.IsDamaged, or a read
// does: Rebuild), or whose file cannot be written any more (batches fail
// with store.IsReadOnly or store.IsIOError, projectorResetAfter times in a
// row), is set aside and the whole log folded again into a new one
// (store.Reset); when no new one can be made, onFail is told (a tah-node
// stops) while the projector keeps trying. Err says why the read model does
// not follow the log, meanwhile.
type Projector struct {
	b   *bus.Bus
	s   *store.Store
	log *slog.Logger
	// onClaim is told of every session.claimed as soon as the tail delivers
	// it, before it is applied.
	onClaim func(sid string, epoch uint64)
	// onFail is told, once, that the read model cannot go on by itself.
	onFail func(error)
	failed atomic.Bool

	ch      chan record
	rebuild chan uint64 // the store generation a read found damaged
	// hurry wakes the batch being filled when a reader starts to wait for
	// the read model (waitShard): no batch lingers while one waits.
	hurry  chan struct{}
	stop   chan struct{}
	ctx    context.Context // ends at Close: an Apply in progress stops
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	tail *bus.Tail
	quit chan struct{} // closed to stop the tail's hand-over to run
	// told are, per shard, the last record whose claims were handed to
	// onClaim: a rebuild folds the log again without telling them twice.
	told    []uint64
	applied []uint64 // per shard, the position after the last committed batch
	// delivered are, per shard, the last record the tail handed over
	// (Flush waits for them).
	delivered []uint64
	waiters   []waiter
	problems  atomic.Int64
	rebuilds  atomic.Int64
	fault     atomic.Pointer[error]
}

// record is one record of the log, from shard shard.
type record struct {
	shard int
	seq   uint64
	evs   []event.Event // none for a copy the tail dropped (bus.RecordFunc)
}

type waiter struct {
	shard int
	seq   uint64
	ch    chan struct{}
}

// projectorBatch bounds the events of one transaction (a record is never
// split: a batch may pass it by one record's events). A batch fills up only
// when the read model is behind the log (otherwise projectorLinger ends it),
// and then its size is what lets it catch up: a transaction's cost is
// mostly in the pages it writes, a few per session it touches (its rows in
// each table, and the WAL frames and checkpoint of each page), whether the
// session has one record in it or ten. With a cluster's few hundred
// sessions, a batch of 4096 events applied a record with two thirds of
// the CPU that a batch of 512 took (store's BenchmarkProject).
const projectorBatch = 4096

// projectorQueue is how many records the tail hands over ahead of the
// batches (a variable for tests): enough to fill the next batch while one
// commits.
var projectorQueue = projectorBatch

// startProjector is StartProjector with onFail (see Projector).
func startProjector(ctx context.Context, b *bus.Bus, s *store.Store, log *slog.Logger, onClaim func(sid string, epoch uint64), onFail func(error)) (*Projector, error) {
	pos, err := s.Positions(ctx, store.DefaultConsumer)
	if store.IsDamaged(err) {
		// Opened unchecked (store.Options.DeferCheck), the file may be
		// damaged where the positions are: start over on a new one.
		aside, rerr := s.Reset(ctx)
		if rerr != nil {
			return nil, fmt.Errorf("projector: %w (and no new read model can be made: %w)", err, rerr)
		}
		log.Warn("read model damaged: set aside, rebuilding it from the log", "damaged", aside, "err", err)
		pos, err = s.Positions(ctx, store.DefaultConsumer)
	}
	if err != nil {
		return nil, fmt.Errorf("projector: %w", err)
	}
	p := &Projector{b: b, s: s, log: log, onClaim: onClaim, onFail: onFail, ch: make(chan record, projectorQueue),
		rebuild: make(chan uint64, 1), hurry: make(chan struct{}, 1), stop: make(chan struct{}), applied: pos, told: slices.Clone(pos), delivered: slices.Clone(pos)}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if err := p.follow(ctx, pos); err != nil {
		p.cancel()
		return nil, fmt.Errorf("projector: %w", err)
	}
	p.wg.Add(1)
	go p.run()
	if s.Unchecked() {
		p.wg.Add(1)
		go p.checkOpened()
	}
	return p, nil
}

// checkOpened runs the integrity check the node's Open left out
// (store.Options.DeferCheck) beside the batches and the reads: it reads the
// whole file (about 2 s for 500 MB), which held up the node's start. A
// damaged file is rebuilt as when a read meets the damage (Rebuild); until
// then the reads and batches that meet it fail and ask the same.
func (p *Projector) checkOpened() {
	defer p.wg.Done()
	gen := p.s.Generation()
	start := time.Now()
	err := p.s.Check(p.ctx)
	switch {
	case err == nil:
		p.log.Debug("read model checked", "took", time.Since(start))
	case store.IsDamaged(err):
		p.log.Warn("read model damaged: rebuilding it from the log", "err", err)
		p.Rebuild(gen, err)
	case p.ctx.Err() == nil:
		// Not damage (the disk, the file's permissions): the batches meet
		// it too, and act on it.
		p.log.Warn("read model: the integrity check could not run", "err", err)
	}
}

// follow starts a tail of every shard after pos.
func (p *Projector) follow(ctx context.Context, pos []uint64) error {
	from := make([]uint64, len(pos))
	for k, seq := range pos {
		from[k] = seq + 1
	}
	quit := make(chan struct{})
	tail, err := p.b.TailAll(ctx, from, p.folded, func(k int, seq uint64, evs []event.Event) error {
		p.claims(k, evs)
		p.mu.Lock()
		p.delivered[k] = max(p.delivered[k], seq)
		p.mu.Unlock()
		select {
		case p.ch <- record{k, seq, evs}:
			return nil
		case <-quit: // a rebuild stops this tail
			return bus.ErrClosed
		case <-p.stop:
			return bus.ErrClosed
		}
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.tail, p.quit = tail, quit
	p.mu.Unlock()
	return nil
}

// folded is the sequence of session sid's last record in the read model
// (bus.FoldedFunc): the tail asks it at the session's first record after a
// restart, to recognise a copy of a record applied before. A read that
// fails answers 0 (the record is folded, as before a restart), logged.
func (p *Projector) folded(sid string) uint64 {
	seq, err := p.s.LastSeq(p.ctx, sid)
	if err != nil && p.ctx.Err() == nil {
		p.log.Warn("read model: a session's last record not read; a copy of it stored by the log would be folded again", "session", sid, "err", err)
	}
	return seq
}

// unfollow stops the tail, and drops what it handed over and was not applied.
func (p *Projector) unfollow() {
	p.mu.Lock()
	tail, quit := p.tail, p.quit
	p.tail, p.quit = nil, nil
	p.mu.Unlock()
	if tail == nil {
		return
	}
	close(quit) // first: a hand-over waiting for run, which is here, gives up
	tail.Stop()
	for {
		select {
		case <-p.ch:
		default:
			return
		}
	}
}

// claims hands the session.claimed events of a record of shard k to onClaim,
// unless a rebuild folds it again.
func (p *Projector) claims(k int, evs []event.Event) {
	if p.onClaim == nil || len(evs) == 0 {
		return
	}
	p.mu.Lock()
	told := evs[0].Seq <= p.told[k]
	p.told[k] = max(p.told[k], evs[0].Seq)
	p.mu.Unlock()
	if told {
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
	var through []uint64 // per shard, the last copy dropped in this batch
	take := func(r record) {
		batch = append(batch, r.evs...)
		if len(r.evs) == 0 {
			if through == nil {
				through = make([]uint64, p.b.Shards())
			}
			through[r.shard] = r.seq
		}
	}
	for {
		select {
		case <-p.stop:
			return
		case gen := <-p.rebuild:
			p.verify(gen)
		case r := <-p.ch:
			batch, through = batch[:0], nil
			take(r)
			linger := time.NewTimer(projectorLinger)
		fill:
			for len(batch) < projectorBatch {
				if p.waiting() { // take what has arrived, and no more
					for len(batch) < projectorBatch {
						select {
						case r := <-p.ch:
							take(r)
						default:
							break fill
						}
					}
					break
				}
				select {
				case r := <-p.ch:
					take(r)
				case <-linger.C:
					break fill
				case <-p.hurry: // a reader came: see waiting
				case <-p.stop:
					break fill
				}
			}
			linger.Stop()
			p.apply(batch, through)
		}
	}
}

// projectorLinger is how long a batch waits for more records once it has
// one, unless a reader waits for the read model (WaitFor: the API's reads of
// a session after its client's own turn), which ends the wait at once. A
// transaction's cost is mostly its own (the commit, the sessions' states
// written back): in store's BenchmarkApplyTurn a step cost 268 µs of CPU
// applied alone, 109 µs in batches of 7 steps, 75 µs in batches of 28. A
// node under load takes a step every few milliseconds from sessions that
// each write a record every 50 ms or more; with 5 ms of linger its batches
// held two or three steps. The read model stays that much behind the log
// for those who do not wait for it (a list of sessions).
var projectorLinger = 50 * time.Millisecond // a variable for tests

// apply commits one batch, and the positions of the copies the tail dropped
// in it (through, nil for none), retrying while the store merely fails
// (busy, a full disk): an event is never dropped, and the tail waits (its channel
// fills) until the store takes it. A damaged or unwritable file is set aside
// and the read model rebuilt instead (reset).
func (p *Projector) apply(batch []event.Event, through []uint64) {
	for attempt := 0; ; attempt++ {
		res, err := p.s.ApplyThrough(p.ctx, batch, through)
		if err == nil {
			p.fault.Store(nil)
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
		if p.stopped() {
			return
		}
		p.setFault(fmt.Errorf("read model: %w", err))
		// A damaged file goes at once, one that cannot be written after a
		// few tries; the batch goes with it (the new tail delivers it
		// again). Anything else (busy, a full disk) passes: retry.
		if store.IsDamaged(err) || (store.IsReadOnly(err) || store.IsIOError(err)) && attempt+1 >= projectorResetAfter {
			p.reset(err)
			return
		}
		p.log.Error("read model: batch not applied; retrying", "events", len(batch), "attempt", attempt, "err", err)
		if !p.sleep(attempt) {
			return
		}
	}
}

// projectorResetAfter is how many batches in a row may fail to write to the
// read model's file (read-only, an I/O error) before it is set aside.
const projectorResetAfter = 5

// sleep waits before the next attempt, longer after each; false when the
// projector stops meanwhile.
func (p *Projector) sleep(attempt int) bool {
	t := time.NewTimer(min(time.Duration(attempt+1)*100*time.Millisecond, 5*time.Second))
	defer t.Stop()
	select {
	case <-p.stop:
		return false
	case <-t.C:
		return true
	}
}

func (p *Projector) stopped() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// Rebuild asks for the read model to be checked, and rebuilt when it is
// damaged, because a read of store generation gen (store.Generation, taken
// before the read) failed with err. Only damage asks (store.IsDamaged), and
// only of the file still in place: the read of a file already set aside
// asks nothing.
func (p *Projector) Rebuild(gen uint64, err error) {
	if !store.IsDamaged(err) || gen != p.s.Generation() {
		return
	}
	select {
	case p.rebuild <- gen:
	default: // one is asked for already
	}
}

// verify rebuilds the read model of generation gen if it is still in place
// and fails its integrity check.
func (p *Projector) verify(gen uint64) {
	if gen != p.s.Generation() {
		return
	}
	err := p.s.Check(p.ctx)
	if err == nil || !store.IsDamaged(err) {
		// A damage the check does not see (an index out of step with its
		// table, which only integrity_check compares) shows up again on
		// the next write, which rebuilds.
		return
	}
	p.reset(err)
}

// reset sets the read model's file aside (damaged, or not writable) and
// folds the whole log again into a new one, from its first record; the reads
// wait for it as for any projector behind the log (WaitFor). When no new file
// can be made (its directory is not writable either), onFail is told, and it
// tries again until it succeeds or the projector stops.
func (p *Projector) reset(cause error) {
	p.rebuilds.Add(1)
	p.setFault(fmt.Errorf("read model set aside, rebuilding it from the log: %w", cause))
	p.unfollow()
	for attempt := 0; ; attempt++ {
		aside, err := p.s.Reset(p.ctx)
		if err == nil {
			p.log.Warn("read model set aside, rebuilding it from the log", "set_aside", aside, "why", cause)
			break
		}
		if p.stopped() {
			return
		}
		err = fmt.Errorf("the read model cannot be used (%v), and no new one can be made (%w): make %s and its directory writable "+
			"by the node's user (ls -l; lsattr, chattr -i; a read-only mount), or delete it: it is rebuilt from the log", cause, err, p.s.Path())
		p.setFault(err)
		p.fail(err)
		p.log.Error("read model: no new one can be made; retrying", "err", err, "attempt", attempt)
		if !p.sleep(attempt) {
			return
		}
	}
	p.mu.Lock()
	clear(p.applied)
	pos := slices.Clone(p.applied)
	p.mu.Unlock()
	for attempt := 0; ; attempt++ {
		err := p.follow(p.ctx, pos)
		if err == nil {
			// The new read model follows the log; the reads wait for it to
			// catch up as for any projector behind (WaitFor).
			p.fault.Store(nil)
			return
		}
		if p.stopped() {
			return
		}
		p.log.Error("read model: the log cannot be followed; retrying", "err", err, "attempt", attempt)
		if !p.sleep(attempt) {
			return
		}
	}
}

// setFault records why the read model does not follow the log (Err).
func (p *Projector) setFault(err error) { p.fault.Store(&err) }

// fail tells onFail, once.
func (p *Projector) fail(err error) {
	if p.onFail != nil && !p.failed.Swap(true) {
		p.onFail(err)
	}
}

// Err is why the read model does not follow the log now (its last batch
// failed, it is damaged and being rebuilt), nil when it does.
func (p *Projector) Err() error {
	if err := p.fault.Load(); err != nil {
		return *err
	}
	return nil
}

// Rebuilds counts the read models set aside (damaged, or no longer
// writable) and rebuilt since start.
func (p *Projector) Rebuilds() int64 { return p.rebuilds.Load() }

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

// Flush returns once the read model has applied every record appended to
// the log before the call, by any node, or ctx ends: the shards' heads as
// their streams have them (Bus.Heads), and what the tail delivered and this
// node's writers appended (what it goes by for a shard whose head cannot be
// read: a leader election). A read after it sees a turn whose outcome its
// client holds, whichever node ran it (its records were acknowledged before
// the outcome went out; the tail may receive them later, and the batch
// being filled does not linger for the read).
func (p *Projector) Flush(ctx context.Context) error {
	heads, err := p.b.Heads(ctx)
	if err != nil {
		p.log.Debug("read model: the log's heads not all read: waiting for what this node knows of those shards", "err", err)
	}
	return p.flush(ctx, heads)
}

// FlushKnown is Flush without asking the log: it waits for what the tail
// delivered and this node's writers appended before the call. A takeover
// looks for the open turns of the partitions it took this way: the dead
// node's records are those its tail had, and the shards whose leader died
// with it would not answer until their election.
func (p *Projector) FlushKnown(ctx context.Context) error { return p.flush(ctx, nil) }

// flush waits for every shard k up to the highest of heads[k], what the
// tail delivered and what this node's writers appended.
func (p *Projector) flush(ctx context.Context, heads []uint64) error {
	p.mu.Lock()
	last := slices.Clone(p.delivered)
	p.mu.Unlock()
	for k, seq := range p.b.Appended() {
		if k < len(last) {
			last[k] = max(last[k], seq)
		}
	}
	for k, seq := range heads {
		if k < len(last) {
			last[k] = max(last[k], seq)
		}
	}
	return p.WaitForLog(ctx, last)
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

// waiting reports whether a reader waits for the read model (waitShard).
func (p *Projector) waiting() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiters) > 0
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
	case p.hurry <- struct{}{}:
	default: // a wake-up is pending already
	}
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

// Close stops the tail, and the batch in progress, which it cancels (its
// transaction rolls back: the next start applies it again), so that a read
// model that cannot be written, or waits on a lock, never holds a node's
// stop up.
func (p *Projector) Close() {
	select {
	case <-p.stop:
		return
	default:
		close(p.stop) // first: a hand-over waiting for run gives up
	}
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	tail := p.tail
	p.tail = nil
	p.mu.Unlock()
	if tail != nil {
		tail.Stop()
	}
}
