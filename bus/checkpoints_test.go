package bus

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// TestCheckpointSnapshot: a session's snapshot goes in and comes back as its
// state; none stored, or what is stored is not the session's state (another
// session's, or not a state at all), reads as none, so that the session is
// replayed from the start of its log.
func TestCheckpointSnapshot(t *testing.T) {
	t.Parallel()
	b := embedded(t)
	cps := b.CheckpointStore()
	if cps.Bucket() != "tah_checkpoints" {
		t.Fatalf("bucket %q", cps.Bucket())
	}
	if _, ok, err := cps.Snapshot(ctxT(t), "s_1"); ok || err != nil {
		t.Fatalf("none stored: ok %v, %v", ok, err)
	}
	st := projection.State{ID: "s_1", LastSeq: 42, Events: 7, Turn: 2}
	if err := cps.PutSnapshot(ctxT(t), "s_1", &st); err != nil {
		t.Fatal(err)
	}
	got, ok, err := cps.Snapshot(ctxT(t), "s_1")
	if !ok || err != nil || got.ID != "s_1" || got.LastSeq != 42 || got.Events != 7 || got.Turn != 2 {
		t.Fatalf("snapshot %+v, ok %v, %v", got, ok, err)
	}
	if err := cps.PutSnapshot(ctxT(t), "s_2", &st); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := cps.Snapshot(ctxT(t), "s_2"); ok || err != nil {
		t.Fatalf("another session's state: ok %v, %v", ok, err)
	}
	if _, err := b.Checkpoints().Put(ctxT(t), "s_3", []byte("not a state")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := cps.Snapshot(ctxT(t), "s_3"); ok || err != nil {
		t.Fatalf("not a state: ok %v, %v", ok, err)
	}
}

// TestCheckpointHistory: a history goes into segments no larger than a
// record, under keys that name where each starts and how many messages it
// holds, and comes back whole; a message larger than a record is refused
// (ErrSegmentTooLarge), and a segment that does not hold what the window
// says is inconsistent.
func TestCheckpointHistory(t *testing.T) {
	t.Parallel()
	b := embedded(t, func(c *Config) { c.MaxPayload = 64 << 10 })
	cps := b.CheckpointStore()
	var msgs []llm.Message
	for i := range 40 {
		msgs = append(msgs, llm.User(strings.Repeat(string(rune('a'+i%26)), 5<<10)))
	}
	sizes, err := cps.PutHistory(ctxT(t), "s_1", 3, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes) < 2 {
		t.Fatalf("%d segments for %d messages of 5 KiB in records of 64 KiB", len(sizes), len(msgs))
	}
	total, from := 0, 3
	for _, k := range sizes {
		e, err := b.Checkpoints().Get(ctxT(t), segmentKey("s_1", from, k))
		if err != nil {
			t.Fatalf("segment from %d of %d: %v", from, k, err)
		}
		if len(e.Value()) > b.MaxRecordSize() {
			t.Fatalf("segment of %d bytes, over %d", len(e.Value()), b.MaxRecordSize())
		}
		total, from = total+k, from+k
	}
	if total != len(msgs) {
		t.Fatalf("segments hold %d messages, want %d", total, len(msgs))
	}
	if segmentKey("s_1", 3, 9) != "s_1.h3-9" {
		t.Fatalf("key %q", segmentKey("s_1", 3, 9))
	}
	// Read back as a window that elided them from its first message.
	if _, err := cps.PutHistory(ctxT(t), "s_2", 0, msgs); err != nil {
		t.Fatal(err)
	}
	got, err := cps.History(ctxT(t), "s_2", projection.Elided{Messages: len(msgs), Segments: sizes})
	if err != nil || !reflect.DeepEqual(got, msgs) {
		t.Fatalf("history read back: %d messages, %v", len(got), err)
	}
	if _, err := cps.History(ctxT(t), "s_2", projection.Elided{Messages: len(msgs), Segments: []int{sizes[0] + 1}}); err == nil {
		t.Fatal("a segment that is not there was read")
	}
	if _, err := b.Checkpoints().Put(ctxT(t), segmentKey("s_3", 0, 2), []byte(`[{"role":"user","content":"one"}]`)); err != nil {
		t.Fatal(err)
	}
	if _, err := cps.History(ctxT(t), "s_3", projection.Elided{Messages: 2, Segments: []int{2}}); !errors.Is(err, projection.ErrInconsistent) {
		t.Fatalf("a segment short of its messages: %v", err)
	}
	big := []llm.Message{llm.User(strings.Repeat("x", 70<<10))}
	if _, err := cps.PutHistory(ctxT(t), "s_4", 0, big); !errors.Is(err, ErrSegmentTooLarge) {
		t.Fatalf("a message larger than a record: %v", err)
	}
}
