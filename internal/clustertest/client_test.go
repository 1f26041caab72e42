package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// client drives the cluster as any client would: a bus (NoSetup) on all the
// nodes' URLs, and one plain connection per node that collects the outcomes
// published to the inputs' reply subjects.
type client struct {
	t *testing.T
	c *cluster
	b *bus.Bus

	mu       sync.Mutex
	conns    []*nats.Conn
	outcomes map[string]map[string][]outcome // input id -> node id of the connection -> outcomes
	waiters  map[string]chan outcome         // input id -> first outcome
}

// outcome is the body a node publishes to an input's reply subject
// (docs/protocol.md, Outcomes).
type outcome struct {
	Session     string `json:"session"`
	Turn        int    `json:"turn"`
	Status      string `json:"status"`
	Content     string `json:"content"`
	Error       string `json:"error"`
	Code        string `json:"code"`
	Steps       int    `json:"steps"`
	LastSeq     uint64 `json:"last_seq"`
	Failure     string `json:"failure"`
	FailureCode string `json:"failure_code"`
}

const outcomePrefix = "clustertest.outcome."

// newClient connects to the cluster.
func newClient(t *testing.T, c *cluster) *client {
	t.Helper()
	cfg := config.Default()
	cfg.NATS.URL = c.urls()
	cfg.NATS.User, cfg.NATS.Password = c.user, c.pass
	cfg.NATS.Replicas = 3
	cfg.NATS.NodeTTL = config.Duration(c.opts.nodeTTL)
	cfg.NATS.InputAckWait = config.Duration(c.opts.ackWait)
	bc := cfg.BusConfig()
	bc.NoSetup = true
	bc.Name = "clustertest client"
	var b *bus.Bus
	err := poll(60*time.Second, 500*time.Millisecond, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var err error
		b, err = bus.Open(ctx, bc)
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("client bus: %v", err)
	}
	cl := &client{t: t, c: c, b: b, outcomes: map[string]map[string][]outcome{}, waiters: map[string]chan outcome{}}
	t.Cleanup(func() {
		cl.mu.Lock()
		conns := cl.conns
		cl.mu.Unlock()
		for _, nc := range conns {
			nc.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
	for _, n := range c.nodes {
		cl.watchOutcomes(n)
	}
	return cl
}

// watchOutcomes subscribes to every outcome through a connection to node n
// alone (no reconnect elsewhere): a node that never died saw them all.
func (cl *client) watchOutcomes(n *nodeProc) {
	t := cl.t
	nc, err := nats.Connect(n.url(), nats.UserInfo(cl.c.user, cl.c.pass), nats.Name("clustertest outcomes "+n.id),
		nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond), nats.DontRandomize(), nats.IgnoreDiscoveredServers())
	if err != nil {
		t.Fatalf("connect to node %s: %v", n.id, err)
	}
	_, err = nc.Subscribe(outcomePrefix+">", func(m *nats.Msg) {
		id := strings.TrimPrefix(m.Subject, outcomePrefix)
		var o outcome
		if err := json.Unmarshal(m.Data, &o); err != nil {
			o = outcome{Failure: "clustertest: not an outcome: " + string(m.Data), FailureCode: "not_json"}
		}
		cl.mu.Lock()
		defer cl.mu.Unlock()
		if cl.outcomes[id] == nil {
			cl.outcomes[id] = map[string][]outcome{}
		}
		cl.outcomes[id][n.id] = append(cl.outcomes[id][n.id], o)
		if ch := cl.waiters[id]; ch != nil {
			select {
			case ch <- o:
			default:
			}
		}
	})
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		t.Fatalf("subscribe to outcomes on node %s: %v", n.id, err)
	}
	cl.mu.Lock()
	cl.conns = append(cl.conns, nc)
	cl.mu.Unlock()
}

// create creates a session through the API service (tah.api.create).
func (cl *client) create() string {
	t := cl.t
	t.Helper()
	var sid string
	err := poll(60*time.Second, 500*time.Millisecond, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		m, err := cl.b.Conn().RequestWithContext(ctx, "tah.api.create", []byte(`{"labels":{"test":"clustertest"}}`))
		if err != nil {
			return false, err
		}
		if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
			return false, fmt.Errorf("tah.api.create: %s %s", code, m.Header.Get("Nats-Service-Error"))
		}
		var r struct {
			Session string `json:"session"`
			Seq     uint64 `json:"seq"`
		}
		if err := json.Unmarshal(m.Data, &r); err != nil || r.Session == "" || r.Seq == 0 {
			return false, fmt.Errorf("tah.api.create answered %q", m.Data)
		}
		sid = r.Session
		return true, nil
	})
	if err != nil {
		t.Fatalf("create a session: %v", err)
	}
	return sid
}

// send publishes a run input with id and text to session sid, its outcome to
// go to outcomePrefix+id; it retries (the same id: the stream stores it once)
// until the stream has it. The returned channel gets the first outcome seen.
func (cl *client) send(sid, id, text string) (<-chan outcome, error) {
	ch := make(chan outcome, 1)
	cl.mu.Lock()
	cl.waiters[id] = ch
	cl.mu.Unlock()
	err := poll(60*time.Second, 300*time.Millisecond, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := cl.b.PublishInput(ctx, sid, wire.Input{ID: id, Command: wire.CommandRun, Text: text, ReplyTo: outcomePrefix + id})
		if errors.Is(err, wire.ErrMalformedInput) || errors.Is(err, event.ErrInvalidSessionID) {
			return false, &permanent{err}
		}
		return err == nil, err
	})
	return ch, err
}

type permanent struct{ error }

// replay reads a session's log, retrying while the cluster answers nothing.
func (cl *client) replay(sid string) ([]event.Event, error) {
	var evs []event.Event
	err := poll(30*time.Second, 300*time.Millisecond, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		evs, _, err = cl.b.Replay(ctx, sid, 0)
		return err == nil, err
	})
	return evs, err
}

// outcomesOf returns the outcomes of input id seen through the connection to
// node.
func (cl *client) outcomesOf(id, node string) []outcome {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return slices.Clone(cl.outcomes[id][node])
}

// nodes lists tah_nodes.
func (cl *client) nodes() ([]wire.NodeRecord, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.b.ListNodes(ctx)
}

// balanced reports whether recs are exactly the nodes ids, with disjoint
// partitions that cover 0..partitions-1 and shares that differ by one at
// most; the error says what is wrong.
func balanced(recs []wire.NodeRecord, ids []string, partitions int) error {
	var got []string
	owner := map[int]string{}
	lo, hi := partitions/len(ids), (partitions+len(ids)-1)/len(ids)
	var errs []string
	for _, r := range recs {
		got = append(got, r.Node)
		if len(r.Partitions) < lo || len(r.Partitions) > hi {
			errs = append(errs, fmt.Sprintf("%s has %d partitions %v, want %d to %d", r.Node, len(r.Partitions), r.Partitions, lo, hi))
		}
		if r.Fenced {
			errs = append(errs, r.Node+" is fenced")
		}
		for _, p := range r.Partitions {
			if p < 0 || p >= partitions {
				errs = append(errs, fmt.Sprintf("%s has partition %d, out of 0..%d", r.Node, p, partitions-1))
			}
			if o, ok := owner[p]; ok {
				errs = append(errs, fmt.Sprintf("partition %d is held by both %s and %s", p, o, r.Node))
			}
			owner[p] = r.Node
		}
	}
	sort.Strings(got)
	if !slices.Equal(got, ids) {
		errs = append(errs, fmt.Sprintf("nodes %v, want %v", got, ids))
	}
	for p := range partitions {
		if _, ok := owner[p]; !ok {
			errs = append(errs, fmt.Sprintf("partition %d is held by no node", p))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func describeNodes(recs []wire.NodeRecord) string {
	var parts []string
	for _, r := range recs {
		parts = append(parts, fmt.Sprintf("%s%v(active %d, fenced %v, heartbeat %s)", r.Node, r.Partitions, r.ActiveSessions, r.Fenced,
			r.Heartbeat.Format("15:04:05.000")))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// waitBalanced waits until tah_nodes lists exactly ids with a balanced,
// disjoint assignment of the partitions.
func (cl *client) waitBalanced(ids []string, bound time.Duration) ([]wire.NodeRecord, error) {
	var recs []wire.NodeRecord
	err := poll(bound, 250*time.Millisecond, func() (bool, error) {
		var err error
		if recs, err = cl.nodes(); err != nil {
			return false, err
		}
		if err := balanced(recs, ids, cl.b.Config().Partitions); err != nil {
			return false, fmt.Errorf("%v: %s", err, describeNodes(recs))
		}
		return true, nil
	})
	return recs, err
}
