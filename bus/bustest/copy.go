package bustest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StoreCopy stores again the message at seq of stream, with its subject,
// body and Nats-Msg-Id but none of its other headers (its fence would
// refuse it), as a replicated stream stores a retried append it failed to
// recognise around a leader change, and returns the copy's sequence. The
// stream's duplicate window is made short for it, since a leader change
// forgets the window: twice, because an update of the window makes
// nats-server (2.15) purge its ids at once but possibly before it takes the
// new window, with the old one (which then holds them for its whole
// length); the second purge has the first's window.
func StoreCopy(ctx context.Context, t testing.TB, js jetstream.JetStream, stream string, seq uint64) uint64 {
	t.Helper()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	for _, window := range []time.Duration{100 * time.Millisecond, 150 * time.Millisecond} {
		cfg.Duplicates = window
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	orig, err := s.GetMsg(ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	for {
		m := nats.NewMsg(orig.Subject)
		m.Data = orig.Data
		m.Header.Set(jetstream.MsgIDHeader, orig.Header.Get(jetstream.MsgIDHeader))
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if !ack.Duplicate {
			return ack.Sequence
		}
		select {
		case <-ctx.Done():
			t.Fatalf("a copy of %s's message at %d was never stored", stream, seq)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
