package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/wire"
)

// A node killed (kill -9, a crash) is taken for dead from what the NATS
// servers saw, without waiting for NodeTTL of silence:
//
//   - a server's disconnect advisory (wire.DisconnectAdvisories) for the
//     connection the node's last presence names (its server id and client
//     id there), closed because its peer went away (EOF, or a read or write
//     error: the process is gone, or closed its connection). A server that closed the
//     connection itself (a slow consumer, a stale connection, its own
//     shutdown) says nothing of the node: that is left to the silence, so
//     that a node that is only slow does not lose its sessions;
//   - with an embedded server, the loss of its routes to the server the
//     node's presence names (a node killed takes its embedded server with
//     it, whose clients no surviving server sees close), when that server's
//     client port then refuses connections: a process that is only paused
//     or starved keeps its listening socket and is left to the silence.
//
// Either way the node is taken for dead only if it is not heard from on
// another connection within a grace (a node whose server went away
// reconnects to another one of the cluster and publishes its presence at
// once: that must not move its partitions). The silence timeout stays for
// partitions of the network, which close no connection.

// Timings of the watch.
const (
	// watchEvery is how often the routes are looked at and the suspicions
	// settled.
	watchEvery = 100 * time.Millisecond
	// probeTimeout bounds the dial of a lost server's client port.
	probeTimeout = 500 * time.Millisecond
)

// Closed states of a server's disconnect advisory that mean the peer went
// away (nats-server's ClientClosed, ReadError and WriteError: EOF, or a read
// or write that failed other than by timing out, a reset or a broken pipe).
// A write that timed out is a slow consumer's (SlowConsumerWriteDeadline):
// not among them.
var peerGone = map[string]bool{"Client Closed": true, "Read Error": true, "Write Error": true}

// connRef is a NATS connection: its server's id and its client id there.
type connRef struct {
	server string
	client uint64
}

func connOf(r wire.NodeRecord) connRef {
	return connRef{server: r.NATSServerID, client: r.NATSClientID}
}

func (c connRef) valid() bool { return c.server != "" && c.client != 0 }

// suspicion is a node whose connection a server saw go, until it is heard
// from on another one or the grace passes.
type suspicion struct {
	conn  connRef
	since time.Time
	why   string
	// probe, for the loss of the routes to the node's server, is the
	// address of that server's client port: the node is dead only if it
	// refuses connections.
	probe string
}

// grace is how long a node whose connection went has to come back on
// another one.
func (m *membership) grace() time.Duration {
	return min(max(m.every/2, 250*time.Millisecond), time.Second)
}

// startWatch subscribes to the disconnect advisories, publishes the node's
// presence at once when its connection moves to another server, and starts
// the watch of the routes and suspicions (owned by m.wg, stopped by m.cancel).
func (m *membership) startWatch(ctx context.Context) {
	nc := m.n.bus.PresenceConn()
	sub, err := nc.Subscribe(wire.DisconnectAdvisories, m.disconnected)
	if err != nil {
		// An external NATS that does not let the node read them: the
		// silence timeout alone takes dead nodes out.
		m.log.Warn("the NATS servers' disconnect advisories are not followed: a dead node is taken for dead after the node TTL", "err", err)
	}
	m.mu.Lock()
	m.advisories = sub
	m.mu.Unlock()
	nc.SetReconnectHandler(func(*nats.Conn) {
		m.mu.Lock()
		closed := m.closed
		m.mu.Unlock()
		if closed {
			return
		}
		// The others wait a grace for it before they take it for dead.
		if err := m.publish(false); err != nil {
			m.log.Debug("presence not published after a reconnect", "err", err)
		}
	})
	m.wg.Add(1)
	go m.watch(ctx)
}

// stopWatch undoes startWatch's subscription and handler (the goroutine
// ends with m's context).
func (m *membership) stopWatch() {
	m.n.bus.PresenceConn().SetReconnectHandler(nil)
	m.mu.Lock()
	sub := m.advisories
	m.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
}

// disconnectAdvisory is what the node reads of a server's
// io.nats.server.advisory.v1.client_disconnect.
type disconnectAdvisory struct {
	Server struct {
		Name string `json:"name"`
		ID   string `json:"id"`
	} `json:"server"`
	Client struct {
		ID uint64 `json:"id"`
	} `json:"client"`
	Reason string `json:"reason"`
}

// disconnected suspects the node whose presence connection a server saw
// close, if its peer went away.
func (m *membership) disconnected(msg *nats.Msg) {
	var a disconnectAdvisory
	if json.Unmarshal(msg.Data, &a) != nil {
		return
	}
	c := connRef{server: a.Server.ID, client: a.Client.ID}
	if !c.valid() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, r := range m.last {
		if connOf(r) != c {
			continue
		}
		if !peerGone[a.Reason] {
			m.log.Info("a node's connection was closed by its NATS server: the node is left to its silence", "node", id,
				"nats_server", a.Server.Name, "reason", a.Reason)
			return
		}
		if _, ok := m.suspects[id]; ok {
			return
		}
		if _, ok := m.gone[id]; ok {
			return
		}
		m.suspects[id] = suspicion{conn: c, since: time.Now(),
			why: fmt.Sprintf("its connection to NATS server %s closed (%s)", a.Server.Name, a.Reason)}
		return
	}
	for id, was := range m.prev {
		if was == c {
			// Its presence on the new connection came first.
			m.log.Info("a node's earlier connection closed: it is on another already", "node", id, "nats_server", a.Server.Name)
			return
		}
	}
}

// watch looks at the routes and settles the suspicions every watchEvery.
func (m *membership) watch(ctx context.Context) {
	defer m.wg.Done()
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	routes := m.routes(nil)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		routes = m.routes(routes)
		m.settle(ctx)
	}
}

// routes reads the embedded server's routes (nil without one): remote
// server id -> its address. The servers that were in was and are no longer
// make suspects of the nodes whose presence names them; those back clear
// the suspicions their loss raised.
func (m *membership) routes(was map[string]string) map[string]string {
	srv := m.n.bus.Server()
	if srv == nil {
		return nil
	}
	rz, err := srv.Routez(&server.RoutezOptions{})
	if err != nil {
		return was // shutting down
	}
	now := make(map[string]string, len(rz.Routes))
	for _, r := range rz.Routes {
		now[r.RemoteID] = r.IP
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, s := range m.suspects {
		if s.probe != "" {
			if _, back := now[s.conn.server]; back {
				m.log.Info("the routes to a node's NATS server are back: not taking it for dead", "node", id)
				delete(m.suspects, id)
			}
		}
	}
	for sid, ip := range was {
		if _, ok := now[sid]; ok {
			continue
		}
		for id, r := range m.last {
			if r.NATSServerID != sid || !connOf(r).valid() {
				continue
			}
			if _, ok := m.suspects[id]; ok {
				continue
			}
			if _, ok := m.gone[id]; ok {
				continue
			}
			m.suspects[id] = suspicion{conn: connOf(r), since: time.Now(), probe: probeAddr(r.NATS, ip),
				why: fmt.Sprintf("the routes to its NATS server %s were lost and its client port refuses connections", r.NATSServer)}
		}
	}
	return now
}

// probeAddr is the address of a server's client port: the host of its
// route (the client URL's may be 0.0.0.0) and the port of its client URL.
func probeAddr(clientURL, routeIP string) string {
	u, err := url.Parse(clientURL)
	if err != nil || u.Port() == "" {
		return ""
	}
	host := u.Hostname()
	if routeIP != "" {
		host = routeIP
	}
	return net.JoinHostPort(host, u.Port())
}

// settle takes the suspects whose grace has passed for dead (a lost server's
// after its client port refused a connection), and forgets the dead that the
// silence has taken out since.
func (m *membership) settle(ctx context.Context) {
	grace := m.grace()
	m.mu.Lock()
	due := map[string]suspicion{}
	for id, s := range m.suspects {
		if time.Since(s.since) >= grace {
			due[id] = s
			delete(m.suspects, id)
		}
	}
	for id := range m.gone {
		if time.Since(m.seen[id]) > m.ttl {
			delete(m.gone, id)
			delete(m.undeleted, id) // its entry has expired
		}
	}
	for p, at := range m.orphans {
		if time.Since(at) > m.orphanFor() {
			delete(m.orphans, p)
		}
	}
	back := m.back
	m.back = map[string]wire.NodeRecord{}
	m.mu.Unlock()
	m.writeBack(ctx, back)
	var dead []string
	for id, s := range due {
		if s.probe != "" {
			if err := probe(ctx, s.probe); err != nil {
				m.log.Info("the routes to a node's NATS server were lost, but it may still run: the node is left to its silence",
					"node", id, "probe", s.probe, "err", err)
				continue
			}
		}
		if m.declare(id, s) {
			dead = append(dead, id)
		}
	}
	if len(dead) > 0 {
		m.poke()
	}
	m.deleteEntries(ctx, dead)
}

// deleteEntries deletes the entries in tah_nodes of the nodes just taken for
// dead, and of those whose delete failed before and are still taken for
// dead: an entry would stay until it expires (NodeTTL), and status should
// show the cluster as it is. (A node taken for dead wrongly writes it again
// with its next presence.)
func (m *membership) deleteEntries(ctx context.Context, dead []string) {
	m.mu.Lock()
	for _, id := range dead {
		m.undeleted[id] = true
	}
	var ids []string
	for id := range m.undeleted {
		if _, ok := m.gone[id]; ok {
			ids = append(ids, id)
		} else {
			delete(m.undeleted, id) // back, or forgotten
		}
	}
	m.mu.Unlock()
	for _, id := range ids {
		dctx, cancel := context.WithTimeout(ctx, m.opTimeout())
		err := m.n.bus.DeleteNode(dctx, id)
		cancel()
		if err != nil {
			m.log.Debug("a dead node's entry not deleted from tah_nodes yet (tried again, or it expires)", "node", id, "err", err)
			continue
		}
		m.mu.Lock()
		delete(m.undeleted, id)
		m.mu.Unlock()
	}
}

// writeBack writes again the entries in tah_nodes that this node deleted
// (settle) of nodes it took for dead and then heard from on another
// connection (a node only slow to reconnect, on a loaded machine): each as
// its last presence says. The node itself writes its entry only every
// presence period (NodeTTL/5), and until then status and nodes starting
// would not see it, nor the partitions it still pulls. Its own next write
// replaces this one.
func (m *membership) writeBack(ctx context.Context, back map[string]wire.NodeRecord) {
	for id, r := range back {
		wctx, cancel := context.WithTimeout(ctx, m.opTimeout())
		if err := m.n.bus.PutNode(wctx, r); err != nil {
			m.log.Debug("the entry of a node taken for dead and back not written again (it writes it itself)", "node", id, "err", err)
		}
		cancel()
	}
}

// errListening: a probed server's client port still accepts connections.
var errListening = errors.New("its client port accepts connections")

// probe returns nil if nothing listens at addr any more (the connection is
// refused), else why it cannot say so.
func probe(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: probeTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		_ = c.Close()
		return errListening
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil
	}
	return err
}

// declare takes node id for dead on s, unless it was heard from on another
// connection meanwhile; its partitions are unpinned when taken.
func (m *membership) declare(id string, s suspicion) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.last[id]
	if !ok || connOf(r) != s.conn {
		return false // left, or back on another connection
	}
	now := time.Now()
	m.gone[id] = s.conn
	for _, p := range r.Partitions {
		m.orphans[p] = now
	}
	m.log.Warn("taking a node for dead without waiting for its silence: its partitions move now", "node", id, "why", s.why,
		"after", now.Sub(s.since).Round(time.Millisecond), "partitions", r.Partitions)
	return true
}

// heardConn updates what m knows of node r.Node's connection from its
// presence r (not this node's, not a leaving one), and reports whether a
// node taken for dead is back (on another connection). m.mu is held.
func (m *membership) heardConn(r wire.NodeRecord) (back bool) {
	c := connOf(r)
	if s, ok := m.suspects[r.Node]; ok && c != s.conn {
		m.log.Info("a node whose connection went is back on another: not taking it for dead", "node", r.Node,
			"nats_server", r.NATSServer, "after", time.Since(s.since).Round(time.Millisecond))
		delete(m.suspects, r.Node)
	}
	if dead, ok := m.gone[r.Node]; ok {
		if c == dead {
			return false // a presence sent before it died, late
		}
		m.log.Info("a node taken for dead is back", "node", r.Node, "nats_server", r.NATSServer)
		delete(m.gone, r.Node)
		m.back[r.Node] = r
		back = true
	}
	if was, ok := m.last[r.Node]; ok && connOf(was) != c && connOf(was).valid() {
		m.prev[r.Node] = connOf(was)
	}
	m.last[r.Node] = r
	return back
}

// forget drops what m knows of node id's connection (it left). m.mu is
// held.
func (m *membership) forget(id string) {
	delete(m.last, id)
	delete(m.prev, id)
	delete(m.suspects, id)
	delete(m.gone, id)
	delete(m.back, id)
	delete(m.undeleted, id)
}

// fencedOut is called when node id's presence first says it is fenced: it
// has stopped its sessions and its pulls, and live leaves it out from now
// on, so that its partitions move at once instead of after its silence. (A
// fenced node whose presence still goes out, on its presence connection,
// would otherwise count as alive: the partitions it handed over went back
// to it in the others' eyes, and a survivor that had taken them gave them
// up and claimed their sessions again after the silence.) The partitions it
// pulled before are unpinned when taken, as a dead node's are: it could not
// unpin them itself if its main connection is what it lost. m.mu is held.
func (m *membership) fencedOut(id string, partitions []int) {
	now := time.Now()
	for _, p := range partitions {
		m.orphans[p] = now
	}
	m.log.Warn("a node says it is fenced: its partitions move now", "node", id, "partitions", partitions)
}

// takeOrphans returns, of the partitions just added, those of nodes taken
// for dead, with when.
func (m *membership) takeOrphans(added []int) map[int]time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int]time.Time{}
	for _, p := range added {
		if at, ok := m.orphans[p]; ok {
			out[p] = at
			delete(m.orphans, p)
		}
	}
	return out
}

// takeOverOrphans readies the partitions of nodes taken for dead, before
// this node pulls them (bus.InputConsumer.TakeOver): the server resets
// their consumers and lets go of the dead nodes' pins, so that this node's
// pulls get them now rather than InputPinnedTTL after the dead node's last
// pull, and the inputs the dead node held unacknowledged come again now
// rather than after their ack wait. Its turns then go on here even where no
// read model shows them open (a turn whose first record was in flight, or
// a cluster of workers only). A pin given since is another node's: it
// stays. It returns the partitions not readied yet (their consumer's
// leader died with the node, another is not elected yet): they are orphans
// again, not to be pulled before the next try (rebalance), until
// orphanFor has passed.
func (m *membership) takeOverOrphans(ctx context.Context, orphans map[int]time.Time) []int {
	if len(orphans) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.opTimeout())
	defer cancel()
	held := 0
	var later []int
	for _, p := range slices.Sorted(maps.Keys(orphans)) {
		n, err := m.n.inputs.TakeOver(ctx, p, orphans[p])
		held += n
		switch {
		case errors.Is(err, bus.ErrNotTakenOver) && time.Since(orphans[p]) < m.orphanFor():
			later = append(later, p)
		case err != nil:
			// What was not done comes by itself: an unpin when the pin
			// expires, inputs not delivered again after their ack wait.
			m.log.Info("partition of a dead node pulled, not wholly readied (the rest comes by itself: the pin expires, the inputs after their ack wait)", "partition", p, "err", err)
		}
	}
	if len(later) > 0 {
		m.mu.Lock()
		for _, p := range later {
			m.orphans[p] = orphans[p]
		}
		m.mu.Unlock()
		m.log.Debug("partitions of a dead node not taken over yet: tried again before they are pulled", "partitions", later)
	}
	if held > 0 {
		m.log.Info("inputs a dead node held delivered again now", "inputs", held, "partitions", slices.Sorted(maps.Keys(orphans)))
	}
	return later
}

// orphanFor is how long a dead node's partition is an orphan, its takeover
// worth waiting for: the ack wait of its inputs, after which they come
// again anyway, and at least the node TTL (the pin's).
func (m *membership) orphanFor() time.Duration {
	return max(m.ttl, m.n.bus.Config().InputAckWait)
}
