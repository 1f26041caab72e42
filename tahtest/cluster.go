package tahtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tahtest/natstest"
)

// TB is what the harness needs of a test: *testing.T and *testing.B satisfy
// it; natstest.Run makes one outside a test.
type TB = natstest.TB

// Cluster is a TAH cluster of Options.Nodes members, each a node with its
// embedded NATS server, joined by routes: natstest's Cluster (Kill, Stop,
// Start, Restart, WaitReady, URLs, Connect, JetStream, the leaders) with the
// nodes' side. Member i's node id and server name are both "n<i>".
type Cluster struct {
	*natstest.Cluster
	tb   TB
	root string
	cfgs []config.Config
	// members are the natstest members: *inProcess or *process.
	members []natstest.Member
	bus     *bus.Bus
}

// Start runs the cluster opts describe and waits until every node is ready;
// everything stops at the end of the test.
func Start(tb TB, opts Options) *Cluster {
	tb.Helper()
	opts = opts.withDefaults()
	l := natstest.NewLayout(tb, opts.Dir, opts.Nodes).WithTrust(tb)
	c := &Cluster{tb: tb, root: opts.ToolsRoot}
	if c.root == "" {
		c.root = filepath.Join(l.Dir, "root")
		if err := writeProject(c.root); err != nil {
			tb.Fatalf("tahtest: tools root: %v", err)
		}
	}
	bin := ""
	for i := range opts.Nodes {
		cfg := opts.config(l, i, c.root)
		if err := node.Check(cfg); err != nil {
			tb.Fatalf("tahtest: member %d's configuration: %v", i, err)
		}
		c.cfgs = append(c.cfgs, cfg)
		if opts.mode(i) == Process {
			if bin == "" && opts.Command == nil {
				bin = nodeBinary(tb) // before any member starts: the others would wait for it
			}
			p, err := newProcess(opts, i, cfg, bin, l.Dir)
			if err != nil {
				tb.Fatalf("tahtest: member %d: %v", i, err)
			}
			c.members = append(c.members, p)
		} else {
			c.members = append(c.members, newInProcess(tb, opts, i, cfg))
		}
	}
	// Registered before the members' own end, so that it runs after it: the
	// logs are complete.
	tb.Cleanup(c.checkLogs)
	c.Cluster = natstest.New(tb, l, c.members)
	c.openBus()
	return c
}

// ID is member i's node id.
func (c *Cluster) ID(i int) string { return c.cfgs[i].NodeID }

// IDs are the node ids of every member, running or not.
func (c *Cluster) IDs() []string {
	ids := make([]string, len(c.cfgs))
	for i := range c.cfgs {
		ids[i] = c.ID(i)
	}
	return ids
}

// Config is the configuration member i runs with (a Process member gets it
// as flags).
func (c *Cluster) Config(i int) config.Config { return c.cfgs[i] }

// ToolsRoot is the directory the agents' tools read.
func (c *Cluster) ToolsRoot() string { return c.root }

// Node is member i's node while it runs in this process; nil for a Process
// member or one that does not run.
func (c *Cluster) Node(i int) *node.Node {
	if m, ok := c.members[i].(*inProcess); ok {
		return m.Node()
	}
	return nil
}

// Bus is a client of the cluster, as any client would open one (NoSetup, on
// every member's URL, with the credentials and the nodes' settings): publish
// inputs, replay logs, list the nodes. It is closed at the end.
func (c *Cluster) Bus() *bus.Bus { return c.bus }

// openBus opens the client bus, retrying while the cluster settles.
func (c *Cluster) openBus() {
	c.tb.Helper()
	bc := node.BusConfig(c.cfgs[0])
	bc.URL, bc.NoSetup, bc.Name, bc.CredsFile = c.URLs(), true, "tahtest client", c.Layout().Creds
	// A deadline for a hang only: on two cores loaded beyond make test (CPU
	// hogs beside two packages' tests, four at a time each) the cluster's
	// streams answered a client's setup checks after more than a minute.
	// Each Open's setup attempts double in time (bus.setupWithRetry) within
	// its ReadyTimeout: a check that is slow, not lost, completes.
	bc.ReadyTimeout = time.Minute
	err := natstest.Poll(3*time.Minute, 500*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), bc.ReadyTimeout)
		defer cancel()
		var err error
		c.bus, err = bus.Open(ctx, bc)
		return err
	})
	if err != nil {
		c.tb.Fatalf("tahtest: a client bus on %s: %v%s", bc.URL, err, natstest.StuckNote())
	}
	c.tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.bus.Close(ctx)
	})
}

// Log reads session sid's log, retrying for a while when the cluster answers
// nothing (a member just died). Unlike the methods that fail the test, it
// may be called from any goroutine.
func (c *Cluster) Log(sid string) ([]event.Event, error) {
	var evs []event.Event
	err := natstest.Poll(2*time.Minute, 300*time.Millisecond, func() error { // a hang's deadline only
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		evs, _, err = c.bus.Replay(ctx, sid, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("the log of %s: %w", sid, err)
	}
	return evs, nil
}

// Audit reads session sid's log and audits it (projection.Audit).
func (c *Cluster) Audit(sid string) projection.Report {
	c.tb.Helper()
	evs, err := c.Log(sid)
	if err != nil {
		c.tb.Fatalf("tahtest: %v", err)
	}
	return projection.Audit(evs)
}

// writeProject writes a small project into root, for the agents' tools: a
// README (so that a turn of the mock's demo makes two tool calls) and a few
// files.
func writeProject(root string) error {
	files := map[string]string{
		"README.md":       "# A test project\n\nA small project that the tests' agents look at, so that every turn calls list_files and read_file.\n",
		"go.mod":          "module example.com/project\n",
		"main.go":         "package main\n\nfunc main() {}\n",
		"docs/guide.md":   "# Guide\n",
		"internal/x/x.go": "package x\n",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}
