package node

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/wire"
)

// A node taken for dead when its connection closed, and heard again on
// another one after the grace (a node only slow to reconnect, on a loaded
// machine), gets its entry in tah_nodes back from the node that deleted it:
// it writes the entry itself only every presence period (NodeTTL/5, long
// here), and until then status and the nodes starting would not see it nor
// the partitions it still pulls.
func TestNodeTakenForDeadAndBackIsListedAgain(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	h := &hostile{t: t, n: startWithAPI(ctx, t, dir), dir: dir, ctx: ctx}
	creds := h.issue(wire.RoleNode, "ghost")
	kv, err := h.n.bus.JetStream().KeyValue(ctx, wire.NodeBucket)
	if err != nil {
		t.Fatal(err)
	}
	entry := func() (wire.NodeRecord, bool) {
		e, err := kv.Get(ctx, "ghost")
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return wire.NodeRecord{}, false
		}
		if err != nil {
			t.Fatal(err)
		}
		var r wire.NodeRecord
		if err := json.Unmarshal(e.Value(), &r); err != nil {
			t.Fatal(err)
		}
		return r, true
	}

	first := connectGhost(t, h, creds)
	r := announceGhost(t, first, time.Now().UTC(), nil)
	if err := h.n.bus.PutNode(ctx, r); err != nil {
		t.Fatal(err)
	}
	// The node has heard ghost's presence when it counts it among the live.
	bustest.Eventually(t, time.Minute, "ghost heard", func() bool { return len(h.n.cluster.live()) == 2 })
	// Its connection closes (the server's advisory says "Client Closed"),
	// and nothing is heard of it within the grace: taken for dead, its
	// entry deleted.
	first.Close()
	bustest.Eventually(t, time.Minute, "ghost's entry deleted", func() bool { _, ok := entry(); return !ok })

	// It was only slow: heard again, on another connection.
	again := announceGhost(t, connectGhost(t, h, creds), time.Now().UTC(), nil)
	bustest.Eventually(t, time.Minute, "ghost's entry written back", func() bool {
		got, ok := entry()
		return ok && got.NATSClientID == again.NATSClientID
	})
}

// connectGhost connects to h's node's server with creds, the credential of
// node "ghost" (which has no membership: the tests play its presence).
func connectGhost(t *testing.T, h *hostile, creds string) *nats.Conn {
	t.Helper()
	conn, err := nats.Connect(h.n.bus.ClientURL(), nats.UserCredentials(creds), nats.CustomInboxPrefix(wire.CredentialInbox("ghost")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// announceGhost publishes on conn the presence of node "ghost" as a node
// does (started then, on conn's server and client id), changed by edit when
// it is not nil, and returns it.
func announceGhost(t *testing.T, conn *nats.Conn, started time.Time, edit func(*wire.NodeRecord)) wire.NodeRecord {
	t.Helper()
	cid, err := conn.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	r := wire.NodeRecord{Node: "ghost", Started: started, Heartbeat: time.Now().UTC(), NATSServer: conn.ConnectedServerName(),
		NATSServerID: conn.ConnectedServerId(), NATSClientID: cid, ShareOut: wire.ShareOutByShard}
	if edit != nil {
		edit(&r)
	}
	body, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Publish(wire.NodeSubject("ghost"), body); err != nil {
		t.Fatal(err)
	}
	if err := conn.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}
