package natstest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/tah-dev/tah/auth"
)

// KeepEnv names the environment variable that keeps a cluster's directory
// (the members' data and logs) after the test, for a look at what happened.
const KeepEnv = "TAHTEST_KEEP"

// Layout is where the members of a cluster live, chosen before any starts
// (JetStream clustering needs every route from the start) and kept across
// restarts: for each member a server name, a directory and two ports.
type Layout struct {
	// Name is the cluster's name, unique in this process.
	Name string
	// Dir holds the members' directories; it is removed at the end unless
	// TAHTEST_KEEP is set.
	Dir string
	// Creds is the .creds file the harness's clients present (a node
	// credential of the trust material every member shares, see WithTrust:
	// the harness reads and writes the log as a node does); empty for servers
	// without authentication.
	Creds string
	Slots []Slot
}

// Slot is one member's place in a Layout.
type Slot struct {
	// Name is the member's server name, "n0", "n1"...
	Name string
	// Dir is its data directory, under Layout.Dir.
	Dir string
	// ClientPort and RoutePort are its ports on 127.0.0.1.
	ClientPort, RoutePort int
	// Routes are the route URLs of the other members.
	Routes []string
}

// URL is the member's client URL.
func (s Slot) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.ClientPort) }

var clusters atomic.Int64

// NewLayout places n members: free ports on 127.0.0.1, a fresh directory in
// parent (the system's temporary directory when empty) removed at the end of
// the test (registered first, so that it goes after the members that write
// to it have stopped), names n0...
func NewLayout(tb TB, parent string, n int) Layout {
	tb.Helper()
	dir, err := os.MkdirTemp(parent, "tahtest-"+strings.NewReplacer("/", "_", " ", "_").Replace(tb.Name())+"-")
	if err != nil {
		tb.Fatalf("natstest: %v", err)
	}
	if os.Getenv(KeepEnv) != "" {
		tb.Logf("%s: the members' data and logs stay in %s", KeepEnv, dir)
	} else {
		tb.Cleanup(func() { os.RemoveAll(dir) })
	}
	l := Layout{Name: fmt.Sprintf("tahtest%d", clusters.Add(1)), Dir: dir}
	ports, err := FreePorts(2 * n)
	if err != nil {
		tb.Fatalf("natstest: %v", err)
	}
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		l.Slots = append(l.Slots, Slot{Name: name, Dir: filepath.Join(dir, name), ClientPort: ports[2*i], RoutePort: ports[2*i+1]})
	}
	for i := range l.Slots {
		for j, o := range l.Slots {
			if j != i {
				l.Slots[i].Routes = append(l.Slots[i].Routes, fmt.Sprintf("nats-route://127.0.0.1:%d", o.RoutePort))
			}
		}
	}
	return l
}

// WithTrust gives every member's directory the same trust material (package
// auth: one operator, one TAH account), as a second node gets it from the
// first, so that the members' embedded servers trust each other and share
// account updates; Creds is a node credential of it.
func (l Layout) WithTrust(tb TB) Layout {
	tb.Helper()
	seed := filepath.Join(l.Dir, "trust-seed")
	if _, err := auth.Ensure(seed); err != nil {
		tb.Fatalf("natstest: %v", err)
	}
	for _, s := range l.Slots {
		if err := auth.CopyTrust(seed, s.Dir); err != nil {
			tb.Fatalf("natstest: %v", err)
		}
	}
	l.Creds = auth.NodeCredsPath(seed)
	return l
}

// FreePorts returns n distinct TCP ports of 127.0.0.1 that were free a moment
// ago, and that no other test process of this machine is handed while this
// one runs.
//
// A port a listener on 127.0.0.1:0 picks comes from the kernel's ephemeral
// range, which every outgoing connection draws its source port from too:
// between the pick and the server's bind, one of the many connections of
// a suite running in parallel could take it ("bind: address already in
// use", a cluster that never formed). So the ports come from below that
// range (where only listeners go), each reserved by a lock on a file named
// after it in the system's temporary directory, held until this process
// ends: test processes that run side by side never pick the same one.
// Where the range or the locks cannot be had, the kernel picks, as before.
func FreePorts(n int) ([]int, error) {
	if ports, err := reservedPorts(n); err == nil {
		return ports, nil
	}
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("a free port: %w", err)
		}
		defer l.Close() // held until all are picked: distinct
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// The ports reservedPorts hands out lie in [portsFrom, the ephemeral
// range's start).
const portsFrom = 20000

var (
	reserveMu sync.Mutex
	// reserved holds the lock files of the ports handed out, open (and so
	// locked) until the process ends.
	reserved []*os.File
)

// reservedPorts picks n ports below the ephemeral range, each free to bind
// and locked for this process (see FreePorts).
func reservedPorts(n int) ([]int, error) {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return nil, err
	}
	var lo, hi int
	if _, err := fmt.Sscanf(string(raw), "%d %d", &lo, &hi); err != nil {
		return nil, err
	}
	if lo-portsFrom < 1000 {
		return nil, fmt.Errorf("the ephemeral range starts at %d: too few ports below it", lo)
	}
	dir := filepath.Join(os.TempDir(), "tahtest-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	reserveMu.Lock()
	defer reserveMu.Unlock()
	var ports []int
	span := lo - portsFrom
	start := rand.IntN(span)
	for k := 0; k < span && len(ports) < n; k++ {
		port := portsFrom + (start+k)%span
		f, ok := tryLock(filepath.Join(dir, strconv.Itoa(port)))
		if !ok {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			f.Close() // taken by a listener of something else
			continue
		}
		l.Close()
		reserved = append(reserved, f)
		ports = append(ports, port)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("%d free ports below %d, %d wanted", len(ports), lo, n)
	}
	return ports, nil
}

// tryLock opens path and locks it without waiting: false when another
// open file of it (in this process or another) holds the lock. Closing the
// file drops the lock, as the process's end does.
func tryLock(path string) (*os.File, bool) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}
