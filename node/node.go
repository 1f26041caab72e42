package node

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/agents"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/buildinfo"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/quota"
	"github.com/tah-dev/tah/store"
	"github.com/tah-dev/tah/telemetry"
	"github.com/tah-dev/tah/telemetry/otlp"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/artifacts"
	"github.com/tah-dev/tah/tools/remote"
)

// Options configure a node.
type Options struct {
	// Bus is the NATS configuration: an embedded server (the default) or an
	// external URL.
	Bus bus.Config
	// StorePath is the SQLite read model's file; empty means
	// <Bus.DataDir>/data.db.
	StorePath string
	// Worker makes a worker node (the setting read_model=false): it opens
	// no read model and runs no projector, so that it does no work
	// proportional to the whole cluster's traffic, and it does not serve
	// the API's reads (wire.ReadModelEndpoints), which the nodes that hold
	// a read model answer. It runs sessions and serves everything else as
	// any node does. The zero value holds a read model, as every node did
	// before workers.
	Worker bool
	// ReadModelCache is how many sessions' folded states the read model
	// keeps in memory (store.Options.CacheSize, which also sizes its SQLite
	// page cache; the setting read_model_cache): above the sessions active
	// at once in the whole cluster. 0 means the store's default (2048).
	ReadModelCache int
	// Session is the loop configuration every session runs with. With no
	// Session.Tracing, Start sets tracing up from Tracing.
	Session session.Config
	// Tracing turns OpenTelemetry traces of the turns on (telemetry/otlp; the
	// OTEL_* variables apply too); the zero value leaves them to those.
	Tracing otlp.Config
	// Provider answers the LLM calls. Required.
	Provider llm.Provider
	// Tools are the tools offered to the model; nil offers none (unless
	// RemoteTools is set).
	Tools tools.Catalog
	// RemoteTools, when set, also offers the tools that tool services serve on
	// NATS (tools/remote), discovered over the node's own connection and listed
	// after Tools (a local tool of the same name wins). On resume, a remote call
	// whose owner died is looked up in the services' stored results.
	RemoteTools *remote.Config
	// ToolOptions configure how tools run (timeouts, output limits).
	ToolOptions tools.Options
	// MaxConcurrentTools bounds the tool calls running at once on this node.
	MaxConcurrentTools int
	// Approval says which tool calls wait for a person's approval.
	Approval session.ApprovalPolicy
	// WakeupTool offers the model the tool WakeupTool, with which an agent
	// schedules its own session's next turn (tools.wakeup).
	WakeupTool bool
	// MaxInputBytes bounds the user message of a run (its text, or its
	// message as JSON): a larger one is refused (wire.Refusal) with code
	// input_too_large. 0 means DefaultMaxInputBytes.
	MaxInputBytes int
	// Loop is the agent loop; nil means session.DefaultLoop.
	Loop session.Loop
	// AgentKeepAlive is how long an agent protocol stream stays silent
	// while its turn works before a "working" chunk; 0 means
	// agents.DefaultKeepAlive.
	AgentKeepAlive time.Duration
	// API, when set, makes Start serve the request/reply API (StartAPI).
	API bool
	// Agents, when set, makes Start serve the sessions as agents of the
	// Synadia Agent Protocol (package agents) on a connection of the
	// gateway's own. A gateway that cannot start leaves the node running
	// (GatewayErr says why).
	Agents *GatewayConfig
	// MCP, when set, makes Start serve the tools of MCP servers as tool
	// services, the servers started in the background (MCPConfig).
	MCP *MCPConfig
	// Logger receives the node's structured logs; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultMaxInputBytes is the default of Options.MaxInputBytes: 256 KiB, a
// long document pasted whole, far below a record's size.
const DefaultMaxInputBytes = 256 << 10

// maxInputBytes is Options.MaxInputBytes or its default.
func (n *Node) maxInputBytes() int {
	if n.opts.MaxInputBytes > 0 {
		return n.opts.MaxInputBytes
	}
	return DefaultMaxInputBytes
}

// Node is one TAH node: the bus (and its embedded server), the read model and
// its projector (not on a worker: Options.Worker), the session actors (which
// own the tool runner) and the input consumers.
type Node struct {
	opts     Options
	log      *slog.Logger
	bus      *bus.Bus
	store    *store.Store              // nil on a worker
	tracing  *telemetry.Tracing        // the spans of the turns' work
	proj     atomic.Pointer[Projector] // swapped by PauseReadModel; nil on a worker
	onClaim  func(sid string, epoch uint64)
	sessions *session.Manager
	quotas   *quota.Meter // the tenants' quotas
	// Metrics are the node's Prometheus metrics (serve Metrics.Handler).
	Metrics  *Metrics
	inputs   *bus.InputConsumer
	inflight inflight // inputs whose work runs here
	acks     *acker   // the acks of inputs whose work ended (input.go)
	cluster  *membership
	tools    tools.Catalog // local and remote, as offered to the model
	// forTenant is the catalog of a tenant's sessions (session.ToolConfig.ForTenant); nil without remote tools.
	forTenant func(tenant string) (tools.Catalog, session.ServiceWaiter)
	remote    *remote.Registry // nil without RemoteTools
	closers   []func(context.Context) error
	// gateway serves the agent protocol (StartAgents); nil until then.
	gateway atomic.Pointer[agents.Gateway]
	// tenantsMu guards tenants, the tenants of the registry as the quotas'
	// watch found them (tenantSeen), whose controllers the gateway serves.
	tenantsMu sync.Mutex
	tenants   map[string]bool
	// gatewayErr is why Options.Agents did not start (GatewayErr).
	gatewayErr error
	// mcp is the bridge of Options.MCP (nil without), mcpErr why it does
	// not run (MCPErr).
	mcp    *mcpPart
	mcpErr error
	// failed receives the first error the node cannot get over by itself
	// (Failed).
	failed chan error
}

// openStore opens the read model at path; a damaged one (store.ErrDamaged)
// is set aside and a new one made, which the projector fills from the log.
// One that cannot be written is refused with what to do about it. With
// opts.DeferCheck the integrity check is the projector's, once started
// (checkOpened): damage Open does not meet is found there.
func openStore(ctx context.Context, path string, opts store.Options, log *slog.Logger) (*store.Store, error) {
	s, err := store.OpenWith(ctx, path, opts)
	if err == nil || !errors.Is(err, store.ErrDamaged) {
		return s, err
	}
	aside, merr := store.MoveAside(path)
	if merr != nil {
		return nil, fmt.Errorf("%w (and it cannot be set aside: %w)", err, merr)
	}
	log.Warn("read model damaged: set aside, rebuilding it from the log", "damaged", aside, "err", err)
	return store.OpenWith(ctx, path, opts)
}

// Failed receives, once, an error the node cannot get over by itself: its
// read model cannot be used and no new one can be made in its place (a
// person must fix its directory), or its embedded NATS server's JetStream
// could not be started again after a write failure.
// The node goes on as well as it can (its /healthz says why it is not
// healthy); a program should Close it and exit with a failure, so that a
// supervisor starts it again. tah-node does.
func (n *Node) Failed() <-chan error { return n.failed }

// fail hands err to Failed, unless an earlier error is there.
func (n *Node) fail(err error) {
	n.log.Error("the node cannot go on by itself", "err", err)
	select {
	case n.failed <- err:
	default:
	}
}

// Start brings a node up: bus, read model, session actors, the claim
// notices, projector and the input consumers, in that order (a worker opens
// no read model and runs no projector). On error everything started is
// stopped.
func Start(ctx context.Context, opts Options) (n *Node, err error) {
	if opts.Provider == nil {
		return nil, errors.New("node: no LLM provider configured")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.Session.Node == "" {
		dir := opts.Bus.DataDir
		if opts.StorePath != "" {
			dir = filepath.Dir(opts.StorePath)
		}
		opts.Session.Node = DefaultNodeID(dir)
	}
	n = &Node{opts: opts, log: log, failed: make(chan error, 1)}
	if opts.WakeupTool {
		cats := []tools.Catalog{tools.MustRegistry(n.wakeupTool())}
		if opts.Tools != nil {
			cats = append([]tools.Catalog{opts.Tools}, cats...)
		}
		n.opts.Tools = tools.Merge(cats...)
		opts.Tools = n.opts.Tools
	}
	n.Metrics = newMetrics(n)
	started := n // `return nil, err` clears n before this runs
	defer func() {
		if err != nil {
			n = started // the closers read n
			_ = n.Close(context.WithoutCancel(ctx))
			n = nil
		}
	}()
	bcfg := opts.Bus
	if bcfg.Logger == nil {
		bcfg.Logger = log.With("component", "nats")
	}
	if n.bus, err = bus.Open(ctx, bcfg); err != nil {
		return nil, err
	}
	n.closers = append(n.closers, n.bus.Close)
	// A JetStream store that cannot be restarted stops the node.
	busWatched, busFailed := make(chan struct{}), n.bus.Failed()
	go func() { // owned here: ends with the node
		select {
		case err := <-busFailed:
			started.fail(err)
		case <-busWatched:
		}
	}()
	n.closers = append(n.closers, func(context.Context) error { close(busWatched); return nil })

	path := ""
	if !opts.Worker {
		path = opts.StorePath
		if path == "" {
			dir := bcfg.DataDir
			if dir == "" {
				dir = ".tah"
			}
			path = filepath.Join(dir, "data.db")
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("node: read model directory: %w", err)
		}
		if n.store, err = openStore(ctx, path, store.Options{Shards: n.bus.Shards(), CacheSize: opts.ReadModelCache, DeferCheck: true}, log); err != nil {
			return nil, err
		}
		n.closers = append(n.closers, func(context.Context) error { return n.store.Close() })
	}

	scfg := opts.Session
	if scfg.Logger == nil {
		scfg.Logger = log.With("component", "session")
	}
	streams := agents.NewStreams(n.bus.Conn(), opts.AgentKeepAlive, log.With("component", "agents"))
	n.closers = append(n.closers, func(context.Context) error { streams.Close(); return nil })
	scfg.Watch = func(sid string, c *event.Caller, restarted bool, st *projection.State) session.Watcher {
		if w := streams.Watch(sid, c, restarted, st); w != nil {
			return w
		}
		return nil // not a typed nil: the session sees no watcher
	}
	scfg.Active = n.sessionActive
	scfg.Claimed = n.tellPrevious
	// The tenants' quotas (package quota), checked by the API and the
	// sessions; closed after them (closers run last first).
	n.quotas = quota.StartWith(n.bus.JetStream(), log.With("component", "quota"), n.tenantSeen)
	n.closers = append(n.closers, func(context.Context) error { n.quotas.Close(); return nil })
	scfg.Quotas = n.quotas
	if scfg.Tracing == nil {
		tr, err := otlp.Start(ctx, opts.Tracing, otlp.Resource{NodeID: scfg.Node, Version: buildinfo.Read().Version}, os.LookupEnv)
		if err != nil {
			return nil, fmt.Errorf("node: tracing: %w", err)
		}
		// Closed after the sessions (closers run last first): their spans
		// are flushed.
		n.closers = append(n.closers, tr.Shutdown)
		scfg.Tracing = tr
	}
	n.tracing = scfg.Tracing
	tc, err := n.toolConfig(opts)
	if err != nil {
		return nil, err
	}
	opts.Loop = n.startMCP(ctx, opts.MCP, opts.Loop) // in the background (mcp.go)
	if n.sessions, err = session.NewManager(scfg, n.bus, measured(opts.Provider, n.Metrics), tc, opts.Loop); err != nil {
		return nil, err
	}
	// The acks wait after the sessions (closers run last first): the work
	// they stop answers its inputs.
	n.acks = newAcker()
	n.closers = append(n.closers, n.acks.close, n.sessions.Close)
	// The claims of other nodes stop this node's stale actors: the claimer
	// tells the previous owner directly (claims.go), and the projector, on
	// a node that holds a read model, sees every record first as well.
	claimed := func(sid string, epoch uint64) {
		n.sessions.ClaimedElsewhere(sid, epoch)
		streams.Claimed(sid, epoch)
	}
	n.onClaim = claimed
	if err := n.hearClaims(); err != nil {
		return nil, err
	}
	if n.store != nil {
		proj, err := startProjector(ctx, n.bus, n.store, log.With("component", "projector"), claimed, n.fail)
		if err != nil {
			return nil, err
		}
		n.proj.Store(proj)
		n.closers = append(n.closers, func(context.Context) error { n.projector().Close(); return nil })
	}

	if n.inputs, err = n.bus.NewInputConsumer(n.handleInput); err != nil {
		return nil, err
	}
	n.closers = append(n.closers, n.inputs.Close)
	if err := n.startAnswers(ctx); err != nil {
		return nil, err
	}
	// Presence and the share of the partitions: closed first, so that the
	// other nodes take this one's partitions over while it stops.
	if n.cluster, err = startMembership(ctx, n); err != nil {
		return nil, err
	}
	n.closers = append(n.closers, n.cluster.close)
	if opts.API {
		if err := n.StartAPI(ctx); err != nil {
			return nil, err
		}
	}
	if opts.Agents != nil {
		n.startGateway(ctx, *opts.Agents)
	}
	if opts.Worker {
		log.Info("node started, a worker: no read model here", "nats", n.bus.ClientURL(), "provider", opts.Provider.Name())
	} else {
		log.Info("node started", "nats", n.bus.ClientURL(), "read_model", path, "provider", opts.Provider.Name())
	}
	return n, nil
}

// toolConfig is what the session actors run tools with: opts.Tools, and the
// tools of the tool services when opts.RemoteTools is set (their registry
// opened here, closed with the node), whose stored results a resume finds;
// a tenant's sessions, its own tool services' too.
func (n *Node) toolConfig(opts Options) (session.ToolConfig, error) {
	if opts.ToolOptions.Logger == nil {
		opts.ToolOptions.Logger = n.log.With("component", "tools")
	}
	tc := session.ToolConfig{Catalog: opts.Tools, Options: opts.ToolOptions, MaxConcurrent: opts.MaxConcurrentTools,
		Observe: n.Metrics.toolCall, Approval: opts.Approval}
	if f, ok := opts.Tools.(session.ResultFinder); ok {
		tc.Finder = f
	}
	if tc.Options.Artifacts == nil && n.bus.Artifacts() != nil {
		// Long outputs are cut to a preview; the whole goes to tah_artifacts.
		tc.Options.Artifacts = artifacts.New(n.bus.Artifacts())
	}
	if opts.RemoteTools != nil {
		rcfg := *opts.RemoteTools
		if rcfg.Logger == nil {
			rcfg.Logger = n.log.With("component", "remote-tools")
		}
		var err error
		if n.remote, err = remote.Open(n.bus.Conn(), rcfg); err != nil {
			return tc, err
		}
		n.closers = append(n.closers, n.remote.Close)
		tc.Catalog, tc.Finder = n.remote, n.remote
		if opts.Tools != nil {
			tc.Catalog = tools.Merge(opts.Tools, n.remote)
		}
		// A tenant's sessions get its own tools too, after every tenant's:
		// the node's and the operator's services win a name.
		shared := tc.Catalog
		tc.ForTenant = func(tenant string) (tools.Catalog, session.ServiceWaiter) {
			own := n.remote.Tenant(tenant)
			return tools.Merge(shared, own), own
		}
	}
	n.tools, n.forTenant = tc.Catalog, tc.ForTenant
	return tc, nil
}

// DefaultNodeID names a node that was given no name: its host name and a
// short hash of its data directory, "host-1a2b3c". It stays the same across
// restarts, so that a node that comes back replaces its own presence entry
// instead of leaving a dead one that holds partitions until it expires.
func DefaultNodeID(dataDir string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "node"
	}
	if i := strings.IndexByte(host, '.'); i > 0 {
		host = host[:i]
	}
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, host)
	if abs, err := filepath.Abs(dataDir); err == nil {
		dataDir = abs
	}
	sum := sha256.Sum256([]byte(dataDir))
	return fmt.Sprintf("%s-%x", host, sum[:3])
}

// ID is the node's name, as recorded in session.claimed.
func (n *Node) ID() string { return n.opts.Session.Node }

// Close stops the node in the reverse order of Start: inputs first (handing
// partitions over), then the session actors, whose running turns stop without
// recording anything (they resume on the next owner), and after them their
// tool runner; then the registry of tool services, the projector, the read
// model and the bus, which flushes every acknowledged write.
//
// With a deadline, the bus keeps a third of the time: a part that overruns
// its share (a session's append that cannot complete on a full disk waits
// for its own deadline) must not leave the embedded server no time to shut
// down; once the connection is closed, what still waited on it ends.
func (n *Node) Close(ctx context.Context) error {
	parts := ctx
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		parts, cancel = context.WithDeadline(ctx, d.Add(-time.Until(d)/3))
		defer cancel()
	}
	var errs []error
	for i := len(n.closers) - 1; i >= 0; i-- {
		cctx := parts
		if i == 0 {
			cctx = ctx // the bus, opened first
		}
		if err := n.closers[i](cctx); err != nil {
			errs = append(errs, err)
		}
	}
	n.closers = nil
	return errors.Join(errs...)
}

// Bus is the node's handle on NATS. Programs drive a node through package
// client; the bench measures its floors (one fenced append) on this handle,
// and tests reach the log through it.
func (n *Node) Bus() *bus.Bus { return n.bus }

// ActiveSessions is how many session actors are in memory on this node.
func (n *Node) ActiveSessions() int { return n.sessions.Active() }

// projector is the running read model projector; nil on a worker.
func (n *Node) projector() *Projector { return n.proj.Load() }

// ErrNoReadModel is returned by the read model's waits of a worker
// (Options.Worker), which holds none.
var ErrNoReadModel = errors.New("this node holds no read model (a worker: read_model=false)")

// HasReadModel reports whether the node holds a read model (it is not a
// worker).
func (n *Node) HasReadModel() bool { return n.store != nil }

// ReadModelPositions are, per shard of the log, the position after the last
// record the read model applied; nil on a worker.
func (n *Node) ReadModelPositions() []uint64 {
	if n.store == nil {
		return nil
	}
	return n.projector().Positions()
}

// WaitReadModel waits until the read model has applied session sid's
// records up to seq (the shard's sequence of its last record). A worker
// fails it with ErrNoReadModel.
func (n *Node) WaitReadModel(ctx context.Context, sid string, seq uint64) error {
	if n.store == nil {
		return ErrNoReadModel
	}
	return n.projector().WaitFor(ctx, sid, seq)
}

// WaitReadModelLog waits until the read model has applied each shard of the
// log up to last[k]. A worker fails it with ErrNoReadModel.
func (n *Node) WaitReadModelLog(ctx context.Context, last []uint64) error {
	if n.store == nil {
		return ErrNoReadModel
	}
	return n.projector().WaitForLog(ctx, last)
}

// PauseReadModel stops the read model's projector, so that a measurement
// of the log's own floors does not share the machine with it, and returns
// the function that starts it again from where it stopped. Only a program
// that measures needs it; the node serves reads from the paused model
// meanwhile, as it stands. On a worker there is nothing to pause: resume
// does nothing.
func (n *Node) PauseReadModel() (resume func(ctx context.Context) error) {
	if n.store == nil {
		return func(context.Context) error { return nil }
	}
	n.projector().Close()
	return func(ctx context.Context) error {
		p, err := startProjector(ctx, n.bus, n.store, n.log.With("component", "projector"), n.onClaim, n.fail)
		if err != nil {
			return err
		}
		n.proj.Store(p) // Close closes this one
		return nil
	}
}

// ReadModel is this node's SQLite read model, for tests that check what one
// node of a cluster holds; programs read it through the API. nil on a
// worker.
func (n *Node) ReadModel() *store.Store { return n.store }
