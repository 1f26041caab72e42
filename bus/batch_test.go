package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// heldShard holds shard k of b busy with one append of session holder, whose
// publish waits until release is called, and lets no other append go alone:
// appends to the shard meanwhile queue in its committer. It returns release
// and a wait for the holder's append.
func heldShard(t *testing.T, b *Bus, k int) (release func(), done func()) {
	t.Helper()
	old := maxAlone
	maxAlone = 1
	t.Cleanup(func() { maxAlone = old })
	holder := sidsInShard(b, k, 1, "s_holder")[0]
	w, _ := b.Writer(holder, 1, 0)
	gate := make(chan struct{})
	entered := make(chan struct{})
	faultyPublish(t, b, func(call int, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
		if call == 0 {
			close(entered)
			<-gate
		}
		return real()
	})
	errc := make(chan error, 1)
	go func() {
		_, err := w.Append(ctxT(t), turn(holder, 0))
		errc <- err
	}()
	<-entered
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return release, func() {
		if err := <-errc; err != nil {
			t.Errorf("holder's append: %v", err)
		}
	}
}

// queued waits until n appends wait in shard k's committer.
func queued(t *testing.T, b *Bus, k, n int) {
	t.Helper()
	c := b.committerOf(k)
	bustest.Eventually(t, 30*time.Second, fmt.Sprintf("%d appends queued", n), func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queue) == n
	})
}

// appendResult is what one Append returned.
type appendResult struct {
	seqs []uint64
	err  error
}

// appendAll starts one Append of evs(i) on each of ws and returns their
// results once all have returned.
func appendAll(t *testing.T, ws []*SessionWriter, evs func(i int) []event.Event) func() []appendResult {
	res := make([]appendResult, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i].seqs, res[i].err = w.Append(ctxT(t), evs(i)...)
		}()
	}
	return func() []appendResult {
		wg.Wait()
		return res
	}
}

func writers(t *testing.T, b *Bus, sids []string) []*SessionWriter {
	ws := make([]*SessionWriter, len(sids))
	for i, sid := range sids {
		var err error
		if ws[i], err = b.Writer(sid, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// TestGroupCommit queues the appends of 16 sessions of one shard behind one
// in flight: they commit as one atomic batch, at consecutive sequences, each
// in its session's log; a lone append afterwards goes alone.
func TestGroupCommit(t *testing.T) {
	b := embedded(t) // fsync on every write: the default
	const k, n = 0, 16
	if b.committerOf(k) == nil {
		t.Fatal("shard 0 has no committer: its stream does not allow atomic publish")
	}
	sids := sidsInShard(b, k, n, "s_group")
	ws := writers(t, b, sids)
	release, holderDone := heldShard(t, b, k)
	wait := appendAll(t, ws, func(i int) []event.Event { return []event.Event{turn(sids[i], 0), turn(sids[i], 1)} })
	queued(t, b, k, n)
	release()
	res := wait()
	holderDone()
	if batches, records := b.groupCommits(); batches != 1 || records != n {
		t.Fatalf("%d batches of %d records, want 1 of %d", batches, records, n)
	}
	seen := map[uint64]bool{}
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("session %s: %v", sids[i], r.err)
		}
		seen[r.seqs[0]] = true
		evs, last := mustReplay(t, b, sids[i], 0)
		if len(evs) != 2 || evs[0].Seq != r.seqs[0] || evs[1].Seq != r.seqs[0] || last != r.seqs[0] {
			t.Fatalf("session %s: log %+v (last %d), acknowledged at %v", sids[i], evs, last, r.seqs)
		}
		if got := texts(t, evs); got[0] != sids[i]+" #0" || got[1] != sids[i]+" #1" {
			t.Fatalf("session %s: %v", sids[i], got)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct sequences for %d records", len(seen), n)
	}
	// Every writer goes on from the sequence the batch gave it; alone now.
	for i, w := range ws {
		mustAppend(t, w, turn(sids[i], 2))
		if evs, _ := mustReplay(t, b, sids[i], 0); len(evs) != 3 {
			t.Fatalf("session %s has %d events, want 3", sids[i], len(evs))
		}
	}
	if batches, _ := b.groupCommits(); batches != 1 {
		t.Fatalf("%d batches after lone appends, want still 1", batches)
	}
}

// TestGroupCommitFencedMember puts a fenced writer in a batch: the batch
// fails as a whole, the fenced writer gets ErrFenced and every other member
// lands, as each would have alone.
func TestGroupCommitFencedMember(t *testing.T) {
	defer setMinGroup(2)()
	b := embedded(t)
	const k, n = 1, 8
	sids := sidsInShard(b, k, n, "s_fence")
	ws := writers(t, b, sids)
	const stale = 3
	newOwner, _ := b.Writer(sids[stale], 2, 0)
	mustAppend(t, newOwner, claim(sids[stale], 2))
	commits := countCommits(t, b, k)
	release, holderDone := heldShard(t, b, k)
	wait := appendAll(t, ws, func(i int) []event.Event { return []event.Event{turn(sids[i], 0)} })
	queued(t, b, k, n)
	release()
	res := wait()
	holderDone()
	for i, r := range res {
		evs, _ := mustReplay(t, b, sids[i], 0)
		if i == stale {
			if !errors.Is(r.err, ErrFenced) {
				t.Fatalf("the stale writer: err = %v, want ErrFenced", r.err)
			}
			if len(evs) != 1 || evs[0].Type != event.SessionClaimed {
				t.Fatalf("the stale writer's session: %+v", evs)
			}
			continue
		}
		if r.err != nil {
			t.Fatalf("session %s: %v", sids[i], r.err)
		}
		if len(evs) != 1 || evs[0].Seq != r.seqs[0] {
			t.Fatalf("session %s: log %+v, acknowledged at %v", sids[i], evs, r.seqs)
		}
	}
	if batches, _ := b.groupCommits(); batches != 0 || commits.Load() != 1 {
		t.Fatalf("%d batches sent, %d committed; want 1 sent and none committed (it held a fenced record)", commits.Load(), batches)
	}
}

// TestGroupCommitLostAnswer loses the answer of a batch that landed: every
// member reads the log back and learns where its record is; nothing lands
// twice and every writer goes on.
func TestGroupCommitLostAnswer(t *testing.T) {
	defer setMinGroup(2)()
	b := embedded(t)
	const k, n = 2, 6
	sids := sidsInShard(b, k, n, "s_lostb")
	ws := writers(t, b, sids)
	c := b.committerOf(k)
	orig := c.request
	var lost atomic.Int64
	c.request = func(ctx context.Context, m *nats.Msg) (*nats.Msg, error) {
		lost.Add(1)
		if _, err := orig(ctx, m); err != nil {
			return nil, err
		}
		return nil, nats.ErrTimeout // the batch landed, its answer did not come back
	}
	t.Cleanup(func() { c.request = orig })
	release, holderDone := heldShard(t, b, k)
	wait := appendAll(t, ws, func(i int) []event.Event { return []event.Event{turn(sids[i], 0)} })
	queued(t, b, k, n)
	release()
	res := wait()
	holderDone()
	c.request = orig
	if lost.Load() != 1 {
		t.Fatalf("%d batches sent, want 1", lost.Load())
	}
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("session %s: %v", sids[i], r.err)
		}
		mustAppend(t, ws[i], turn(sids[i], 1))
		evs, _ := mustReplay(t, b, sids[i], 0)
		if len(evs) != 2 || evs[0].Seq != r.seqs[0] {
			t.Fatalf("session %s: log %+v, first acknowledged at %v", sids[i], evs, r.seqs)
		}
		if got := texts(t, evs); got[0] != sids[i]+" #0" || got[1] != sids[i]+" #1" {
			t.Fatalf("session %s: %v", sids[i], got)
		}
	}
}

// TestGroupCommitDuplicate puts in a batch a record whose earlier attempt
// already landed (same message id, its acknowledgement lost): the server
// refuses the whole batch for the duplicate; the member learns that its record
// is in the log, once, and the others land.
func TestGroupCommitDuplicate(t *testing.T) {
	defer setMinGroup(2)()
	b := embedded(t)
	const k, n, dup = 3, 5, 2
	sids := sidsInShard(b, k, n, "s_dupb")
	ws := writers(t, b, sids)
	// The earlier attempt of dup's append: its message, with its id and
	// fence, stored by the stream.
	evs := []event.Event{turn(sids[dup], 0)}
	m, err := ws[dup].message(evs)
	if err != nil {
		t.Fatal(err)
	}
	ws[dup].setHeaders(m, 0, ws[dup].positionID)
	ack, err := b.js.PublishMsg(ctxT(t), m)
	if err != nil {
		t.Fatal(err)
	}
	commits := countCommits(t, b, k)
	release, holderDone := heldShard(t, b, k)
	wait := appendAll(t, ws, func(i int) []event.Event {
		if i == dup {
			return evs
		}
		return []event.Event{turn(sids[i], 0)}
	})
	queued(t, b, k, n)
	release()
	res := wait()
	holderDone()
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("session %s: %v", sids[i], r.err)
		}
		log, _ := mustReplay(t, b, sids[i], 0)
		if len(log) != 1 || log[0].Seq != r.seqs[0] {
			t.Fatalf("session %s: log %+v, acknowledged at %v", sids[i], log, r.seqs)
		}
		if i == dup && r.seqs[0] != ack.Sequence {
			t.Fatalf("the duplicate was acknowledged at %d, its earlier attempt landed at %d", r.seqs[0], ack.Sequence)
		}
	}
	if batches, _ := b.groupCommits(); batches != 0 || commits.Load() != 1 {
		t.Fatalf("%d batches sent, %d committed; want 1 sent and none committed (it held a duplicate)", commits.Load(), batches)
	}
}

// TestGroupCommitManySessions has 32 sessions of one shard append 20 records
// each, all at once: every record lands once, in order per session, at the
// sequence it was acknowledged at, whether it went alone or in a batch.
func TestGroupCommitManySessions(t *testing.T) {
	defer setMinGroup(2)()
	b := embedded(t)
	const k, n, per = 4, 32, 20
	sids := sidsInShard(b, k, n, "s_many")
	ws := writers(t, b, sids)
	acked := make([][]uint64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range per {
				seqs, err := w.Append(ctxT(t), turn(sids[i], j))
				if err != nil {
					errs[i] = err
					return
				}
				acked[i] = append(acked[i], seqs...)
			}
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("session %s: %v", sids[i], errs[i])
		}
		evs, _ := mustReplay(t, b, sids[i], 0)
		if len(evs) != per {
			t.Fatalf("session %s has %d events, want %d", sids[i], len(evs), per)
		}
		for j, ev := range evs {
			if ev.Seq != acked[i][j] {
				t.Fatalf("session %s: event %d at %d, acknowledged at %d", sids[i], j, ev.Seq, acked[i][j])
			}
		}
		for j, text := range texts(t, evs) {
			if want := fmt.Sprintf("%s #%d", sids[i], j); text != want {
				t.Fatalf("session %s: event %d is %q, want %q", sids[i], j, text, want)
			}
		}
	}
	batches, records := b.groupCommits()
	t.Logf("%d of %d records committed in %d atomic batches", records, n*per, batches)
}

// TestGroupCommitSetup: a new log's shards allow atomic publish; an existing
// log's shards without it get it at setup; a node that only checks the setup
// accepts a log without it and appends one by one.
func TestGroupCommitSetup(t *testing.T) {
	t.Parallel()
	srv := bustest.Server(t)
	b1 := connected(t, srv.ClientURL())
	for k := range b1.Shards() {
		s, err := b1.js.Stream(ctxT(t), wire.EventShardStream(k))
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		if !cfg.AllowAtomicPublish {
			t.Fatalf("shard %d does not allow atomic publish", k)
		}
		if b1.committerOf(k) == nil {
			t.Fatalf("shard %d has no committer", k)
		}
		// As a log set up before atomic batches.
		cfg.AllowAtomicPublish = false
		if _, err := b1.js.UpdateStream(ctxT(t), cfg); err != nil {
			t.Skipf("the server cannot turn allow_atomic off again (%v): nothing to upgrade from", err)
		}
	}
	checker := connected(t, srv.ClientURL(), func(c *Config) { c.NoSetup = true })
	for k := range checker.Shards() {
		if checker.committerOf(k) != nil {
			t.Fatalf("shard %d: a committer on a stream without allow_atomic", k)
		}
	}
	b2 := connected(t, srv.ClientURL())
	for k := range b2.Shards() {
		s, err := b2.js.Stream(ctxT(t), wire.EventShardStream(k))
		if err != nil {
			t.Fatal(err)
		}
		if !s.CachedInfo().Config.AllowAtomicPublish || b2.committerOf(k) == nil {
			t.Fatalf("shard %d was not updated to allow atomic publish", k)
		}
	}
}

// TestGroupCommitOnlyWhereItPays: no committer on an embedded server that
// fsyncs on an interval (no fsync to share).
func TestGroupCommitOnlyWhereItPays(t *testing.T) {
	t.Parallel()
	b := embedded(t, func(c *Config) { c.SyncInterval = time.Minute })
	for k := range b.Shards() {
		if b.committerOf(k) != nil {
			t.Fatalf("shard %d has a committer with fsync every minute", k)
		}
	}
}

// countCommits counts the batch commits sent on shard k.
func countCommits(t *testing.T, b *Bus, k int) *atomic.Int64 {
	c := b.committerOf(k)
	orig := c.request
	var n atomic.Int64
	c.request = func(ctx context.Context, m *nats.Msg) (*nats.Msg, error) {
		n.Add(1)
		return orig(ctx, m)
	}
	t.Cleanup(func() { c.request = orig })
	return &n
}

// setMinGroup sets minGroup for a test and returns its restore.
func setMinGroup(n int) func() {
	old := minGroup
	minGroup = n
	return func() { minGroup = old }
}

// BenchmarkGroupCommit has N sessions (spread over the log's shards as any
// are) append a record each, all at once, again and again, with fsync on
// every write: with group commit ("grouped") and with every append alone
// ("alone", minGroup out of reach). It reports appends/s.
func BenchmarkGroupCommit(b *testing.B) {
	for _, n := range []int{16, 128, 1000} {
		for _, mode := range []string{"alone", "grouped"} {
			b.Run(fmt.Sprintf("%s/sessions=%d", mode, n), func(b *testing.B) {
				if mode == "alone" {
					defer setMinGroup(1 << 30)()
				}
				bus := embedded(b)
				ws := make([]*SessionWriter, n)
				for i := range ws {
					ws[i], _ = bus.Writer(fmt.Sprintf("s_gc%04d", i), 1, 0)
				}
				ctx := context.Background()
				appends := 0
				for b.Loop() {
					var wg sync.WaitGroup
					for i, w := range ws {
						wg.Add(1)
						go func() {
							defer wg.Done()
							if _, err := w.Append(ctx, turn(w.Session(), i)); err != nil {
								b.Error(err)
							}
						}()
					}
					wg.Wait()
					appends += n
				}
				b.ReportMetric(float64(appends)/b.Elapsed().Seconds(), "appends/s")
				batches, records := bus.groupCommits()
				b.ReportMetric(float64(records)/float64(max(appends, 1)), "batched/append")
				_ = batches
			})
		}
	}
}
