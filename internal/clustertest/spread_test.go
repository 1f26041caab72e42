package clustertest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/wire"
)

// TestSessionsSpread: on a settled cluster of three nodes, tah_nodes holds a
// balanced assignment of the 16 partitions, and sessions run on the node that
// holds their partition: all three nodes run some, each session is claimed
// once, and each input ends with one finished turn.
func TestSessionsSpread(t *testing.T) {
	c := newCluster(t, clusterOptions{pace: 2 * time.Millisecond})
	cl := newClient(t, c)

	recs, err := cl.waitBalanced(c.ids(), 60*time.Second)
	if err != nil {
		t.Fatalf("tah_nodes never showed a balanced assignment of the three nodes: %v", err)
	}
	t.Logf("tah_nodes: %s", describeNodes(recs))
	partOwner := map[int]string{}
	for _, r := range recs {
		for _, p := range r.Partitions {
			partOwner[p] = r.Node
		}
	}

	const sessions = 24
	sids := make([]string, sessions)
	ids := make([]string, sessions)
	waits := make([]<-chan outcome, sessions)
	for i := range sessions {
		sids[i] = cl.create()
	}
	for i, sid := range sids {
		ids[i] = fmt.Sprintf("in_spread_%02d", i)
		if waits[i], err = cl.send(sid, ids[i], fmt.Sprintf("spread %d: what is in this project?", i)); err != nil {
			t.Fatalf("send to %s: %v", sid, err)
		}
	}

	// Every outcome arrives (no node dies here), and says completed.
	deadline := time.After(90 * time.Second)
	for i, ch := range waits {
		select {
		case o := <-ch:
			if o.Status != "completed" || o.FailureCode != "" {
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
		evs, err := cl.replay(sid)
		if err != nil {
			t.Fatalf("replay %s: %v", sid, err)
		}
		l := analyze(sid, evs)
		probs := l.checkInputs([]string{ids[i]})
		if len(l.claims) != 1 {
			probs = append(probs, fmt.Sprintf("%s: claimed %d times on a settled cluster: %v", sid, len(l.claims), l.claims))
		}
		for _, cm := range l.claims {
			claimedBy[cm.node]++
		}
		p := wire.Partition(sid, cl.b.Config().Partitions)
		if own := l.owner(); own != partOwner[p] {
			probs = append(probs, fmt.Sprintf("%s (partition %d) is owned by %q, but tah_nodes gives partition %d to %s", sid, p, own, p, partOwner[p]))
		}
		if len(probs) > 0 {
			t.Errorf("session %s:\n  %s\n%s", sid, strings.Join(probs, "\n  "), l.dump())
		}
	}
	t.Logf("sessions claimed per node: %v", claimedBy)
	for _, id := range c.ids() {
		if claimedBy[id] == 0 {
			t.Errorf("node %s claimed none of the %d sessions (claims per node: %v)", id, sessions, claimedBy)
		}
	}
	var others []string
	for n := range claimedBy {
		if !slices.Contains(c.ids(), n) {
			others = append(others, n)
		}
	}
	if len(others) > 0 {
		t.Errorf("sessions claimed by nodes that are not in the cluster: %v", others)
	}

	// Still balanced at the end, and each outcome was published once.
	if recs, err := cl.waitBalanced(c.ids(), 30*time.Second); err != nil {
		t.Errorf("tah_nodes at the end: %v", err)
	} else {
		t.Logf("tah_nodes at the end: %s", describeNodes(recs))
	}
	for i, id := range ids {
		if os := cl.outcomesOf(id, "n1"); len(os) != 1 {
			t.Errorf("input %s of %s: %d outcomes seen on n1: %+v", id, sids[i], len(os), os)
		}
	}
}
