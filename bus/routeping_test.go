package bus

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus/bustest"
)

// relay forwards TCP connections from its listener to target until frozen;
// then it forwards nothing more, in either direction, and accepts new
// connections without answering them, while keeping every socket open: what
// a server looks like from its peers once its process is stopped (SIGSTOP)
// or its host is cut off without a FIN.
type relay struct {
	l      net.Listener
	target string
	frozen chan struct{}
	stop   chan struct{}
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newRelay(t *testing.T, target string) *relay {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{l: l, target: target, frozen: make(chan struct{}), stop: make(chan struct{})}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.close)
	return r
}

func (r *relay) addr() string { return r.l.Addr().String() }

func (r *relay) freeze() { close(r.frozen) }

func (r *relay) keep(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conns = append(r.conns, c)
}

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.l.Accept()
		if err != nil {
			return // closed
		}
		r.keep(c)
		select {
		case <-r.frozen:
			continue // accepted, never answered
		default:
		}
		d, err := net.Dial("tcp", r.target)
		if err != nil {
			continue
		}
		r.keep(d)
		r.wg.Add(2)
		go r.pipe(d, c)
		go r.pipe(c, d)
	}
}

// pipe copies from src to dst until either closes or the relay freezes;
// frozen, it holds what it read and reads no more.
func (r *relay) pipe(dst, src net.Conn) {
	defer r.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-r.frozen:
			<-r.stop
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (r *relay) close() {
	close(r.stop)
	r.l.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// TestSilentServerLosesItsRoutes: a server of a cluster that goes silent
// without closing its sockets (as a SIGSTOPped process does) loses its routes
// to the other servers after a few route pings tied to Config.NodeTTL (1 to
// 1.5 NodeTTL), not nats-server's 60 to 90 s: until then it would get its
// share of every R3 stream's direct gets, which time out. A and B route to
// each other through relays that the test freezes.
func TestSilentServerLosesItsRoutes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("two embedded servers of a cluster: not in -short")
	}
	trust := t.TempDir()
	if _, err := auth.Ensure(trust); err != nil {
		t.Fatal(err)
	}
	var ports [2]int
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	// Every route between A and B goes through a relay, whichever solicits.
	toB := newRelay(t, fmt.Sprintf("127.0.0.1:%d", ports[1]))
	toA := newRelay(t, fmt.Sprintf("127.0.0.1:%d", ports[0]))
	cfgs := make([]Config, 2)
	for i := range cfgs {
		cfg := testConfig(t)
		if err := auth.CopyTrust(trust, cfg.DataDir); err != nil {
			t.Fatal(err)
		}
		cfg.ServerName = fmt.Sprintf("node%d", i)
		cfg.NodeTTL = 2 * time.Second
		cfg.Cluster = ClusterConfig{Name: "tah", Port: ports[i]}
		cfg.ReadyTimeout = formingTimeout
		cfgs[i] = cfg
	}
	cfgs[0].Cluster.Routes = []string{"nats-route://" + toB.addr()}
	cfgs[1].Cluster.Routes = []string{"nats-route://" + toA.addr()}
	buses := make([]*Bus, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range buses {
		wg.Add(1)
		go func() { // they need each other to become ready
			defer wg.Done()
			buses[i], errs[i] = Open(ctxT(t), cfgs[i])
		}()
	}
	wg.Wait()
	for i, b := range buses {
		if b != nil {
			(&embeddedCluster{t: t}).closeAtEnd(b)
		}
		if errs[i] != nil {
			t.Fatalf("node %d: %v", i, errs[i])
		}
	}
	a := buses[0].Server()
	bustest.Eventually(t, 30*time.Second, "A routed to B", func() bool { return a.NumRoutes() > 0 })
	toB.freeze()
	toA.freeze()
	// The deadline only catches a hang: nats-server's own pings would take
	// 60 to 90 s, this NodeTTL's 2 to 3 s.
	bustest.Eventually(t, 45*time.Second, "A's routes to the silent B closed", func() bool { return a.NumRoutes() == 0 })
}
