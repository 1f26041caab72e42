package bus

import (
	"testing"
	"time"
)

// The appends' average starts at the first append's time and moves an
// eighth of the way to each new one.
func TestAppendLatencyAverage(t *testing.T) {
	t.Parallel()
	var l appendLatency
	l.observe(80 * time.Millisecond)
	if got := time.Duration(l.ewma.Load()); got != 80*time.Millisecond {
		t.Fatalf("after one append: %v", got)
	}
	l.observe(0)
	if got := time.Duration(l.ewma.Load()); got != 70*time.Millisecond {
		t.Fatalf("after a second, instant one: %v, want 70ms", got)
	}
	for range 100 {
		l.observe(time.Millisecond)
	}
	if got := time.Duration(l.ewma.Load()); got < time.Millisecond || got > 2*time.Millisecond {
		t.Fatalf("after 100 appends of 1ms: %v", got)
	}
}

// A node's appends feed its average.
func TestAppendLatencyOfAppends(t *testing.T) {
	t.Parallel()
	b := embedded(t)
	if got := b.AppendLatency(); got != 0 {
		t.Fatalf("before any append: %v", got)
	}
	w, err := b.Writer("s_latency", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctxT(t), turn("s_latency", 0)); err != nil {
		t.Fatal(err)
	}
	if got := b.AppendLatency(); got <= 0 {
		t.Fatalf("after an append: %v", got)
	}
}
