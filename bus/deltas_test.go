package bus

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/wire"
)

func TestDeltasDropStaleEpochs(t *testing.T) {
	t.Parallel()
	b := embedded(t)
	const sid = "s_delta"
	var mu sync.Mutex
	var got []DeltaMsg
	sub, err := b.SubscribeDeltas(ctxT(t), sid, func(d DeltaMsg) {
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	p1, _ := b.Deltas(sid, 1)
	p2, _ := b.Deltas(sid, 2)
	send := func(p *DeltaPublisher, text string) {
		t.Helper()
		if err := p.Publish(ctxT(t), "st_1", llm.Delta{Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	send(p1, "a")
	send(p1, "b")
	send(p2, "c")
	send(p1, "stale") // an old owner that does not know it lost the session
	send(p2, "d")
	// Both publishers share one connection, so the subscriber sees them in
	// this order: when "d" has arrived, "stale" was dropped, not late.
	bustest.Eventually(t, 30*time.Second, "deltas received", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0 && got[len(got)-1].Text == "d"
	})
	mu.Lock()
	defer mu.Unlock()
	want := []struct {
		text       string
		epoch, seq uint64
	}{{"a", 1, 1}, {"b", 1, 2}, {"c", 2, 1}, {"d", 2, 2}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i, w := range want {
		if got[i].Text != w.text || got[i].Epoch != w.epoch || got[i].Seq != w.seq || got[i].StepID != "st_1" || got[i].Session != sid {
			t.Fatalf("delta %d = %+v, want %+v", i, got[i], w)
		}
	}
}

// FuzzAppendDelta holds the delta's hand-written body to what json.Marshal
// writes of wire.Delta, byte for byte.
func FuzzAppendDelta(f *testing.F) {
	f.Add("st_1", "Hello", "", false, 0, "", "", "")
	f.Add("", "", "thinking \"hard\"\n", false, 0, "", "", "")
	f.Add("st_2", "", "", true, 0, "call_1", "list_files", `{"path":`)
	f.Add("st_3", "é<>&", "\xff", true, 3, "", "", "")
	f.Fuzz(func(t *testing.T, step, text, reasoning string, call bool, index int, id, name, args string) {
		d := llm.Delta{Text: text, Reasoning: reasoning}
		if call {
			d.ToolCall = &llm.ToolCallDelta{Index: index, ID: id, Name: name, ArgumentsDelta: args}
		}
		want, err := json.Marshal(wire.Delta{StepID: step, Delta: d})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendDelta([]byte("prefix"), step, d); string(got) != "prefix"+string(want) {
			t.Fatalf("appendDelta = %s\nwant prefix%s", got, want)
		}
	})
}

// BenchmarkDeltaPublish is a token delta's cost to its owner: its body, its
// headers and its publish on the session's connection (nobody listening).
func BenchmarkDeltaPublish(b *testing.B) {
	bus := embedded(b)
	p, err := bus.Deltas("s_bench", 7)
	if err != nil {
		b.Fatal(err)
	}
	ctx := ctxT(b)
	d := llm.Delta{Text: " token"}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Publish(ctx, "st_1", d); err != nil {
			b.Fatal(err)
		}
	}
}
