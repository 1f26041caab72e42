package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/wire"
)

// silence is the node TTL of these tests: so long that a test that needs a
// dead node taken out can pass only by the servers' signals, never by the
// silence timeout.
const silence = time.Hour

// The cluster log's messages that settle what a node made of another's
// connection going (presence.go).
const (
	msgDead     = "taking a node for dead without waiting for its silence"
	msgBack     = "a node whose connection went is back on another"
	msgAlready  = "a node's earlier connection closed: it is on another already"
	msgLeftSlow = "a node's connection was closed by its NATS server"
)

// presenceLog notes, per node, the cluster log's messages about other nodes
// (their "node" attribute) and hands every record on.
type presenceLog struct {
	mu   sync.Mutex
	seen map[string][]string // "observer>node" -> messages
}

func (l *presenceLog) messages(observer, about string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen[observer+">"+about]...)
}

// has reports whether observer logged a message starting with one of
// prefixes about node about.
func (l *presenceLog) has(observer, about string, prefixes ...string) bool {
	for _, m := range l.messages(observer, about) {
		for _, p := range prefixes {
			if strings.HasPrefix(m, p) {
				return true
			}
		}
	}
	return false
}

type presenceHandler struct {
	next     slog.Handler
	observer string
	log      *presenceLog
}

func (h presenceHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h presenceHandler) Handle(ctx context.Context, r slog.Record) error {
	about := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "node" {
			about = a.Value.String()
		}
		return true
	})
	if about != "" {
		h.log.mu.Lock()
		k := h.observer + ">" + about
		h.log.seen[k] = append(h.log.seen[k], r.Message)
		h.log.mu.Unlock()
	}
	return h.next.Handle(ctx, r)
}

func (h presenceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return presenceHandler{next: h.next.WithAttrs(as), observer: h.observer, log: h.log}
}

func (h presenceHandler) WithGroup(name string) slog.Handler {
	return presenceHandler{next: h.next.WithGroup(name), observer: h.observer, log: h.log}
}

// watched wraps o's logger to note its presence messages in pl.
func watched(pl *presenceLog, o *node.Options) {
	o.Logger = slog.New(presenceHandler{next: o.Logger.Handler(), observer: o.Session.Node, log: pl})
}

// newSilentCluster is newCluster with a node TTL of an hour: no node is taken
// for dead by its silence during the test.
func newSilentCluster(t *testing.T, pl *presenceLog) *cluster {
	if testing.Short() {
		t.Skip("a cluster of three nodes: not in -short")
	}
	c := &cluster{t: t, models: []*heldModel{{}, {}, {}}}
	c.Cluster = tahtest.Start(t, tahtest.Options{
		NodeTTL: silence, InputAckWait: 4 * time.Second,
		Sync: time.Minute,
		EditNode: func(i int, o *node.Options) {
			o.Provider = c.models[i]
			watched(pl, o)
		},
	})
	return c
}

// takenOver runs turns on node victim's partitions, has kill end it, and
// checks that the others carry its turns on and share its partitions, with
// no silence timeout to help them.
func takenOver(t *testing.T, kill func(c *cluster, victim int)) {
	pl := &presenceLog{seen: map[string][]string{}}
	c := newSilentCluster(t, pl)
	recs := c.balanced("n0", "n1", "n2")
	const victim = 2
	c.models[victim].hold.Store(int64(time.Minute))
	sids := c.sessionsOn(recs, victim, 3, "s_gone")
	inputs := map[string][]string{}
	for _, sid := range sids {
		c.send(sid, "in_"+sid, "hello")
		inputs[sid] = []string{"in_" + sid}
	}
	// A deadline for a hang only: three nodes forming on a loaded machine
	// (CI beside other suites) have taken more than 30 s to start them.
	bustest.Eventually(t, 2*time.Minute, "the victim's turns in flight", func() bool { return c.models[victim].calls.Load() >= 3 })
	cutOff := c.Node(victim)
	kill(c, victim)
	c.finished(inputs)
	c.balanced("n0", "n1")
	for _, sid := range sids {
		if by := c.claimedBy(sid); len(by) != 2 || by[0] != "n2" || by[1] == "n2" {
			t.Errorf("%s claimed by %v, want n2 then another", sid, by)
		}
	}
	for _, obs := range []string{"n0", "n1"} {
		if !pl.has(obs, "n2", msgDead) {
			t.Errorf("%s did not take n2 for dead on the servers' word: %q", obs, pl.messages(obs, "n2"))
		}
	}
	// Cut off, the victim stops without a goodbye that nobody could hear:
	// it used to publish it, delete its presence entry and unpin its
	// partitions, each step waiting out its bound (20 s and more in all),
	// and the delete's failure failed the close.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang's deadline only
	defer cancel()
	if err := cutOff.Close(ctx); err != nil {
		t.Errorf("closing the cut-off n2: %v", err)
	}
}

// A node whose connection closed (the process gone, or cut from its server)
// without a leaving presence is replaced on the server's disconnect
// advisory: its turns finish on the others and they share its partitions,
// although the node TTL (an hour) is far from over.
func TestPresenceClosedConnectionIsTakenOverAtOnce(t *testing.T) {
	t.Parallel()
	takenOver(t, func(c *cluster, victim int) {
		// Cut from its server, which runs on and says the connections
		// closed: the presence's (what the others go by) and the main one.
		b := c.Node(victim).Bus()
		b.PresenceConn().Close()
		b.Conn().Close()
	})
}

// kill -9 of a node as one process can play it (its embedded server goes at
// once): no surviving server sees its connection close, but theirs lose
// their routes to its server, whose port then refuses connections. The
// others take it over without waiting for the node TTL (an hour).
func TestPresenceKilledNodeIsTakenOverAtOnce(t *testing.T) {
	t.Parallel()
	takenOver(t, func(c *cluster, victim int) { c.Kill(victim) })
}

// A node whose connection moves to another server of the cluster (it closes
// the old one itself, as after a network error, and reconnects) keeps its
// partitions: the others see the old connection close, then hear it on the
// new one within the grace, and do not take it for dead.
//
// Not beside the package's other tests (no t.Parallel): the others wait a
// grace of at most a second for the node on its new connection, and on a
// machine loaded enough (two CPU hogs beside this package and bus, four
// tests at a time each) that second passed before a survivor heard it.
func TestPresenceNodeMovingServersKeepsPartitions(t *testing.T) {
	pl := &presenceLog{seen: map[string][]string{}}
	c := newSilentCluster(t, pl)
	c.balanced("n0", "n1", "n2")

	// A fourth node on the cluster's servers as an external NATS: n0's and
	// n1's.
	cfg := c.Config(0)
	cfg.NodeID, cfg.DataDir = "ext", t.TempDir()
	cfg.NATS.URL = c.Layout().Slots[0].URL() + "," + c.Layout().Slots[1].URL()
	cfg.NATS.Creds = c.Layout().Creds
	cfg.NATS.Port, cfg.NATS.ServerName, cfg.NATS.ClusterName, cfg.NATS.ClusterPort, cfg.NATS.Routes = 0, "", "", 0, nil
	o, err := node.Configure(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o.Logger, o.Provider = tahtest.Logger(t, "ext"), &heldModel{}
	watched(pl, &o)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ext, err := node.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer ext.Close(context.Background())
	before := c.balanced("n0", "n1", "n2", "ext")
	// The presence's connection is the one the others go by; the main one
	// moves too, as after a network error.
	nc := ext.Bus().PresenceConn()
	from := nc.ConnectedServerName()

	for round := range 3 {
		// A connection is its server's and its id there: ids are counted
		// per server, so the one on the next server may be the same number.
		conn := func() string {
			cid, _ := nc.GetClientID()
			return fmt.Sprintf("%s/%d", nc.ConnectedServerId(), cid)
		}
		was := conn()
		if err := nc.ForceReconnect(); err != nil {
			t.Fatal(err)
		}
		if err := ext.Bus().Conn().ForceReconnect(); err != nil {
			t.Fatal(err)
		}
		bustest.Eventually(t, 30*time.Second, "ext on a new connection", func() bool {
			return nc.IsConnected() && conn() != was
		})
		// Each survivor settles the old connection's close one way or the
		// other: the event waited for, not a time.
		for _, obs := range []string{"n0", "n1", "n2"} {
			bustest.Eventually(t, 30*time.Second, obs+" settling ext's move", func() bool {
				return len(settled(pl.messages(obs, "ext"))) > round
			})
		}
		t.Logf("round %d: ext moved from %s to %s", round, from, nc.ConnectedServerName())
		from = nc.ConnectedServerName()
	}
	for _, obs := range []string{"n0", "n1", "n2"} {
		if pl.has(obs, "ext", msgDead) {
			t.Errorf("%s took ext for dead when it only moved: %q", obs, pl.messages(obs, "ext"))
		}
	}
	after := c.balanced("n0", "n1", "n2", "ext")
	if p0, p1 := partitionsOf(before, "ext"), partitionsOf(after, "ext"); !slices.Equal(p0, p1) {
		t.Errorf("ext's partitions went from %v to %v", p0, p1)
	}
}

// settled are the messages of msgs that settle a connection's close.
func settled(msgs []string) []string {
	var out []string
	for _, m := range msgs {
		for _, p := range []string{msgDead, msgBack, msgAlready, msgLeftSlow} {
			if strings.HasPrefix(m, p) {
				out = append(out, m)
			}
		}
	}
	return out
}

func partitionsOf(recs []wire.NodeRecord, id string) []int {
	for _, r := range recs {
		if r.Node == id {
			return r.Partitions
		}
	}
	return nil
}
