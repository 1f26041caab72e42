package client_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/wire"
)

// A record the stream stored twice (a retried append around a leader
// change: protocol.md, appending, rule 5) reaches a Follower once: the copy
// has the message id of the record before it, and is dropped.
func TestFollowDropsAStoredCopy(t *testing.T) {
	ctx := ctxT(t)
	srv := bustest.Server(t)
	cfg := bus.Default()
	cfg.URL = srv.ClientURL()
	b, err := bus.Open(ctx, cfg) // the streams
	if err != nil {
		t.Fatal(err)
	}
	const sid = "s_copied"
	k := b.ShardOf(sid)
	b.Close(ctx)
	c, err := client.Connect(ctx, client.Options{URL: srv.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	js, err := jetstream.New(c.Conn())
	if err != nil {
		t.Fatal(err)
	}
	appendRaw(ctx, t, js, k, sid, event.SessionCreated, event.SessionCreatedData{Config: event.Config{MaxSteps: 1}}, 0)
	bustest.StoreCopy(ctx, t, js, wire.EventShardStream(k), 1)
	f, err := c.Follow(ctx, sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ev := <-f.Events(); ev.Type != event.SessionCreated || ev.Seq != 1 {
		t.Fatalf("first: %s at %d", ev.Type, ev.Seq)
	}
	appendRaw(ctx, t, js, k, sid, event.SessionClaimed, event.SessionClaimedData{Node: "n", Epoch: 1}, 1)
	if ev := <-f.Events(); ev.Type != event.SessionClaimed || ev.Seq != 3 {
		t.Fatalf("after the record and its copy: %s at %d, want session.claimed at 3", ev.Type, ev.Seq)
	}
	// From the copy on (a client that had the record asks for what
	// follows it): the record before tells the copy.
	after, err := c.Follow(ctx, sid, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if ev := <-after.Events(); ev.Type != event.SessionClaimed || ev.Seq != 3 {
		t.Fatalf("following from the copy: %s at %d, want session.claimed at 3", ev.Type, ev.Seq)
	}
}

// A tenant's Follower, on the session's live feed, drops a copy too: the
// live feed republishes each record with its message id.
func TestTenantFollowDropsAStoredCopy(t *testing.T) {
	n := startNode(t, newGated())
	ctx := ctxT(t)
	_, sid, next := tenantFollowing(ctx, t, n, nil, nil)
	first := next()
	if first.Type != event.SessionCreated {
		t.Fatalf("first: %s", first.Type)
	}
	js, err := jetstream.New(n.Bus().Conn())
	if err != nil {
		t.Fatal(err)
	}
	k := n.Bus().ShardOf(sid)
	claimed := appendRaw(ctx, t, js, k, sid, event.SessionClaimed, event.SessionClaimedData{Node: "n", Epoch: 9}, first.Seq)
	if ev := next(); ev.Type != event.SessionClaimed || ev.Seq != claimed {
		t.Fatalf("second: %s at %d, want session.claimed at %d", ev.Type, ev.Seq, claimed)
	}
	copyThenNext(ctx, t, js, k, sid, claimed, next)
}

// A tenant's Follower that had a record from the events API (which gives
// no message ids) drops a copy of it met on the live feed: the copy's id
// names the record before the one it copies (wire.CopyBefore).
func TestTenantFollowDropsACopyOfARecordFromTheAPI(t *testing.T) {
	n := startNode(t, newGated())
	ctx := ctxT(t)
	js, err := jetstream.New(n.Bus().Conn())
	if err != nil {
		t.Fatal(err)
	}
	var k int
	var created, claimed uint64
	_, sid, next := tenantFollowing(ctx, t, n, nil, func(sid string) {
		// Before the Follower: it has this record from the API.
		k = n.Bus().ShardOf(sid)
		shard, err := js.Stream(ctx, wire.EventShardStream(k))
		if err != nil {
			t.Fatal(err)
		}
		last, err := shard.GetLastMsgForSubject(ctx, wire.ShardSubject(k, sid))
		if err != nil {
			t.Fatal(err)
		}
		created = last.Sequence
		claimed = appendRaw(ctx, t, js, k, sid, event.SessionClaimed, event.SessionClaimedData{Node: "n", Epoch: 9}, created)
	})
	if ev := next(); ev.Type != event.SessionCreated || ev.Seq != created {
		t.Fatalf("first: %s at %d, want session.created at %d", ev.Type, ev.Seq, created)
	}
	if ev := next(); ev.Type != event.SessionClaimed || ev.Seq != claimed {
		t.Fatalf("second: %s at %d, want session.claimed at %d", ev.Type, ev.Seq, claimed)
	}
	copyThenNext(ctx, t, js, k, sid, claimed, next)
}

// copyThenNext stores a copy of session sid's record at claimed (shard k)
// and appends the session's next record after it: the Follower's next event
// (next) must be that record's, the copy dropped.
func copyThenNext(ctx context.Context, t *testing.T, js jetstream.JetStream, k int, sid string, claimed uint64, next func() event.Event) {
	t.Helper()
	bustest.StoreCopy(ctx, t, js, wire.EventShardStream(k), claimed)
	again := appendRaw(ctx, t, js, k, sid, event.SessionClaimed, event.SessionClaimedData{Node: "n", Epoch: 10}, claimed)
	if ev := next(); ev.Type != event.SessionClaimed || ev.Seq != again {
		t.Fatalf("after the record and its copy: %s at %d, want the next claim at %d", ev.Type, ev.Seq, again)
	}
}

// tenantFollowing makes tenant acme on node n and a Client of its client
// credential alice (options edited by edit, when given), creates a session
// with it, calls before with it (when given), and follows that session from
// its start: next returns the Follower's next event.
func tenantFollowing(ctx context.Context, t *testing.T, n *node.Node, edit func(*client.Options), before func(sid string)) (c *client.Client, sid string, next func() event.Event) {
	t.Helper()
	admin := connect(t, n)
	if _, err := admin.AddTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	alice, _, err := admin.IssueTenantCreds(ctx, "acme", "alice", wire.RoleClient)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "alice.creds")
	if err := os.WriteFile(path, alice, 0o600); err != nil {
		t.Fatal(err)
	}
	opts := client.Options{URL: n.Bus().ClientURL(), CredsFile: path}
	if edit != nil {
		edit(&opts)
	}
	if c, err = client.Connect(ctx, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	created, err := c.Create(ctx, wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(created.Session)
	}
	f, err := c.Follow(ctx, created.Session, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return c, created.Session, func() event.Event {
		t.Helper()
		select {
		case ev, ok := <-f.Events():
			if !ok {
				t.Fatal("the Follower stopped")
			}
			return ev
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		return event.Event{}
	}
}

// appendRaw appends to shard k a record of session sid of one event, with
// the message id of a writer that expects the session's last record at
// after, and returns its sequence.
func appendRaw(ctx context.Context, t *testing.T, js jetstream.JetStream, k int, sid string, typ event.Type, data any, after uint64) uint64 {
	t.Helper()
	m := nats.NewMsg(wire.ShardSubject(k, sid))
	m.Data, _ = event.EncodeRecord([]event.Event{event.MustNew(sid, typ, data)})
	m.Header.Set(wire.HeaderMsgID, sid+":9:w:"+strconv.FormatUint(after, 10))
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}
