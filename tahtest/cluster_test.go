package tahtest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// run sends input id to session sid and waits until its turn has ended.
func run(t *testing.T, c *Cluster, sid, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Bus().PublishInput(ctx, sid, wire.Input{ID: id, Command: wire.CommandRun, Text: "what is in this project?"}); err != nil {
		t.Fatal(err)
	}
	if err := natstest.Poll(time.Minute, 50*time.Millisecond, func() error {
		if rep := c.Audit(sid); !rep.InputEnded(id) {
			return fmt.Errorf("not ended:\n%s", rep.Dump())
		}
		return nil
	}); err != nil {
		t.Fatalf("input %s: %v", id, err)
	}
}

// The mixed cluster the failover benchmark runs: two in-process nodes and a
// tah-node process that leads the shard of the log of one of its sessions,
// killed with SIGKILL while it does; the others elect a leader, carry its sessions on and share its
// partitions.
func TestMixedCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster of three nodes: not in -short")
	}
	c := Start(t, Options{Pace: time.Millisecond, Modes: map[int]Mode{2: Process}, NodeTTL: 3 * time.Second, InputAckWait: 4 * time.Second})
	if c.Node(0) == nil || c.Node(2) != nil || c.ID(2) != "n2" || !slices.Equal(c.IDs(), []string{"n0", "n1", "n2"}) {
		t.Fatalf("members: node 0 %v, node 2 %v, ids %v", c.Node(0), c.Node(2), c.IDs())
	}
	recs := c.WaitBalanced(time.Minute, c.IDs()...)
	var sid string // a session of n2's
	for j := 0; sid == ""; j++ {
		cand := fmt.Sprintf("s_mixed_%d", j)
		for _, r := range recs {
			if r.Node == "n2" && slices.Contains(r.Partitions, wire.Partition(cand, c.Bus().Config().Partitions)) {
				sid = cand
			}
		}
	}
	shard := wire.EventShardStream(c.Bus().ShardOf(sid))
	// On a loaded machine leadership may move on again right after it came
	// (another election): asked again until n2 is seen leading.
	if err := natstest.Poll(time.Minute, 100*time.Millisecond, func() error {
		c.MoveLeader(shard, 2)
		if led := c.Leaders().Of(2); !slices.Contains(led, shard) {
			return fmt.Errorf("n2 leads %v, not %s", led, shard)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := session.Create(ctx, c.Bus(), sid, session.Config{}, nil); err != nil {
		t.Fatal(err)
	}
	run(t, c, sid, "in_before")
	if tail := c.LogTail(2, 5); tail == "" {
		t.Error("no log of the process")
	}
	if tr := c.Trace("msg=ready"); !strings.Contains(tr, "n2 run 1:") {
		t.Errorf("the process's log does not say it is ready:\n%s", tr)
	}

	c.Kill(2)
	c.WaitLeaders(shard)
	run(t, c, sid, "in_after")
	rep := c.Audit(sid)
	if probs := rep.CheckInputs("in_before", "in_after"); len(probs) > 0 || rep.Owner() == "n2" {
		t.Fatalf("owner %s; %s\n%s", rep.Owner(), probs, rep.Dump())
	}
	c.WaitBalanced(time.Minute, "n0", "n1")
}

func TestBalanced(t *testing.T) {
	rec := func(node string, parts ...int) wire.NodeRecord { return wire.NodeRecord{Node: node, Partitions: parts} }
	ids := []string{"n0", "n1"}
	tests := []struct {
		recs []wire.NodeRecord
		want string // in the error; empty for none
	}{
		{[]wire.NodeRecord{rec("n1", 2, 3), rec("n0", 0, 1)}, ""},
		{[]wire.NodeRecord{rec("n0", 0, 1, 2), rec("n1", 3)}, "n1 has 1 partitions [3], want 2"},
		{[]wire.NodeRecord{rec("n0", 0, 1), rec("n1", 1, 2)}, "partition 1 is held by both n0 and n1"},
		{[]wire.NodeRecord{rec("n0", 0, 1), rec("n1", 2, 3), rec("n2")}, "nodes [n0 n1 n2], want [n0 n1]"},
		{[]wire.NodeRecord{rec("n0", 0, 1), rec("n1", 2, 4)}, "partition 3 is held by no node"},
		{[]wire.NodeRecord{rec("n0", 0, 1), {Node: "n1", Partitions: []int{2, 3}, Fenced: true}}, "n1 is fenced"},
	}
	for _, tc := range tests {
		err := Balanced(tc.recs, ids, 4, 0)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", DescribeNodes(tc.recs), err, tc.want)
		}
	}
}

// The flags of a process are the settings that differ from the defaults.
func TestFlags(t *testing.T) {
	l := natstest.Layout{Name: "c", Dir: "/tmp/x", Creds: "/tmp/x/trust-seed/node.creds",
		Slots: []natstest.Slot{{Name: "n0", Dir: "/tmp/x/n0", ClientPort: 4300, RoutePort: 6300, Routes: []string{"nats-route://127.0.0.1:6301"}}}}
	got := strings.Join(flags(Options{Replicas: 3, Pace: time.Second}.config(l, 0, "/tmp/root")), " ")
	for _, want := range []string{"--data-dir=/tmp/x/n0", "--node-id=n0", "--nats-port=4300", "--nats-cluster=c", "--nats-cluster-port=6300",
		"--nats-routes=nats-route://127.0.0.1:6301", "--nats-replicas=3", "--http=", "--tools-root=/tmp/root", "--tools-remote=false",
		"--llm-mock-pace=1s"} {
		if !strings.Contains(got+" ", want+" ") {
			t.Errorf("flags lack %s: %s", want, got)
		}
	}
	if strings.Contains(got, "creds") || strings.Contains(got, "--llm-provider") {
		t.Errorf("flags: %s", got)
	}
}

// A process gets the sub-agents, which no flag carries, in a configuration
// file that tah-node reads under its flags.
func TestSubAgentsFile(t *testing.T) {
	l := natstest.Layout{Name: "c", Dir: t.TempDir(), Slots: []natstest.Slot{{Name: "n0", Dir: "/tmp/x/n0", ClientPort: 4300}}}
	defs := []config.SubAgent{{Name: "researcher", Description: "Finds out.", SystemPrompt: "You research."}}
	cfg := Options{Nodes: 1, SubAgents: defs}.config(l, 0, "/tmp/root")
	p, err := newProcess(Options{}, 0, cfg, "tah-node", l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	path, ok := strings.CutPrefix(p.args[0], "--config=")
	if !ok {
		t.Fatalf("args: %q", p.args)
	}
	got := config.Default()
	if err := got.Load(path, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Agent.SubAgents, defs) || got.Agent.MaxSteps != config.Default().Agent.MaxSteps {
		t.Fatalf("the file gives agent %+v", got.Agent)
	}
	if p, err := newProcess(Options{}, 0, Options{Nodes: 1}.config(l, 0, "/tmp/root"), "tah-node", l.Dir); err != nil || strings.Contains(strings.Join(p.args, " "), "--config") {
		t.Fatalf("without sub-agents: %q, %v", p.args, err)
	}
}

// An in-process member serves the API, as tah-node does, at every start.
func TestInProcessAPI(t *testing.T) {
	c := Start(t, Options{Nodes: 1})
	cl, err := client.New(c.Connect(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, sid := range []string{"s_api_1", "s_api_2"} {
		if _, err := cl.Create(ctx, wire.CreateRequest{Session: sid}); err != nil {
			t.Fatalf("create %s: %v", sid, err)
		}
		if got, err := cl.Get(ctx, sid); err != nil || got.ID != sid {
			t.Fatalf("get %s: %+v, %v", sid, got, err)
		}
		c.Restart(0)
	}
}
