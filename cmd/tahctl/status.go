package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// nodeStatus is what tah.api.status returns.
type nodeStatus struct {
	Node            string `json:"node"`
	NATS            string `json:"nats"`
	Partitions      int    `json:"partitions"`
	ActiveSessions  int    `json:"active_sessions"`
	ReadModelAt     uint64 `json:"read_model_at"`
	ReadModelPath   string `json:"read_model_path"`
	Provider        string `json:"provider"`
	APIVersion      string `json:"api_version"`
	ProblemsSkipped int64  `json:"problems_skipped"`
}

// nodeInstance is one node's API service, as micro discovery finds it.
type nodeInstance struct {
	Node     string `json:"node"`
	Instance string `json:"instance"`
	Version  string `json:"version"`
	NATS     string `json:"nats,omitempty"`
	Provider string `json:"provider,omitempty"`
}

// runStatus is `tahctl status`.
func runStatus(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("status", "", "Shows the nodes that serve the API, the input partitions and the sessions.")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("`tahctl status`", "status takes no arguments, got %q", pos[0])
	}
	c, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var st nodeStatus
	if err := c.call(ctx, "status", map[string]any{}, &st); err != nil {
		return err
	}
	nodes, err := discover(ctx, c.nc, 2*time.Second)
	if err != nil {
		return err
	}
	var page struct {
		Sessions []sessionView `json:"sessions"`
		Next     string        `json:"next"`
	}
	if err := c.call(ctx, "list", map[string]any{"limit": 1000}, &page); err != nil {
		return err
	}
	byStatus := map[string]int{}
	for _, s := range page.Sessions {
		byStatus[s.Status]++
	}
	if g.json {
		return printJSON(g.stdout, map[string]any{"answered_by": st, "nodes": nodes, "sessions": len(page.Sessions),
			"sessions_more": page.Next != "", "sessions_by_status": byStatus, "url": c.ep.url})
	}
	sty := newStyle(g, g.stdout)
	w := g.stdout
	fmt.Fprintf(w, "%s %s\n", sty.bold("NATS      "), c.ep.url)
	fmt.Fprintf(w, "%s %d\n", sty.bold("nodes     "), len(nodes))
	for _, n := range nodes {
		fmt.Fprintf(w, "  %s  %s\n", sty.green("●")+" "+n.Node, sty.dim(fmt.Sprintf("api %s · model %s · %s", n.Version, n.Provider, n.NATS)))
	}
	fmt.Fprintf(w, "%s %d %s\n", sty.bold("partitions"), st.Partitions, sty.dim("(each served by one node at a time: the owner of its sessions)"))
	total := fmt.Sprint(len(page.Sessions))
	if page.Next != "" {
		total += "+"
	}
	var parts []string
	for _, k := range []string{"running", "waiting_tool", "completed", "failed", "cancelled", "idle"} {
		if byStatus[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", byStatus[k], k))
		}
	}
	line := total
	if len(parts) > 0 {
		line += " (" + strings.Join(parts, ", ") + ")"
	}
	fmt.Fprintf(w, "%s %s\n", sty.bold("sessions  "), line)
	fmt.Fprintf(w, "%s %s %s\n", sty.bold("answered  "), st.Node, sty.dim(fmt.Sprintf("(%d session actors active; read model at seq %d, %s)", st.ActiveSessions, st.ReadModelAt, st.ReadModelPath)))
	if st.ProblemsSkipped > 0 {
		fmt.Fprintf(w, "%s %d events were stored but not folded into the read model (see the node's log)\n", sty.yellow("warning   "), st.ProblemsSkipped)
	}
	return nil
}

// discover lists the instances of the API service "tah", one per node, by
// micro discovery: it collects $SRV.INFO.tah replies until wait passes, or
// 200ms after the last one.
func discover(ctx context.Context, nc *nats.Conn, wait time.Duration) ([]nodeInstance, error) {
	inbox := nc.NewInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	subj, err := micro.ControlSubject(micro.InfoVerb, apiService, "")
	if err != nil {
		return nil, err
	}
	if err := nc.PublishRequest(subj, inbox, nil); err != nil {
		return nil, err
	}
	var out []nodeInstance
	total := time.NewTimer(wait)
	defer total.Stop()
	var quiet <-chan time.Time
	for {
		select {
		case m := <-ch:
			var info micro.Info
			if json.Unmarshal(m.Data, &info) == nil && info.Name == apiService {
				out = append(out, nodeInstance{Node: info.Metadata["node"], Instance: info.ID, Version: info.Version,
					NATS: info.Metadata["nats"], Provider: info.Metadata["provider"]})
			}
			quiet = time.After(200 * time.Millisecond)
		case <-quiet:
			sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
			return out, nil
		case <-total.C:
			sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
			return out, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
