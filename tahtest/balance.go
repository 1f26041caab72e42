package tahtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// Balanced reports, as an error that says what is wrong, whether recs (the
// nodes' presence: tah_nodes, or what they publish) are exactly the nodes
// ids, none fenced, with disjoint shares of the partitions that cover
// 0..partitions-1, each as large as node.Assign makes it for these nodes
// (by their worker flags) and a log of shards shards.
func Balanced(recs []wire.NodeRecord, ids []string, partitions, shards int) error {
	if len(ids) == 0 {
		return errors.New("no nodes to balance over")
	}
	var got []string
	owner := map[int]string{}
	peers := make([]node.Peer, len(recs))
	for i, r := range recs {
		peers[i] = node.Peer{ID: r.Node, Worker: r.Worker, Legacy: r.ShareOut < wire.ShareOutByShard}
	}
	share := node.Assign(peers, partitions, shards)
	var errs []string
	for _, r := range recs {
		got = append(got, r.Node)
		if want := len(share[r.Node]); len(r.Partitions) != want {
			errs = append(errs, fmt.Sprintf("%s has %d partitions %v, want %d", r.Node, len(r.Partitions), r.Partitions, want))
		}
		if r.Fenced {
			errs = append(errs, r.Node+" is fenced")
		}
		for _, p := range r.Partitions {
			if p < 0 || p >= partitions {
				errs = append(errs, fmt.Sprintf("%s has partition %d, out of 0..%d", r.Node, p, partitions-1))
			}
			if o, ok := owner[p]; ok {
				errs = append(errs, fmt.Sprintf("partition %d is held by both %s and %s", p, o, r.Node))
			}
			owner[p] = r.Node
		}
	}
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(ids)); !slices.Equal(got, want) {
		errs = append(errs, fmt.Sprintf("nodes %v, want %v", got, want))
	}
	for p := range partitions {
		if _, ok := owner[p]; !ok {
			errs = append(errs, fmt.Sprintf("partition %d is held by no node", p))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// DescribeNodes is recs on one line, for logs and failure messages.
func DescribeNodes(recs []wire.NodeRecord) string {
	var parts []string
	for _, r := range recs {
		parts = append(parts, fmt.Sprintf("%s%v(active %d, fenced %v, heartbeat %s)", r.Node, r.Partitions, r.ActiveSessions, r.Fenced,
			r.Heartbeat.Format("15:04:05.000")))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// WaitBalanced waits until tah_nodes lists exactly the nodes ids with a
// Balanced share-out of the partitions, and returns the records.
func (c *Cluster) WaitBalanced(within time.Duration, ids ...string) []wire.NodeRecord {
	c.tb.Helper()
	recs, err := c.BalancedWithin(within, ids...)
	if err != nil {
		c.tb.Fatalf("tahtest: %v", err)
	}
	return recs
}

// BalancedWithin is WaitBalanced that returns what is wrong instead of
// failing the test.
func (c *Cluster) BalancedWithin(within time.Duration, ids ...string) ([]wire.NodeRecord, error) {
	b := c.Bus()
	var recs []wire.NodeRecord
	err := natstest.Poll(within, 250*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		if recs, err = b.ListNodes(ctx); err != nil {
			return err
		}
		if err := Balanced(recs, ids, b.Config().Partitions, b.Shards()); err != nil {
			return fmt.Errorf("%v: %s", err, DescribeNodes(recs))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("partitions not balanced over %v: %w", ids, err)
	}
	return recs, nil
}
