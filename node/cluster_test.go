package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/wire"
)

// heldModel answers "done: <prompt>" after hold, or when its context ends
// (counting those cancellations): the LLM call of a turn in flight.
type heldModel struct {
	hold      atomic.Int64 // nanoseconds
	calls     atomic.Int64
	cancelled atomic.Int64
}

func (m *heldModel) Name() string { return "held" }

func (m *heldModel) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	m.calls.Add(1)
	select {
	case <-time.After(time.Duration(m.hold.Load())):
	case <-ctx.Done():
		m.cancelled.Add(1)
		return llm.Response{}, ctx.Err()
	}
	last := req.Messages[len(req.Messages)-1]
	return llm.Response{Content: "done: " + last.Content, FinishReason: llm.FinishStop}, nil
}

// testCluster is nodes, each with an embedded server, joined by routes (R3).
type testCluster struct {
	t      *testing.T
	routes []string
	ports  []int
	dirs   []string
	nodes  []*Node
	models []*heldModel
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// newTestCluster prepares size nodes (the route ports of all of them are known
// from the start, as JetStream clustering needs) and starts the first start
// (a JetStream cluster forms only with all its configured servers up).
func newTestCluster(t *testing.T, size, start int) *testCluster {
	if testing.Short() {
		t.Skip("a cluster of three nodes: not in -short")
	}
	c := &testCluster{t: t}
	for range size {
		p := freePort(t)
		c.ports = append(c.ports, p)
		c.routes = append(c.routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
		c.dirs = append(c.dirs, t.TempDir())
		c.nodes = append(c.nodes, nil)
		c.models = append(c.models, &heldModel{})
	}
	var wg sync.WaitGroup
	errs := make([]error, start)
	for i := range start {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.start(i) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		// Together, so that none waits for a cluster that lost its quorum.
		var wg sync.WaitGroup
		for i := range c.nodes {
			wg.Add(1)
			go func() { defer wg.Done(); c.stop(i) }()
		}
		wg.Wait()
	})
	return c
}

func (c *testCluster) start(i int) error {
	cfg := bus.Default()
	cfg.DataDir = c.dirs[i]
	cfg.Port = -1
	cfg.ServerName = fmt.Sprintf("n%d", i)
	cfg.Cluster = bus.ClusterConfig{Name: "tahtest", Host: "127.0.0.1", Port: c.ports[i], Routes: c.routes}
	cfg.Replicas = 3
	cfg.SyncInterval = time.Minute // fsync is not what these tests are about
	cfg.NodeTTL, cfg.InputPinnedTTL, cfg.InputAckWait = 3*time.Second, 3*time.Second, 4*time.Second
	cfg.ReadyTimeout = 60 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n, err := Start(ctx, Options{Bus: cfg, Provider: c.models[i],
		Session: session.Config{Node: fmt.Sprintf("node%d", i), IdleTimeout: time.Minute},
		Logger:  testLogger(c.t, fmt.Sprintf("node%d", i))})
	if err != nil {
		return fmt.Errorf("node %d: %w", i, err)
	}
	c.nodes[i] = n
	return nil
}

func (c *testCluster) stop(i int) {
	if n := c.nodes[i]; n != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = n.Close(ctx)
		c.nodes[i] = nil
	}
}

// any returns a running node.
func (c *testCluster) any() *Node {
	for _, n := range c.nodes {
		if n != nil {
			return n
		}
	}
	c.t.Fatal("no node runs")
	return nil
}

// balanced waits until the live nodes are exactly want, each pulling its share
// (give or take one) and all partitions pulled by exactly one of them.
func (c *testCluster) balanced(want ...string) {
	c.t.Helper()
	var last []wire.NodeRecord
	bustest.Eventually(c.t, 60*time.Second, "partitions balanced over "+strings.Join(want, ","), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		recs, err := c.any().Bus.ListNodes(ctx)
		if err != nil {
			return false
		}
		last = recs
		var ids []string
		seen := map[int]int{}
		parts := c.any().Bus.Config().Partitions
		for _, r := range recs {
			ids = append(ids, r.Node)
			if n := len(r.Partitions); n < parts/len(want) || n > parts/len(want)+1 {
				return false
			}
			for _, p := range r.Partitions {
				seen[p]++
			}
		}
		if !slices.Equal(ids, want) || len(seen) != parts {
			return false
		}
		for _, k := range seen {
			if k != 1 {
				return false
			}
		}
		return true
	})
	for _, r := range last {
		c.t.Logf("%s pulls %v", r.Node, r.Partitions)
	}
}

// sessionsOn creates k sessions whose partitions node i pulls.
func (c *testCluster) sessionsOn(i, k int, prefix string) []string {
	c.t.Helper()
	n := c.nodes[i]
	mine := n.inputs.Partitions()
	var out []string
	for j := 0; len(out) < k; j++ {
		sid := fmt.Sprintf("%s_%d", prefix, j)
		if !slices.Contains(mine, wire.Partition(sid, n.Bus.Config().Partitions)) {
			continue
		}
		c.create(sid)
		out = append(out, sid)
	}
	return out
}

func (c *testCluster) create(sid string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := session.Create(ctx, c.any().Bus, sid, session.Config{}, nil); err != nil {
		c.t.Fatalf("create %s: %v", sid, err)
	}
}

func (c *testCluster) send(sid, inputID, text string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.any().Bus.PublishInput(ctx, sid, wire.Input{ID: inputID, Command: wire.CommandRun, Text: text}); err != nil {
		c.t.Fatalf("send to %s: %v", sid, err)
	}
}

func (c *testCluster) log(sid string) []event.Event {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evs, _, err := c.any().Bus.Replay(ctx, sid, 0)
	if err != nil {
		return nil
	}
	return evs
}

// finished waits until every input of inputs (session -> input ids) has had
// exactly one turn, ended by agent.finished, and checks that every session's
// log has non-decreasing epochs: no stale owner wrote after a newer claim.
func (c *testCluster) finished(inputs map[string][]string) {
	c.t.Helper()
	pending := ""
	bustest.Eventually(c.t, 90*time.Second, "every turn finished", func() bool {
		for sid, ids := range inputs {
			if n := count(c.log(sid), event.AgentFinished); n < len(ids) {
				pending = fmt.Sprintf("%s: %d of %d turns finished", sid, n, len(ids))
				return false
			}
		}
		return true
	})
	_ = pending
	for sid, ids := range inputs {
		evs := c.log(sid)
		started := map[string]int{}
		var epoch uint64
		for _, ev := range evs {
			if ev.Epoch < epoch {
				c.t.Errorf("%s: event %d (%s) of epoch %d after epoch %d: a stale owner wrote", sid, ev.Seq, ev.Type, ev.Epoch, epoch)
			}
			epoch = max(epoch, ev.Epoch)
			if ev.Type == event.TurnStarted {
				d, _ := event.DecodeAs[event.TurnStartedData](ev)
				started[d.InputID]++
			}
		}
		for _, id := range ids {
			if started[id] != 1 {
				c.t.Errorf("%s: input %s started %d turns, want 1", sid, id, started[id])
			}
		}
		if n := count(evs, event.AgentFinished); n != len(ids) {
			c.t.Errorf("%s: %d turns finished, want %d", sid, n, len(ids))
		}
	}
}

func count(evs []event.Event, typ event.Type) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// claimedBy returns the nodes that claimed sid, in order.
func claimedBy(evs []event.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type == event.SessionClaimed {
			d, _ := event.DecodeAs[event.SessionClaimedData](ev)
			out = append(out, d.Node)
		}
	}
	return out
}

// Three nodes share the partitions; one leaves and the other two share them;
// it joins again and gets its share back within seconds; sessions then run on
// all three.
func TestClusterSpreadsAndRebalancesOnJoin(t *testing.T) {
	c := newTestCluster(t, 3, 3)
	c.balanced("node0", "node1", "node2")
	c.stop(2)
	c.balanced("node0", "node1")
	if err := c.start(2); err != nil {
		t.Fatal(err)
	}
	c.balanced("node0", "node1", "node2")

	inputs := map[string][]string{}
	for i := range 24 {
		sid := fmt.Sprintf("s_spread_%d", i)
		c.create(sid)
		c.send(sid, "in_"+sid, "hello")
		inputs[sid] = []string{"in_" + sid}
	}
	c.finished(inputs)
	owners := map[string]int{}
	for sid := range inputs {
		by := claimedBy(c.log(sid))
		if len(by) != 1 {
			t.Errorf("%s claimed by %v, want one node", sid, by)
			continue
		}
		owners[by[0]]++
	}
	t.Logf("sessions per node: %v", owners)
	if len(owners) != 3 {
		t.Fatalf("sessions ran on %v, want all three nodes", owners)
	}

	// A cancel sent through any node reaches the owner of the session.
	c.models[2].hold.Store(int64(time.Minute))
	sid := c.sessionsOn(2, 1, "s_cancel")[0]
	before := c.models[2].calls.Load()
	c.send(sid, "in_"+sid, "hello")
	bustest.Eventually(t, 30*time.Second, "the turn in flight on node2", func() bool { return c.models[2].calls.Load() > before })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.nodes[0].Bus.PublishInput(ctx, sid, wire.Input{Command: wire.CommandCancel, Reason: "enough"}); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, "the turn cancelled", func() bool { return count(c.log(sid), event.AgentCancelled) == 1 })
	if c.models[2].cancelled.Load() != 1 {
		t.Fatalf("node2's LLM call was not cancelled (%d)", c.models[2].cancelled.Load())
	}
}

// A node that stops gracefully while its turns run hands its partitions over:
// the turns finish on the others, each exactly once, and the survivors share
// all partitions.
func TestClusterGracefulStopHandsOver(t *testing.T) {
	c := newTestCluster(t, 3, 3)
	c.balanced("node0", "node1", "node2")
	c.models[0].hold.Store(int64(time.Minute)) // node0's turns stay in flight
	sids := c.sessionsOn(0, 3, "s_grace")
	inputs := map[string][]string{}
	for _, sid := range sids {
		c.send(sid, "in_"+sid, "hello")
		inputs[sid] = []string{"in_" + sid}
	}
	bustest.Eventually(t, 30*time.Second, "node0's turns in flight", func() bool { return c.models[0].calls.Load() >= 3 })
	c.stop(0)
	c.finished(inputs)
	c.balanced("node1", "node2")
	for _, sid := range sids {
		if by := claimedBy(c.log(sid)); len(by) != 2 || by[0] != "node0" || by[1] == "node0" {
			t.Errorf("%s claimed by %v, want node0 then another", sid, by)
		}
	}
}

// A node cut off from NATS (its connection closed, the process alive) is
// replaced: its sessions finish elsewhere, it cancels its own LLM calls, and
// it never writes to a log it no longer owns.
func TestClusterCutOffNodeIsFenced(t *testing.T) {
	c := newTestCluster(t, 3, 3)
	c.balanced("node0", "node1", "node2")
	c.models[2].hold.Store(int64(time.Minute))
	sids := c.sessionsOn(2, 3, "s_cut")
	inputs := map[string][]string{}
	for _, sid := range sids {
		c.send(sid, "in_"+sid, "hello")
		inputs[sid] = []string{"in_" + sid}
	}
	bustest.Eventually(t, 30*time.Second, "node2's turns in flight", func() bool { return c.models[2].calls.Load() >= 3 })
	cut := c.nodes[2]
	c.nodes[2] = nil // not a member any more: the helpers use the others
	cut.Bus.Conn().Close()
	c.finished(inputs)
	bustest.Eventually(t, 30*time.Second, "the cut-off node stopped its sessions", func() bool {
		return cut.Sessions.Active() == 0 && c.models[2].cancelled.Load() >= 3
	})
	c.balanced("node0", "node1")
	for _, sid := range sids {
		by := claimedBy(c.log(sid))
		if len(by) != 2 || by[0] != "node2" || by[1] == "node2" {
			t.Errorf("%s claimed by %v, want node2 then another", sid, by)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = cut.Close(ctx)
}

// testLogger writes a node's logs to the test's log, named.
func testLogger(t *testing.T, name string) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", name)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// kill -9 of a node, as far as one process can play it: its embedded server
// goes at once (routes and clients drop as on a process kill) and the node is
// never closed gracefully. The victim is the leader of tah_nodes' stream, so
// that the survivors live through its leader election too: that must not make
// them take themselves for cut off.
func TestClusterKilledNodeIsReplaced(t *testing.T) {
	c := newTestCluster(t, 3, 3)
	c.balanced("node0", "node1", "node2")
	victim := -1
	for i, n := range c.nodes {
		if n.Bus.Server().JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, "KV_"+wire.NodeBucket) {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatal("no leader of tah_nodes")
	}
	c.models[victim].hold.Store(int64(time.Minute))
	sids := c.sessionsOn(victim, 3, "s_kill")
	inputs := map[string][]string{}
	for _, sid := range sids {
		c.send(sid, "in_"+sid, "hello")
		inputs[sid] = []string{"in_" + sid}
	}
	bustest.Eventually(t, 30*time.Second, "the victim's turns in flight", func() bool { return c.models[victim].calls.Load() >= 3 })
	dead := c.nodes[victim]
	c.nodes[victim] = nil
	dead.Bus.Server().Shutdown()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = dead.Close(ctx)
	})
	c.finished(inputs)
	var live []string
	for i, n := range c.nodes {
		if n == nil {
			continue
		}
		live = append(live, fmt.Sprintf("node%d", i))
		if f := n.cluster.fences.Load(); f != 0 {
			t.Errorf("node%d fenced itself %d times while another node died", i, f)
		}
	}
	c.balanced(live...)
}

// Two nodes with one id would take each other's presence for their own: the
// second is refused at start, with what to do.
func TestNodeIDInUseIsRefused(t *testing.T) {
	cfg := bus.Default()
	cfg.DataDir, cfg.Port = t.TempDir(), -1
	start := func(b bus.Config, dir string) (*Node, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return Start(ctx, Options{Bus: b, StorePath: filepath.Join(dir, "data.db"), Provider: &heldModel{},
			Session: session.Config{Node: "twin"}, Logger: testLogger(t, "twin")})
	}
	first, err := start(cfg, cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(context.Background())
	ext := bus.Default()
	ext.URL = first.Bus.ClientURL()
	if _, err := start(ext, t.TempDir()); !errors.Is(err, ErrNodeIDInUse) || !strings.Contains(err.Error(), "--node-id") {
		t.Fatalf("err = %v, want ErrNodeIDInUse saying what to do", err)
	}
}
