package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// flat is the events of recs, in order.
func flat(recs [][]event.Event) []event.Event {
	var out []event.Event
	for _, r := range recs {
		out = append(out, r...)
	}
	return out
}

// TestManySessionsInOneBatch applies a cluster's log (many sessions, their
// records interleaved over shards) a record a transaction, in the
// projector's batches, and all in one transaction: the rows are the same
// (the rows of many sessions written together), and read back as the fold.
func TestManySessionsInOneBatch(t *testing.T) {
	t.Parallel()
	const sessions, turns, shards = 40, 3, 4
	recs := clusterLog(t, sessions, turns, shards)
	evs := flat(recs)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			opts := v.opts
			opts.Shards = shards
			ctx := context.Background()
			one := openTest(t, opts)
			for _, r := range recs {
				if _, err := one.Apply(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			want := dump(t, one.Path())
			checkEquivalent(t, one, evs)
			for _, size := range []int{64, 4096, len(evs)} {
				s := openTest(t, opts)
				for _, b := range projectorBatches(recs, size) {
					res, err := s.Apply(ctx, b)
					if err != nil {
						t.Fatal(err)
					}
					if len(res.Problems) > 0 {
						t.Fatal(res.Problems[0])
					}
				}
				if got := dump(t, s.Path()); got != want {
					t.Fatalf("batches of %d events:\n%s\nwant (a record a batch):\n%s", size, got, want)
				}
				checkEquivalent(t, s, evs)
			}
		})
	}
}

// TestBatchSharesStatements: the rows of the sessions of one batch go out
// in statements of several sessions' rows, not a statement (or several)
// per session.
func TestBatchSharesStatements(t *testing.T) {
	t.Parallel()
	const sessions, shards = 64, 4
	recs := clusterLog(t, sessions, 1, shards)
	s := openTest(t, Options{Shards: shards})
	ctx := context.Background()
	// Every session's first records (created, claimed, the turn's start);
	// then one batch of the next record of each (llm.completed +
	// tool.started: the session's row, a message, a step, a tool call).
	seen := map[string]int{}
	var firsts, nexts [][]event.Event
	for _, r := range recs {
		sid := r[0].Session
		seen[sid]++
		switch {
		case seen[sid] <= 3:
			firsts = append(firsts, r)
		case seen[sid] == 4:
			if r[0].Type != event.LLMCompleted {
				t.Fatalf("the 4th record of %s is %s", sid, r[0].Type)
			}
			nexts = append(nexts, r)
		}
	}
	// Numbered again as the log would have them in this order.
	seq := make([]uint64, shards)
	for _, r := range slices.Concat(firsts, nexts) {
		k := wire.Shard(r[0].Session, shards)
		seq[k]++
		for i := range r {
			r[i].Seq = seq[k]
		}
	}
	first, next := flat(firsts), flat(nexts)
	if _, err := s.Apply(ctx, first); err != nil {
		t.Fatal(err)
	}
	before := s.Stats()
	res, err := s.Apply(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied != 2*sessions {
		t.Fatalf("applied %d events, want %d", res.Applied, 2*sessions)
	}
	after := s.Stats()
	if n := after.Statements - before.Statements; n >= sessions {
		t.Fatalf("a batch of %d sessions' records wrote with %d statements: one or more a session", sessions, n)
	}
	checkEquivalent(t, s, append(first, next...))
}

// TestFailureMidBatchManySessions fails a batch of many sessions' records
// after each of several of its statements (the sessions' rows written,
// some of the rows gathered across sessions written, all of them, the
// positions): nothing of it is committed, its position included, and the
// batch delivered again gives the rows of a store that never failed.
func TestFailureMidBatchManySessions(t *testing.T) {
	t.Parallel()
	const sessions, turns, shards = 40, 2, 4
	recs := clusterLog(t, sessions, turns, shards)
	head, rest := flat(recs[:len(recs)/3]), flat(recs[len(recs)/3:])
	ctx := context.Background()
	ref := openTest(t, Options{Shards: shards})
	if _, err := ref.Apply(ctx, head); err != nil {
		t.Fatal(err)
	}
	before := ref.Stats()
	if _, err := ref.Apply(ctx, rest); err != nil {
		t.Fatal(err)
	}
	total := int(ref.Stats().Statements - before.Statements)
	want := dump(t, ref.Path())
	for _, at := range []int{1, total / 4, total / 2, total - 1, total} {
		for _, reopen := range []bool{false, true} {
			t.Run(fmt.Sprintf("statement%d/reopen=%v", at, reopen), func(t *testing.T) {
				t.Parallel()
				s := openTest(t, Options{Shards: shards})
				if _, err := s.Apply(ctx, head); err != nil {
					t.Fatal(err)
				}
				pos, err := s.Positions(ctx, DefaultConsumer)
				if err != nil {
					t.Fatal(err)
				}
				was := dump(t, s.Path())
				s.afterStatement = func(n int) error {
					if n == at {
						return errCrash
					}
					return nil
				}
				if _, err := s.Apply(ctx, rest); !errors.Is(err, errCrash) {
					t.Fatalf("apply with a failure after statement %d of %d: %v", at, total, err)
				}
				s.afterStatement = nil
				if got := dump(t, s.Path()); got != was {
					t.Fatalf("the failed batch left rows:\n%s\nwere:\n%s", got, was)
				}
				if got, err := s.Positions(ctx, DefaultConsumer); err != nil || !slices.Equal(got, pos) {
					t.Fatalf("positions after the failed batch %v (%v), were %v", got, err, pos)
				}
				if reopen {
					s.Close()
					s = openAt(t, s.Path(), Options{Shards: shards})
				}
				// Delivered again from the positions, as the projector does.
				if _, err := s.Apply(ctx, slices.Concat(head, rest)); err != nil {
					t.Fatal(err)
				}
				if got := dump(t, s.Path()); got != want {
					t.Fatalf("after the failure:\n%s\nwant:\n%s", got, want)
				}
				checkEquivalent(t, s, slices.Concat(head, rest))
			})
		}
	}
}

// TestWriterSettings: the writer keeps its statement journals in memory,
// has a page cache that follows the state cache, and checkpoints the WAL
// every walAutocheckpoint pages.
func TestWriterSettings(t *testing.T) {
	t.Parallel()
	for _, sessions := range []int{0, 100, 10000, 1 << 20} {
		s := openTest(t, Options{CacheSize: sessions})
		ctx := context.Background()
		pragma := func(name string) int {
			t.Helper()
			var v int
			// The writer's one connection: the pragmas are per connection.
			conn, err := s.w.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := conn.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v); err != nil && !errors.Is(err, sql.ErrNoRows) {
				t.Fatal(err)
			}
			return v
		}
		wantKB := PageCacheKB(s.opts.CacheSize)
		if sessions == 0 && wantKB != 16<<10 {
			t.Fatalf("default page cache %d KiB, want 16 MiB", wantKB)
		}
		if got := pragma("temp_store"); got != 2 {
			t.Errorf("temp_store %d, want 2 (memory)", got)
		}
		if got := pragma("cache_size"); got != -wantKB {
			t.Errorf("cache_size %d with %d sessions cached, want -%d (KiB)", got, s.opts.CacheSize, wantKB)
		}
		if got := pragma("wal_autocheckpoint"); got != walAutocheckpoint {
			t.Errorf("wal_autocheckpoint %d, want %d", got, walAutocheckpoint)
		}
		if kb := PageCacheKB(sessions); kb < 8<<10 || kb > 256<<10 {
			t.Errorf("page cache of %d sessions: %d KiB, not within 8 to 256 MiB", sessions, kb)
		}
	}
}
