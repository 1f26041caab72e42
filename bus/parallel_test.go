package bus

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
)

// TestThousandSessionsInParallel appends to 1,000 sessions at once, one
// goroutine (one writer) per session, and checks every session's log: in one
// pass over the whole stream, and by Replay for a sample of the sessions.
// Durability is not the point here (the restart tests check it), so the store
// fsyncs every second instead of on every write, which keeps the test fast.
func TestThousandSessionsInParallel(t *testing.T) {
	t.Parallel()
	b := embedded(t, func(c *Config) { c.SyncInterval = time.Second })
	const sessions, perSession = 1000, 3
	sid := func(i int) string { return fmt.Sprintf("s_par%04d", i) }
	var wg sync.WaitGroup
	acked := make([][]uint64, sessions)
	errs := make([]error, sessions)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := b.Writer(sid(i), 1, 0)
			if err != nil {
				errs[i] = err
				return
			}
			// One append of one event, then one of two: both paths of Append.
			s1, err := w.Append(ctxT(t), turn(sid(i), 0))
			if err != nil {
				errs[i] = err
				return
			}
			s2, err := w.Append(ctxT(t), turn(sid(i), 1), turn(sid(i), 2))
			if err != nil {
				errs[i] = err
				return
			}
			acked[i] = append(s1, s2...)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	// The whole stream, once: every session has its three events, in order, at
	// the sequences it was acknowledged.
	var mu sync.Mutex
	bySession := map[string][]event.Event{}
	n := 0
	tl, err := b.TailAll(ctxT(t), nil, nil, func(_ int, _ uint64, evs []event.Event) error {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			bySession[ev.Session] = append(bySession[ev.Session], ev)
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 60*time.Second, "whole stream read", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return n == sessions*perSession
	})
	tl.Stop()
	for i := range sessions {
		evs := bySession[sid(i)]
		var seqs []uint64
		for _, ev := range evs {
			seqs = append(seqs, ev.Seq)
		}
		if !slices.Equal(seqs, acked[i]) {
			t.Fatalf("%s: log %v, acknowledged %v", sid(i), seqs, acked[i])
		}
		want := []string{sid(i) + " #0", sid(i) + " #1", sid(i) + " #2"}
		if got := texts(t, evs); !slices.Equal(got, want) {
			t.Fatalf("%s: %v", sid(i), got)
		}
	}
	for i := 0; i < sessions; i += 37 {
		evs, last := mustReplay(t, b, sid(i), 0)
		if len(evs) != perSession || last != acked[i][perSession-1] {
			t.Fatalf("replay %s: %d events, last %d; acknowledged %v", sid(i), len(evs), last, acked[i])
		}
	}
}
