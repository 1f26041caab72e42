package node

import (
	"context"
	"testing"
	"time"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/wire"
)

// A node whose presence says it is fenced (it lost its main connection, or
// its own presence came back late, and stopped its sessions and pulls) is
// out of the share-out at once, though its presence still goes out on its
// presence connection: its partitions move now, not after its silence, and
// never go back to it while it says so. When it says it is back, it gets its
// share again.
func TestFencedNodeIsOutOfTheShareOutAtOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	h := &hostile{t: t, n: startWithAPI(ctx, t, dir), dir: dir, ctx: ctx}
	creds := h.issue(wire.RoleNode, "ghost")
	conn := connectGhost(t, h, creds)
	started := time.Now().UTC()
	// announce publishes ghost's presence, with the partitions it would
	// pull of the share-out as this node computes it unless it is fenced.
	announce := func(fenced bool) {
		t.Helper()
		announceGhost(t, conn, started, func(r *wire.NodeRecord) {
			r.Fenced = fenced
			if !fenced {
				r.Partitions = Assign(h.n.cluster.peers(), h.n.cluster.parts, h.n.bus.Shards())["ghost"]
			}
		})
	}
	all := h.n.cluster.parts
	pulled := func() int { return len(h.n.inputs.Partitions()) }

	// ghost heard: this node hands it its share.
	bustest.Eventually(t, time.Minute, "ghost given a share", func() bool {
		announce(false)
		return len(h.n.cluster.live()) == 2 && pulled() < all
	})
	announce(false) // its presence names the partitions it pulls now

	// ghost says it is fenced, and goes on saying so (its presence is not
	// silent): this node pulls every partition, without waiting for a
	// silence that never comes.
	bustest.Eventually(t, time.Minute, "ghost's partitions taken while it says it is fenced", func() bool {
		announce(true)
		return len(h.n.cluster.live()) == 1 && pulled() == all
	})
	for range 3 { // and they stay: ghost, fenced, is heard again and again
		announce(true)
		time.Sleep(h.n.cluster.every)
		if pulled() != all {
			t.Fatalf("a partition went back to a fenced node: pulling %v", h.n.inputs.Partitions())
		}
	}

	// Back in touch: its share again.
	bustest.Eventually(t, time.Minute, "ghost given a share again", func() bool {
		announce(false)
		return len(h.n.cluster.live()) == 2 && pulled() < all
	})
}
