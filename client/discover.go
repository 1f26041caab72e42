package client

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/wire"
)

// Instance is one node's API service, as micro discovery finds it.
type Instance struct {
	Node     string `json:"node"`
	Instance string `json:"instance"`
	Version  string `json:"version"`
	NATS     string `json:"nats,omitempty"`
	Provider string `json:"provider,omitempty"`
}

// Discover lists the instances of the API service, one per node, by micro
// discovery ($SRV.INFO.tah), sorted by node: it collects the replies until
// wait passes, or 200ms after the last one. Status's Nodes are the better
// source; this is for nodes that report no presence.
func (c *Client) Discover(ctx context.Context, wait time.Duration) ([]Instance, error) {
	inbox := c.nc.NewInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := c.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	subj, err := micro.ControlSubject(micro.InfoVerb, wire.APIService, "")
	if err != nil {
		return nil, err
	}
	if err := c.nc.PublishRequest(subj, inbox, nil); err != nil {
		return nil, err
	}
	var out []Instance
	total := time.NewTimer(wait)
	defer total.Stop()
	var quiet <-chan time.Time
	for {
		select {
		case m := <-ch:
			var info micro.Info
			if json.Unmarshal(m.Data, &info) == nil && info.Name == wire.APIService {
				out = append(out, Instance{Node: info.Metadata["node"], Instance: info.ID, Version: info.Version,
					NATS: info.Metadata["nats"], Provider: info.Metadata["provider"]})
			}
			quiet = time.After(200 * time.Millisecond)
		case <-quiet:
			return sorted(out), nil
		case <-total.C:
			return sorted(out), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func sorted(is []Instance) []Instance {
	slices.SortFunc(is, func(a, b Instance) int { return strings.Compare(a.Node, b.Node) })
	return is
}
