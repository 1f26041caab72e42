package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
)

// NodeRecord is a node's presence: published on NodeSubject every
// Config.NodeTTL/5 (a node not heard of for Config.NodeTTL is taken for dead by
// the others, which share its partitions out) and kept, for status and for
// nodes starting, in the KV bucket tah_nodes under the node id. A node that
// stops gracefully says so (Leaving) and deletes its entry.
type NodeRecord struct {
	// Node is the node's id (the key), as recorded in session.claimed.
	Node string `json:"node"`
	// Started is when the node started; Heartbeat when it wrote this entry.
	Started   time.Time `json:"started"`
	Heartbeat time.Time `json:"heartbeat"`
	// Partitions are the input partitions the node pulls: its share of the
	// sessions. Sorted.
	Partitions []int `json:"partitions"`
	// ActiveSessions is the number of session actors alive on the node.
	ActiveSessions int `json:"active_sessions"`
	// NATS is the client URL of the node's embedded server, or of the external
	// server it uses.
	NATS string `json:"nats,omitempty"`
	// Provider names the node's LLM provider.
	Provider string `json:"provider,omitempty"`
	// Fenced is set while the node has lost touch with NATS for longer than
	// Config.NodeTTL and has stopped its sessions.
	Fenced bool `json:"fenced,omitempty"`
	// Leaving is set on the last presence a node publishes when it stops
	// gracefully: the others take its partitions at once.
	Leaving bool `json:"leaving,omitempty"`
}

// PutNode writes r under r.Node in tah_nodes.
func (b *Bus) PutNode(ctx context.Context, r NodeRecord) error {
	if err := event.ValidSessionID(r.Node); err != nil {
		return fmt.Errorf("node id %q (letters, digits, '_' and '-'): %w", r.Node, err)
	}
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := b.nodes.Put(ctx, r.Node, body); err != nil {
		return fmt.Errorf("node presence of %s: %w", r.Node, err)
	}
	return nil
}

// DeleteNode removes node's presence entry: the others take its partitions
// over at once instead of after Config.NodeTTL.
func (b *Bus) DeleteNode(ctx context.Context, node string) error {
	if err := b.nodes.Delete(ctx, node); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("delete node presence of %s: %w", node, err)
	}
	return nil
}

// ListNodes returns the presence entries in tah_nodes that were written within
// Config.NodeTTL (by the server's clock), sorted by node id.
func (b *Bus) ListNodes(ctx context.Context) ([]NodeRecord, error) {
	lister, err := b.nodes.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	var out []NodeRecord
	for _, k := range keys {
		e, err := b.nodes.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", k, err)
		}
		var r NodeRecord
		if json.Unmarshal(e.Value(), &r) != nil || time.Since(e.Created()) > b.cfg.NodeTTL {
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, c NodeRecord) int { return strings.Compare(a.Node, c.Node) })
	return out, nil
}

// NodeSubject is the core NATS subject where node publishes its presence
// (a NodeRecord) every Config.NodeTTL/5, and once with Leaving set when it
// stops gracefully: tah.nodes.<node>. Liveness travels on core NATS, not
// JetStream, so that a stream leader election (which stalls writes for a few
// seconds) is never taken for nodes dying.
func NodeSubject(node string) string { return "tah.nodes." + node }

// NodeSubjects matches the presence of every node.
const NodeSubjects = "tah.nodes.*"
