package node

import (
	"strings"
	"testing"
	"time"
)

// A node that hears no other node and cannot write to JetStream takes itself
// for cut off only after twice the TTL: after another node's death the
// survivors' servers elect leaders for every replicated stream and may
// stall for seconds, and a survivor that gave its sessions up then claimed
// them back (the clean-clone CI's TestKillMidTurn). Times are set far from
// the thresholds, so that the test never races the clock.
func TestOutOfTouchWaitsTwiceTheTTLForALostCluster(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	now := time.Now()
	member := func(silent time.Duration) *membership {
		return &membership{ttl: ttl, every: ttl / 5,
			echo: now, sent: now, mainUp: now, // it hears itself, its connection is up
			storedOK: now.Add(-silent),
			seen:     map[string]time.Time{"n0": now.Add(-silent), "n1": now.Add(-silent)}}
	}
	// Silent and unwritable for one and a half TTLs: a stall, not a cut.
	if why, late := member(ttl + ttl/2).outOfTouch(); why != "" || late != "" {
		t.Errorf("after 1.5 TTLs of silence: why %q, late %q; want in touch", why, late)
	}
	// For three TTLs: its server lost the cluster.
	why, late := member(3 * ttl).outOfTouch()
	if !strings.Contains(why, "no other node heard and JetStream not writable") || late != "" {
		t.Errorf("after 3 TTLs of silence: why %q, late %q; want cut off", why, late)
	}
	// Another node heard within the window: JetStream is only busy.
	m := member(3 * ttl)
	m.seen["n2"] = now
	if why, _ := m.outOfTouch(); why != "" {
		t.Errorf("another node heard just now, yet: %q", why)
	}
}
