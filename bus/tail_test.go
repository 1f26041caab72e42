package bus

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
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

func TestTailAllAndStop(t *testing.T) {
	b := embedded(t)
	seqs := interleaved(t, b, []string{"s_x", "s_y"}, 5)
	from := seqs["s_x"][2]
	c := &collector{}
	tl, err := b.TailAll(ctxT(t), from, c.add)
	if err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for s := from; s <= seqs["s_y"][4]; s++ {
		want = append(want, s) // both sessions: every sequence from `from` on
	}
	bustest.Eventually(t, 30*time.Second, "tail all caught up", func() bool { return c.len() >= len(want) })
	if fmt.Sprint(c.seqs()) != fmt.Sprint(want) {
		t.Fatalf("got %v want %v", c.seqs(), want)
	}
	tl.Stop()
	<-tl.Done()
	n := c.len()
	interleaved(t, b, []string{"s_z"}, 3)
	// After Stop returns, fn is never called again: the appends above must
	// not reach the collector. Wait for a fresh tail to see them first.
	c2 := &collector{}
	tl2, _ := b.TailAll(ctxT(t), seqs["s_y"][4]+1, c2.add)
	defer tl2.Stop()
	bustest.Eventually(t, 30*time.Second, "second tail saw the new events", func() bool { return c2.len() >= 3 })
	if c.len() != n {
		t.Fatalf("a stopped tail received %d more events", c.len()-n)
	}
}

func TestTailStopsOnHandlerError(t *testing.T) {
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
	if !errors.Is(tl.Err(), boom) || tl.LastSeq() == 0 {
		t.Fatalf("Err = %v, LastSeq = %d", tl.Err(), tl.LastSeq())
	}
	tl.Stop()
	if seen != 3 {
		t.Fatalf("fn called %d times after failing at 3", seen)
	}
}
