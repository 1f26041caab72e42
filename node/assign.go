package node

import (
	"cmp"
	"hash/fnv"
	"slices"
)

// Assign shares partitions 0..partitions-1 out over nodes: every node computes
// the same answer from the same set of live nodes, so that no coordinator is
// needed. The shares are balanced (each node gets partitions/len(nodes), the
// first partitions%len(nodes) nodes in id order one more), and each partition
// goes to the node that ranks it highest by rendezvous hashing among the nodes
// with room left: a node joining or leaving moves few partitions, so few
// sessions change owner. The order of nodes does not matter.
func Assign(nodes []string, partitions int) map[string][]int {
	ids := slices.Clone(nodes)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make(map[string][]int, len(ids))
	if len(ids) == 0 || partitions <= 0 {
		return out
	}
	room := make(map[string]int, len(ids))
	for i, id := range ids {
		room[id] = partitions / len(ids)
		if i < partitions%len(ids) {
			room[id]++
		}
	}
	for p := range partitions {
		order := slices.Clone(ids)
		slices.SortFunc(order, func(a, b string) int { return cmp.Compare(weight(b, p), weight(a, p)) })
		for _, id := range order {
			if room[id] > 0 {
				room[id]--
				out[id] = append(out[id], p) // in increasing order
				break
			}
		}
	}
	return out
}

// weight is the rendezvous hash of node id for partition p.
func weight(id string, p int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	_, _ = h.Write([]byte{0, byte(p), byte(p >> 8)})
	// FNV's low bits mix poorly for short inputs: finish with a multiply-xorshift.
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return x
}
