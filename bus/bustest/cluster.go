package bustest

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

var clusterSeq atomic.Int64

// Cluster is a NATS cluster of JetStream servers running in-process, joined by
// routes on 127.0.0.1, for tests of replicated (R3) streams and failover.
//
//	c := bustest.NewCluster(t, 3)
//	nc := bustest.ConnectURL(t, c.URLs())
//	c.Shutdown(1); c.Restart(1)
type Cluster struct {
	t       testing.TB
	Name    string
	Servers []*server.Server // nil at the index of a server that is shut down
	opts    []*server.Options
	mu      sync.Mutex
}

// NewCluster starts n JetStream servers joined in one cluster, each storing
// under its own t.TempDir(), waits until every server sees the JetStream meta
// leader and all n peers, and shuts them all down in t.Cleanup.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Name: fmt.Sprintf("tah%d", clusterSeq.Add(1))}
	c.mu.Lock()
	c.Servers = make([]*server.Server, n)
	c.opts = make([]*server.Options, n)
	c.mu.Unlock()
	// JetStream clustering needs configured routes from the start: pick the
	// route ports first, then give every server the routes to all.
	ports := make([]int, n)
	for i := range ports {
		ports[i] = freePort(t)
	}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	for i := range n {
		c.opts[i] = &server.Options{
			ServerName: fmt.Sprintf("%s-s%d", c.Name, i),
			Host:       "127.0.0.1",
			Port:       -1,
			JetStream:  true,
			StoreDir:   t.TempDir(),
			NoLog:      true,
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: c.Name, Host: "127.0.0.1", Port: ports[i]},
			Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
		}
	}
	// Registered after the t.TempDir calls above, so that it runs before their
	// removal: a server writes to its store until it is shut down.
	t.Cleanup(func() {
		for i := range c.Servers {
			c.Shutdown(i)
		}
	})
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.startErr(i)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("bustest: cluster server %d: %v", i, err)
		}
	}
	// A restarted server keeps its client port.
	for i, o := range c.opts {
		o.Port = c.Servers[i].Addr().(*net.TCPAddr).Port
	}
	c.WaitReady(30 * time.Second)
	return c
}

func (c *Cluster) startErr(i int) error {
	o := *c.opts[i]
	srv, err := server.NewServer(&o)
	if err != nil {
		return err
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("not ready within 10s")
	}
	c.mu.Lock()
	c.Servers[i] = srv
	c.mu.Unlock()
	return nil
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("bustest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Shutdown stops server i (a no-op if it is already down).
func (c *Cluster) Shutdown(i int) {
	if srv := c.Servers[i]; srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		c.Servers[i] = nil
	}
}

// Restart starts server i again, on the same ports and store, and waits until
// the cluster is ready.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.Shutdown(i)
	if err := c.startErr(i); err != nil {
		c.t.Fatalf("bustest: restart cluster server %d: %v", i, err)
	}
	c.WaitReady(30 * time.Second)
}

// URLs is the comma-separated client URLs of the running servers.
func (c *Cluster) URLs() string {
	var urls []string
	for _, srv := range c.Servers {
		if srv != nil {
			urls = append(urls, srv.ClientURL())
		}
	}
	return strings.Join(urls, ",")
}

// WaitReady polls until every running server has JetStream on and is current
// with the meta leader, and the leader knows every peer, failing the test
// after within.
func (c *Cluster) WaitReady(within time.Duration) {
	c.t.Helper()
	Eventually(c.t, within, "cluster JetStream ready", func() bool {
		leaders := 0
		for _, srv := range c.Servers {
			if srv == nil {
				continue
			}
			if !srv.JetStreamEnabled() || !srv.JetStreamIsCurrent() {
				return false
			}
			// Only the meta leader lists the peers.
			if srv.JetStreamIsLeader() {
				if len(srv.JetStreamClusterPeers()) != len(c.Servers) {
					return false
				}
				leaders++
			}
		}
		return leaders == 1
	})
}

// StreamLeader returns the index of the server leading stream in the global
// account, or -1 when none does.
func (c *Cluster) StreamLeader(stream string) int {
	for i, srv := range c.Servers {
		if srv != nil && srv.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// ConnectURL opens a client connection to urls (comma-separated), closed in
// t.Cleanup.
func ConnectURL(t testing.TB, urls string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		t.Fatalf("bustest: connect %s: %v", urls, err)
	}
	t.Cleanup(nc.Close)
	return nc
}
