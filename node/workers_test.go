package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/wire"
)

// newRoleCluster starts three in-process nodes, those of workers with
// read_model=false, each answering with its own heldModel.
func newRoleCluster(t *testing.T, ackWait time.Duration, workers ...int) *cluster {
	if testing.Short() {
		t.Skip("a cluster of three nodes: not in -short")
	}
	c := &cluster{t: t, models: []*heldModel{{}, {}, {}}}
	c.Cluster = tahtest.Start(t, tahtest.Options{
		NodeTTL: 3 * time.Second, InputAckWait: ackWait,
		Sync:       time.Minute, // fsync is not what these tests are about
		EditConfig: func(i int, cfg *config.Config) { cfg.ReadModel = !slices.Contains(workers, i) },
		EditNode:   func(i int, o *node.Options) { o.Provider = c.models[i] },
	})
	return c
}

// clientOf is a client connected to node i's own NATS server only.
func (c *cluster) clientOf(i int) *client.Client {
	c.t.Helper()
	nc, err := nats.Connect(c.Node(i).Bus().ClientURL(), nats.UserCredentials(localnode.NodeCredsPath(c.Config(i).DataDir)))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(nc.Close)
	cl, err := client.New(nc, client.Options{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// One node holds the read model, two are workers: sessions run on all three
// nodes' partitions, and list, get and steps answer from a client of any
// node's server with every session, complete, from the one read model; the
// workers open no SQLite file and follow no shard of the log.
func TestWorkersLeaveReadsToTheReadModel(t *testing.T) {
	t.Parallel()
	c := newRoleCluster(t, 4*time.Second, 1, 2)
	recs := c.balanced("n0", "n1", "n2")
	inputs := map[string][]string{}
	for i := range 3 {
		for _, sid := range c.sessionsOn(recs, i, 2, fmt.Sprintf("s_role%d", i)) {
			c.send(sid, "in_"+sid, "hello "+sid)
			inputs[sid] = []string{"in_" + sid}
		}
	}
	c.finished(inputs)
	owners := map[string]bool{}
	for sid := range inputs {
		for _, by := range c.claimedBy(sid) {
			owners[by] = true
		}
	}
	if len(owners) != 3 {
		t.Fatalf("sessions ran on %v, want all three nodes", owners)
	}

	ctx := ctxFor(t)
	for i := range 3 {
		cl := c.clientOf(i)
		page, err := cl.List(ctx, wire.ListRequest{Limit: 100})
		if err != nil {
			t.Fatalf("list through %s: %v", c.ID(i), err)
		}
		var listed []string
		for _, s := range page.Sessions {
			listed = append(listed, s.ID)
		}
		for sid := range inputs {
			if !slices.Contains(listed, sid) {
				t.Errorf("list through %s: %s missing from %v", c.ID(i), sid, listed)
			}
			row, err := cl.Get(ctx, sid)
			if err != nil || row.Status != projection.StatusCompleted || row.Turn != 1 {
				t.Errorf("get %s through %s: %+v, %v; want completed after one turn", sid, c.ID(i), row, err)
			}
			steps, err := cl.Steps(ctx, wire.StepsRequest{Session: sid})
			if err != nil || len(steps.Steps) == 0 {
				t.Errorf("steps of %s through %s: %d steps, %v", sid, c.ID(i), len(steps.Steps), err)
			}
		}
		st, err := cl.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("status through %s: answered by %s (worker %v)", c.ID(i), st.Node, st.Worker)
	}

	if c.Node(0).ReadModel() == nil || len(c.Node(0).ReadModelPositions()) == 0 {
		t.Fatal("n0 holds no read model")
	}
	if _, err := os.Stat(filepath.Join(c.Config(0).DataDir, "data.db")); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2} {
		n := c.Node(i)
		if n.ReadModel() != nil || n.ReadModelPositions() != nil || n.HasReadModel() {
			t.Errorf("%s, a worker, holds a read model: positions %v", c.ID(i), n.ReadModelPositions())
		}
		if _, err := os.Stat(filepath.Join(c.Config(i).DataDir, "data.db")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s, a worker, has a data.db (%v)", c.ID(i), err)
		}
		if err := n.WaitReadModel(ctx, "s_x", 1); !errors.Is(err, node.ErrNoReadModel) {
			t.Errorf("%s: WaitReadModel = %v, want ErrNoReadModel", c.ID(i), err)
		}
		rec := httptest.NewRecorder()
		n.HealthHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusOK || body["worker"] != true {
			t.Errorf("%s /healthz: %d %s", c.ID(i), rec.Code, rec.Body)
		}
		if _, err := n.Metrics.Registry().Gather(); err != nil {
			t.Errorf("%s metrics: %v", c.ID(i), err)
		}
	}
}

// A worker that still runs a session's turn when another node claims the
// session learns of it from the claimer's notice, not from the log (it
// follows none): its actor stops at once, its LLM call cancelled, rather
// than when the call ends and its next append is fenced. The model here
// would hold the call for ten minutes.
func TestClaimNoticeStopsTheStaleOwner(t *testing.T) {
	t.Parallel()
	c := newRoleCluster(t, 4*time.Second, 1, 2)
	recs := c.balanced("n0", "n1", "n2")
	c.models[2].hold.Store(int64(10 * time.Minute))
	sid := c.sessionsOn(recs, 2, 1, "s_notice")[0]
	c.send(sid, "in_"+sid, "hello")
	bustest.Eventually(t, 30*time.Second, "the turn in flight on n2", func() bool { return c.models[2].calls.Load() == 1 })
	// The call starts while its llm.started (with the turn.started) is
	// appended: until that record is in the log, a node that loads the
	// session finds it idle and has nothing to resume or claim (it failed
	// so under load).
	bustest.Eventually(t, 30*time.Second, "the turn's llm.started in the log", func() bool {
		evs, _, err := c.Node(0).Bus().Replay(t.Context(), sid, 1)
		return err == nil && slices.ContainsFunc(evs, func(e event.Event) bool { return e.Type == event.LLMStarted })
	})

	// n1 claims the session n2 runs, as a node that took its partition over
	// while n2 was thought dead would.
	done := make(chan session.Outcome, 1)
	if err := c.Node(1).Deliver(sid, &session.Command{Kind: wire.CommandResume, Done: func(o session.Outcome) { done <- o }}); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, "n2's actor stopped, its LLM call cancelled", func() bool {
		return c.models[2].cancelled.Load() == 1 && !slices.Contains(activeOn(c.Node(2)), sid)
	})
	if got := claimNotices(t, c.Node(1), "sent"); got < 1 {
		t.Errorf("n1 sent %v claim notices", got)
	}
	if got := claimNotices(t, c.Node(2), "received"); got < 1 {
		t.Errorf("n2 received %v claim notices", got)
	}
	var o session.Outcome
	select {
	case o = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("n1's resume did not end")
	}
	// n2 still owns the session's partition: its stopped actor put the input
	// it held back (a second later), and n2 runs it again. That claim is
	// n2's to make, and under load it may come before n1's resume has
	// ended, fencing it (or stopping its actor with a notice of its own):
	// the turn then goes on on n2, as it would have without n1.
	by := c.claimedBy(sid)
	if len(by) < 2 || by[0] != "n2" || by[1] != "n1" || slices.ContainsFunc(by[2:], func(n string) bool { return n != "n2" }) {
		t.Fatalf("%s claimed by %v, want n2 then n1 (then n2 again, the partition's owner, at most)", sid, by)
	}
	if o.Err != nil && !((o.Fenced || errors.Is(o.Err, session.ErrStopped)) && len(by) > 2) {
		t.Fatalf("n1's resume: %v (fenced %v), claims %v", o.Err, o.Fenced, by)
	}
}

// activeOn lists the sessions whose actors are alive on n.
func activeOn(n *node.Node) []string {
	if n.ActiveSessions() == 0 {
		return nil
	}
	return []string{"?"} // any: the tests here run one session per node
}

// claimNotices reads n's tah_claim_notices_total{direction}.
func claimNotices(t *testing.T, n *node.Node, direction string) float64 {
	t.Helper()
	mfs, err := n.Metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tah_claim_notices_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "direction" && l.GetValue() == direction {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A worker killed mid-turn: the nodes that take its partitions over resume
// its open turns at once, a worker among them asking the cluster's read
// model which turns are open. The inputs' ack wait is far longer than the
// test's patience, so only that resume can finish the turns in time.
func TestKilledWorkersTurnsResumeOnAWorker(t *testing.T) {
	t.Parallel()
	c := newRoleCluster(t, 10*time.Minute, 1, 2)
	recs := c.balanced("n0", "n1", "n2")
	// Sessions of n2's partitions that n1 (a worker) pulls once n2 is gone.
	after := node.Assign([]node.Peer{{ID: "n0"}, {ID: "n1", Worker: true}}, c.Bus().Config().Partitions, c.Bus().Shards())["n1"]
	var mine []int
	for _, r := range recs {
		if r.Node == "n2" {
			mine = r.Partitions
		}
	}
	var sids []string
	for j := 0; len(sids) < 2; j++ {
		sid := fmt.Sprintf("s_wkill_%d", j)
		p := wire.Partition(sid, c.Bus().Config().Partitions)
		if slices.Contains(mine, p) && slices.Contains(after, p) {
			c.create(sid)
			sids = append(sids, sid)
		}
	}
	c.models[2].hold.Store(int64(10 * time.Minute))
	inputs := map[string][]string{}
	for _, sid := range sids {
		c.send(sid, "in_"+sid, "hello")
		inputs[sid] = []string{"in_" + sid}
	}
	// In flight, and known to the read model: a model call alone does not
	// mean the turn's first record is in the log (the call starts while it
	// is appended), and a record that lands only with the new leader of its
	// shard, after the takeover's look, is left to its input's redelivery.
	rm := c.Node(0).ReadModel()
	bustest.Eventually(t, 30*time.Second, "n2's turns in flight, in the read model", func() bool {
		for _, sid := range sids {
			row, err := rm.GetSession(context.Background(), sid)
			if err != nil || row.Status != projection.StatusRunning {
				return false
			}
		}
		return c.models[2].calls.Load() >= 2
	})
	c.Kill(2)
	c.finished(inputs)
	for _, sid := range sids {
		if by := c.claimedBy(sid); len(by) != 2 || by[0] != "n2" || by[1] != "n1" {
			t.Errorf("%s claimed by %v, want n2 then n1", sid, by)
		}
	}
}

// A node killed mid-turn in a cluster of workers only: no read model shows
// its turns open, and the inputs' ack wait is far longer than the test's
// patience; the nodes that take its partitions over get the inputs it held
// at once (bus.InputConsumer.TakeOver), and the turns go on there, each
// input's exactly once, whether the turn's first record was in the log at
// the kill or not. Also when the partitions' consumers are led by the dead
// node's server: their pins go with their leaders, and the takeover waits
// for the new ones.
func TestKilledNodesInputsComeAtOnceWithNoReadModel(t *testing.T) {
	t.Parallel()
	for name, leadHere := range map[string]bool{"consumers led elsewhere": false, "consumers led by the dead": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newRoleCluster(t, 10*time.Minute, 0, 1, 2)
			recs := c.balanced("n0", "n1", "n2")
			sids := c.sessionsOn(recs, 2, 3, "s_wonly")
			c.models[2].hold.Store(int64(10 * time.Minute))
			inputs := map[string][]string{}
			for _, sid := range sids {
				c.send(sid, "in_"+sid, "hello")
				inputs[sid] = []string{"in_" + sid}
			}
			bustest.Eventually(t, 30*time.Second, "n2's turns in flight", func() bool { return c.models[2].calls.Load() >= int64(len(sids)) })
			if leadHere {
				for _, r := range recs {
					for _, p := range r.Partitions {
						if r.Node == "n2" {
							c.MoveConsumerLeader(wire.InputStream, wire.PartitionConsumer(p), 2)
						}
					}
				}
			}
			c.Kill(2)
			c.finished(inputs)
			for _, sid := range sids {
				if by := c.claimedBy(sid); len(by) < 1 || by[len(by)-1] == "n2" {
					t.Errorf("%s claimed by %v, want another node last", sid, by)
				}
			}
		})
	}
}

// With no node that holds a read model, a read says so: no node answers
// it, and the client tells that from no node at all.
func TestNoReadModelAnywhereSaysSo(t *testing.T) {
	t.Parallel()
	c := tahtest.Start(t, tahtest.Options{Nodes: 1,
		EditConfig: func(_ int, cfg *config.Config) { cfg.ReadModel = false }})
	cl, err := client.New(c.Connect(), client.Options{RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxFor(t)
	_, err = cl.List(ctx, wire.ListRequest{})
	if !errors.Is(err, client.ErrNoReadModel) || !strings.Contains(err.Error(), "no node holds the read model (read_model=false everywhere)") {
		t.Fatalf("list: %v, want ErrNoReadModel", err)
	}
	st, err := cl.Status(ctx)
	if err != nil || !st.Worker || st.ReadModelPath != "" {
		t.Fatalf("status: %+v, %v; want a worker's", st, err)
	}
	// Everything else works on a worker: a session is made, a turn runs.
	if _, err := cl.Create(ctx, wire.CreateRequest{Session: "s_worker_only"}); err != nil {
		t.Fatal(err)
	}
	turn, err := cl.Run(ctx, "s_worker_only", wire.Input{Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := turn.Outcome(ctx)
	if err != nil || out.Status != projection.StatusCompleted {
		t.Fatalf("turn on a worker: %+v, %v", out, err)
	}
}
