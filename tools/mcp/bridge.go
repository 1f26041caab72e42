package mcp

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/toolservice"
)

// Options configure a Bridge. Zero values mean the defaults named.
type Options struct {
	// Logger receives the bridge's records and the servers' stderr lines;
	// nil means slog.Default().
	Logger *slog.Logger
	// Version is what the bridge tells the servers it is (default "dev").
	Version string
	// ConnectTimeout bounds starting a server and listing its tools (30s).
	// An attempt that runs out of it is tried again with twice the time, up
	// to MaxConnectTimeout (5m): a server whose first start is slow (npx
	// fetching its package on a cold cache) is given the time it takes
	// rather than killed at the same point every time.
	ConnectTimeout, MaxConnectTimeout time.Duration
	// KeepAlive pings each server on this period; a server that misses two
	// pings in a row is restarted (15s; negative: no pings, only a stdio
	// server's exit is seen).
	KeepAlive time.Duration
	// MinBackoff and MaxBackoff bound the wait before a restart: it doubles
	// from MinBackoff (500ms) up to MaxBackoff (30s) while a server keeps
	// failing, and starts over once it ran longer than MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// FailLogEvery is how often a server that keeps failing to start is
	// logged as a warning (1m): its first failure is, and then one a
	// period, with the count of attempts; the others are debug records.
	FailLogEvery time.Duration
	// Grace is how long calls in flight may finish when the bridge stops (10s).
	Grace time.Duration
	// Protect names the paths no call may name in its arguments, besides
	// the credential files every bridge refuses (see Protect).
	Protect Protect
	// Service configures the tool services (executor timeout, artifact store,
	// result bucket); its Logger defaults to Logger.
	Service toolservice.Config
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 30 * time.Second
	}
	if o.MaxConnectTimeout < o.ConnectTimeout {
		o.MaxConnectTimeout = max(5*time.Minute, o.ConnectTimeout)
	}
	if o.FailLogEvery <= 0 {
		o.FailLogEvery = time.Minute
	}
	switch {
	case o.KeepAlive == 0:
		o.KeepAlive = 15 * time.Second
	case o.KeepAlive < 0:
		o.KeepAlive = 0
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 500 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(30*time.Second, o.MinBackoff)
	}
	if o.Grace <= 0 {
		o.Grace = 10 * time.Second
	}
	if o.Service.Logger == nil {
		o.Service.Logger = o.Logger
	}
	return o
}

// Bridge serves the tools of MCP servers as TAH tool services.
type Bridge struct {
	cfg  Config
	opts Options
	log  *slog.Logger

	// stderr bounds what the stdio servers' stderr puts in the log, at the
	// rate of each server's bucket (kept across its restarts).
	stderr  stderrLimits
	buckets map[string]*tokenBucket

	mu       sync.Mutex
	first    map[string]*conn // Open's connections, until Serve takes them
	problems []string
	names    []string // Open's tools
	// states are the servers' (States), and changed is closed (and
	// replaced) when one changes.
	states  map[string]ServerState
	changed chan struct{}
}

// The states of a server (ServerState.State).
const (
	// StateConnecting: the server has not been served since the bridge
	// started: its first start, or the retries of a start that failed.
	StateConnecting = "connecting"
	// StateServing: its tools are served.
	StateServing = "serving"
	// StateRestarting: it was served and stopped (it exited, or stopped
	// answering); it is being started again, its tools withdrawn meanwhile.
	StateRestarting = "restarting"
)

// ServerState is what the bridge does with one server (Bridge.States).
type ServerState struct {
	// State is StateConnecting, StateServing or StateRestarting.
	State string `json:"state"`
	// Tools are the TAH names of the tools served now (StateServing).
	Tools []string `json:"tools,omitempty"`
	// Failures counts the attempts to start it that failed in a row, and
	// Err is the last one's error; both are cleared once it is served.
	Failures int    `json:"failures,omitempty"`
	Err      string `json:"error,omitempty"`
}

// New returns a bridge of cfg's enabled servers that has started none yet:
// Serve starts them, each in the background, with retries (see Serve), so
// that a server slow to start holds nothing up. States says where each
// stands.
func New(cfg Config, opts Options) *Bridge {
	return newBridge(cfg, opts, defaultStderrLimits())
}

func newBridge(cfg Config, opts Options, lim stderrLimits) *Bridge {
	opts = opts.withDefaults()
	b := &Bridge{cfg: cfg, opts: opts, log: opts.Logger, stderr: lim, buckets: map[string]*tokenBucket{},
		first: map[string]*conn{}, states: map[string]ServerState{}, changed: make(chan struct{})}
	for _, name := range cfg.names() {
		b.buckets[name] = newTokenBucket(lim)
		b.states[name] = ServerState{State: StateConnecting}
	}
	return b
}

// Open starts (or reaches) every enabled server of cfg and lists its tools,
// each within Options.ConnectTimeout, before it returns (New does not
// wait). A server that fails is in Problems and is tried again by Serve; so
// Open fails only when ctx is done.
func Open(ctx context.Context, cfg Config, opts Options) (*Bridge, error) {
	return open(ctx, cfg, opts, defaultStderrLimits())
}

// open is Open with the limits of the servers' stderr.
func open(ctx context.Context, cfg Config, opts Options, lim stderrLimits) (*Bridge, error) {
	b := newBridge(cfg, opts, lim)
	var wg sync.WaitGroup
	for _, name := range cfg.names() {
		wg.Go(func() {
			c, err := b.dial(ctx, name, b.opts.ConnectTimeout)
			b.mu.Lock()
			defer b.mu.Unlock()
			if err != nil {
				b.problems = append(b.problems, err.Error())
				return
			}
			b.first[name] = c
			b.names = append(b.names, c.names()...)
			b.problems = append(b.problems, c.problems...)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		b.Close()
		return nil, err
	}
	slices.Sort(b.problems)
	slices.Sort(b.names)
	return b, nil
}

// dial starts or reaches the server name within timeout (see dial).
func (b *Bridge) dial(ctx context.Context, name string, timeout time.Duration) (*conn, error) {
	opts := b.opts
	opts.ConnectTimeout = timeout
	return dial(ctx, name, b.cfg.Servers[name], opts, b.stderr, b.buckets[name])
}

// Servers names the enabled servers of the bridge's configuration, sorted.
func (b *Bridge) Servers() []string { return b.cfg.names() }

// Names returns the TAH names of the tools Open listed, sorted (none after
// New). (A tool credential for the bridge names the servers, not their
// tools: Config.ToolGrants.)
func (b *Bridge) Names() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.names)
}

// Problems returns what Open could not serve, each with why: servers that
// did not start, tools with unmappable or colliding names or malformed
// schemas.
func (b *Bridge) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.problems)
}

// Serving returns the tools served now, by server; a server that is not
// served (connecting, restarting) is absent.
func (b *Bridge) Serving() map[string][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string][]string{}
	for name, st := range b.states {
		if st.State == StateServing {
			out[name] = st.Tools
		}
	}
	return out
}

// States returns where each enabled server stands, by name, and a channel
// closed at the next change of any of them: a caller waits on it for a
// server to be served, without polling.
func (b *Bridge) States() (map[string]ServerState, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.states), b.changed
}

// setState changes server's state with edit, and tells the waiters.
func (b *Bridge) setState(server string, edit func(*ServerState)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.states[server]
	edit(&st)
	b.states[server] = st
	close(b.changed)
	b.changed = make(chan struct{})
}

// Close stops the servers Open started when Serve never ran.
func (b *Bridge) Close() {
	b.mu.Lock()
	first := b.first
	b.first = map[string]*conn{}
	b.mu.Unlock()
	for _, c := range first {
		c.close()
	}
}

// Serve offers every server's tools on nc, as the tool services of the
// namespace of the server's name (package toolservice,
// Config.Namespace), until ctx is done; then calls in flight have
// Options.Grace to finish and the servers stop. nc's credential must grant
// those namespaces (Config.ToolGrants). Binary content is stored in store
// (the artifacts of nc's object store, say); nil keeps Options.Service's.
// A server that Open did not start (or, after New, every server) is
// started here, in the background; one that fails to start, crashes or
// stops answering is started again with backoff (Options.MinBackoff to
// MaxBackoff), for as long as Serve runs: its tools are not served while
// it is down. Serve runs once.
func (b *Bridge) Serve(ctx context.Context, nc *nats.Conn, store tools.ArtifactStore) {
	b.mu.Lock()
	first := b.first
	b.first = map[string]*conn{}
	if store != nil {
		b.opts.Service.Executor.Artifacts = store
	}
	b.mu.Unlock()
	var wg sync.WaitGroup
	for _, name := range b.cfg.names() {
		wg.Go(func() { b.run(ctx, nc, name, first[name]) })
	}
	wg.Wait()
}

// run keeps one server served until ctx is done: c is its first connection,
// nil when Open could not make one (or did not try). A start that fails is
// tried again after a backoff that doubles up to MaxBackoff, as is the start
// of a server that stopped; a start that ran out of its connect timeout has
// twice the time the next attempt (up to MaxConnectTimeout). Failures are
// logged as warnings once in FailLogEvery (see failLog).
func (b *Bridge) run(ctx context.Context, nc *nats.Conn, name string, c *conn) {
	log := b.log.With("mcp_server", name)
	backoff, timeout := b.opts.MinBackoff, b.opts.ConnectTimeout
	var fails failLog
	for ctx.Err() == nil {
		if c == nil {
			var err error
			if c, err = b.dial(ctx, name, timeout); err != nil {
				if ctx.Err() != nil {
					return
				}
				n := 0
				b.setState(name, func(st *ServerState) { st.Failures++; st.Err = err.Error(); n = st.Failures })
				if errors.Is(err, context.DeadlineExceeded) && timeout < b.opts.MaxConnectTimeout {
					timeout = min(2*timeout, b.opts.MaxConnectTimeout)
				}
				fails.failed(log, b.opts.FailLogEvery, n, backoff, timeout, err)
				if !sleep(ctx, backoff) {
					return
				}
				backoff = min(2*backoff, b.opts.MaxBackoff)
				continue
			}
			for _, p := range c.problems {
				log.Warn("mcp: " + p)
			}
		}
		if n := fails.attempts; n > 0 {
			log.Info("mcp: the server started", "after_failed_attempts", n)
		}
		fails = failLog{}
		timeout = b.opts.ConnectTimeout
		started := time.Now()
		b.serveConn(ctx, nc, c, log)
		c = nil
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > b.opts.MaxBackoff {
			backoff = b.opts.MinBackoff
		}
		log.Warn("mcp: the server stopped; its tools are withdrawn until it is back", "restart_in", backoff)
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, b.opts.MaxBackoff)
	}
	if c != nil {
		c.close()
	}
}

// failLog says that a server's start failed without flooding the log: the
// first failure in a row is a warning, then one a period (with how many
// attempts failed meanwhile); the others are debug records.
type failLog struct {
	attempts int
	warned   time.Time
}

func (f *failLog) failed(log *slog.Logger, every time.Duration, failures int, retryIn, timeout time.Duration, err error) {
	f.attempts++
	if f.attempts > 1 && time.Since(f.warned) < every {
		log.Debug("mcp: the server did not start; trying again", "failed_attempts", failures, "in", retryIn, "connect_timeout", timeout, "err", err)
		return
	}
	f.warned = time.Now()
	log.Warn("mcp: the server did not start; trying again (next warning in "+every.String()+" if it still fails)",
		"failed_attempts", failures, "in", retryIn, "connect_timeout", timeout, "err", err)
}

// serveConn serves c's tools until its session ends or ctx is done, then
// withdraws them and closes the session. When the server says its tools
// changed, it lists them again and serves the new list in place: the tools
// added are served, those removed withdrawn, the others stay served (no
// restart: the credential grants the server's namespace, whatever its
// tools). A list that fails, or NATS refusing, restarts the server.
func (b *Bridge) serveConn(ctx context.Context, nc *nats.Conn, c *conn, log *slog.Logger) {
	ended := make(chan struct{})
	go func() { _ = c.sess.Wait(); c.down.Store(true); close(ended) }() // ends with the session, closed below
	defer func() { c.close(); <-ended }()
	cfg := b.opts.Service
	cfg.Namespace = c.server
	svc, err := toolservice.Start(ctx, nc, cfg, c.tools...)
	if err != nil {
		log.Error("mcp: cannot serve the server's tools on NATS", "err", err)
		return
	}
	defer func() { // before the session closes: calls in flight finish
		b.setServing(c.server, nil)
		gctx, cancel := context.WithTimeout(context.Background(), b.opts.Grace)
		defer cancel()
		if err := svc.Close(gctx); err != nil {
			log.Warn("mcp: stopping the tool services", "err", err)
		}
	}()
	for {
		if len(c.tools) == 0 {
			log.Warn("mcp: the server offers no tool that can be served")
			b.setServing(c.server, []string{})
		} else {
			b.setServing(c.server, c.names())
			log.Info("mcp: serving", "tools", c.names())
		}
		select {
		case <-ended:
			return
		case <-ctx.Done():
			return
		case <-c.changed:
		}
		log.Info("mcp: the server's tools changed; listing them again")
		lctx, cancel := context.WithTimeout(ctx, b.opts.ConnectTimeout)
		err := c.list(lctx)
		cancel()
		if err != nil {
			log.Warn("mcp: listing the server's changed tools failed; restarting it", "err", err)
			return
		}
		for _, p := range c.problems {
			log.Warn("mcp: " + p)
		}
		if err := svc.Set(c.tools...); err != nil {
			log.Error("mcp: cannot serve the server's changed tools on NATS; restarting it", "err", err)
			return
		}
	}
}

// setServing says that server's tools are served (names), or no longer
// (nil: its session ended; it is started again unless the bridge stops).
func (b *Bridge) setServing(server string, names []string) {
	b.setState(server, func(st *ServerState) {
		if names == nil {
			*st = ServerState{State: StateRestarting}
			return
		}
		*st = ServerState{State: StateServing, Tools: names}
	})
}

// sleep waits d, or less when ctx is done; it reports whether ctx is not.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
