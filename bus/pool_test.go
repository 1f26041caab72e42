package bus

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
)

// connsOf returns the server's client connections named after cfgName (the
// Bus's), by name: cfgName itself for the main one, "<cfgName> append <i>",
// "<cfgName> tail" and "<cfgName> presence" for the pool's.
func connsOf(t *testing.T, srv *server.Server, cfgName string) map[string]*server.ConnInfo {
	t.Helper()
	cz, err := srv.Connz(&server.ConnzOptions{Limit: 1024})
	if err != nil {
		t.Fatalf("connz: %v", err)
	}
	out := map[string]*server.ConnInfo{}
	for _, c := range cz.Conns {
		if c.Name == cfgName || strings.HasPrefix(c.Name, cfgName+" ") {
			out[c.Name] = c
		}
	}
	return out
}

// inMsgs is what each of the Bus's connections has sent the server so far.
func inMsgs(t *testing.T, srv *server.Server, cfgName string) map[string]int64 {
	out := map[string]int64{}
	for name, c := range connsOf(t, srv, cfgName) {
		out[name] = c.InMsgs
	}
	return out
}

// carrier appends n records to sid and returns the name of the connection
// that sent them: the one whose count of messages sent grew by n or more.
// The server counts a connection's messages once its read loop has parsed
// them, which may be just after the acks: it is waited for.
func carrier(t *testing.T, b *Bus, sid string, n int) string {
	t.Helper()
	before := inMsgs(t, b.Server(), b.cfg.Name)
	w, err := b.Writer(sid, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		mustAppend(t, w, turn(sid, i))
	}
	var name string
	bustest.Eventually(t, 10*time.Second, "a connection that sent the appends of "+sid, func() bool {
		for c, in := range inMsgs(t, b.Server(), b.cfg.Name) {
			if in-before[c] >= int64(n) {
				name = c
				return true
			}
		}
		return false
	})
	return name
}

// TestAppendsOfShardsGoOnTheirConnections: with two append connections, the
// appends of shard 0 and of shard 1 go out on different connections, neither
// of them the main one; with one, everything goes on the main connection, as
// before the pool.
func TestAppendsOfShardsGoOnTheirConnections(t *testing.T) {
	t.Parallel()
	b := embedded(t, func(c *Config) { c.Conns = 2 })
	const n = 20
	c0 := carrier(t, b, sidsInShard(b, 0, 1, "s_pool0_")[0], n)
	c1 := carrier(t, b, sidsInShard(b, 1, 1, "s_pool1_")[0], n)
	c2 := carrier(t, b, sidsInShard(b, 2, 1, "s_pool2_")[0], n)
	if c0 == c1 {
		t.Fatalf("the appends of shards 0 and 1 both went on %q", c0)
	}
	if c0 != c2 {
		t.Fatalf("the appends of shards 0 and 2 (both on connection 0 of 2) went on %q and %q", c0, c2)
	}
	for _, c := range []string{c0, c1} {
		if !strings.HasPrefix(c, b.cfg.Name+" append ") {
			t.Fatalf("appends went on %q, not an append connection", c)
		}
	}
	if got := len(connsOf(t, b.Server(), b.cfg.Name)); got != 5 {
		t.Fatalf("%d connections, want 5 (main, two for appends, one for tails, one for the presence)", got)
	}
	if b.PresenceConn() == b.Conn() || b.PresenceConn().Opts.Name != b.cfg.Name+" presence" {
		t.Fatalf("the presence goes on %q, want a connection of its own", b.PresenceConn().Opts.Name)
	}

	one := embedded(t, func(c *Config) { c.Conns = 1 })
	if got := connsOf(t, one.Server(), one.cfg.Name); len(got) != 1 || got[one.cfg.Name] == nil || one.PresenceConn() != one.Conn() {
		t.Fatalf("Conns 1: connections %v, want the main one alone", got)
	}
	if c := carrier(t, one, "s_one", n); c != one.cfg.Name {
		t.Fatalf("Conns 1: appends went on %q, want the main connection", c)
	}
}

// TestPoolKeepsEachSessionsOrder: sessions of every shard append at once over
// three connections (shards 0, 3 and 6 share one, and so on), some of them
// in atomic batches: each session's records are in its log in the order it
// appended them, at the sequences it was acknowledged, and every connection
// carried some.
func TestPoolKeepsEachSessionsOrder(t *testing.T) {
	defer setMinGroup(2)()
	b := embedded(t, func(c *Config) { c.Conns = 3 })
	const sessions, each = 48, 12
	before := inMsgs(t, b.Server(), b.cfg.Name)
	sids := make([]string, sessions)
	acked := make([][]uint64, sessions)
	errs := make([]error, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		sids[i] = fmt.Sprintf("s_order%02d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := b.Writer(sids[i], 1, 0)
			if err != nil {
				errs[i] = err
				return
			}
			for j := range each {
				seqs, err := w.Append(ctxT(t), turn(sids[i], j))
				if err != nil {
					errs[i] = err
					return
				}
				acked[i] = append(acked[i], seqs[0])
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("session %s: %v", sids[i], err)
		}
	}
	for i, sid := range sids {
		evs, _ := mustReplay(t, b, sid, 0)
		got := texts(t, evs)
		if len(got) != each {
			t.Fatalf("%s has %d records, want %d", sid, len(got), each)
		}
		for j := range each {
			if want := fmt.Sprintf("%s #%d", sid, j); got[j] != want || evs[j].Seq != acked[i][j] {
				t.Fatalf("%s record %d is %q at %d, want %q at %d", sid, j, got[j], evs[j].Seq, want, acked[i][j])
			}
		}
	}
	for k := range b.Shards() {
		if c := b.committerOf(k); c != nil && c.link != b.appendLink(k) {
			t.Fatalf("shard %d's committer is not on the shard's connection", k)
		}
	}
	bustest.Eventually(t, 10*time.Second, "every append connection carried appends", func() bool {
		after := inMsgs(t, b.Server(), b.cfg.Name)
		for i := range 3 {
			name := fmt.Sprintf("%s append %d", b.cfg.Name, i+1)
			if after[name]-before[name] < each {
				return false
			}
		}
		return true
	})
}

// TestTailOnItsOwnConnection: TailAll's consumers run on the tails'
// connection, not on the main one nor an append one.
func TestTailOnItsOwnConnection(t *testing.T) {
	t.Parallel()
	b := embedded(t, func(c *Config) { c.Conns = 2 })
	w, _ := b.Writer("s_tailconn", 1, 0)
	const n = 5
	for i := range n {
		mustAppend(t, w, turn("s_tailconn", i))
	}
	got := make(chan struct{}, n)
	tl, err := b.TailAll(ctxT(t), nil, nil, func(int, uint64, []event.Event) error {
		got <- struct{}{}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Stop()
	for range n {
		<-got
	}
	tailName := b.cfg.Name + " tail"
	bustest.Eventually(t, 10*time.Second, "the tail's connection delivered the records", func() bool {
		c := connsOf(t, b.Server(), b.cfg.Name)[tailName]
		return c != nil && c.OutMsgs >= n && c.NumSubs > 0
	})
}

// TestCloseClosesEveryConnection: Close drains the main connection and every
// connection of the pool; the external server sees none of them left.
func TestCloseClosesEveryConnection(t *testing.T) {
	t.Parallel()
	srv := bustest.Server(t)
	cfg := Default()
	cfg.URL, cfg.Partitions, cfg.Conns, cfg.Name = srv.ClientURL(), 4, 3, "tah-close"
	ctx := ctxT(t)
	b, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(connsOf(t, srv, cfg.Name)); got != 6 {
		t.Fatalf("%d connections open, want 6 (main, three for appends, one for tails, one for the presence)", got)
	}
	links := append([]*link{b.main}, b.extra...)
	w, _ := b.Writer("s_close", 1, 0)
	mustAppend(t, w, turn("s_close", 0))
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if !l.nc.IsClosed() {
			t.Fatalf("connection %s is not closed", l.nc.Opts.Name)
		}
	}
	bustest.Eventually(t, 10*time.Second, "the server sees no connection of the bus", func() bool {
		return len(connsOf(t, srv, cfg.Name)) == 0
	})
}

// TestPoolAfterReconnect: the external server restarts on the same port and
// store; every connection of the pool comes back by itself, the session's
// writer goes on where it was, and the tail delivers what is appended after
// the restart. The main connection's reconnect handler (the node's presence
// sets one) still fires, for it alone.
func TestPoolAfterReconnect(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := bustest.ServerWith(t, func(o *server.Options) { o.StoreDir = dir })
	port := srv.Addr().(*net.TCPAddr).Port
	b := connected(t, srv.ClientURL(), func(c *Config) { c.Conns = 2 })
	reconnected := make(chan struct{}, 4)
	b.Conn().SetReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} })

	const sid = "s_reconn"
	w, _ := b.Writer(sid, 1, 0)
	mustAppend(t, w, turn(sid, 0))
	seen := make(chan string, 16)
	tl, err := b.Tail(ctxT(t), sid, 0, func(e event.Event) error {
		d, err := event.DecodeAs[event.TurnStartedData](e)
		if err != nil {
			return err
		}
		seen <- d.Message.Content
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Stop()
	if got := <-seen; got != sid+" #0" {
		t.Fatalf("tail saw %q first", got)
	}

	srv.Shutdown()
	srv.WaitForShutdown()
	bustest.ServerWith(t, func(o *server.Options) { o.StoreDir, o.Port = dir, port })
	select {
	case <-reconnected:
	case <-ctxT(t).Done():
		t.Fatal("the main connection's reconnect handler did not fire")
	}
	for _, l := range append([]*link{b.main}, b.extra...) {
		bustest.Eventually(t, 30*time.Second, "connection "+l.nc.Opts.Name+" back", func() bool {
			return l.nc.Status() == nats.CONNECTED
		})
	}

	mustAppend(t, w, turn(sid, 1))
	select {
	case got := <-seen:
		if got != sid+" #1" {
			t.Fatalf("tail saw %q after the restart, want %q", got, sid+" #1")
		}
	case <-ctxT(t).Done():
		t.Fatal("the tail delivered nothing after the restart")
	}
	evs, _ := mustReplay(t, b, sid, 0)
	if got := texts(t, evs); len(got) != 2 || got[1] != sid+" #1" {
		t.Fatalf("log after the restart: %v", got)
	}
}

// TestConnsDownNamesTheConnection: a pool connection that is down makes the
// Bus unfit to serve (what /healthz reports), and the error names it.
func TestConnsDownNamesTheConnection(t *testing.T) {
	t.Parallel()
	b := embedded(t, func(c *Config) { c.Conns = 2 })
	if err := b.ConnsDown(); err != nil {
		t.Fatalf("all connections up: %v", err)
	}
	b.PresenceConn().Close()
	err := b.ConnsDown()
	if err == nil || !strings.Contains(err.Error(), b.cfg.Name+" presence") || !strings.Contains(err.Error(), "CLOSED") {
		t.Fatalf("ConnsDown with the presence connection closed = %v, want it named, CLOSED", err)
	}
}
