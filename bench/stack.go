package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/tahtest/natstest"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// discard is the logger of the single-node rows' nodes: the benchmarks print
// only their table.
var discard = slog.New(slog.DiscardHandler)

// clientTimeout bounds the client's API calls (retries included): a node
// creating a thousand sessions at once answers slowly.
const clientTimeout = time.Minute

// stack is what rows 2 to 6 measure on: one node of the harness (tahtest,
// in this process, on a fresh directory under Config.Tmp; row 9 runs three)
// with the probe as its model and the noop tool, and a client of it over a
// connection of its own, as any client would have.
type stack struct {
	c  *tahtest.Cluster
	cl *client.Client
	o  stackOpts
}

// stackOpts say how to start a stack's node.
type stackOpts struct {
	// sync is bus.Config.SyncInterval at the node's next start: 0 fsyncs
	// every write.
	sync     time.Duration
	provider llm.Provider
	// session is the sessions' configuration; MaxSteps 0 means no limit
	// (the turns here make as many steps as they say).
	session session.Config
	// nodes is the cluster's members (0 means 1), each in this process;
	// with three or more, every stream is R3.
	nodes int
}

// noopTool is the benchmarks' tool: it does nothing and says so.
func noopTool() tools.Catalog {
	return tools.MustRegistry(tools.Func(tools.Spec{Name: "noop", Description: "does nothing", Idempotent: true},
		func(context.Context, json.RawMessage) (tools.Result, error) { return tools.Text("ok"), nil }))
}

// startStack starts the node and connects the client.
func startStack(env Env, tmp string, o stackOpts) (*stack, error) {
	s := &stack{o: o}
	s.c = tahtest.Start(env.TB, tahtest.Options{Nodes: max(o.nodes, 1), Dir: tmp, EditNode: s.edit})
	// The harness's connection may publish any input: its inputs name
	// nobody ($anon) and go straight to TAH_IN, as a credential's that names
	// itself do, not through TAH_TIN (the form of credentials issued before
	// inputs named their sender).
	cl, err := client.New(s.c.Connect(), client.Options{RequestTimeout: clientTimeout, Sender: wire.AnonymousSender})
	if err != nil {
		return nil, err
	}
	s.cl = cl
	return s, nil
}

// edit makes the harness's node the bench's, at each of its starts.
func (s *stack) edit(_ int, o *node.Options) {
	o.Provider, o.Tools = s.o.provider, noopTool()
	o.Logger, o.Bus.Logger = discard, discard
	o.Bus.SyncInterval = s.o.sync
	sc := s.o.session
	sc.Node, sc.Logger = o.Session.Node, discard
	if sc.MaxSteps == 0 {
		sc.MaxSteps = -1
	}
	o.Session = sc
}

// close closes the client; the harness stops the node.
func (s *stack) close() {
	if s != nil && s.cl != nil {
		s.cl.Close()
	}
}

// node is the running node.
func (s *stack) node() *node.Node { return s.c.Node(0) }

// restart stops the node and starts it again on the same directory with
// durability sync (a fresh server, Manager and actors), and waits until the
// client is connected again.
func (s *stack) restart(sync time.Duration) error {
	s.c.Stop(0)
	s.o.sync = sync
	s.c.Start(0)
	if err := natstest.Poll(time.Minute, 10*time.Millisecond, natstest.Until(s.cl.Conn().IsConnected)); err != nil {
		return fmt.Errorf("the client's connection after the restart: %w", err)
	}
	return nil
}

// create creates session sid through the API.
func (s *stack) create(ctx context.Context, sid string) error {
	if _, err := s.cl.Create(ctx, wire.CreateRequest{Session: sid}); err != nil {
		return fmt.Errorf("create %s: %w", sid, err)
	}
	return nil
}

// run runs one turn of sid with text through the client.
func (s *stack) run(ctx context.Context, sid, text string) (*turn, outcome, error) {
	return runTurn(ctx, s.cl, sid, text)
}

// pauseProjector stops the node's read model projector, so that a floor's
// events are not projected while the floor is measured, and returns the
// function that starts it again (it picks up where it stopped), and with
// wait waits until it has caught up with the log.
func (s *stack) pauseProjector(ctx context.Context) (resume func(wait bool) error) {
	start := s.node().PauseReadModel()
	return func(wait bool) error {
		if err := start(ctx); err != nil {
			return err
		}
		if !wait {
			return nil
		}
		return s.waitReadModel(ctx)
	}
}

// waitReadModel waits until the read model has applied the whole log.
func (s *stack) waitReadModel(ctx context.Context) error {
	last, err := s.logState(ctx)
	if err != nil {
		return err
	}
	return s.node().WaitReadModelLog(ctx, last.lastSeqs)
}

// logInfo is what the log's shards hold.
type logInfo struct {
	lastSeqs []uint64 // each shard's last sequence
	records  uint64   // the messages of every shard
}

// logState reads every shard of the log.
func (s *stack) logState(ctx context.Context) (logInfo, error) {
	b := s.node().Bus()
	out := logInfo{lastSeqs: make([]uint64, b.Shards())}
	for k := range b.Shards() {
		info, err := b.JetStream().Stream(ctx, wire.EventShardStream(k))
		if err != nil {
			return logInfo{}, err
		}
		out.lastSeqs[k] = info.CachedInfo().State.LastSeq
		out.records += info.CachedInfo().State.Msgs
	}
	return out, nil
}
