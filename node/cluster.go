package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
)

// membership is a node's part in the cluster, with no coordinator but NATS:
//
//   - presence: the node rewrites its bus.NodeRecord in tah_nodes every
//     NodeTTL/5 and watches the others'; a node not heard of for NodeTTL is
//     dead;
//   - ownership: every node computes Assign over the live nodes and pulls its
//     share of the input partitions; the pinned consumers make sure a partition
//     is delivered to one node at a time while nodes disagree for a moment;
//     a share that shrinks is handed over (stop pulling, stop those sessions,
//     unpin);
//   - self-fencing: a node that could not write its presence for NodeTTL is
//     about to be replaced: it stops its sessions and pulls at once, and
//     rejoins when it can write again;
//   - the claim watch: a session.claimed with a newer epoch stops this node's
//     actor of that session (a stale owner), cancelling its LLM and tool calls.
type membership struct {
	n     *Node
	log   *slog.Logger
	ttl   time.Duration
	every time.Duration
	parts int

	started time.Time
	kick    chan struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	claims  *nats.Subscription

	mu     sync.Mutex
	seen   map[string]time.Time // node id -> when its record was last seen written (local clock)
	lastOK time.Time            // the last heartbeat written
	fenced bool
	closed bool
	synced bool // the entries present at the start were read
}

// startMembership joins the cluster: it reads the nodes present, writes the
// node's presence, takes its share of the partitions and keeps all of that up
// to date until close.
func startMembership(ctx context.Context, n *Node) (*membership, error) {
	cfg := n.Bus.Config()
	m := &membership{n: n, log: n.log.With("component", "cluster"), ttl: cfg.NodeTTL,
		every: max(cfg.NodeTTL/5, 50*time.Millisecond), parts: cfg.Partitions,
		started: time.Now(), kick: make(chan struct{}, 1), seen: map[string]time.Time{}}
	wctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	synced := make(chan struct{})
	var once sync.Once
	onSynced := func() {
		once.Do(func() {
			m.mu.Lock()
			m.synced = true
			m.mu.Unlock()
			close(synced)
		})
	}
	if err := n.Bus.WatchNodes(wctx, m.update, onSynced); err != nil {
		cancel()
		return nil, err
	}
	select {
	case <-synced:
	case <-ctx.Done():
		cancel()
		return nil, fmt.Errorf("node: reading the cluster's nodes: %w", ctx.Err())
	}
	sub, err := n.Bus.Conn().Subscribe(bus.EventSubject("*", event.SessionClaimed), m.claimed)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("node: watching session claims: %w", err)
	}
	m.claims = sub
	if err := m.heartbeat(ctx); err != nil {
		_ = sub.Unsubscribe()
		cancel()
		return nil, err
	}
	m.rebalance(ctx)
	m.wg.Add(1)
	go m.run(wctx)
	return m, nil
}

// update records a change of tah_nodes (on the watcher's goroutine).
func (m *membership) update(u bus.NodeUpdate) {
	m.mu.Lock()
	if u.Deleted {
		delete(m.seen, u.Node)
	} else {
		// Entries present at the start may be old: count them from when the
		// server wrote them, never later than now. Later changes count from
		// their arrival (no trust in clocks of other machines).
		at := time.Now()
		if !m.synced && !u.Written.IsZero() && u.Written.Before(at) {
			at = u.Written
		}
		m.seen[u.Node] = at
	}
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// claimed hands a session.claimed seen on NATS to the session's actor here.
func (m *membership) claimed(msg *nats.Msg) {
	ev, err := event.Unmarshal(msg.Data, 0)
	if err != nil || ev.Epoch == 0 {
		return
	}
	m.n.Sessions.ClaimedElsewhere(ev.Session, ev.Epoch)
}

func (m *membership) run(ctx context.Context) {
	defer m.wg.Done()
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-t.C:
			m.mu.Lock()
			silent := time.Since(m.lastOK)
			m.mu.Unlock()
			// Checked before anything else: a process that was paused must not
			// go on as if nothing happened.
			if silent > m.ttl-m.every {
				m.fence(ctx, silent)
			}
			hctx, cancel := context.WithTimeout(ctx, m.every*2)
			err := m.heartbeat(hctx)
			cancel()
			if err != nil {
				m.log.Debug("presence not written", "err", err)
				continue
			}
		}
		m.rebalance(ctx)
	}
}

// heartbeat writes the node's presence record.
func (m *membership) heartbeat(ctx context.Context) error {
	m.mu.Lock()
	fenced := m.fenced
	m.mu.Unlock()
	r := bus.NodeRecord{Node: m.n.ID(), Started: m.started, Heartbeat: time.Now().UTC(),
		Partitions: m.n.inputs.Partitions(), ActiveSessions: m.n.Sessions.Active(),
		NATS: m.n.Bus.ClientURL(), Provider: m.n.opts.Provider.Name(), Fenced: fenced}
	if err := m.n.Bus.PutNode(ctx, r); err != nil {
		return err
	}
	m.mu.Lock()
	m.lastOK = time.Now()
	if m.fenced {
		m.fenced = false
		m.log.Warn("back in touch with NATS: rejoining the cluster")
	}
	m.mu.Unlock()
	return nil
}

// fence stops everything this node owns: it has been out of touch for longer
// than the others wait before taking its partitions over.
func (m *membership) fence(ctx context.Context, silent time.Duration) {
	m.mu.Lock()
	was := m.fenced
	m.fenced = true
	m.mu.Unlock()
	if !was {
		m.log.Warn("out of touch with NATS: stopping this node's sessions (the other nodes take them over)",
			"silent", silent.Round(time.Millisecond), "node_ttl", m.ttl)
	}
	m.handOver(ctx, m.n.inputs.Partitions())
}

// live returns the nodes heard of within the TTL, this one included unless it
// is fenced.
func (m *membership) live() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for id, at := range m.seen {
		if id != m.n.ID() && time.Since(at) <= m.ttl {
			out = append(out, id)
		}
	}
	if !m.fenced && !m.closed {
		out = append(out, m.n.ID())
	}
	return out
}

// rebalance pulls this node's share of the partitions and hands the rest over.
func (m *membership) rebalance(ctx context.Context) {
	want := Assign(m.live(), m.parts)[m.n.ID()]
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
	var added []int
	for _, p := range want {
		if slices.Contains(have, p) {
			continue
		}
		if err := m.n.inputs.Add(ctx, p); err != nil {
			m.log.Warn("partition not pulled", "partition", p, "err", err)
			continue
		}
		added = append(added, p)
	}
	if len(drop) > 0 || len(added) > 0 {
		m.log.Info("partitions changed", "pulling", m.n.inputs.Partitions(), "added", added, "handed_over", drop)
	}
}

// handOver stops pulling partitions, stops this node's sessions of them
// (their running turns resume on the next owner) and unpins them.
func (m *membership) handOver(ctx context.Context, partitions []int) {
	if len(partitions) == 0 {
		return
	}
	n := m.n
	// Bounded: with NATS out of reach the unpins cannot succeed, and the pins
	// expire by themselves.
	ctx, cancel := context.WithTimeout(ctx, m.ttl)
	defer cancel()
	err := n.inputs.Remove(ctx, partitions, func() {
		stopped := n.Sessions.StopWhere(ctx, func(sid string) bool {
			return slices.Contains(partitions, bus.Partition(sid, m.parts))
		})
		if stopped > 0 {
			m.log.Info("sessions handed over", "sessions", stopped, "partitions", partitions)
		}
	})
	if err != nil {
		m.log.Debug("partitions not unpinned (they move when their pins expire)", "err", err)
	}
}

// close leaves the cluster gracefully: the presence entry goes first, so that
// the others start pulling this node's partitions at once, then the
// partitions are handed over.
func (m *membership) close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	_ = m.claims.Unsubscribe()
	// Bounded: a cluster that lost its quorum cannot take the delete, and the
	// entry then simply ages out.
	dctx, cancel := context.WithTimeout(ctx, m.ttl)
	err := m.n.Bus.DeleteNode(dctx, m.n.ID())
	cancel()
	m.handOver(ctx, m.n.inputs.Partitions())
	return err
}
