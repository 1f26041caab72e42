package clustertest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tah-dev/tah/internal/localnode"
)

// clusterOptions tune the nodes of a test.
type clusterOptions struct {
	// nodes is how many nodes (3).
	nodes int
	// pace is the mock's pause between streamed tokens: how long the answer
	// of a turn takes to write.
	pace time.Duration
	// nodeTTL and ackWait are --nats-node-ttl and --nats-input-ack-wait (0:
	// the defaults).
	nodeTTL, ackWait time.Duration
}

// cluster is a set of tah-node processes joined by routes.
type cluster struct {
	t     *testing.T
	dir   string
	opts  clusterOptions
	user  string
	pass  string
	root  string // the tools root
	nodes []*nodeProc
}

// nodeProc is one node: its settings, which stay the same across restarts, and
// its current process.
type nodeProc struct {
	c          *cluster
	id         string
	dataDir    string
	clientPort int
	routePort  int
	args       []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current process has exited
	exitErr error
	runs    int
	logs    []string // one log file per run
}

// newCluster starts opts.nodes nodes and waits until every one is ready.
func newCluster(t *testing.T, opts clusterOptions) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process cluster: not in -short")
	}
	if opts.nodes == 0 {
		opts.nodes = 3
	}
	dir := t.TempDir()
	if os.Getenv("CLUSTERTEST_KEEP") != "" {
		var err error
		if dir, err = os.MkdirTemp("", "clustertest-"+t.Name()+"-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("CLUSTERTEST_KEEP: the nodes' data and logs stay in %s", dir)
	}
	c := &cluster{t: t, dir: dir, opts: opts, user: "tah", pass: randomHex(12), root: filepath.Join(dir, "root")}
	writeToolsRoot(t, c.root)
	ports := freePorts(t, 2*opts.nodes)
	for i := range opts.nodes {
		n := &nodeProc{c: c, id: fmt.Sprintf("n%d", i+1), dataDir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			clientPort: ports[2*i], routePort: ports[2*i+1]}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		var routes []string
		for _, o := range c.nodes {
			if o != n {
				routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", o.routePort))
			}
		}
		n.args = []string{
			"--data-dir", n.dataDir,
			"--node-id", n.id,
			"--nats-port", strconv.Itoa(n.clientPort),
			"--nats-server-name", n.id,
			"--nats-cluster", "clustertest",
			"--nats-cluster-port", strconv.Itoa(n.routePort),
			"--nats-routes", strings.Join(routes, ","),
			"--nats-replicas", "3",
			"--http", "",
			"--tools-root", c.root,
			"--tools-remote=false",
			"--llm-provider", "mock",
			"--llm-mock-pace", opts.pace.String(),
			"--log-level", "debug",
		}
		if opts.nodeTTL > 0 {
			n.args = append(n.args, "--nats-node-ttl", opts.nodeTTL.String())
		}
		if opts.ackWait > 0 {
			n.args = append(n.args, "--nats-input-ack-wait", opts.ackWait.String())
		}
	}
	t.Cleanup(c.cleanup)
	for _, n := range c.nodes {
		n.start()
	}
	for _, n := range c.nodes {
		n.waitReady()
	}
	return c
}

// writeToolsRoot makes the directory the agents read: a README (so that each
// turn makes two tool calls) and a few files.
func writeToolsRoot(t *testing.T, root string) {
	t.Helper()
	files := map[string]string{
		"README.md":       "# Cluster test\n\nA small project that the cluster tests' agents look at, so that every turn calls list_files and read_file.\n",
		"go.mod":          "module example.com/clustertest\n",
		"main.go":         "package main\n\nfunc main() {}\n",
		"docs/guide.md":   "# Guide\n",
		"internal/x/x.go": "package x\n",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// urls are the nodes' client URLs, comma-separated.
func (c *cluster) urls() string {
	var us []string
	for _, n := range c.nodes {
		us = append(us, n.url())
	}
	return strings.Join(us, ",")
}

func (c *cluster) node(id string) *nodeProc {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	c.t.Fatalf("no node %q", id)
	return nil
}

func (c *cluster) ids() []string {
	var ids []string
	for _, n := range c.nodes {
		ids = append(ids, n.id)
	}
	return ids
}

// cleanup kills every node still running, reports what the logs say went
// wrong (data races, panics) and prints the logs when the test failed.
func (c *cluster) cleanup() {
	for _, n := range c.nodes {
		n.kill()
	}
	for _, n := range c.nodes {
		n.mu.Lock()
		logs := append([]string(nil), n.logs...)
		n.mu.Unlock()
		for i, path := range logs {
			b, err := os.ReadFile(path)
			if err != nil {
				continue
			}
			s := string(b)
			for _, bad := range []string{"WARNING: DATA RACE", "panic:", "fatal error:"} {
				if strings.Contains(s, bad) {
					c.t.Errorf("node %s (run %d): %q in its log", n.id, i+1, bad)
				}
			}
			if c.t.Failed() {
				c.t.Logf("===== log of node %s, run %d (%s), without the NATS server's debug lines =====\n%s", n.id, i+1, path, tailLines(quiet(s), 300))
			}
		}
	}
}

// quiet drops the embedded server's debug lines and its route connection
// retries from a node's log.
func quiet(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "component=nats") &&
			(strings.Contains(line, "level=DEBUG") || strings.Contains(line, "Error trying to connect to route")) {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// tailLines is the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return fmt.Sprintf("[... %d lines before]\n", len(lines)-n) + strings.Join(lines[len(lines)-n:], "\n")
}

func (n *nodeProc) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.clientPort) }

// start runs a new process of the node, its output into a new log file.
func (n *nodeProc) start() {
	t := n.c.t
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done != nil {
		select {
		case <-n.done:
		default:
			t.Fatalf("node %s: start while it runs", n.id)
		}
	}
	n.runs++
	logPath := filepath.Join(n.c.dir, fmt.Sprintf("%s.run%d.log", n.id, n.runs))
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nodeBin, n.args...)
	cmd.Env = append(cleanEnv(), "TAH_NATS_USER="+n.c.user, "TAH_NATS_PASSWORD="+n.c.pass, "NO_COLOR=1")
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start node %s: %v", n.id, err)
	}
	done := make(chan struct{})
	n.cmd, n.done, n.exitErr = cmd, done, nil
	n.logs = append(n.logs, logPath)
	go func() { // owned by the process: ends when it exits
		err := cmd.Wait()
		f.Close()
		n.mu.Lock()
		n.exitErr = err
		n.mu.Unlock()
		close(done)
	}()
	t.Logf("node %s: started (run %d, pid %d)", n.id, n.runs, cmd.Process.Pid)
}

// waitReady waits until the current process wrote its node.json: its NATS
// server, the streams and the API are up.
func (n *nodeProc) waitReady() {
	t := n.c.t
	t.Helper()
	n.mu.Lock()
	pid, done := n.cmd.Process.Pid, n.done
	n.mu.Unlock()
	err := poll(90*time.Second, 100*time.Millisecond, func() (bool, error) {
		select {
		case <-done:
			return false, fmt.Errorf("exited: %v", n.exitError())
		default:
		}
		info, err := localnode.ReadNodeInfo(n.dataDir)
		if err != nil {
			return false, err
		}
		return info.PID == pid, fmt.Errorf("node.json names pid %d", info.PID)
	})
	if err != nil {
		t.Fatalf("node %s is not ready: %v\n%s", n.id, err, n.lastLog(60))
	}
}

func (n *nodeProc) exitError() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exitErr
}

func (n *nodeProc) running() bool {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// lastLog is the tail of the current run's log.
func (n *nodeProc) lastLog(lines int) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.logs) == 0 {
		return ""
	}
	b, _ := os.ReadFile(n.logs[len(n.logs)-1])
	return tailLines(string(b), lines)
}

// kill ends the current process with SIGKILL and waits for it.
func (n *nodeProc) kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	n.c.t.Logf("node %s: killed (SIGKILL)", n.id)
}

// stop sends SIGTERM and waits up to bound for the process to exit; it
// returns the process's exit error (nil for status 0).
func (n *nodeProc) stop(bound time.Duration) error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-done:
		return n.exitError()
	case <-time.After(bound):
		return fmt.Errorf("node %s did not exit within %v of SIGTERM", n.id, bound)
	}
}

// cleanEnv is this process's environment without TAH_ variables, which would
// change the nodes' settings.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TAH_") {
			env = append(env, kv)
		}
	}
	return env
}

// freePorts returns n distinct TCP ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// poll calls f every interval until it returns true, or bound passes; then it
// returns the last error f gave (or a timeout).
func poll(bound, interval time.Duration, f func() (bool, error)) error {
	deadline := time.Now().Add(bound)
	var last error
	for {
		ok, err := f()
		if ok {
			return nil
		}
		var perm *permanent
		if errors.As(err, &perm) {
			return perm.error
		}
		last = err
		if time.Now().After(deadline) {
			if last == nil {
				last = errors.New("condition not met")
			}
			return fmt.Errorf("after %v: %w", bound, last)
		}
		time.Sleep(interval)
	}
}

// trace is every node's log lines that mention sub (a session id), for
// failure messages.
func (c *cluster) trace(sub string) string {
	var lines []string
	for _, n := range c.nodes {
		lines = append(lines, n.grepLog(sub)...)
	}
	if len(lines) == 0 {
		return "  (no node logged " + sub + ")\n"
	}
	return "  " + strings.Join(lines, "\n  ") + "\n"
}

// grepLog returns the lines of every run's log of n that contain sub.
func (n *nodeProc) grepLog(sub string) []string {
	n.mu.Lock()
	logs := append([]string(nil), n.logs...)
	n.mu.Unlock()
	var out []string
	for i, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), sub) {
				out = append(out, fmt.Sprintf("%s run %d: %s", n.id, i+1, sc.Text()))
			}
		}
		f.Close()
	}
	return out
}

// ctxT is a context bounded by d and by the test.
func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
