package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/store"
	"github.com/tah-dev/tah/wire"
)

// What another node wrote is in this node's list and get as soon as its
// writer has the acknowledgement, as a client that holds a turn's outcome
// from one node and asks another expects: the reads wait for the log's heads
// (a get for its session's shard's), not only for what this node's
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

// A record the stream stored twice (a retried append across a leader change
// can be) is dropped by the read model's tail; its position moves past the
// copy all the same, and is committed with the read model. Else, the copy as
// its shard's last record is a head the read model never reaches: every list
// (and a get of that shard's sessions) waits its whole bound, and a restart
// meets the copy again with nothing before it to recognise it by.
func TestReadModelMovesPastAStoredCopy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	n := startWithAPI(ctx, t, t.TempDir())
	const sid = "s_copied"
	created, err := session.Create(ctx, n.bus, sid, session.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	k, copySeq := storeCopy(ctx, t, n, sid, created.Seq)
	waitCopyApplied(ctx, t, n, k, copySeq)
	pos, err := n.store.Positions(ctx, store.DefaultConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if pos[k] != copySeq {
		t.Fatalf("committed position of shard %d: %d, want the copy's %d", k, pos[k], copySeq)
	}
	row, err := n.apiGet(ctx, wire.SessionRequest{Session: sid})
	if err != nil {
		t.Fatal(err)
	}
	if row.Events != 1 {
		t.Fatalf("the session's row counts %d events, want 1 (its record, once)", row.Events)
	}
}

// storeCopy stores again the record of session sid at seq (bustest.StoreCopy)
// and returns the record's shard and the copy's sequence.
func storeCopy(ctx context.Context, t *testing.T, n *Node, sid string, seq uint64) (k int, copySeq uint64) {
	t.Helper()
	js, err := jetstream.New(n.bus.Conn())
	if err != nil {
		t.Fatal(err)
	}
	k = n.bus.ShardOf(sid)
	return k, bustest.StoreCopy(ctx, t, js, wire.EventShardStream(k), seq)
}

// waitCopyApplied waits until the read model's position in shard k has
// reached the copy at copySeq.
func waitCopyApplied(ctx context.Context, t *testing.T, n *Node, k int, copySeq uint64) {
	t.Helper()
	last := make([]uint64, n.bus.Shards())
	last[k] = copySeq
	if err := n.WaitReadModelLog(ctx, last); err != nil {
		t.Fatalf("the read model stays at %d in shard %d, before the copy at %d: %v", n.projector().Positions()[k], k, copySeq, err)
	}
}

// A copy met by a read model that restarted after folding its original
// (its position committed between the two) is recognised all the same: the
// restarted tail has no record of the session before the copy to compare
// it with, and asks the read model which record of the session it folded
// last (bus.FoldedFunc); the copy names one before it. Before, the session
// was folded twice: a second session.created, a fault.
func TestReadModelDropsACopyMetAfterARestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	n := startWithAPI(ctx, t, t.TempDir())
	const sid = "s_copied_late"
	created, err := session.Create(ctx, n.bus, sid, session.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A second record after it, so that the copy is not the first record
	// of the session's either.
	w, err := n.bus.Writer(sid, 1, created.Seq)
	if err != nil {
		t.Fatal(err)
	}
	claim, err := event.New(sid, event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := w.Append(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.WaitReadModel(ctx, sid, seqs[0]); err != nil {
		t.Fatal(err)
	}
	resume := n.PauseReadModel() // committed with both records
	k, copySeq := storeCopy(ctx, t, n, sid, seqs[0])
	if err := resume(ctx); err != nil {
		t.Fatal(err)
	}
	waitCopyApplied(ctx, t, n, k, copySeq)
	row, err := n.apiGet(ctx, wire.SessionRequest{Session: sid})
	if err != nil {
		t.Fatal(err)
	}
	if row.Events != 2 || row.Rejected != 0 || row.Fault != nil {
		t.Fatalf("the session's row: %d events, %d rejected, fault %+v; want its 2 records' events once, none rejected, no fault", row.Events, row.Rejected, row.Fault)
	}
	if n.projector().Problems() != 0 {
		t.Fatalf("the read model reports %d problems", n.projector().Problems())
	}
}

// A list with known asks no shard's stream for its head (a takeover's look
// for open turns, while shards whose leader died elect a new one); one
// without asks every shard. Seen from the server: the requests the node
// makes reach a subscriber of the JetStream API's subjects before their
// answer reaches the node, so they are in its queue once a flush returns.
func TestListKnownAsksNoStream(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	n := startWithAPI(ctx, t, dir)
	if _, err := session.Create(ctx, n.bus, "s_known", session.Config{}, nil); err != nil {
		t.Fatal(err)
	}
	watch, err := nats.Connect(n.bus.ClientURL(), nats.UserCredentials(auth.NodeCredsPath(dir)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(watch.Close)
	const info = "$JS.API.STREAM.INFO."
	heads, err := watch.SubscribeSync(info + "*")
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.FlushWithContext(ctx); err != nil { // the server has the subscription
		t.Fatal(err)
	}
	asked := func(req wire.ListRequest) int {
		t.Helper()
		page, err := n.apiList(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Sessions) != 1 {
			t.Fatalf("list %+v: %d sessions, want 1", req, len(page.Sessions))
		}
		if err := watch.FlushWithContext(ctx); err != nil {
			t.Fatal(err)
		}
		count := 0
		for {
			m, err := heads.NextMsg(0)
			if err != nil {
				return count
			}
			if strings.HasPrefix(m.Subject, info+wire.EventStreamPrefix) {
				count++
			}
		}
	}
	if got := asked(wire.ListRequest{}); got < n.bus.Shards() {
		t.Fatalf("a list asked %d shards for their heads, want all %d", got, n.bus.Shards())
	}
	if got := asked(wire.ListRequest{Known: true}); got != 0 {
		t.Fatalf("a list with known asked %d shards for their heads, want none", got)
	}
}
