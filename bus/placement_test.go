package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/wire"
)

// embeddedCluster is Buses each embedding a server of one cluster, as TAH
// nodes run them.
type embeddedCluster struct {
	t        *testing.T
	replicas int
	trust    string // the data directory whose trust every server copies
	ports    []int  // route ports, one per server that may run
	buses    []*Bus
	logs     logRecorder // what the servers' Buses logged
}

// startEmbedded starts n of at most most servers (the first n route to each
// other; a server added later routes to them) with Buses of replicas.
func startEmbedded(t *testing.T, n, most, replicas int) *embeddedCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("embedded servers of a cluster: not in -short")
	}
	c := &embeddedCluster{t: t, replicas: replicas, trust: t.TempDir()}
	if _, err := auth.Ensure(c.trust); err != nil {
		t.Fatal(err)
	}
	for range most {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.ports = append(c.ports, l.Addr().(*net.TCPAddr).Port)
		l.Close()
	}
	buses := make([]*Bus, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		cfg := c.config(i, n)
		wg.Add(1)
		go func() { // they need each other to become ready
			defer wg.Done()
			buses[i], errs[i] = Open(ctxT(t), cfg)
		}()
	}
	wg.Wait()
	for i, b := range buses {
		if b != nil {
			c.closeAtEnd(b)
		}
		if errs[i] != nil {
			t.Fatalf("server %d: %v", i, errs[i])
		}
	}
	c.buses = buses
	return c
}

// config is server i's, routing to the first n servers.
func (c *embeddedCluster) config(i, n int) Config {
	cfg := testConfig(c.t)
	if err := auth.CopyTrust(c.trust, cfg.DataDir); err != nil {
		c.t.Fatal(err)
	}
	var routes []string
	for k := range n {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", c.ports[k]))
	}
	cfg.ServerName = fmt.Sprintf("node%d", i)
	cfg.Replicas = c.replicas
	cfg.Partitions = 2
	cfg.Cluster = ClusterConfig{Name: "tah", Port: c.ports[i], Routes: routes}
	cfg.ReadyTimeout = formingTimeout
	var h slog.Handler = &c.logs
	if os.Getenv("TAH_DEBUG") != "" {
		h = slog.NewMultiHandler(h, slog.NewTextHandler(os.Stderr, nil))
	}
	cfg.Logger = slog.New(h).With("server", i)
	return cfg
}

func (c *embeddedCluster) closeAtEnd(b *Bus) {
	c.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
}

// add starts one more server, routing to the running ones.
func (c *embeddedCluster) add() *Bus {
	c.t.Helper()
	b := open(c.t, c.config(len(c.buses), len(c.buses)))
	c.buses = append(c.buses, b)
	return b
}

// servers are the names of the running servers.
func (c *embeddedCluster) servers() []string {
	var out []string
	for i := range c.buses {
		out = append(out, fmt.Sprintf("node%d", i))
	}
	return out
}

// where returns, for each stream whose placement matters, the server that
// holds it (R1) or leads it (R3); ok is false while one moves or elects.
func (c *embeddedCluster) where() (map[string]string, bool) {
	b := c.buses[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := map[string]string{}
	for _, name := range b.placedStreams() {
		s, err := b.js.Stream(ctx, name)
		if err != nil {
			return nil, false
		}
		ci := s.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" || ci.Desired != nil || (c.replicas == 1 && len(ci.Replicas) > 0) {
			return nil, false
		}
		out[name] = ci.Leader
	}
	return out, true
}

// spreadOver waits until the placed streams (R1) or their leaders (R3) are
// spread over the running servers, no server with more than one over
// another, and returns where each is. It asks every Bus to look (as the
// membership code does when nodes change); the Buses also look by
// themselves.
func (c *embeddedCluster) spreadOver() map[string]string {
	c.t.Helper()
	servers := c.servers()
	var at map[string]string
	bustest.Eventually(c.t, 2*time.Minute, "streams spread over "+strings.Join(servers, ", "), func() bool {
		for _, b := range c.buses {
			b.SpreadStreams()
		}
		var ok bool
		if at, ok = c.where(); !ok {
			return false
		}
		counts := map[string]int{}
		for _, s := range servers {
			counts[s] = 0
		}
		for _, s := range at {
			counts[s]++
		}
		lo, hi := len(at), 0
		for _, n := range counts {
			lo, hi = min(lo, n), max(hi, n)
		}
		return len(counts) == len(servers) && hi-lo <= 1
	})
	return at
}

// countShards counts the log's shards on (or led by) each server.
func countShards(at map[string]string) map[string]int {
	out := map[string]int{}
	for name, s := range at {
		if name != wire.InputStream {
			out[s]++
		}
	}
	return out
}

// At R1 an embedded cluster's log shards and TAH_IN end spread over its
// servers (nats-server had put them all on one), and again when a server
// joins; the streams JetStream moves keep their data: every session's log
// replays whole and takes appends after the move, and TAH_IN keeps its
// partitions' consumers.
func TestStreamsSpreadAtR1(t *testing.T) {
	t.Parallel()
	c := startEmbedded(t, 3, 4, 1)
	at := c.spreadOver()
	shards := len(c.buses[0].shards)
	for s, n := range countShards(at) {
		if n > (shards+2)/3 {
			t.Fatalf("server %s holds %d of the %d shards: %v", s, n, shards, at)
		}
	}
	t.Logf("3 servers: %v", at)

	// A session in every shard, written before the next moves.
	b := c.buses[0]
	type written struct {
		w    *SessionWriter
		seqs []uint64
	}
	sessions := map[string]*written{}
	for k := range shards {
		sid := sidsInShard(b, k, 1, fmt.Sprintf("s_move%d_", k))[0]
		w, _ := b.Writer(sid, 1, 0)
		sessions[sid] = &written{w: w, seqs: mustAppend(t, w, turn(sid, 0), turn(sid, 1), turn(sid, 2))}
	}

	// A node pulling the inputs, as before a move of TAH_IN.
	ib := &inbox{ack: true}
	ic, err := c.buses[1].ConsumeInputs(ctxT(t), ib.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Stop()
	if _, err := b.PublishInput(ctxT(t), "s_in", wire.Input{ID: "in_1", Command: wire.CommandRun, Text: "before"}); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, "the input delivered", func() bool { return ib.len() == 1 })

	c.add()
	after := c.spreadOver()
	movedTo := 0
	for name, s := range after {
		if s == "node3" {
			movedTo++
			if at[name] == s {
				t.Fatalf("%s was on node3 before it joined", name)
			}
		}
	}
	if movedTo == 0 {
		t.Fatalf("no stream moved to the server that joined: %v", after)
	}
	t.Logf("4 servers: %v", after)

	for sid, s := range sessions {
		evs, _ := mustReplay(t, b, sid, 0)
		if len(evs) != 3 || evs[0].Seq != s.seqs[0] || evs[2].Seq != s.seqs[2] || !slices.Equal(texts(t, evs), []string{sid + " #0", sid + " #1", sid + " #2"}) {
			t.Fatalf("%s (shard on %s) after the moves: %d events", sid, after[wire.EventShardStream(b.ShardOf(sid))], len(evs))
		}
		mustAppend(t, s.w, turn(sid, 3))
		if evs, _ := mustReplay(t, b, sid, 0); len(evs) != 4 {
			t.Fatalf("%s: %d events after an append past the move, want 4", sid, len(evs))
		}
	}

	// TAH_IN moved (by the request spread makes) keeps its partitions'
	// consumers, and the inputs reach the node that pulls them.
	from := after[wire.InputStream]
	to := "node0"
	if from == to {
		to = "node3"
	}
	in, err := b.js.Stream(ctxT(t), wire.InputStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.moveStream(ctxT(t), in.CachedInfo().Config, to); err != nil {
		t.Fatalf("move TAH_IN from %s to %s: %v", from, to, err)
	}
	bustest.Eventually(t, time.Minute, "TAH_IN moved to "+to, func() bool {
		at, ok := c.where()
		return ok && at[wire.InputStream] == to
	})
	var names []string
	for name := range b.in.ConsumerNames(ctxT(t)).Name() {
		names = append(names, name)
	}
	for p := range b.cfg.Partitions {
		if !slices.Contains(names, wire.PartitionConsumer(p)) {
			t.Fatalf("TAH_IN (moved to %s) lost the consumer of partition %d: %v", to, p, names)
		}
	}
	if _, err := b.PublishInput(ctxT(t), "s_in", wire.Input{ID: "in_2", Command: wire.CommandRun, Text: "after"}); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, time.Minute, "the input after the move delivered", func() bool { return ib.len() == 2 })
	if got := ib.get(); got[1].ID != "in_2" {
		t.Fatalf("delivered after the move: %s", got[1].ID)
	}
}

// At R3 every server holds every stream; their leaders, which take the
// writes, end spread over the servers.
func TestStreamLeadersSpreadAtR3(t *testing.T) {
	t.Parallel()
	c := startEmbedded(t, 3, 3, 3)
	at := c.spreadOver()
	shards := len(c.buses[0].shards)
	for s, n := range countShards(at) {
		if n > (shards+2)/3 {
			t.Fatalf("server %s leads %d of the %d shards: %v", s, n, shards, at)
		}
	}
	t.Logf("leaders: %v", at)
}

// A stream with a home goes there (R1) or has its leader anywhere else (R3),
// the others spread around the homed ones, and the streams follow when the
// homes change: what a node's membership asks so that its sessions append
// to their own server, and at R3 survive its death (node's streamHomes).
func TestStreamsGoHome(t *testing.T) {
	defer func(was time.Duration) { placeRecheck = was }(placeRecheck) // after the subtests' Buses closed
	placeRecheck = 3 * time.Second
	for _, replicas := range []int{1, 3} {
		t.Run(fmt.Sprintf("R%d", replicas), func(t *testing.T) {
			c := startEmbedded(t, 3, 3, replicas)
			shards := len(c.buses[0].shards)
			var mu sync.Mutex
			homes := map[string]string{}
			setHomes := func(home func(k int) string) {
				mu.Lock()
				defer mu.Unlock()
				clear(homes)
				for k := range shards {
					homes[wire.EventShardStream(k)] = home(k)
				}
			}
			for _, b := range c.buses {
				b.SetStreamHomes(func() map[string]string {
					mu.Lock()
					defer mu.Unlock()
					return maps.Clone(homes)
				})
			}
			// What the last look saw, for a round that does not end.
			var seen string
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("the last look: %s", seen)
				}
			})
			for round, home := range []func(k int) string{
				func(k int) string { return fmt.Sprintf("node%d", k%2) },   // none on node2
				func(k int) string { return fmt.Sprintf("node%d", 2-k%2) }, // none on node0
			} {
				setHomes(home)
				bustest.Eventually(t, 2*time.Minute, fmt.Sprintf("round %d: the shards at home", round), func() bool {
					for _, b := range c.buses {
						b.SpreadStreams()
					}
					at, ok := c.where()
					if !ok {
						return false
					}
					mu.Lock()
					seen = fmt.Sprintf("streams at (R1) or led from (R3) %v, shard homes %v", at, homes)
					mu.Unlock()
					for k := range shards {
						// At R1 a shard is on its home; at R3 it is led
						// from anywhere else.
						if (at[wire.EventShardStream(k)] == home(k)) != (replicas == 1) {
							return false
						}
					}
					// TAH_IN, without a home, goes where no shard is (R1).
					return replicas > 1 || at[wire.InputStream] == fmt.Sprintf("node%d", 2-2*round)
				})
			}
			if replicas == 1 {
				return
			}
			// A leader back on its home by an election the placer did not
			// ask for (here a stepdown by hand) leaves it again, though
			// neither servers nor homes changed: at the placer's next look
			// if it had not yet taken them as balanced, at its recheck
			// (placeRecheck) if it had.
			shard := wire.EventShardStream(1)
			mu.Lock()
			home := homes[shard]
			mu.Unlock()
			// The placer took them as balanced (it looks again only after
			// placeRecheck): its last word is "placed", not "moved".
			bustest.Eventually(t, time.Minute, "the placer done", func() bool {
				said := c.logs.matching("streams placed", " moved")
				return len(said) > 0 && strings.Contains(said[len(said)-1], "streams placed")
			})
			elected := make(chan string, 16)
			sub, err := c.buses[0].nc.Subscribe("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED."+shard, func(m *nats.Msg) {
				var adv struct {
					Leader string `json:"leader"`
				}
				if json.Unmarshal(m.Data, &adv) == nil {
					elected <- adv.Leader
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			if err := c.buses[0].nc.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := c.buses[0].stepDown(ctxT(t), shard, home); err != nil {
				t.Fatalf("step %s's leader down to its home %s: %v", shard, home, err)
			}
			for leader := ""; leader != home; {
				select {
				case leader = <-elected:
				case <-time.After(time.Minute):
					t.Fatalf("%s: no leader elected on its home %s", shard, home)
				}
			}
			bustest.Eventually(t, 2*time.Minute, shard+" led from elsewhere again", func() bool {
				at, ok := c.where()
				return ok && at[shard] != "" && at[shard] != home
			})
		})
	}
}

// plan moves as few streams as it takes, never to a server that is not among
// a stream's peers, and leaves streams of servers that are not running.
func TestPlan(t *testing.T) {
	t.Parallel()
	spots := func(at ...string) []spot {
		var out []spot
		for i, s := range at {
			out = append(out, spot{stream: fmt.Sprint("s", i), at: s})
		}
		return out
	}
	count := func(servers []string, sp []spot, moves []move) map[string]int {
		at := map[string]string{}
		for _, s := range sp {
			at[s.stream] = s.at
		}
		for _, m := range moves {
			at[m.stream] = m.to
		}
		out := map[string]int{}
		for _, s := range at {
			if slices.Contains(servers, s) {
				out[s]++
			}
		}
		return out
	}
	abc := []string{"a", "b", "c"}
	all := spots("a", "a", "a", "a", "a", "a", "a", "a", "a")
	moves := plan(abc, all)
	if got := count(abc, all, moves); len(moves) != 6 || got["a"] != 3 || got["b"] != 3 || got["c"] != 3 {
		t.Errorf("9 on a: %d moves, %v", len(moves), got)
	}
	if moves := plan(abc, spots("a", "b", "c", "a", "b", "c", "a", "b", "c")); len(moves) != 0 {
		t.Errorf("balanced: moves %v", moves)
	}
	// d is offline: its streams stay and count for none.
	if moves := plan(abc, spots("d", "d", "a", "b", "c")); len(moves) != 0 {
		t.Errorf("with an offline server: moves %v", moves)
	}
	// A joining server takes its share, and no more moves than that.
	abcd := append(slices.Clone(abc), "d")
	three := spots("a", "b", "c", "a", "b", "c", "a", "b", "c")
	if moves := plan(abcd, three); len(moves) != 2 {
		t.Errorf("a server joins: %v", moves)
	}
	// R3: a leader goes only to a peer of its stream.
	r3 := []spot{{stream: "x", at: "a", peers: []string{"a", "b"}}, {stream: "y", at: "a", peers: []string{"a", "b"}}, {stream: "z", at: "a", peers: []string{"a", "b"}}}
	for _, m := range plan(abc, r3) {
		if m.to != "b" {
			t.Errorf("leader of %s to %s, not a peer", m.stream, m.to)
		}
	}
	// Homes: the streams with one go there whatever the balance (s0..s2 to
	// a, s3 stays on b), the one without spreads around them, and a home
	// that is offline or not among a stream's peers is no home.
	sp := spots("b", "c", "a", "b", "c")
	homes := map[string]string{"s0": "a", "s1": "a", "s2": "a", "s3": "b"}
	moves = plan(abc, homed(abc, sp, homes, nil))
	if got := count(abc, sp, moves); len(moves) != 2 || got["a"] != 3 || got["b"] != 1 || got["c"] != 1 {
		t.Errorf("homes %v: %d moves %v, %v", homes, len(moves), moves, got)
	}
	sp = spots("a", "a", "a", "a")
	moves = plan(abc, homed(abc, sp, map[string]string{"s0": "a", "s1": "a", "s2": "a"}, nil))
	if len(moves) != 1 || moves[0].stream != "s3" {
		t.Errorf("three homed on a, the fourth spreads: %v", moves)
	}
	r1 := map[string]jetstream.StreamConfig{}
	sp = spots("b", "c", "a", "b", "c")
	if got := count(abc, sp, plan(abc, homed(abc, sp, homes, r1))); got["a"] != 3 {
		t.Errorf("homes at R1: %v", got)
	}
	// R3: a leader keeps away from its home (x and y are led from a, their
	// home), and goes to the peer holding the fewest.
	rep3 := map[string]jetstream.StreamConfig{"x": {Replicas: 3}, "y": {Replicas: 3}, "z": {Replicas: 3}}
	lead := []spot{{stream: "x", at: "a", peers: abc}, {stream: "y", at: "a", peers: abc}, {stream: "z", at: "b", peers: abc}}
	moves = plan(abc, homed(abc, lead, map[string]string{"x": "a", "y": "a", "z": "c", "w": "d"}, rep3))
	at := map[string]string{"x": "a", "y": "a", "z": "b"}
	for _, m := range moves {
		at[m.stream] = m.to
	}
	if at["x"] == "a" || at["y"] == "a" || at["z"] == "c" || at["x"] == at["y"] {
		t.Errorf("leaders away from their homes: %v (moves %v)", at, moves)
	}
}
