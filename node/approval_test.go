package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/wire"
)

// TestApprovalSurvivesTheOwnersDeathAndComesThroughAnotherNode: a call that
// waits for approval holds nothing; its node dies; the approval, sent
// through another node of the cluster, runs the call on the session's new
// owner, and the turn completes with every call answered.
func TestApprovalSurvivesTheOwnersDeathAndComesThroughAnotherNode(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a cluster of three nodes: not in -short")
	}
	c := tahtest.Start(t, tahtest.Options{
		NodeTTL: 3 * time.Second, InputAckWait: 4 * time.Second, Sync: time.Minute,
		// The mock model in demo mode calls list_files first: it waits.
		EditConfig: func(_ int, cfg *config.Config) { cfg.Tools.Approval = map[string]string{"list_*": "always"} },
	})
	c.WaitBalanced(time.Minute, c.IDs()...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	connect := func(i int) *client.Client {
		cl, err := client.Connect(ctx, client.Options{URL: c.Node(i).Bus().ClientURL(), CredsFile: localnode.AdminCredsPath(c.Config(i).DataDir)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	first := connect(0)
	r, err := first.Create(ctx, wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sid := r.Session
	turn, err := first.Run(ctx, sid, wire.Input{Text: "what is in this project?"})
	if err != nil {
		t.Fatal(err)
	}
	o, err := turn.Outcome(ctx)
	turn.Close()
	if err != nil || !o.AwaitsApproval() || o.AwaitingApproval[0].Name != "list_files" {
		t.Fatalf("%+v %v", o, err)
	}
	owner := ownerOf(t, c, sid)
	c.Kill(owner)
	other := (owner + 1) % 3
	c.WaitBalanced(time.Minute, c.ID(other), c.ID((owner+2)%3))

	turn, err = connect(other).Approve(ctx, sid, wire.Decision{By: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	defer turn.Close()
	if o, err = turn.Outcome(ctx); err != nil || o.Status != projection.StatusCompleted {
		t.Fatalf("%+v %v", o, err)
	}
	rep := c.Audit(sid)
	if len(rep.Problems) > 0 {
		t.Fatalf("%v\n%s", rep.Problems, rep.Dump())
	}
}

// ownerOf is the member whose node claimed sid last.
func ownerOf(t *testing.T, c *tahtest.Cluster, sid string) int {
	t.Helper()
	evs, err := c.Log(sid)
	if err != nil {
		t.Fatal(err)
	}
	node := ""
	for _, e := range evs {
		if d, err := event.DecodeAs[event.SessionClaimedData](e); err == nil && e.Type == event.SessionClaimed {
			node = d.Node
		}
	}
	for i, id := range c.IDs() {
		if id == node {
			return i
		}
	}
	t.Fatalf("no member claimed %s", sid)
	return -1
}
