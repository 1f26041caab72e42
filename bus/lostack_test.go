package bus

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/event"
)

// faultyPublish replaces b's publish with one that runs script for each call:
// script gets the call's number (from 0) and the real publish, and returns
// what the writer sees.
func faultyPublish(t *testing.T, b *Bus, script func(call int, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error)) {
	t.Helper()
	orig := b.publish
	var mu sync.Mutex
	calls := 0
	b.publish = func(ctx context.Context, l *link, m *nats.Msg) (*jetstream.PubAck, error) {
		mu.Lock()
		n := calls
		calls++
		mu.Unlock()
		return script(n, func() (*jetstream.PubAck, error) { return orig(ctx, l, m) })
	}
	t.Cleanup(func() { b.publish = orig })
}

// lostAckSuite runs the lost-acknowledgement cases against b (R1 or R3).
func lostAckSuite(t *testing.T, b *Bus) {
	countIn := func(t *testing.T, sid string) []event.Event {
		evs, _ := mustReplay(t, b, sid, 0)
		return evs
	}

	t.Run("landed, ack lost", func(t *testing.T) {
		const sid = "s_lost1"
		w, _ := b.Writer(sid, 1, 0)
		faultyPublish(t, b, func(call int, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
			ack, err := real()
			if call == 0 && err == nil {
				return nil, nats.ErrTimeout // the write landed, its ack did not come back
			}
			return ack, err
		})
		seqs := mustAppend(t, w, turn(sid, 0))
		if evs := countIn(t, sid); len(evs) != 1 || evs[0].Seq != seqs[0] {
			t.Fatalf("log %v, appended at %v", evs, seqs)
		}
		mustAppend(t, w, turn(sid, 1)) // the writer goes on from the right sequence
		if evs := countIn(t, sid); len(evs) != 2 {
			t.Fatalf("log has %d events, want 2", len(evs))
		}
	})

	t.Run("request lost", func(t *testing.T) {
		const sid = "s_lost2"
		w, _ := b.Writer(sid, 1, 0)
		faultyPublish(t, b, func(call int, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
			if call == 0 {
				return nil, jetstream.ErrNoStreamResponse // never reached the stream
			}
			return real()
		})
		seqs := mustAppend(t, w, turn(sid, 0))
		if evs := countIn(t, sid); len(evs) != 1 || evs[0].Seq != seqs[0] {
			t.Fatalf("log %v, appended at %v", evs, seqs)
		}
	})

	t.Run("late original and retry", func(t *testing.T) {
		// The first attempt seems lost; it lands just before the retry, which
		// the server then answers as a duplicate (R3) or with "wrong last
		// sequence" (R1). Either way: landed once.
		const sid = "s_lost3"
		w, _ := b.Writer(sid, 1, 0)
		faultyPublish(t, b, func(call int, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
			switch call {
			case 0:
				return nil, context.DeadlineExceeded
			case 1:
				if _, err := real(); err != nil {
					return nil, err
				}
				ack, err := real()
				switch {
				case err != nil:
					t.Logf("the server answered the retry with: %v", err)
				case ack.Duplicate:
					t.Logf("the server answered the retry as a duplicate of %d", ack.Sequence)
				default:
					t.Errorf("the retry landed a second time at %d", ack.Sequence)
				}
				return ack, err
			}
			return real()
		})
		seqs := mustAppend(t, w, turn(sid, 0))
		evs := countIn(t, sid)
		if len(evs) != 1 || evs[0].Seq != seqs[0] {
			t.Fatalf("log %v, appended at %v", evs, seqs)
		}
	})

	t.Run("caller gives up after the write landed", func(t *testing.T) {
		const sid = "s_lost7"
		w, _ := b.Writer(sid, 1, 0)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		faultyPublish(t, b, func(call int, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
			ack, err := real()
			if call == 0 && err == nil {
				cancel() // the caller's context ends while the ack is on its way
				return nil, context.Canceled
			}
			return ack, err
		})
		seqs, err := w.Append(ctx, turn(sid, 0))
		if err != nil {
			t.Fatalf("a landed append must be reported as such: %v", err)
		}
		mustAppend(t, w, turn(sid, 1))
		if evs := countIn(t, sid); len(evs) != 2 || evs[0].Seq != seqs[0] {
			t.Fatalf("log %v", evs)
		}
	})

	t.Run("outcome unknown", func(t *testing.T) {
		const sid = "s_lost5"
		w, _ := b.Writer(sid, 1, 0)
		faultyPublish(t, b, func(int, func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
			return nil, nats.ErrTimeout // the stream is unreachable for writes
		})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if _, err := w.Append(ctx, turn(sid, 0)); !errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
		}
		if _, err := w.Append(ctxT(t), turn(sid, 0)); !errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("the writer must stay unusable, err = %v", err)
		}
	})

	t.Run("ack lost, then fenced", func(t *testing.T) {
		const sid = "s_lost6"
		w, _ := b.Writer(sid, 1, 0)
		other, _ := b.Writer(sid, 2, 0)
		faultyPublish(t, b, func(call int, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
			if call == 0 {
				// While our request is lost, another owner claims the session.
				if _, err := other.Append(context.Background(), claim(sid, 2)); err != nil {
					t.Errorf("other: %v", err)
				}
				return nil, nats.ErrTimeout
			}
			return real()
		})
		if _, err := w.Append(ctxT(t), turn(sid, 0)); !errors.Is(err, ErrFenced) {
			t.Fatalf("err = %v, want ErrFenced", err)
		}
		if evs := countIn(t, sid); len(evs) != 1 || evs[0].Epoch != 2 {
			t.Fatalf("log = %+v", evs)
		}
	})
}

func TestLostAckR1(t *testing.T) {
	t.Parallel()
	lostAckSuite(t, embedded(t))
}
