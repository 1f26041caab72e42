package tahtest

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tahtest/natstest"
)

// inProcess is an InProcess member: a node of this process.
type inProcess struct {
	i   int
	cfg config.Config
	log *slog.Logger
	// natsLog is the embedded server's: its warnings and errors only, as
	// tah-node keeps them.
	natsLog *slog.Logger
	edit    func(int, *node.Options)

	mu   sync.Mutex
	node *node.Node
	dead *node.Node // killed, to be closed before the next start
}

var _ natstest.Member = (*inProcess)(nil)

func newInProcess(tb natstest.TB, o Options, i int, cfg config.Config) *inProcess {
	return &inProcess{i: i, cfg: cfg, edit: o.EditNode, log: Logger(tb, cfg.NodeID), natsLog: logger(tb, cfg.NodeID, slog.LevelWarn)}
}

// nodeOptions are the node options of cfg, as tah-node makes them
// (node.Configure): the model, the built-in and remote tools, the approval
// policy, the API and the agent gateway.
func (m *inProcess) nodeOptions() (node.Options, error) {
	o, err := node.Configure(m.cfg)
	if err != nil {
		return node.Options{}, err
	}
	o.Bus.Name = "tahtest " + m.cfg.NodeID
	o.Bus.ReadyTimeout = 2 * time.Minute // a cluster forms slowly under -race on two loaded cores (over a minute, measured)
	o.Bus.Logger = m.natsLog
	o.Logger = m.log
	if m.edit != nil {
		m.edit(m.i, &o)
	}
	return o, nil
}

func (m *inProcess) Start(ctx context.Context) error {
	if m.Running() {
		return errors.New("it runs already")
	}
	m.closeDead(ctx)
	o, err := m.nodeOptions()
	if err != nil {
		return err
	}
	// With the API and the agent gateway, as tah-node serves them.
	n, err := node.Start(ctx, o)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.node = n
	m.mu.Unlock()
	return nil
}

// closeDead frees what a kill left of the last node.
func (m *inProcess) closeDead(ctx context.Context) {
	m.mu.Lock()
	dead := m.dead
	m.dead = nil
	m.mu.Unlock()
	if dead != nil {
		_ = dead.Close(ctx) // its server is gone: errors mean nothing
	}
}

// Kill shuts the node's server down at once: its routes and clients drop as
// on kill -9, and the node, cut off, is left to itself until the next start
// or the end of the test.
func (m *inProcess) Kill() error {
	m.mu.Lock()
	n := m.node
	m.node, m.dead = nil, n
	m.mu.Unlock()
	if n != nil {
		// Its gateway goes with it, as with the process: its connection
		// would find another server of the cluster.
		if g := n.Gateway(); g != nil {
			g.Close()
		}
		n.Bus().Server().Shutdown()
		n.Bus().Server().WaitForShutdown()
	}
	return nil
}

func (m *inProcess) Stop(ctx context.Context) error {
	m.mu.Lock()
	n := m.node
	m.node = nil
	m.mu.Unlock()
	if n == nil {
		return nil
	}
	return n.Close(ctx)
}

func (m *inProcess) Close(ctx context.Context) {
	_ = m.Stop(ctx)
	m.closeDead(ctx)
}

func (m *inProcess) Running() bool { return m.Node() != nil }

func (m *inProcess) Node() *node.Node {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.node
}

func (m *inProcess) Server() *server.Server {
	if n := m.Node(); n != nil {
		return n.Bus().Server()
	}
	return nil
}

// Logger writes records at level info and above to the test's log, each
// with node=name: the log of an InProcess member, unless EditNode gives it
// another.
func Logger(tb TB, name string) *slog.Logger { return logger(tb, name, slog.LevelInfo) }

func logger(tb TB, name string, level slog.Level) *slog.Logger {
	w := &tbWriter{tb: tb}
	tb.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})).With("node", name)
}

// tbWriter writes log lines to the test's log until the test's cleanup
// closes it, then drops them: a node killed in a test (Kill) is left to
// itself, and one of its sessions may still log (an append retried until
// its deadline) after the test has ended, which testing turns into a panic.
type tbWriter struct {
	tb     natstest.TB
	mu     sync.RWMutex // held for reading while a line is written
	closed bool
}

func (w *tbWriter) Write(p []byte) (int, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if !w.closed {
		w.tb.Logf("%s", strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *tbWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}
