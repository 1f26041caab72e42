package bus

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// testConfig is a small, fast configuration for an embedded server on a random
// port in a temporary directory.
func testConfig(t testing.TB) Config {
	cfg := Default()
	cfg.DataDir = t.TempDir()
	cfg.Port = -1
	cfg.Partitions = 4
	return cfg
}

// formingTimeout is the ReadyTimeout of the buses of a cluster a test forms,
// a deadline for a hang only (within ctxT's): three servers forming under
// -race on two loaded cores (CPU hogs beside this package and node's, four
// tests at a time each) took more than the default 30 s, and so did a
// clean-clone CI run's TestTLSRoutes (its object store's setup).
const formingTimeout = 2 * time.Minute

// open opens a Bus with cfg and closes it in t.Cleanup.
func open(t testing.TB, cfg Config) *Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// embedded opens a Bus on its own embedded server.
func embedded(t testing.TB, edit ...func(*Config)) *Bus {
	t.Helper()
	cfg := testConfig(t)
	for _, e := range edit {
		e(&cfg)
	}
	return open(t, cfg)
}

// connected opens a Bus on the external server(s) at url.
func connected(t testing.TB, url string, edit ...func(*Config)) *Bus {
	t.Helper()
	cfg := Default()
	cfg.URL = url
	cfg.Partitions = 4
	for _, e := range edit {
		e(&cfg)
	}
	return open(t, cfg)
}

func ctxT(t testing.TB) context.Context {
	// Catches a hang only; longer than an embedded cluster's ReadyTimeout.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// turn returns the i-th test event of a session: a turn.started with a
// recognisable text.
func turn(sid string, i int) event.Event {
	return event.MustNew(sid, event.TurnStarted, event.TurnStartedData{Turn: i + 1, Message: llm.User(fmt.Sprintf("%s #%d", sid, i))})
}

// sidsInShard returns n session ids starting with prefix that b puts in
// shard k: sessions whose records interleave in one stream.
func sidsInShard(b *Bus, k, n int, prefix string) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		if sid := fmt.Sprintf("%s%d", prefix, i); b.ShardOf(sid) == k {
			out = append(out, sid)
		}
	}
	return out
}

func mustAppend(t testing.TB, w *SessionWriter, evs ...event.Event) []uint64 {
	t.Helper()
	seqs, err := w.Append(ctxT(t), evs...)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return seqs
}

func mustReplay(t testing.TB, b *Bus, sid string, from uint64) ([]event.Event, uint64) {
	t.Helper()
	// A replay asks its stream in one short try (a stream electing a leader
	// does not answer, or answers 503 "JetStream system temporarily
	// unavailable"); its callers try again, as a session's load does.
	ctx := ctxT(t)
	for {
		evs, last, err := b.Replay(ctx, sid, from)
		if err == nil {
			return evs, last
		}
		var api *jetstream.APIError
		electing := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) ||
			errors.As(err, &api) && api.Code == 503
		if !electing || ctx.Err() != nil {
			t.Fatalf("Replay(%s, %d): %v", sid, from, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func texts(t testing.TB, evs []event.Event) []string {
	t.Helper()
	out := make([]string, len(evs))
	for i, ev := range evs {
		d, err := event.DecodeAs[event.TurnStartedData](ev)
		if err != nil {
			t.Fatalf("decode %d: %v", ev.Seq, err)
		}
		out[i] = d.Message.Content
	}
	return out
}
