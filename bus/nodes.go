package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
)

// NodeRecord is a node's presence entry in the KV bucket tah_nodes, under its
// node id. A node rewrites it every Config.NodeTTL/5; a node whose entry has
// not changed for Config.NodeTTL is taken for dead by the others, which share
// its partitions out. A node that stops gracefully deletes its entry first.
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
	slices.SortFunc(out, func(a, c NodeRecord) int {
		switch {
		case a.Node < c.Node:
			return -1
		case a.Node > c.Node:
			return 1
		}
		return 0
	})
	return out, nil
}

// NodeUpdate is one change of tah_nodes seen by WatchNodes: a record written
// (Record set) or deleted (Deleted).
type NodeUpdate struct {
	Node    string
	Record  NodeRecord
	Deleted bool
	// Written is when the server stored the change.
	Written time.Time
}

// WatchNodes calls fn for every entry of tah_nodes, then for every change,
// until ctx ends; synced is called once the entries present at the start have
// been delivered. fn and synced run on one goroutine of the watcher, in order.
func (b *Bus) WatchNodes(ctx context.Context, fn func(NodeUpdate), synced func()) error {
	w, err := b.nodes.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch nodes: %w", err)
	}
	go func() {
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					synced()
					continue
				}
				u := NodeUpdate{Node: e.Key(), Written: e.Created()}
				switch e.Operation() {
				case jetstream.KeyValueDelete, jetstream.KeyValuePurge:
					u.Deleted = true
				default:
					if json.Unmarshal(e.Value(), &u.Record) != nil {
						continue
					}
				}
				fn(u)
			}
		}
	}()
	return nil
}
