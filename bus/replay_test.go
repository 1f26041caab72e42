package bus

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
)

// interleaved appends n events to each of the sessions, round-robin, and
// returns each session's sequences.
func interleaved(t testing.TB, b *Bus, sids []string, n int) map[string][]uint64 {
	t.Helper()
	ws := map[string]*SessionWriter{}
	for _, sid := range sids {
		ws[sid], _ = b.Writer(sid, 1, 0)
	}
	seqs := map[string][]uint64{}
	for i := range n {
		for _, sid := range sids {
			seqs[sid] = append(seqs[sid], mustAppend(t, ws[sid], turn(sid, i))...)
		}
	}
	return seqs
}

// Not parallel: it sets replayBatch, which every other test's replay reads
// (the race detector caught one in CI).
func TestReplayFromEverySequence(t *testing.T) {
	b := embedded(t)
	old := replayBatch
	replayBatch = 4 // cross many batch boundaries
	t.Cleanup(func() { replayBatch = old })
	sids := sidsInShard(b, 0, 3, "s_a") // interleaved in one stream
	seqs := interleaved(t, b, sids, 10)
	// A record of two events at the end of the first session.
	w, _ := b.Writer(sids[0], 2, seqs[sids[0]][9])
	rec := mustAppend(t, w, turn(sids[0], 10), turn(sids[0], 11))
	seqs[sids[0]] = append(seqs[sids[0]][:9], rec[0])
	for _, sid := range sids {
		full, last := mustReplay(t, b, sid, 0)
		if last != seqs[sid][9] || len(full) != 10+2*boolInt(sid == sids[0]) {
			t.Fatalf("%s: full read has %d events, last %d", sid, len(full), last)
		}
		for from := uint64(0); from <= last+2; from++ {
			got, gotLast := mustReplay(t, b, sid, from)
			var want []event.Event
			for _, ev := range full {
				if ev.Seq >= from {
					want = append(want, ev)
				}
			}
			if gotLast != last || !sameEvents(got, want) {
				t.Fatalf("%s from %d: %d events (last %d), want %d (last %d)", sid, from, len(got), gotLast, len(want), last)
			}
			// The consumer-based replay agrees.
			alt, altLast, err := b.replayConsumer(ctxT(t), sid, from)
			if err != nil {
				t.Fatal(err)
			}
			if altLast != last || !sameEvents(alt, want) {
				t.Fatalf("%s from %d by consumer: %d events (last %d), want %d", sid, from, len(alt), altLast, len(want))
			}
		}
	}
}

func sameEvents(a, b []event.Event) bool {
	return slices.EqualFunc(a, b, func(x, y event.Event) bool {
		return x.Seq == y.Seq && x.Index == y.Index && x.Type == y.Type && x.Session == y.Session && string(x.Data) == string(y.Data)
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestRestartKeepsAcknowledgedEvents(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ctx := ctxT(t)
	b, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sids := []string{"s_r1", "s_r2", "s_r3"}
	seqs := interleaved(t, b, sids, 20)
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b2 := open(t, cfg) // same data directory
	for _, sid := range sids {
		evs, last := mustReplay(t, b2, sid, 0)
		var got []uint64
		for _, ev := range evs {
			got = append(got, ev.Seq)
		}
		if !slices.Equal(got, seqs[sid]) || last != seqs[sid][19] {
			t.Fatalf("%s after restart: %v, acknowledged %v", sid, got, seqs[sid])
		}
		want := make([]string, 20)
		for i := range want {
			want[i] = fmt.Sprintf("%s #%d", sid, i)
		}
		if !slices.Equal(texts(t, evs), want) {
			t.Fatalf("%s: contents differ after restart", sid)
		}
		// and the session goes on from there
		w, _ := b2.Writer(sid, 2, last)
		mustAppend(t, w, claim(sid, 2))
	}
}

func TestRestartWithoutDrain(t *testing.T) {
	t.Parallel()
	// The server goes down under the client's feet (no drain): every append
	// that was acknowledged before is still there after the restart.
	cfg := testConfig(t)
	b, err := Open(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := b.Writer("s_crash", 1, 0)
	var acked []uint64
	for i := range 30 {
		acked = append(acked, mustAppend(t, w, turn("s_crash", i))...)
	}
	b.srv.Shutdown()
	b.srv.WaitForShutdown()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = b.Close(ctx)
	b2 := open(t, cfg)
	evs, _ := mustReplay(t, b2, "s_crash", 0)
	var got []uint64
	for _, ev := range evs {
		got = append(got, ev.Seq)
	}
	if !slices.Equal(got, acked) {
		t.Fatalf("after restart %v, acknowledged %v", got, acked)
	}
}
