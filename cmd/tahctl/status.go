package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/wire"
)

// nodeView is a node of tah_nodes as `status --json` prints it: the record,
// its partitions as a compact list and how old its heartbeat is (by the
// answering node's clock).
type nodeView struct {
	wire.NodeRecord
	PartitionList  string `json:"partition_list"`
	HeartbeatAgeMS int64  `json:"heartbeat_age_ms"`
}

// clusterStatus is what `tahctl status` shows.
type clusterStatus struct {
	URL      string
	Answered wire.StatusReply
	// Nodes come from tah_nodes through the status endpoint. Only when the
	// answering node reports none (a node of a version that writes no
	// heartbeats) are the API service's instances found by micro discovery
	// instead, in Discovered. tah_nodes is the better source: it is what the
	// nodes themselves act on (a node in it owns partitions; one missing from
	// it owns none), it carries the partitions, sessions, heartbeat and fencing
	// of each node besides what discovery has (id, NATS URL, provider), and it
	// is read in one request, where discovery waits for replies to stop coming
	// and may miss a slow node.
	Nodes      []wire.NodeRecord
	NodesError string
	Discovered []client.Instance
	Sessions   int
	More       bool
	// SessionsError says why the sessions could not be listed.
	SessionsError string
	ByStatus      map[string]int
}

// coverage is how the partitions are shared out among the nodes that pull.
type coverage struct {
	Unowned []int // pulled by no node: their sessions wait for an owner
	Shared  []int // claimed by two nodes at once: a handover in progress
}

// runStatus is `tahctl status`.
func runStatus(ctx context.Context, g *globals, args []string) error {
	fs := g.flags("status", "", "Shows the nodes, the input partitions each one owns, and the sessions by status.")
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
	st, err := c.Status(ctx)
	if err != nil {
		return c.failed(wire.EndpointStatus, err)
	}
	cs := clusterStatus{URL: c.ep.url, Answered: st, Nodes: st.Nodes, NodesError: st.NodesError}
	if cs.Answered.Time.IsZero() {
		cs.Answered.Time = time.Now()
	}
	if len(st.Nodes) == 0 {
		if cs.Discovered, err = c.Discover(ctx, 2*time.Second); err != nil {
			return err
		}
	}
	// The nodes are worth showing even when the sessions cannot be listed:
	// print what there is, then fail.
	page, listErr := c.List(ctx, wire.ListRequest{Limit: wire.ListMax})
	listErr = c.failed(wire.EndpointList, listErr)
	cs.Sessions, cs.More = len(page.Sessions), page.Next != ""
	cs.ByStatus = map[string]int{}
	for _, s := range page.Sessions {
		cs.ByStatus[string(s.Status)]++
	}
	if listErr != nil {
		cs.SessionsError = listErr.Error()
	}
	if g.json {
		err = printJSON(g.stdout, cs.jsonView())
	} else {
		err = cs.write(g.stdout, newStyle(g, g.stdout))
	}
	return cmp.Or(err, listErr)
}

// jsonView is the object `status --json` prints.
func (cs clusterStatus) jsonView() map[string]any {
	out := map[string]any{"answered_by": cs.Answered, "partitions": cs.Answered.Partitions, "sessions": cs.Sessions,
		"sessions_more": cs.More, "sessions_by_status": cs.ByStatus, "url": cs.URL}
	if len(cs.Nodes) > 0 {
		views := make([]nodeView, 0, len(cs.Nodes))
		for _, n := range cs.Nodes {
			views = append(views, nodeView{NodeRecord: n, PartitionList: ranges(n.Partitions),
				HeartbeatAgeMS: max(0, cs.Answered.Time.Sub(n.Heartbeat).Milliseconds())})
		}
		cv := cs.coverage()
		out["nodes"], out["nodes_from"] = views, "tah_nodes"
		out["unowned_partitions"], out["shared_partitions"] = nonNil(cv.Unowned), nonNil(cv.Shared)
	} else {
		out["nodes"], out["nodes_from"] = nonNilInstances(cs.Discovered), "discovery"
	}
	if cs.NodesError != "" {
		out["nodes_error"] = cs.NodesError
	}
	if cs.SessionsError != "" {
		out["sessions_error"] = cs.SessionsError
	}
	return out
}

// write prints the status for people.
func (cs clusterStatus) write(w io.Writer, sty style) error {
	fmt.Fprintf(w, "%s %s\n", sty.bold("NATS      "), cs.URL)
	if len(cs.Nodes) > 0 {
		fmt.Fprintf(w, "%s %d\n", sty.bold("nodes     "), len(cs.Nodes))
		var t table
		t.add(cell{"NODE", sty.bold}, cell{"PARTITIONS", sty.bold}, cell{"SESSIONS", sty.bold},
			cell{"HEARTBEAT", sty.bold}, cell{"NATS", sty.bold}, cell{"MODEL", sty.bold})
		live := func(s string) string { // a green dot before the id
			dot, id, _ := strings.Cut(s, " ")
			return sty.green(dot) + " " + id
		}
		for _, n := range cs.Nodes {
			id, parts := cell{"● " + n.Node, live}, plain(ranges(n.Partitions))
			if n.Fenced {
				id, parts = cell{"✗ " + n.Node, sty.red}, cell{"fenced", sty.red}
			}
			age := max(0, cs.Answered.Time.Sub(n.Heartbeat))
			t.add(id, parts, plain(strconv.Itoa(n.ActiveSessions)), plain(heartbeatAge(age)+" ago"),
				plain(firstURL(n.NATS)), plain(n.Provider))
		}
		var b strings.Builder
		if err := t.write(&b); err != nil {
			return err
		}
		for _, l := range strings.SplitAfter(strings.TrimSuffix(b.String(), "\n"), "\n") {
			fmt.Fprint(w, "  "+strings.TrimRight(l, " \n")+"\n")
		}
		cv := cs.coverage()
		switch {
		case len(cv.Unowned) > 0:
			fmt.Fprintf(w, "%s %d %s\n", sty.bold("partitions"), cs.Answered.Partitions,
				sty.yellow(fmt.Sprintf("(%d owned by no node: %s; their sessions wait until a node takes them)", len(cv.Unowned), ranges(cv.Unowned))))
		default:
			fmt.Fprintf(w, "%s %d %s\n", sty.bold("partitions"), cs.Answered.Partitions, sty.dim("(all owned; each pulled by one node at a time: the owner of its sessions)"))
		}
		if len(cv.Shared) > 0 {
			fmt.Fprintf(w, "%s %s\n", sty.yellow("moving    "), sty.dim(fmt.Sprintf("%s listed by two nodes: a handover in progress (the server delivers each to one of them)", ranges(cv.Shared))))
		}
	} else {
		fmt.Fprintf(w, "%s %d %s\n", sty.bold("nodes     "), len(cs.Discovered), sty.dim("(API services found by discovery: the nodes report no heartbeats)"))
		for _, n := range cs.Discovered {
			fmt.Fprintf(w, "  %s  %s\n", sty.green("●")+" "+n.Node, sty.dim(fmt.Sprintf("api %s · model %s · %s", n.Version, n.Provider, n.NATS)))
		}
		fmt.Fprintf(w, "%s %d %s\n", sty.bold("partitions"), cs.Answered.Partitions, sty.dim("(each served by one node at a time: the owner of its sessions)"))
	}
	if cs.NodesError != "" {
		fmt.Fprintf(w, "%s the nodes could not be read from tah_nodes: %s\n", sty.yellow("warning   "), cs.NodesError)
	}
	total := strconv.Itoa(cs.Sessions)
	if cs.More {
		total += "+"
	}
	var parts []string
	for _, k := range []string{"running", "waiting_tool", "completed", "failed", "cancelled", "idle"} {
		if cs.ByStatus[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", cs.ByStatus[k], k))
		}
	}
	line := total
	if len(parts) > 0 {
		line += " (" + strings.Join(parts, ", ") + ")"
	}
	if cs.SessionsError != "" {
		line = sty.yellow("? (not listed: " + cs.SessionsError + ")")
	}
	st := cs.Answered
	fmt.Fprintf(w, "%s %s\n", sty.bold("sessions  "), line)
	fmt.Fprintf(w, "%s %s %s\n", sty.bold("answered  "), st.Node, sty.dim(fmt.Sprintf("(%d session actors active; read model at seq %s of the log's %d shards, %s)",
		st.ActiveSessions, joinSeqs(st.ReadModelAt), st.LogShards, st.ReadModelPath)))
	if st.ProblemsSkipped > 0 {
		fmt.Fprintf(w, "%s %d events were stored but not folded into the read model (see the node's log)\n", sty.yellow("warning   "), st.ProblemsSkipped)
	}
	return nil
}

// coverage finds the partitions that no node pulls, and those that two nodes
// list at once (while they disagree about a join or a leave). A fenced node
// pulls nothing, whatever its record lists.
func (cs clusterStatus) coverage() coverage {
	owners := make([]int, cs.Answered.Partitions)
	for _, n := range cs.Nodes {
		if n.Fenced {
			continue
		}
		for _, p := range n.Partitions {
			if p >= 0 && p < len(owners) {
				owners[p]++
			}
		}
	}
	var cv coverage
	for p, k := range owners {
		switch {
		case k == 0:
			cv.Unowned = append(cv.Unowned, p)
		case k > 1:
			cv.Shared = append(cv.Shared, p)
		}
	}
	return cv
}

// ranges prints a set of partitions compactly: [0 1 2 3 4 9] is "0-4,9", none
// is "-".
func ranges(ps []int) string {
	if len(ps) == 0 {
		return "-"
	}
	s := append([]int(nil), ps...)
	sort.Ints(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] <= s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s[i]))
		if s[j] != s[i] {
			b.WriteString("-" + strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	return b.String()
}

// heartbeatAge prints the age of a heartbeat: "0.4s", "12s", "3m20s".
func heartbeatAge(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	}
	return d.Round(time.Second).String()
}

// firstURL shortens a list of URLs (a node on an external cluster records
// the URLs it was given) to its first: "nats://a:4222 (+2)".
func firstURL(urls string) string {
	first, rest, ok := strings.Cut(urls, ",")
	if !ok {
		return urls
	}
	return fmt.Sprintf("%s (+%d)", first, strings.Count(rest, ",")+1)
}

func nonNil(ps []int) []int {
	if ps == nil {
		return []int{}
	}
	return ps
}

func nonNilInstances(ns []client.Instance) []client.Instance {
	if ns == nil {
		return []client.Instance{}
	}
	return ns
}

// joinSeqs writes one sequence per shard: "12/0/7".
func joinSeqs(seqs []uint64) string {
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = strconv.FormatUint(s, 10)
	}
	return strings.Join(parts, "/")
}
