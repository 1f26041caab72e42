package node

import (
	"cmp"
	"hash/fnv"
	"slices"
)

// Peer is a live node as the share-out of the partitions sees it.
type Peer struct {
	ID string
	// Worker says the node holds no read model (Options.Worker).
	Worker bool
	// Legacy says the node is of a build that shares a partition at a time
	// and equally (its presence has no wire.ShareOutByShard): while one is
	// live, every node shares that way, so that all compute one share-out.
	Legacy bool
}

// Shares of a cluster of read-model nodes and workers: a node that holds a
// read model folds every step of the cluster into it (about a third of what
// running a step costs, in row 9 of make bench), so where workers are there
// to run the sessions it takes a share of one for their three.
const (
	readModelShare = 1
	workerShare    = 3
)

// Assign shares partitions 0..partitions-1 out over peers: every node
// computes the same answer from the same set of live nodes, so that no
// coordinator is needed.
//
// The partitions go in units: when partitions is a multiple of shards and
// there are two shards a node or more (byShard), the partitions of one
// shard of the log together (a session's partition is
// fnv(sid) mod partitions, its shard fnv(sid) mod shards, so partition p's
// sessions all append to shard p mod shards), so that a node's sessions
// append to its own shards only, whose streams an embedded cluster places on
// the node's server (streamHomes): a step's appends cross no route. Otherwise
// each partition is a unit.
//
// The shares are balanced by weight (equal when all nodes are alike; a node
// with a read model takes readModelShare where a worker takes workerShare),
// the remainder going to the largest fractions, ties to the first in id
// order; each unit goes to the node that ranks it highest by rendezvous
// hashing among the nodes with room left: a node joining or leaving moves
// few units, so few sessions change owner. The order of peers does not
// matter; a duplicate id counts once. While a Legacy node is live, every
// partition is a unit and all nodes take equal shares, as that build does.
//

func Assign(peers []Peer, partitions, shards int) map[string][]int {
	ps := slices.Clone(peers)
	slices.SortFunc(ps, func(a, b Peer) int { return cmp.Compare(a.ID, b.ID) })
	ps = slices.CompactFunc(ps, func(a, b Peer) bool { return a.ID == b.ID })
	out := make(map[string][]int, len(ps))
	if len(ps) == 0 || partitions <= 0 {
		return out
	}
	legacy := slices.ContainsFunc(ps, func(p Peer) bool { return p.Legacy })
	if legacy {
		for i := range ps {
			ps[i].Worker = false
		}
	}
	units := partitions
	if byShard(partitions, shards, len(ps)) && !legacy {
		units = shards
	}
	room := rooms(ps, units)
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	for u := range units {
		order := slices.Clone(ids)
		slices.SortFunc(order, func(a, b string) int { return cmp.Compare(weight(b, u), weight(a, u)) })
		for _, id := range order {
			if room[id] > 0 {
				room[id]--
				for p := u; p < partitions; p += units {
					out[id] = append(out[id], p)
				}
				break
			}
		}
	}
	for id := range out {
		slices.Sort(out[id])
	}
	return out
}

// aligned says whether the partitions can go in units of a shard's.
func aligned(partitions, shards int) bool {
	return shards > 0 && partitions >= shards && partitions%shards == 0
}

// byShard says whether the partitions go in units of a shard's among nodes
// nodes: when they can, and there are two shards a node or more (with
// fewer, a unit is too large a share to balance: 8 shards over 5 nodes
// would give some twice what others get, so each partition is a unit and a
// shard's stream goes with its first partition).
func byShard(partitions, shards, nodes int) bool {
	return aligned(partitions, shards) && shards >= 2*nodes
}

// rooms is how many of units each of ps (sorted by id) takes.
func rooms(ps []Peer, units int) map[string]int {
	mixed := slices.ContainsFunc(ps, func(p Peer) bool { return p.Worker }) &&
		slices.ContainsFunc(ps, func(p Peer) bool { return !p.Worker })
	share := func(p Peer) int {
		switch {
		case !mixed:
			return 1
		case p.Worker:
			return workerShare
		default:
			return readModelShare
		}
	}
	total := 0
	for _, p := range ps {
		total += share(p)
	}
	room := make(map[string]int, len(ps))
	given := 0
	for _, p := range ps {
		room[p.ID] = units * share(p) / total
		given += room[p.ID]
	}
	// The rest, one each, to the largest remainders (stable: id order).
	byRest := slices.Clone(ps)
	slices.SortStableFunc(byRest, func(a, b Peer) int {
		return cmp.Compare(units*share(b)%total, units*share(a)%total)
	})
	for i := 0; given < units; i++ {
		room[byRest[i%len(byRest)].ID]++
		given++
	}
	return room
}

// ShardOwners are the nodes whose sessions append to each shard of the log
// under assign (Assign's answer): shard k -> the node of partition k, which
// holds all of the shard's partitions unless a Legacy node split them.
// Empty unless the partitions are a multiple of the shards.
func ShardOwners(assign map[string][]int, partitions, shards int) map[int]string {
	out := map[int]string{}
	if !aligned(partitions, shards) {
		return out
	}
	for id, ps := range assign {
		for _, p := range ps {
			if p < shards {
				out[p] = id
			}
		}
	}
	return out
}

// weight is the rendezvous hash of node id for unit u.
func weight(id string, u int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	_, _ = h.Write([]byte{0, byte(u), byte(u >> 8)})
	// FNV's low bits mix poorly for short inputs: finish with a multiply-xorshift.
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return x
}
