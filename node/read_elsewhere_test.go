package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// What another node wrote is in this node's list and get as soon as its
// writer has the acknowledgement, as a client that holds a turn's outcome
// from one node and asks another expects: the reads wait for the log's heads
// (and a get for the session's last record), not only for what this node's
// tail received. Each session is read at once after each write, many times
// over, so that a read that went by the tail alone would miss one.
func TestReadsSeeWhatAnotherNodeWrote(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	n := startWithAPI(ctx, t, dir)
	// The other node: a bus of its own on this node's server, as a node of
	// a cluster on external NATS servers has.
	cfg := bus.Default()
	cfg.URL, cfg.CredsFile, cfg.NoSetup, cfg.Partitions = n.bus.ClientURL(), auth.NodeCredsPath(dir), true, n.bus.Config().Partitions
	other, err := bus.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close(context.Background()) })

	for i := range 20 {
		sid := fmt.Sprintf("s_elsewhere_%02d", i)
		created, err := session.Create(ctx, other, sid, session.Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		page, err := n.apiList(ctx, wire.ListRequest{Limit: wire.ListMax})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(page.Sessions, func(s wire.SessionSummary) bool { return s.ID == sid }) {
			t.Fatalf("list right after %s was created elsewhere: not in it", sid)
		}
		// The other node claims it (as it does before a turn): this
		// node's get says so at once.
		w, err := other.Writer(sid, 1, created.Seq)
		if err != nil {
			t.Fatal(err)
		}
		claim, err := event.New(sid, event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "elsewhere"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append(ctx, claim); err != nil {
			t.Fatal(err)
		}
		row, err := n.apiGet(ctx, wire.SessionRequest{Session: sid})
		if err != nil {
			t.Fatal(err)
		}
		if row.Node != "elsewhere" || row.Epoch != 1 {
			t.Fatalf("get right after %s was claimed elsewhere: node %q, epoch %d", sid, row.Node, row.Epoch)
		}
	}
}
