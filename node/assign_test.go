package node

import (
	"fmt"
	"slices"
	"testing"
)

func peersOf(ids ...string) []Peer {
	out := make([]Peer, len(ids))
	for i, id := range ids {
		out[i] = Peer{ID: id}
	}
	return out
}

// owner is the node that holds partition p in a.
func owner(a map[string][]int, p int) string {
	for id, ps := range a {
		if slices.Contains(ps, p) {
			return id
		}
	}
	return ""
}

func TestAssignIsBalancedCompleteAndOrderFree(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{0, 8} {
		for _, parts := range []int{1, 3, 16, 17, 64} {
			for n := 1; n <= 7; n++ {
				units, per := parts, 1
				if byShard(parts, shards, n) {
					units, per = shards, parts/shards
				}
				var ids []string
				for i := range n {
					ids = append(ids, fmt.Sprintf("node-%d", i))
				}
				a := Assign(peersOf(ids...), parts, shards)
				slices.Reverse(ids)
				b := Assign(peersOf(ids...), parts, shards)
				seen := make([]int, parts)
				for _, id := range ids {
					if !slices.Equal(a[id], b[id]) {
						t.Fatalf("%d nodes, %d partitions: order changes the answer: %v vs %v", n, parts, a, b)
					}
					if got, lo := len(a[id]), units/n*per; got < lo || got > lo+per {
						t.Fatalf("%d nodes, %d partitions, %d shards: %s has %d", n, parts, shards, id, got)
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
	}
	if len(Assign(nil, 16, 8)) != 0 || len(Assign(peersOf("a", "a"), 4, 0)["a"]) != 4 {
		t.Fatal("no nodes, or a duplicate id")
	}
}

// With partitions a multiple of the shards, the partitions of a shard go to
// one node, which ShardOwners names for the shard.
func TestAssignKeepsAShardsPartitionsTogether(t *testing.T) {
	t.Parallel()
	a := Assign(peersOf("a", "b", "c"), 16, 8)
	owners := ShardOwners(a, 16, 8)
	if len(owners) != 8 {
		t.Fatalf("shard owners %v", owners)
	}
	for p := range 16 {
		if o := owner(a, p); o != owners[p%8] || o != owner(a, (p+8)%16) {
			t.Fatalf("partition %d on %s, its shard's owner %s: %v", p, o, owners[p%8], a)
		}
	}
	if got := ShardOwners(Assign(peersOf("a", "b"), 12, 8), 12, 8); len(got) != 0 {
		t.Fatalf("12 partitions over 8 shards: owners %v", got)
	}
}

// Workers take workerShare for a read-model node's readModelShare; nodes
// all alike share equally.
func TestAssignGivesWorkersTheLargerShare(t *testing.T) {
	t.Parallel()
	peers := []Peer{{ID: "rm"}, {ID: "w1", Worker: true}, {ID: "w2", Worker: true}}
	a := Assign(peers, 64, 8)
	if five := Assign(append(peers, Peer{ID: "w3", Worker: true}, Peer{ID: "w4", Worker: true}), 16, 8); len(five["rm"]) != 1 {
		t.Fatal("5 nodes over 8 shards: a partition at a time")
	}
	if len(a["rm"]) != 8 || len(a["w1"])+len(a["w2"]) != 56 || len(a["w1"]) < 24 || len(a["w2"]) < 24 {
		t.Fatalf("1 read model, 2 workers, 64 partitions in 8 units: %d %d %d", len(a["rm"]), len(a["w1"]), len(a["w2"]))
	}
	a = Assign(peers, 14, 0)
	if len(a["rm"]) != 2 || len(a["w1"]) != 6 || len(a["w2"]) != 6 {
		t.Fatalf("1 read model, 2 workers, 14 partitions: %v", a)
	}
	all := []Peer{{ID: "w1", Worker: true}, {ID: "w2", Worker: true}}
	if a := Assign(all, 16, 8); len(a["w1"]) != 8 || len(a["w2"]) != 8 {
		t.Fatalf("two workers: %v", a)
	}
}

// While a node of an older build (a partition at a time, equal shares) is
// live, every node shares as it does: one share-out for all.
func TestAssignSharesAsTheOldestBuild(t *testing.T) {
	t.Parallel()
	peers := []Peer{{ID: "rm"}, {ID: "w1", Worker: true}, {ID: "old", Legacy: true}}
	a := Assign(peers, 16, 8)
	for _, id := range []string{"rm", "w1", "old"} {
		if n := len(a[id]); n < 5 || n > 6 {
			t.Fatalf("%s has %d partitions: %v", id, n, a)
		}
	}
	split := 0
	for k := range 8 {
		if owner(a, k) != owner(a, k+8) {
			split++
		}
	}
	if split == 0 {
		t.Fatalf("the shards' partitions kept together with a legacy node: %v", a)
	}
	if owners := ShardOwners(a, 16, 8); len(owners) != 8 || owners[3] != owner(a, 3) {
		t.Fatalf("shard owners %v of %v", owners, a)
	}
}

// A node joining takes units from the others; the rest stay where they
// were (sessions keep their owner).
func TestAssignMovesFewOnJoin(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{0, 8} {
		const parts = 16
		nodes := peersOf("a", "b", "c")
		before := Assign(nodes, parts, shards)
		after := Assign(append(nodes, Peer{ID: "d"}), parts, shards)
		moved := 0
		for p := range parts {
			if o := owner(after, p); o != owner(before, p) && o != "d" {
				moved++
			}
		}
		t.Logf("%d shards: moved between old nodes: %d; to the new one: %d", shards, moved, len(after["d"]))
		if moved > parts/4 {
			t.Fatalf("%d shards: %d partitions moved between nodes that stayed", shards, moved)
		}
	}
}
