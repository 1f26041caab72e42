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
	"github.com/tah-dev/tah/wire"
)

// PutNode writes r under r.Node in tah_nodes.
func (b *Bus) PutNode(ctx context.Context, r wire.NodeRecord) error {
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
func (b *Bus) ListNodes(ctx context.Context) ([]wire.NodeRecord, error) {
	lister, err := b.nodes.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	var out []wire.NodeRecord
	for _, k := range keys {
		e, err := b.nodes.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", k, err)
		}
		var r wire.NodeRecord
		if json.Unmarshal(e.Value(), &r) != nil || time.Since(e.Created()) > b.cfg.NodeTTL {
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, c wire.NodeRecord) int { return strings.Compare(a.Node, c.Node) })
	return out, nil
}
