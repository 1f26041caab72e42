package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/wire"
)

// newCluster starts three tah-node processes (tahtest, Process mode) with the
// mock's demo at pace.
func newCluster(t *testing.T, opts tahtest.Options) *tahtest.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process cluster: not in -short")
	}
	opts.Mode = tahtest.Process
	return tahtest.Start(t, opts)
}

// client drives the cluster as any client would: the harness's client bus on
// every node, and one plain connection per node that collects the outcomes
// published to the inputs' reply subjects.
type client struct {
	t *testing.T
	c *tahtest.Cluster

	mu       sync.Mutex
	outcomes map[string]map[string][]wire.Outcome // input id -> node id of the connection -> outcomes
	waiters  map[string]chan wire.Outcome         // input id -> first outcome
}

const outcomePrefix = "_INBOX.clustertest.outcome." // an inbox: a node replies nowhere else

// newClient connects to the cluster.
func newClient(t *testing.T, c *tahtest.Cluster) *client {
	t.Helper()
	cl := &client{t: t, c: c, outcomes: map[string]map[string][]wire.Outcome{}, waiters: map[string]chan wire.Outcome{}}
	for i := range c.Size() {
		cl.watchOutcomes(i)
	}
	return cl
}

// watchOutcomes subscribes to every outcome through a connection to node i
// alone (no reconnect elsewhere): a node that never died saw them all.
func (cl *client) watchOutcomes(i int) {
	t, id := cl.t, cl.c.ID(i)
	l := cl.c.Layout()
	nc, err := nats.Connect(l.Slots[i].URL(), nats.UserCredentials(l.Creds), nats.Name("clustertest outcomes "+id),
		nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond), nats.DontRandomize(), nats.IgnoreDiscoveredServers())
	if err != nil {
		t.Fatalf("connect to node %s: %v", id, err)
	}
	t.Cleanup(nc.Close)
	_, err = nc.Subscribe(outcomePrefix+">", func(m *nats.Msg) {
		input := strings.TrimPrefix(m.Subject, outcomePrefix)
		var o wire.Outcome
		if err := json.Unmarshal(m.Data, &o); err != nil {
			o = wire.Outcome{Failure: "clustertest: not an outcome: " + string(m.Data), FailureCode: "not_json"}
		}
		cl.mu.Lock()
		defer cl.mu.Unlock()
		if cl.outcomes[input] == nil {
			cl.outcomes[input] = map[string][]wire.Outcome{}
		}
		cl.outcomes[input][id] = append(cl.outcomes[input][id], o)
		if ch := cl.waiters[input]; ch != nil {
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
		t.Fatalf("subscribe to outcomes on node %s: %v", id, err)
	}
}

// create creates a session through the API service (tah.api.create).
func (cl *client) create() string {
	t := cl.t
	t.Helper()
	req, _ := json.Marshal(wire.CreateRequest{Labels: map[string]string{"test": "clustertest"}})
	var sid string
	err := natstest.Poll(60*time.Second, 500*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		m, err := cl.c.Bus().Conn().RequestWithContext(ctx, wire.APISubject(wire.EndpointCreate), req)
		if err != nil {
			return err
		}
		if code := m.Header.Get(wire.HeaderServiceErrorCode); code != "" {
			return fmt.Errorf("create: %s %s", code, m.Header.Get(wire.HeaderServiceError))
		}
		var r wire.CreateReply
		if err := json.Unmarshal(m.Data, &r); err != nil || r.Session == "" || r.Seq == 0 {
			return fmt.Errorf("create answered %q", m.Data)
		}
		sid = r.Session
		return nil
	})
	if err != nil {
		t.Fatalf("create a session: %v", err)
	}
	return sid
}

// send publishes a run input with id and text to session sid, its outcome to
// go to outcomePrefix+id; it retries (the same id: the stream stores it once)
// until the stream has it. The returned channel gets the first outcome seen.
func (cl *client) send(sid, id, text string) (<-chan wire.Outcome, error) {
	ch := make(chan wire.Outcome, 1)
	cl.mu.Lock()
	cl.waiters[id] = ch
	cl.mu.Unlock()
	err := natstest.Poll(60*time.Second, 300*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := cl.c.Bus().PublishInput(ctx, sid, wire.Input{ID: id, Command: wire.CommandRun, Text: text, ReplyTo: outcomePrefix + id})
		if errors.Is(err, wire.ErrMalformedInput) || errors.Is(err, event.ErrInvalidSessionID) {
			return natstest.Permanent(err)
		}
		return err
	})
	return ch, err
}

// outcomesOf returns the outcomes of input id seen through the connection to
// node.
func (cl *client) outcomesOf(id, node string) []wire.Outcome {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return slices.Clone(cl.outcomes[id][node])
}

// nodes lists tah_nodes.
func (cl *client) nodes() ([]wire.NodeRecord, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.c.Bus().ListNodes(ctx)
}

// completed reports whether o is the outcome of a turn that completed.
func completed(o wire.Outcome) bool {
	return o.Ended() && o.Status == projection.StatusCompleted
}
