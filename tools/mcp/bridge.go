package mcp

import (
	"context"
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
	ConnectTimeout time.Duration
	// KeepAlive pings each server on this period; a server that misses two
	// pings in a row is restarted (15s; negative: no pings, only a stdio
	// server's exit is seen).
	KeepAlive time.Duration
	// MinBackoff and MaxBackoff bound the wait before a restart: it doubles
	// from MinBackoff (500ms) up to MaxBackoff (30s) while a server keeps
	// failing, and starts over once it ran longer than MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
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
	names    []string            // Open's tools
	serving  map[string][]string // by server: the tools served now
}

// Open starts (or reaches) every enabled server of cfg and lists its tools.
// A server that fails is in Problems and is tried again by Serve; so Open
// fails only when ctx is done.
func Open(ctx context.Context, cfg Config, opts Options) (*Bridge, error) {
	return open(ctx, cfg, opts, defaultStderrLimits())
}

// open is Open with the limits of the servers' stderr.
func open(ctx context.Context, cfg Config, opts Options, lim stderrLimits) (*Bridge, error) {
	opts = opts.withDefaults()
	b := &Bridge{cfg: cfg, opts: opts, log: opts.Logger, stderr: lim, buckets: map[string]*tokenBucket{},
		first: map[string]*conn{}, serving: map[string][]string{}}
	for _, name := range cfg.names() {
		b.buckets[name] = newTokenBucket(lim)
	}
	var wg sync.WaitGroup
	for _, name := range cfg.names() {
		wg.Go(func() {
			c, err := b.dial(ctx, name)
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

// dial starts or reaches the server name (see dial).
func (b *Bridge) dial(ctx context.Context, name string) (*conn, error) {
	return dial(ctx, name, b.cfg.Servers[name], b.opts, b.stderr, b.buckets[name])
}

// Names returns the TAH names of the tools Open listed, sorted. (A tool
// credential for the bridge names the servers, not their tools:
// Config.ToolGrants.)
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

// Serving returns the tools served now, by server; a server that is down
// (restarting) is absent.
func (b *Bridge) Serving() map[string][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.serving)
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
// (the artifacts of nc's object store, say); nil keeps Options.Service's. A
// server that crashes or stops answering is restarted with backoff; its
// tools are not served while it is down. Serve runs once.
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
// nil when Open could not make one.
func (b *Bridge) run(ctx context.Context, nc *nats.Conn, name string, c *conn) {
	log := b.log.With("mcp_server", name)
	backoff := b.opts.MinBackoff
	for ctx.Err() == nil {
		if c == nil {
			var err error
			if c, err = b.dial(ctx, name); err != nil {
				log.Warn("mcp: the server did not start; trying again", "in", backoff, "err", err)
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
			b.setServing(c.server, nil)
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

func (b *Bridge) setServing(server string, names []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if names == nil {
		delete(b.serving, server)
	} else {
		b.serving[server] = names
	}
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
