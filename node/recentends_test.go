package node

import (
	"testing"
	"time"
)

// recentEnds forgets an input once its end is older than the memory, in
// the order the inputs ended, and keeps one that ended again since.
func TestRecentEndsForgetTheOldest(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	var r recentEnds
	if r.has(1) {
		t.Fatal("nothing ended yet")
	}
	r.forget(t0, time.Second) // nothing to forget
	r.end(1, t0)
	r.end(2, t0.Add(1*time.Second))
	r.end(3, t0.Add(2*time.Second))
	r.end(1, t0.Add(3*time.Second)) // input 1 redelivered, and ended again
	has := func(want ...uint64) {
		t.Helper()
		for seq := uint64(1); seq <= 3; seq++ {
			in := false
			for _, w := range want {
				in = in || w == seq
			}
			if r.has(seq) != in {
				t.Fatalf("input %d remembered %v, want %v (remembered: %v)", seq, r.has(seq), in, want)
			}
		}
	}
	has(1, 2, 3)
	r.forget(t0.Add(2500*time.Millisecond), time.Second) // t0 and t0+1s are older than 1 s
	has(1, 3)                                            // 1 ended again at t0+3s
	r.forget(t0.Add(3500*time.Millisecond), time.Second)
	has(1)
	r.forget(t0.Add(4001*time.Millisecond), time.Second)
	has()
	if len(r.order) != 0 || len(r.at) != 0 {
		t.Fatalf("left: %v, %v", r.order, r.at)
	}
}
