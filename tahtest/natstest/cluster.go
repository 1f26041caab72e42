package natstest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Bounds of the harness's own waits: generous, since a cluster forms slowly
// under -race on two cores.
const (
	startWithin = 3 * time.Minute // longer than tahtest's bus.Config.ReadyTimeout
	readyWithin = 2 * time.Minute
	stopWithin  = 60 * time.Second
	closeWithin = 30 * time.Second
)

// Cluster is members joined by routes, each at its Slot of a Layout. Its
// methods fail the test (TB.Fatalf) when they cannot do what they say, and
// are called from the test's goroutine.
type Cluster struct {
	tb      TB
	layout  Layout
	members []Member

	mu    sync.Mutex
	conns []*nats.Conn
}

// New starts members (members[i] at layout.Slots[i]) all at once (a
// JetStream cluster forms only with its servers up), once a formation slot
// of the machine is free (formingSlot), waits until the cluster is ready, and at the end of the test closes them all at once (none waits
// for a cluster that lost its quorum) and every connection it opened.
func New(tb TB, layout Layout, members []Member) *Cluster {
	tb.Helper()
	c := &Cluster{tb: tb, layout: layout, members: members}
	tb.Cleanup(c.close)
	release := formingSlot(tb, formingDir, startWithin) // formations take turns (forming.go)
	defer release()
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), startWithin)
			defer cancel()
			if err := m.Start(ctx); err != nil {
				errs[i] = fmt.Errorf("%s: %w", layout.Slots[i].Name, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("natstest: the cluster did not start:\n%v%s", err, StuckNote())
	}
	c.WaitReady()
	return c
}

func (c *Cluster) close() {
	c.mu.Lock()
	conns := c.conns
	c.conns = nil
	c.mu.Unlock()
	for _, nc := range conns {
		nc.Close()
	}
	var wg sync.WaitGroup
	for _, m := range c.members {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), closeWithin)
			defer cancel()
			m.Close(ctx)
		})
	}
	wg.Wait()
}

// Layout is where the members live.
func (c *Cluster) Layout() Layout { return c.layout }

// Size is the number of members, running or not.
func (c *Cluster) Size() int { return len(c.members) }

// Member returns member i.
func (c *Cluster) Member(i int) Member { return c.members[i] }

// Name is member i's server name.
func (c *Cluster) Name(i int) string { return c.layout.Slots[i].Name }

// Index returns the index of the member whose server is named name, or -1.
func (c *Cluster) Index(name string) int {
	for i, s := range c.layout.Slots {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// Running reports whether member i runs.
func (c *Cluster) Running(i int) bool { return c.members[i].Running() }

// URLs are the client URLs of the running members, comma-separated.
func (c *Cluster) URLs() string {
	var urls []string
	for i, m := range c.members {
		if m.Running() {
			urls = append(urls, c.layout.Slots[i].URL())
		}
	}
	return strings.Join(urls, ",")
}

// Kill ends member i at once, as kill -9 would.
func (c *Cluster) Kill(i int) {
	c.tb.Helper()
	if err := c.members[i].Kill(); err != nil {
		c.tb.Fatalf("natstest: kill %s: %v", c.Name(i), err)
	}
	c.tb.Logf("natstest: %s killed", c.Name(i))
}

// Stop ends member i gracefully. A member that does not stop cleanly fails
// the test (without ending it) and is killed.
func (c *Cluster) Stop(i int) {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stopWithin)
	defer cancel()
	if err := c.members[i].Stop(ctx); err != nil {
		c.tb.Errorf("natstest: stop %s: %v", c.Name(i), err)
		_ = c.members[i].Kill()
		return
	}
	c.tb.Logf("natstest: %s stopped", c.Name(i))
}

// Start starts member i again (after Kill or Stop) on the same ports and
// directory, and waits until the cluster is ready.
func (c *Cluster) Start(i int) {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startWithin)
	defer cancel()
	if err := c.members[i].Start(ctx); err != nil {
		c.tb.Fatalf("natstest: start %s: %v", c.Name(i), err)
	}
	c.tb.Logf("natstest: %s started", c.Name(i))
	c.WaitReady()
}

// Restart stops member i gracefully if it runs, and starts it again.
func (c *Cluster) Restart(i int) {
	c.tb.Helper()
	if c.Running(i) {
		c.Stop(i)
	}
	c.Start(i)
}

// WaitReady waits until every running member runs JetStream, current with the
// meta leader, and the meta leader (when it is a server of this process)
// counts every running member among its peers.
func (c *Cluster) WaitReady() {
	c.tb.Helper()
	if err := Poll(readyWithin, 20*time.Millisecond, c.ready); err != nil {
		c.tb.Fatalf("natstest: cluster %s not ready: %v%s", c.layout.Name, err, StuckNote())
	}
}

func (c *Cluster) ready() error {
	running := 0
	for _, m := range c.members {
		if m.Running() {
			running++
		}
	}
	for i, m := range c.members {
		srv := m.Server()
		if srv == nil {
			continue
		}
		switch {
		case !srv.JetStreamEnabled():
			return fmt.Errorf("%s: JetStream is not enabled", c.Name(i))
		case !srv.JetStreamIsCurrent():
			return fmt.Errorf("%s: not current with the meta leader", c.Name(i))
		case srv.JetStreamIsClustered() && srv.JetStreamIsLeader():
			if peers := srv.JetStreamClusterPeers(); len(peers) != running {
				return fmt.Errorf("%s, the meta leader, sees peers %v; %d members run", c.Name(i), peers, running)
			}
		}
	}
	return nil
}

// Connect opens a connection to the running members, with the layout's
// credentials and opts, reconnecting for ever; it is closed at the end.
func (c *Cluster) Connect(opts ...nats.Option) *nats.Conn {
	c.tb.Helper()
	all := []nats.Option{nats.Name("tahtest " + c.tb.Name()), nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}
	if c.layout.Creds != "" {
		all = append(all, nats.UserCredentials(c.layout.Creds))
	}
	nc, err := nats.Connect(c.URLs(), append(all, opts...)...)
	if err != nil {
		c.tb.Fatalf("natstest: connect to %s: %v", c.URLs(), err)
	}
	c.mu.Lock()
	c.conns = append(c.conns, nc)
	c.mu.Unlock()
	return nc
}
