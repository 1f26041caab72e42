package bench

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/wire"
)

// foPresence is what the survivors' presence showed after the kill.
type foPresence struct {
	rebalanced              time.Duration // every partition pulled by exactly one survivor, for good
	doubleFrom, doubleUntil time.Duration // some partition listed by both
	doubleMax               int           // the most partitions listed by both at once
}

// presenceTracker follows the nodes' presence on core NATS (what the nodes
// themselves go by): when each was last heard, and after the kill, whether
// the survivors' latest records share every partition between them.
type presenceTracker struct {
	parts  int
	killed string

	mu      sync.Mutex
	last    map[string]wire.NodeRecord
	heard   map[string]time.Time
	t0      time.Time
	p       foPresence
	covered time.Time // since when the survivors cover every partition; zero when they do not
}

func (t *presenceTracker) heardMsg(m *nats.Msg) {
	var r wire.NodeRecord
	if json.Unmarshal(m.Data, &r) != nil || r.Node == "" {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.heard[r.Node] = now
	if r.Leaving {
		delete(t.last, r.Node)
	} else {
		t.last[r.Node] = r
	}
	if t.t0.IsZero() {
		return
	}
	at := now.Sub(t.t0)
	seen := map[int]int{}
	for id, x := range t.last {
		if id == t.killed {
			continue
		}
		for _, q := range x.Partitions {
			seen[q]++
		}
	}
	double := 0
	for _, k := range seen {
		if k > 1 {
			double++
		}
	}
	if double > 0 {
		if t.p.doubleFrom == 0 {
			t.p.doubleFrom = at
		}
		t.p.doubleUntil, t.p.doubleMax = at, max(t.p.doubleMax, double)
	}
	switch {
	case double > 0 || len(seen) != t.parts:
		t.covered, t.p.rebalanced = time.Time{}, 0
	case t.covered.IsZero():
		t.covered, t.p.rebalanced = now, at
	}
}

// killedAt marks the kill and returns how long before it the killed node was
// last heard.
func (t *presenceTracker) killedAt(t0 time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.t0 = t0
	delete(t.last, t.killed)
	if h, ok := t.heard[t.killed]; ok {
		return t0.Sub(h)
	}
	return 0
}

// settled reports whether the survivors have covered every partition for d.
func (t *presenceTracker) settled(d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.covered.IsZero() && time.Since(t.covered) >= d
}

func (t *presenceTracker) result() foPresence {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.p
}
