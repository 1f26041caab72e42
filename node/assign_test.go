package node

import (
	"fmt"
	"slices"
	"testing"
)

func TestAssignIsBalancedCompleteAndOrderFree(t *testing.T) {
	for _, parts := range []int{1, 3, 16, 17, 64} {
		for n := 1; n <= 7; n++ {
			var nodes []string
			for i := range n {
				nodes = append(nodes, fmt.Sprintf("node-%d", i))
			}
			a := Assign(nodes, parts)
			slices.Reverse(nodes)
			b := Assign(nodes, parts)
			seen := make([]int, parts)
			for _, id := range nodes {
				if !slices.Equal(a[id], b[id]) {
					t.Fatalf("%d nodes, %d partitions: order changes the answer: %v vs %v", n, parts, a, b)
				}
				if got, lo := len(a[id]), parts/n; got < lo || got > lo+1 {
					t.Fatalf("%d nodes, %d partitions: %s has %d", n, parts, id, got)
				}
				for _, p := range a[id] {
					seen[p]++
				}
			}
			for p, c := range seen {
				if c != 1 {
					t.Fatalf("%d nodes, %d partitions: partition %d assigned %d times", n, parts, p, c)
				}
			}
		}
	}
	if len(Assign(nil, 16)) != 0 || len(Assign([]string{"a", "a"}, 4)["a"]) != 4 {
		t.Fatal("no nodes, or a duplicate id")
	}
}

// A node joining takes partitions from the others; the rest stay where they
// were (sessions keep their owner).
func TestAssignMovesFewOnJoin(t *testing.T) {
	const parts = 16
	nodes := []string{"a", "b", "c"}
	before := Assign(nodes, parts)
	after := Assign(append(nodes, "d"), parts)
	owner := func(m map[string][]int, p int) string {
		for id, ps := range m {
			if slices.Contains(ps, p) {
				return id
			}
		}
		return ""
	}
	moved := 0
	for p := range parts {
		if o := owner(after, p); o != owner(before, p) && o != "d" {
			moved++
		}
	}
	t.Logf("moved between old nodes: %d; to the new one: %d", moved, len(after["d"]))
	if moved > parts/4 {
		t.Fatalf("%d partitions moved between nodes that stayed", moved)
	}
}
