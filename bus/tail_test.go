package bus

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// collector gathers tailed events.
type collector struct {
	mu  sync.Mutex
	evs []event.Event
}

func (c *collector) add(ev event.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evs = append(c.evs, ev)
	return nil
}

func (c *collector) seqs() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]uint64, len(c.evs))
	for i, ev := range c.evs {
		out[i] = ev.Seq
	}
	return out
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.evs)
}

// TestTailAcrossHistoryToLive starts tails at several points of a session's
// history while appends go on concurrently (to it and to another session), and
// checks that each one sees exactly the log from its start on: nothing
// missed, nothing repeated, in order.
func TestTailAcrossHistoryToLive(t *testing.T) {
	t.Parallel()
	b := embedded(t)
	const sid, other = "s_tail", "s_noise"
	w, _ := b.Writer(sid, 1, 0)
	wo, _ := b.Writer(other, 1, 0)
	var history []uint64
	for i := range 10 {
		history = append(history, mustAppend(t, w, turn(sid, i))...)
		mustAppend(t, wo, turn(other, i))
	}
	starts := []uint64{0, history[0], history[4], history[9], history[9] + 1}
	tails := make([]*collector, len(starts))
	var wg sync.WaitGroup
	wg.Add(1)
	var live []uint64
	go func() { // appends race with the tails' start
		defer wg.Done()
		for i := 10; i < 60; i++ {
			seqs, err := w.Append(ctxT(t), turn(sid, i))
			if err != nil {
				t.Error(err)
				return
			}
			live = append(live, seqs...)
			if _, err := wo.Append(ctxT(t), turn(other, i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i, from := range starts {
		tails[i] = &collector{}
		tl, err := b.Tail(ctxT(t), sid, from, tails[i].add)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tl.Stop)
	}
	wg.Wait()
	all := append(history, live...)
	for i, from := range starts {
		var want []uint64
		for _, s := range all {
			if s >= from {
				want = append(want, s)
			}
		}
		bustest.Eventually(t, 30*time.Second, fmt.Sprintf("tail from %d caught up", from), func() bool {
			return tails[i].len() >= len(want)
		})
		if got := tails[i].seqs(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("tail from %d:\n got %v\nwant %v", from, got, want)
		}
	}
}

// recordCollector gathers the records of TailAll, by shard.
type recordCollector struct {
	mu   sync.Mutex
	recs map[int][][]event.Event
	at   map[int][]uint64 // the records' sequences, as TailAll gave them
	n    int              // events
}

func (c *recordCollector) add(k int, seq uint64, evs []event.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recs == nil {
		c.recs, c.at = map[int][][]event.Event{}, map[int][]uint64{}
	}
	for _, e := range evs {
		if e.Seq != seq {
			return fmt.Errorf("an event at %d in the record at %d", e.Seq, seq)
		}
	}
	c.recs[k] = append(c.recs[k], evs)
	c.at[k] = append(c.at[k], seq)
	c.n += len(evs)
	return nil
}

func (c *recordCollector) events() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// seqs lists the sequences of shard k's records.
func (c *recordCollector) seqs(k int) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.at[k])
}

// TestTailAllAndStop: TailAll hands out every shard's records whole, each
// shard's in order and from its own start sequence, and nothing after Stop.
func TestTailAllAndStop(t *testing.T) {
	t.Parallel()
	b := embedded(t, func(c *Config) { c.Shards = 2 })
	a, z := sidsInShard(b, 0, 1, "s_x")[0], sidsInShard(b, 1, 1, "s_y")[0]
	seqs := interleaved(t, b, []string{a, z}, 5)
	wa, _ := b.Writer(a, 2, seqs[a][4])
	rec := mustAppend(t, wa, turn(a, 5), turn(a, 6), turn(a, 7)) // one record of three events
	from := []uint64{seqs[a][2], 0}
	c := &recordCollector{}
	tl, err := b.TailAll(ctxT(t), from, nil, c.add)
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, "tail all caught up", func() bool { return c.events() >= 3+3+5 })
	if got, want := fmt.Sprint(c.seqs(0)), fmt.Sprint([]uint64{seqs[a][2], seqs[a][3], seqs[a][4], rec[0]}); got != want {
		t.Fatalf("shard 0: %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(c.seqs(1)), fmt.Sprint(seqs[z]); got != want {
		t.Fatalf("shard 1: %s, want %s", got, want)
	}
	c.mu.Lock()
	last := c.recs[0][3]
	c.mu.Unlock()
	if len(last) != 3 || last[2].Index != 2 || texts(t, last)[2] != a+" #7" {
		t.Fatalf("the record of three events came as %+v", last)
	}
	if pos := tl.Positions(); fmt.Sprint(pos) != fmt.Sprint([]uint64{rec[0], seqs[z][4]}) {
		t.Fatalf("positions %v", pos)
	}
	tl.Stop()
	<-tl.Done()
	n := c.events()
	wz, _ := b.Writer(z, 2, seqs[z][4])
	more := mustAppend(t, wz, turn(z, 5), turn(z, 6), turn(z, 7))
	// After Stop returns, fn is never called again: the appends above must
	// not reach the collector. Wait for a fresh tail to see them first.
	c2 := &recordCollector{}
	tl2, _ := b.TailAll(ctxT(t), []uint64{rec[0] + 1, more[0]}, nil, c2.add)
	defer tl2.Stop()
	bustest.Eventually(t, 30*time.Second, "second tail saw the new events", func() bool { return c2.events() >= 3 })
	if c.events() != n {
		t.Fatalf("a stopped tail received %d more events", c.events()-n)
	}
	if _, err := b.TailAll(ctxT(t), []uint64{1}, nil, c2.add); err == nil {
		t.Fatal("TailAll took one start sequence for two shards")
	}
}

func TestTailStopsOnHandlerError(t *testing.T) {
	t.Parallel()
	b := embedded(t)
	interleaved(t, b, []string{"s_e"}, 5)
	boom := errors.New("boom")
	var seen int
	tl, err := b.Tail(ctxT(t), "s_e", 0, func(ev event.Event) error {
		seen++
		if seen == 3 {
			return boom
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-tl.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("tail did not stop")
	}
	if !errors.Is(tl.Err(), boom) || tl.Positions()[b.ShardOf("s_e")] == 0 {
		t.Fatalf("Err = %v, positions %v", tl.Err(), tl.Positions())
	}
	tl.Stop()
	if seen != 3 {
		t.Fatalf("fn called %d times after failing at 3", seen)
	}
}

// TestABadRecordDoesNotStopTheTail: a message of a session's shard that is
// not a record comes to the tail as one event without a type, with its
// sequence, session and body; the tail goes on with the next records, and a
// replay of that session fails with a Fault that names it, after the events
// before it.
func TestABadRecordDoesNotStopTheTail(t *testing.T) {
	t.Parallel()
	b := embedded(t)
	seqs := interleaved(t, b, []string{"s_bad", "s_good"}, 2)
	js, err := jetstream.New(b.Conn())
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ctxT(t), wire.ShardSubject(b.ShardOf("s_bad"), "s_bad"), []byte("not a record"))
	if err != nil {
		t.Fatal(err)
	}
	wg, _ := b.Writer("s_good", 2, seqs["s_good"][1])
	after := mustAppend(t, wg, turn("s_good", 3))
	c := &recordCollector{}
	tl, err := b.TailAll(ctxT(t), nil, nil, c.add)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Stop()
	bustest.Eventually(t, 30*time.Second, "the tail read past the bad record", func() bool { return c.events() >= 6 })
	var bad []event.Event
	c.mu.Lock()
	for _, recs := range c.recs {
		for _, r := range recs {
			if r[0].Type == "" {
				bad = r
			}
		}
	}
	c.mu.Unlock()
	if len(bad) != 1 || bad[0].Seq != ack.Sequence || bad[0].Session != "s_bad" || string(bad[0].Data) != "not a record" {
		t.Fatalf("the bad record came as %+v", bad)
	}
	if got := c.seqs(b.ShardOf("s_good")); got[len(got)-1] != after[0] {
		t.Fatalf("records of shard %d: %v, want the last at %d", b.ShardOf("s_good"), got, after[0])
	}

	evs, last, err := b.Replay(ctxT(t), "s_bad", 0)
	var f *projection.Fault
	if !errors.As(err, &f) || f.Seq != ack.Sequence || f.Code != projection.FaultCorruptLog || !errors.Is(err, event.ErrMalformed) {
		t.Fatalf("replay: %v", err)
	}
	if len(evs) != 2 || last != seqs["s_bad"][1] {
		t.Fatalf("before the fault: %d events, last %d; want 2, %d", len(evs), last, seqs["s_bad"][1])
	}
}

// wire.CopyBefore reads the position a record's id names (positionID: this
// package's ids and the protocol's parse agree) and calls the record a copy when
// that is before the session's last record folded;
// ids of other forms are never copies by it.
func TestCopyBefore(t *testing.T) {
	const sid = "s_x"
	w := &SessionWriter{idPrefix: sid + ":3:n0nce:"}
	for _, c := range []struct {
		name   string
		id     string
		folded uint64
		want   bool
	}{
		{"the record after the last folded", w.positionID(40), 40, false},
		{"after a record not folded (rejected)", w.positionID(41), 40, false},
		{"a copy of the last folded", w.positionID(12), 40, true},
		{"a copy of a session's first record", w.positionID(0), 40, true},
		{"nothing folded of the session", w.positionID(0), 0, false},
		{"a copy from the old log", legacyCopyPrefix(sid) + "n0nce:7", 40, false},
		{"another session's id", "s_y:3:n0nce:7", 40, false},
		{"no position", sid + ":3:n0nce:", 40, false},
		{"no id", "", 40, false},
	} {
		if got := wire.CopyBefore(sid, c.id, c.folded); got != c.want {
			t.Errorf("%s: wire.CopyBefore(%q, %d) = %v, want %v", c.name, c.id, c.folded, got, c.want)
		}
	}
}
