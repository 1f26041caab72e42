package clustertest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/wire"
)

// TestSessionsSpread: on a settled cluster of three nodes, tah_nodes holds a
// balanced assignment of the 16 partitions, and sessions run on the node that
// holds their partition: all three nodes run some, each session is claimed
// once, and each input ends with one finished turn.
func TestSessionsSpread(t *testing.T) {
	c := newCluster(t, tahtest.Options{Pace: 2 * time.Millisecond})
	cl := newClient(t, c)

	recs := c.WaitBalanced(time.Minute, c.IDs()...)
	t.Logf("tah_nodes: %s", tahtest.DescribeNodes(recs))
	partOwner := map[int]string{}
	for _, r := range recs {
		for _, p := range r.Partitions {
			partOwner[p] = r.Node
		}
	}

	const sessions = 24
	sids := make([]string, sessions)
	ids := make([]string, sessions)
	waits := make([]<-chan wire.Outcome, sessions)
	for i := range sessions {
		sids[i] = cl.create()
	}
	for i, sid := range sids {
		ids[i] = fmt.Sprintf("in_spread_%02d", i)
		var err error
		if waits[i], err = cl.send(sid, ids[i], fmt.Sprintf("spread %d: what is in this project?", i)); err != nil {
			t.Fatalf("send to %s: %v", sid, err)
		}
	}

	// Every outcome arrives (no node dies here), and says completed.
	deadline := time.After(90 * time.Second)
	for i, ch := range waits {
		select {
		case o := <-ch:
			if !completed(o) {
				t.Errorf("input %s of %s: outcome %+v, want completed", ids[i], sids[i], o)
			}
		case <-deadline:
			t.Fatalf("input %s of %s: no outcome within 90s", ids[i], sids[i])
		}
	}

	// The logs: one finished turn per input, claimed once, by the node that
	// holds the session's partition; the claims cover the three nodes.
	claimedBy := map[string]int{}
	for i, sid := range sids {
		rep := c.Audit(sid)
		probs := rep.CheckInputs(ids[i])
		bad := func(format string, args ...any) {
			probs = append(probs, projection.Problem{Session: sid, What: fmt.Sprintf(format, args...)})
		}
		if len(rep.Claims) != 1 {
			bad("claimed %d times on a settled cluster: %v", len(rep.Claims), rep.Claims)
		}
		for _, cm := range rep.Claims {
			claimedBy[cm.Node]++
		}
		p := wire.Partition(sid, c.Bus().Config().Partitions)
		if own := rep.Owner(); own != partOwner[p] {
			bad("partition %d is owned by %q, but tah_nodes gives partition %d to %s", p, own, p, partOwner[p])
		}
		if len(probs) > 0 {
			t.Errorf("session %s:\n%s\n%s", sid, probs, rep.Dump())
		}
	}
	t.Logf("sessions claimed per node: %v", claimedBy)
	for _, id := range c.IDs() {
		if claimedBy[id] == 0 {
			t.Errorf("node %s claimed none of the %d sessions (claims per node: %v)", id, sessions, claimedBy)
		}
	}
	var others []string
	for n := range claimedBy {
		if !slices.Contains(c.IDs(), n) {
			others = append(others, n)
		}
	}
	if len(others) > 0 {
		t.Errorf("sessions claimed by nodes that are not in the cluster: %v", others)
	}

	// Still balanced at the end, and each outcome was published once.
	if recs, err := c.BalancedWithin(30*time.Second, c.IDs()...); err != nil {
		t.Errorf("tah_nodes at the end: %v", err)
	} else {
		t.Logf("tah_nodes at the end: %s", tahtest.DescribeNodes(recs))
	}
	for i, id := range ids {
		if os := cl.outcomesOf(id, c.ID(0)); len(os) != 1 {
			t.Errorf("input %s of %s: %d outcomes seen on %s: %+v", id, sids[i], len(os), c.ID(0), os)
		}
	}
}
