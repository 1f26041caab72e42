package node_test

import (
	"testing"
	"time"
)

// TestClusterWholeStop stops every node of a cluster, one after the other,
// as an operator taking the whole cluster down does: each stop succeeds.
func TestClusterWholeStop(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.balanced("n0", "n1", "n2")
	for i := range 3 {
		begin := time.Now()
		c.Stop(i)
		t.Logf("n%d stopped in %v", i, time.Since(begin))
	}
}
