package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/wire"
)

// membership is a node's part in the cluster, with no coordinator but NATS:
//
//   - presence: the node publishes its bus.NodeRecord on core NATS every
//     NodeTTL/5 (and at once when its partitions change or its connection
//     moves to another server) and listens to the others'; a node not heard
//     of for NodeTTL is dead, and so is one whose connection the NATS
//     servers saw go, at once (presence.go: a kill -9 need not wait for the
//     silence). Core NATS, not JetStream: a stream leader election stalls
//     JetStream writes for seconds and must not look like nodes dying. It
//     goes on a connection of its own (bus.PresenceConn), so that it never
//     queues behind the node's own traffic, and is held back while the main
//     connection, the one the node's work needs, is down. The record is also
//     kept in tah_nodes (for status, and for nodes starting); writes there
//     may fail without consequence;
//   - ownership: every node computes Assign over the live nodes and pulls its
//     share of the input partitions; the pinned consumers make sure a partition
//     is delivered to one node at a time while nodes disagree for a moment;
//     a share that shrinks is handed over (stop pulling, stop those sessions,
//     unpin);
//   - self-fencing: a node that does not hear its own presence back for
//     NodeTTL (its connection is down, or the process was paused; not when
//     it published and its connection answers a ping: its own copy is only
//     late, the others hear it), whose main
//     connection is down as long, or that hears no other node while it cannot
//     write to JetStream either for twice NodeTTL (its server lost the
//     cluster; not sooner: see outOfTouch), is about to be
//     replaced: it stops its sessions and pulls at once, and rejoins when it
//     is back in touch.
//
// (The claim watch is the projector's: a session.claimed with a newer epoch
// stops this node's actor of that session, a stale owner, cancelling its LLM
// and tool calls.)
type membership struct {
	n     *Node
	log   *slog.Logger
	ttl   time.Duration
	every time.Duration
	parts int

	started  time.Time
	kick     chan struct{}
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	presence *nats.Subscription

	mu       sync.Mutex
	seen     map[string]time.Time // other node id -> when it was last heard of
	echo     time.Time            // when this node last heard its own presence
	echoLag  time.Duration        // how long that presence took to come back
	sent     time.Time            // when this node last handed its presence to its connection
	mainUp   time.Time            // when the main connection (its work's) was last seen connected
	storedOK time.Time            // when its presence was last written to tah_nodes
	fenced   bool
	closed   bool
	twin     time.Time // when another node with this node's id was last heard
	// What the servers say of the other nodes' connections (presence.go):
	// each one's last presence, those whose connection went (until they
	// come back on another or their grace passes), those taken for dead on
	// that (until heard on another connection), and the dead ones'
	// partitions, to unpin when taken.
	last     map[string]wire.NodeRecord
	prev     map[string]connRef // the connection before the last one
	suspects map[string]suspicion
	gone     map[string]connRef
	orphans  map[int]time.Time
	// back are nodes this one took for dead, and whose entry in tah_nodes
	// it deleted, heard again: their last presence, to write back (settle).
	back map[string]wire.NodeRecord
	// undeleted are nodes taken for dead whose entry in tah_nodes is still
	// to delete: a delete that failed (the bucket's stream electing a
	// leader, its server gone with the node) is made again (settle).
	undeleted  map[string]bool
	advisories *nats.Subscription
	// fences counts the times the node fenced itself (a metric).
	fences atomic.Int64
}

// startMembership joins the cluster: it learns the nodes present, publishes
// the node's presence, takes its share of the partitions and keeps all of that
// up to date until close.
func startMembership(ctx context.Context, n *Node) (*membership, error) {
	cfg := n.bus.Config()
	now := time.Now()
	m := &membership{n: n, log: n.log.With("component", "cluster"), ttl: cfg.NodeTTL,
		every: max(cfg.NodeTTL/5, 50*time.Millisecond), parts: cfg.Partitions,
		started: now, kick: make(chan struct{}, 1), seen: map[string]time.Time{},
		echo: now, sent: now, mainUp: now, storedOK: now, last: map[string]wire.NodeRecord{}, prev: map[string]connRef{}, suspects: map[string]suspicion{},
		gone: map[string]connRef{}, orphans: map[int]time.Time{}, back: map[string]wire.NodeRecord{}, undeleted: map[string]bool{}}
	recs, err := n.bus.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	namesake := false // a recent entry under this node's id: alive, or this node before a crash
	for _, r := range recs {
		switch {
		case r.Node == n.ID():
			namesake = true
		case !r.Leaving:
			m.seen[r.Node] = now
			m.last[r.Node] = r
		}
	}
	nc := n.bus.PresenceConn()
	if m.presence, err = nc.Subscribe(wire.NodeSubjects, m.heard); err != nil {
		return nil, fmt.Errorf("node: listening to the cluster's nodes: %w", err)
	}
	if namesake {
		err = m.checkTwin(ctx)
	}
	if err == nil {
		err = m.publish(false)
	}
	if err == nil {
		err = m.store(ctx)
	}
	if err != nil {
		_ = m.presence.Unsubscribe()
		return nil, err
	}
	// The shards' streams follow the sessions (a no-op but in an embedded
	// cluster, and on the meta leader's node).
	n.bus.SetStreamHomes(m.streamHomes)
	m.rebalance(ctx, false)
	wctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Add(3)
	go m.pulse(wctx)
	go m.run(wctx)
	go m.keepStored(wctx)
	m.startWatch(wctx)
	return m, nil
}

// ErrNodeIDInUse is returned by Start when a running node already has the
// node's id.
var ErrNodeIDInUse = errors.New("node id in use by a running node")

// checkTwin listens for two presence periods for a running node with this
// node's id (its entry in tah_nodes is recent: it may also be this node's own,
// from before a crash).
func (m *membership) checkTwin(ctx context.Context) error {
	select {
	case <-time.After(2 * m.every):
	case <-ctx.Done():
		return ctx.Err()
	}
	m.mu.Lock()
	twin := !m.twin.IsZero()
	m.mu.Unlock()
	if twin {
		return fmt.Errorf("node %s: %w: give this node another --node-id (TAH_NODE_ID), or stop the other one", m.n.ID(), ErrNodeIDInUse)
	}
	return nil
}

// heard records a presence published by a node (this one included).
func (m *membership) heard(msg *nats.Msg) {
	var r wire.NodeRecord
	if json.Unmarshal(msg.Data, &r) != nil || r.Node == "" {
		return
	}
	m.mu.Lock()
	changed := false
	switch {
	case r.Node == m.n.ID() && !r.Started.Equal(m.started):
		// Two nodes with one id would take each other's presence for their
		// own and fight over the same partitions.
		if m.twin.IsZero() || time.Since(m.twin) > time.Minute {
			m.log.Error("another node runs with this node's id: give each node its own --node-id", "node", r.Node, "its_nats", r.NATS, "started", r.Started)
		}
		m.twin = time.Now()
	case r.Node == m.n.ID():
		m.echo = time.Now()
		m.echoLag = m.echo.Sub(r.Heartbeat)
	case r.Leaving:
		_, changed = m.seen[r.Node]
		delete(m.seen, r.Node)
		m.forget(r.Node)
	default:
		at, known := m.seen[r.Node]
		was, had := m.last[r.Node]
		changed = !known || time.Since(at) > m.ttl || was.Worker != r.Worker || was.ShareOut != r.ShareOut || was.Fenced != r.Fenced
		m.seen[r.Node] = time.Now()
		if r.Fenced && had && !was.Fenced {
			m.fencedOut(r.Node, was.Partitions)
		}
		if m.heardConn(r) {
			changed = true
		}
	}
	m.mu.Unlock()
	if changed {
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
}

// pulse publishes the node's presence every interval and decides whether the
// node is out of touch. It never waits on JetStream, so that a slow stream or
// consumer lookup (a leader election) never silences the node.
func (m *membership) pulse(ctx context.Context) {
	defer m.wg.Done()
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// The presence says the node can work: not while the connection
		// its work goes on is down (the presence has one of its own).
		up := m.n.bus.Conn().IsConnected()
		if up {
			m.mu.Lock()
			m.mainUp = time.Now()
			m.mu.Unlock()
		}
		// Checked before anything else: a process that was paused must not go
		// on as if nothing happened.
		why, late := m.outOfTouch()
		if late != "" && m.connAnswers() {
			// Its presence goes out, and its connection answers a ping at
			// once: the others hear it, only its own copy comes back late
			// (the process is busy, a takeover's replays say): no reason to
			// give its sessions up. (Seen beside CPU hogs: a survivor of a
			// kill fenced itself while the others heard it all along.)
			m.log.Debug("own presence comes back late, but the connection answers: staying", "late", late)
			why = ""
		} else if late != "" {
			why = late
		}
		m.mu.Lock()
		was := m.fenced
		m.fenced = why != ""
		m.mu.Unlock()
		switch {
		case why != "" && !was:
			m.fences.Add(1)
			m.log.Warn("out of touch with NATS: stopping this node's sessions (the other nodes take them over)",
				"why", why, "node_ttl", m.ttl)
			m.poke()
		case why == "" && was:
			m.log.Warn("back in touch with NATS: rejoining the cluster")
			m.poke()
		}
		if !up {
			m.log.Debug("presence held back: the main connection to NATS is down")
			continue
		}
		if err := m.publish(false); err != nil {
			m.log.Debug("presence not published", "err", err)
		}
	}
}

// run keeps the node's share of the partitions up to date; it may wait on
// JetStream. It looks again every presence period, at least every
// retryEvery: a partition it could not pull (a consumer's leader election)
// is tried again soon whatever the node TTL.
func (m *membership) run(ctx context.Context) {
	defer m.wg.Done()
	t := time.NewTicker(min(m.every, retryEvery))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-t.C:
		}
		m.rebalance(ctx, true)
	}
}

// keepStored writes the node's presence to tah_nodes every presence period.
// Apart from run: while tah_nodes elects a leader (its leader's server died
// with a node) a store waits up to opTimeout, and a takeover waiting behind
// it started that much later (row 7 of make bench: 2 s of a failover).
func (m *membership) keepStored(ctx context.Context) {
	defer m.wg.Done()
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, m.opTimeout())
		_ = m.store(sctx)
		cancel()
	}
}

// Bounds of the membership's waits on JetStream, whatever the node TTL.
const (
	// retryEvery: see run.
	retryEvery = time.Second
	// maxOpWait: see opTimeout.
	maxOpWait = 5 * time.Second
)

// opTimeout bounds one JetStream operation of the membership (pulling a
// partition, storing the presence, unpinning): two presence periods, at most
// maxOpWait, so that a long node TTL does not hold the membership on one
// stream leader election for as long.
func (m *membership) opTimeout() time.Duration { return min(m.every*2, maxOpWait) }

// poke asks run to look at the share of partitions now.
func (m *membership) poke() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// connAnswers reports whether the presence connection answers a ping
// within a presence period: it is up, both ways.
func (m *membership) connAnswers() bool {
	return m.n.bus.PresenceConn().FlushTimeout(m.every) == nil
}

// outOfTouch says why this node must take itself for cut off (why), or, in
// late, that its presence went out and has not come back: cut off unless
// its connection answers (connAnswers); both "" when it is in touch.
func (m *membership) outOfTouch() (why, late string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	limit := m.ttl - m.every
	if s := time.Since(m.mainUp); s > limit {
		return fmt.Sprintf("its main connection to NATS down for %v (its presence is held back meanwhile)", s.Round(time.Millisecond)), ""
	}
	if s := time.Since(m.echo); s > limit {
		// Which of the two it is tells an operator where to look: a node
		// that published nothing was paused or starved of CPU (the others
		// heard nothing either); one whose presence went out and did not
		// come back has lost, or is queued behind, its connection.
		if quiet := time.Since(m.sent); quiet > limit {
			return fmt.Sprintf("its own presence not heard back for %v: it published none for %v (the process was paused or starved of CPU)",
				s.Round(time.Millisecond), quiet.Round(time.Millisecond)), ""
		}
		return "", fmt.Sprintf("its own presence not heard back for %v although published %v ago (connection to NATS lost or stalled: it did not answer a ping either; the last presence came back in %v)",
			s.Round(time.Millisecond), time.Since(m.sent).Round(time.Millisecond), m.echoLag.Round(time.Millisecond))
	}
	// Twice the TTL, not limit: after another node's death the survivors'
	// servers elect leaders for every replicated stream at once and may stall
	// for seconds, their routes with them; a survivor that heard nobody and
	// wrote nothing for 4-7 s then took itself for cut off and gave its
	// sessions up for nothing (the clean-clone CI saw it under the full
	// suite's load). A node whose server really lost the cluster cannot write
	// a step meanwhile (a stale write is refused by its fence), and the others
	// take its partitions over after one TTL of its silence whatever it does.
	lost := 2 * m.ttl
	if s := time.Since(m.storedOK); s > lost && len(m.seen) > 0 {
		for _, at := range m.seen {
			if time.Since(at) <= lost {
				return "", "" // the others hear us: JetStream is only busy (a leader election)
			}
		}
		return fmt.Sprintf("no other node heard and JetStream not writable for %v (its server lost the cluster)", s.Round(time.Millisecond)), ""
	}
	return "", ""
}

// record is the node's presence as of now.
func (m *membership) record(leaving bool) wire.NodeRecord {
	m.mu.Lock()
	fenced := m.fenced
	m.mu.Unlock()
	// The presence connection's: its close is what the servers' disconnect
	// advisories tell the others (presence.go).
	nc := m.n.bus.PresenceConn()
	cid, _ := nc.GetClientID() // 0 while disconnected
	return wire.NodeRecord{Node: m.n.ID(), Started: m.started, Heartbeat: time.Now().UTC(),
		Partitions: m.n.inputs.Partitions(), ActiveSessions: m.n.sessions.Active(),
		NATS: m.n.bus.ClientURL(), NATSServer: nc.ConnectedServerName(), NATSServerID: nc.ConnectedServerId(), NATSClientID: cid,
		Provider: m.n.opts.Provider.Name(), Worker: m.n.opts.Worker, ShareOut: wire.ShareOutByShard, Fenced: fenced, Leaving: leaving}
}

// publish sends the node's presence on core NATS: what the others go by.
func (m *membership) publish(leaving bool) error {
	body, err := json.Marshal(m.record(leaving))
	if err != nil {
		return err
	}
	if err := m.n.bus.PresenceConn().Publish(wire.NodeSubject(m.n.ID()), body); err != nil {
		return fmt.Errorf("node presence: %w", err)
	}
	m.mu.Lock()
	m.sent = time.Now()
	m.mu.Unlock()
	if leaving {
		return m.n.bus.PresenceConn().FlushTimeout(min(m.every, maxOpWait))
	}
	return nil
}

// store writes the node's presence to tah_nodes, for status and for nodes
// starting. It may fail for a while (a leader election) without consequence,
// except as a sign of being cut off (see outOfTouch).
func (m *membership) store(ctx context.Context) error {
	if err := m.n.bus.PutNode(ctx, m.record(false)); err != nil {
		m.log.Debug("presence not stored in tah_nodes", "err", err)
		return err
	}
	m.mu.Lock()
	m.storedOK = time.Now()
	m.mu.Unlock()
	return nil
}

// live returns the nodes heard of within the TTL, not taken for dead on
// what the servers saw of their connections and whose last presence does
// not say fenced, this one included unless it is fenced.
func (m *membership) live() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for id, at := range m.seen {
		if _, dead := m.gone[id]; dead {
			continue
		}
		if m.last[id].Fenced {
			continue // it stopped its sessions and pulls: see fencedOut
		}
		if id != m.n.ID() && time.Since(at) <= m.ttl {
			out = append(out, id)
		}
	}
	if !m.fenced && !m.closed {
		out = append(out, m.n.ID())
	}
	return out
}

// peers are the live nodes (live) as Assign takes them: a node is a worker
// as its last presence says.
func (m *membership) peers() []Peer {
	ids := m.live()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Peer, len(ids))
	for i, id := range ids {
		r := m.last[id]
		out[i] = Peer{ID: id, Worker: r.Worker, Legacy: r.ShareOut < wire.ShareOutByShard}
		if id == m.n.ID() {
			out[i] = Peer{ID: id, Worker: m.n.opts.Worker}
		}
	}
	return out
}

// streamHomes are the homes the placer of the meta leader's bus asks for
// (bus.SetStreamHomes): each shard's the server of the node whose sessions
// append to it (at R1 the shard goes there, so that their appends cross no
// route; at R3 its leader stays off it, so that the node's death does not
// take it), and each input partition's consumer's the server of the node
// that pulls it (at R3 its leader stays off it). One whose node's server is
// not known has none.
func (m *membership) streamHomes() map[string]string {
	shards := m.n.bus.Shards()
	assign := Assign(m.peers(), m.parts, shards)
	owners := ShardOwners(assign, m.parts, shards)
	self := m.n.bus.PresenceConn().ConnectedServerName()
	m.mu.Lock()
	defer m.mu.Unlock()
	serverOf := func(id string) string {
		if id == m.n.ID() {
			return self
		}
		return m.last[id].NATSServer
	}
	out := make(map[string]string, len(owners)+m.parts)
	for k, id := range owners {
		if server := serverOf(id); server != "" {
			out[wire.EventShardStream(k)] = server
		}
	}
	// The partitions' consumers: their pullers' servers (bus.leadAway keeps
	// their leaders elsewhere at R3).
	for id, ps := range assign {
		for _, p := range ps {
			if server := serverOf(id); server != "" {
				out[bus.ConsumerHome(p)] = server
			}
		}
	}
	return out
}

// rebalance pulls this node's share of the partitions and hands the rest over
// (all of them while the node is fenced: live leaves it out). With resume, the
// turns left open in partitions it takes are resumed at once (see
// resumeOpenTurns); a node starting leaves them to its inputs' redelivery.
func (m *membership) rebalance(ctx context.Context, resume bool) {
	want := Assign(m.peers(), m.parts, m.n.bus.Shards())[m.n.ID()]
	have := m.n.inputs.Partitions()
	var drop []int
	for _, p := range have {
		if !slices.Contains(want, p) {
			drop = append(drop, p)
		}
	}
	if len(drop) > 0 {
		m.handOver(ctx, drop)
	}
	var taken []int
	for _, p := range want {
		if !slices.Contains(have, p) {
			taken = append(taken, p)
		}
	}
	// A dead node's partitions are readied before they are pulled: its
	// inputs come again at once (takeOverOrphans); one not readied yet is
	// pulled at a later look.
	later := m.takeOverOrphans(ctx, m.takeOrphans(taken))
	var added []int
	for _, p := range taken {
		if slices.Contains(later, p) {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, m.opTimeout())
		err := m.n.inputs.Add(actx, p)
		cancel()
		if err != nil {
			m.log.Warn("partition not pulled", "partition", p, "err", err)
			continue
		}
		added = append(added, p)
	}
	if len(drop) > 0 || len(added) > 0 {
		// The cluster changed: the meta leader's bus spreads the streams over
		// the servers now, not at its next look (a no-op elsewhere).
		m.n.bus.SpreadStreams()
		m.log.Info("partitions changed", "pulling", m.n.inputs.Partitions(), "added", added, "handed_over", drop)
		// Said at once, not at the next heartbeat: status and the others
		// see the share as it is.
		if err := m.publish(false); err != nil {
			m.log.Debug("presence not published", "err", err)
		}
	}
	if resume && len(added) > 0 {
		m.resumeOpenTurns(ctx, added)
	}
	if len(drop) > 0 || len(added) > 0 {
		// Stored after the takeover's resumes: while tah_nodes elects a
		// leader (its server died with a node) a store waits up to
		// opTimeout, which the turns should not.
		sctx, cancel := context.WithTimeout(ctx, m.opTimeout())
		_ = m.store(sctx)
		cancel()
	}
}

// handOver stops pulling partitions, stops this node's sessions of them
// (their running turns resume on the next owner) and unpins them.
func (m *membership) handOver(ctx context.Context, partitions []int) {
	m.stopSessions(ctx, partitions, true)
}

// stopSessions stops pulling partitions and this node's sessions of them
// (their running turns resume on the next owner), and unpins the partitions
// when unpin says so: with NATS out of reach the unpins cannot succeed, and
// the pins expire by themselves.
func (m *membership) stopSessions(ctx context.Context, partitions []int, unpin bool) {
	if len(partitions) == 0 {
		return
	}
	n := m.n
	ctx, cancel := context.WithTimeout(ctx, m.giveUp())
	defer cancel()
	err := n.inputs.Remove(ctx, partitions, unpin, func() {
		stopped := n.sessions.StopWhere(ctx, func(sid string) bool {
			return slices.Contains(partitions, wire.Partition(sid, m.parts))
		})
		if stopped > 0 {
			m.log.Info("sessions handed over", "sessions", stopped, "partitions", partitions)
		}
	})
	if err != nil {
		m.log.Debug("partitions not unpinned (they move when their pins expire)", "err", err)
	}
}

// giveUp bounds what a node does on NATS while handing over or leaving:
// the node TTL, at most leaveWithin (a long TTL must not hold a node that is
// cut off for as long when it closes).
func (m *membership) giveUp() time.Duration { return min(m.ttl, leaveWithin) }

// leaveWithin: see giveUp.
const leaveWithin = 10 * time.Second

// close leaves the cluster gracefully: it says so first, so that the others
// start pulling this node's partitions at once, then hands them over.
func (m *membership) close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.n.bus.SetStreamHomes(nil)
	m.cancel()
	m.wg.Wait()
	m.stopWatch()
	_ = m.presence.Unsubscribe()
	if down := m.n.bus.ConnsDown(); down != nil {
		// Cut off (its server gone, a reconnect under way): a goodbye could
		// reach nobody, and its three steps would each wait out their bound
		// (20 s and more in all) before the node could stop. The others take
		// the partitions over on their servers' word or by the silence, the
		// presence entry ages out and the pins expire by themselves.
		m.log.Warn("leaving the cluster without a goodbye: not connected to NATS", "err", down)
		m.stopSessions(ctx, m.n.inputs.Partitions(), false)
		return nil
	}
	last := len(m.live()) == 0 // closed: live leaves this node out
	_ = m.publish(true)
	// Bounded: a cluster that lost its quorum cannot take the delete, and the
	// entry then simply ages out (within the node TTL), which is no failure
	// of the node's close. The last node of a cluster taken down whole is
	// the usual case: with embedded servers, the others' went with them, so
	// it waits less.
	bound := m.giveUp()
	if last {
		bound = min(bound, lastLeaveWithin)
	}
	dctx, cancel := context.WithTimeout(ctx, bound)
	if err := m.n.bus.DeleteNode(dctx, m.n.ID()); err != nil {
		level := slog.LevelWarn
		if last {
			level = slog.LevelInfo
		}
		m.log.Log(ctx, level, "left the cluster without deleting this node's presence entry: it ages out within the node TTL", "ttl", m.ttl, "last_node", last, "err", err)
	}
	cancel()
	m.handOver(ctx, m.n.inputs.Partitions())
	return nil
}

// lastLeaveWithin bounds the delete of the presence entry of the last live
// node of a cluster when it leaves (see close).
const lastLeaveWithin = time.Second
