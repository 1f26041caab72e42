package bus

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/wire"
)

func TestPayloadTooLarge(t *testing.T) {
	t.Parallel()
	b := embedded(t, func(c *Config) { c.MaxPayload = 64 << 10 })
	const sid = "s_big"
	w, _ := b.Writer(sid, 1, 0)
	big := strings.Repeat("x", 100<<10)
	ev := event.MustNew(sid, event.TurnStarted, event.TurnStartedData{Turn: 1, Message: llm.User(big)})
	_, err := w.Append(ctxT(t), ev)
	if !errors.Is(err, ErrPayloadTooLarge) || !strings.Contains(err.Error(), "65536") {
		t.Fatalf("err = %v, want ErrPayloadTooLarge naming the limit", err)
	}
	// The writer is not broken by it.
	mustAppend(t, w, turn(sid, 0))
	// A record of exactly MaxRecordSize bytes fits, whatever its headers.
	mk := func(n int) event.Event {
		e := event.MustNew(sid, event.TurnStarted, event.TurnStartedData{Turn: 2, Message: llm.User(strings.Repeat("y", n))})
		e.Epoch, e.Time = 1, ev.Time
		return e
	}
	size := func(e event.Event) int {
		body, _ := event.EncodeRecord([]event.Event{e})
		return len(body)
	}
	fit := mk(b.MaxRecordSize() - size(mk(1)) + 1)
	if n := size(fit); n != b.MaxRecordSize() {
		t.Fatalf("test record is %d bytes, want %d", n, b.MaxRecordSize())
	}
	mustAppend(t, w, fit)
	// Inputs too.
	if _, err := b.PublishInput(ctxT(t), sid, wire.Input{Command: wire.CommandRun, Text: big}); !errors.Is(err, ErrPayloadTooLarge) {
		t.Fatalf("input: %v", err)
	}
}

func TestArtifacts(t *testing.T) {
	t.Parallel()
	b := embedded(t)
	data := bytes.Repeat([]byte("artifact data "), 100_000) // 1.4 MB: several chunks
	ref, err := b.PutArtifactBytes(ctxT(t), "s_art/call_1/output", data)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Bucket != wire.ArtifactBucket || ref.Size != int64(len(data)) || len(ref.SHA256) != 64 {
		t.Fatalf("ref = %+v", ref)
	}
	got, err := b.GetArtifact(ctxT(t), ref)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get: %v (%d bytes)", err, len(got))
	}
	// The reference goes into an event as it is.
	ev := event.MustNew("s_art", event.ToolFinished, event.ToolFinishedData{StepID: "st_1", CallID: "call_1", Name: "read_file", Output: "[see artifact]", Artifact: &ref})
	w, _ := b.Writer("s_art", 1, 0)
	mustAppend(t, w, ev)
	bad := ref
	bad.SHA256 = strings.Repeat("0", 64)
	if _, err := b.GetArtifact(ctxT(t), bad); !errors.Is(err, ErrArtifactCorrupt) {
		t.Fatalf("corrupt: %v", err)
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	for in, want := range map[[2]string]string{
		{"s_1", "cp_abc"}:     "s_1.cp_abc",
		{"s_1", "a.b"}:        "s_1.=YS5i",
		{"s_1", "with space"}: "s_1.=d2l0aCBzcGFjZQ",
		{"s_1", ""}:           "s_1.=",
	} {
		if got := CheckpointKey(in[0], in[1]); got != want {
			t.Errorf("CheckpointKey%v = %q, want %q", in, got, want)
		}
	}
	b := embedded(t)
	for _, id := range []string{"cp_1", "a.b/é c"} {
		if _, err := b.Checkpoints().Put(ctxT(t), CheckpointKey("s_1", id), []byte("{}")); err != nil {
			t.Fatalf("key of %q refused by the bucket: %v", id, err)
		}
	}
}
