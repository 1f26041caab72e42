package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// Config configures a Registry. Zero values mean the defaults named.
type Config struct {
	// DiscoveryWait is the longest a Refresh collects answers (default 1s).
	DiscoveryWait time.Duration
	// DiscoveryQuiet ends a Refresh early, this long after the last answer
	// (default 150ms).
	DiscoveryQuiet time.Duration
	// RefreshEvery, when positive, also refreshes on this period: a new tool
	// service that no call waits for is found this way (or when someone asks
	// for the tools, tah.api.tools). Zero: discovery is driven by events only
	// (see Registry).
	RefreshEvery time.Duration
	// MissingEvery is how often the registry looks again while a tool it
	// knew is missing, or a call waits for one (default 500ms).
	MissingEvery time.Duration
	// MissingFor is how long a tool that disappeared counts as missing
	// (default 1 minute); after that only calls that wait for it, and the
	// periodic refresh, look for it.
	MissingFor time.Duration
	// ServiceWait is the longest a call to a tool the model was offered
	// waits for its absent service before it fails with code
	// tool_unavailable (default DefaultServiceWait; see WaitFor).
	ServiceWait time.Duration
	// ProbeEvery is how often a waiting call reads its stored state and, while
	// its runner claims it, pings the runner, so that a runner that died ends the
	// call at once (code "interrupted") rather than at its deadline. Default 1s;
	// negative: never.
	ProbeEvery time.Duration
	// Results names the bucket of stored calls (only read here).
	Results ResultsConfig
	// Logger receives the registry's records; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultServiceWait is how long a call waits for its tool's absent service
// when Config.ServiceWait is zero.
const DefaultServiceWait = 30 * time.Second

func (c Config) withDefaults() Config {
	if c.DiscoveryWait <= 0 {
		c.DiscoveryWait = time.Second
	}
	if c.DiscoveryQuiet <= 0 {
		c.DiscoveryQuiet = 150 * time.Millisecond
	}
	if c.MissingEvery <= 0 {
		c.MissingEvery = 500 * time.Millisecond
	}
	if c.MissingFor <= 0 {
		c.MissingFor = time.Minute
	}
	if c.ServiceWait <= 0 {
		c.ServiceWait = DefaultServiceWait
	}
	if c.ProbeEvery == 0 {
		c.ProbeEvery = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Results.Create = false
	return c
}

// Registry lists the tools that services offer on NATS, beside local tools (see
// tools.Merge), and calls them. It is safe for concurrent use.
//
// Its discovery follows the services: from Open until Close it refreshes at
// once, when its connection reconnects, when a call finds no service or
// waits for one (WaitFor), every MissingEvery while a tool it knew is
// missing, and every RefreshEvery when set.
type Registry struct {
	nc      *nats.Conn
	cfg     Config
	results *Results

	// refreshMu makes refreshes run one at a time, so that an older one never
	// replaces a newer one's tools.
	refreshMu sync.Mutex

	mu sync.Mutex
	// tools are by Tool.key: a tenant's by tenantKey, every tenant's by
	// name (gone, wanted and seen too).
	tools map[string]*Tool
	// gone holds the tools that disappeared, and when.
	gone map[string]time.Time
	// wanted counts the calls that wait for each tool (WaitFor).
	wanted map[string]int
	// opened is when Open made the registry, and seen the tools it has
	// listed since: until ServiceWait after opened, a tool never seen is
	// one whose service may still be reconnecting (Expected).
	opened time.Time
	seen   map[string]bool
	// started numbers the refreshes as they start; fresh is the number of
	// the last one that ended, and changed is closed (and replaced) then.
	started, fresh uint64
	changed        chan struct{}

	kick   chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ tools.Catalog = (*Registry)(nil)

// Open returns a registry over nc and starts its discovery (see Registry);
// Close stops it.
func Open(nc *nats.Conn, cfg Config) (*Registry, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	cfg = cfg.withDefaults()
	r := &Registry{nc: nc, cfg: cfg, results: NewResults(js, cfg.Results), tools: map[string]*Tool{},
		gone: map[string]time.Time{}, wanted: map[string]int{}, opened: time.Now(), seen: map[string]bool{},
		changed: make(chan struct{}), kick: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(1)
	go r.follow(ctx)
	return r, nil
}

// Close stops the discovery and waits for it, or for ctx.
func (r *Registry) Close(ctx context.Context) error {
	r.cancel()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }() // ends with the loop, just cancelled
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Tool returns the remote tool named name, as of the last Refresh: one of
// every tenant's (a tenant's tools are its Tenant view's). A name that is
// not a tool's is none: it could be a tenant's tool's key (tenantKey),
// which a model's call must never reach.
func (r *Registry) Tool(name string) (tools.Tool, bool) {
	if tools.ValidName(name) != nil {
		return nil, false
	}
	return r.tool(name)
}

// tool is the tool of key, as of the last Refresh.
func (r *Registry) tool(key string) (tools.Tool, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tools[key]
	if !ok {
		return nil, false
	}
	return t, true
}

// Schemas describes the remote tools of every tenant, sorted by name.
func (r *Registry) Schemas() []llm.ToolSchema { return r.schemas("") }

// schemas describes tenant's remote tools (every tenant's for ""), sorted
// by name.
func (r *Registry) schemas(tenant string) []llm.ToolSchema {
	r.mu.Lock()
	ts := make([]tools.Tool, 0, len(r.tools))
	for _, t := range r.tools {
		if t.tenant == tenant {
			ts = append(ts, t)
		}
	}
	r.mu.Unlock()
	reg, err := tools.NewRegistry(ts...)
	if err != nil { // cannot happen: names and schemas were checked on the way in
		r.cfg.Logger.Error("remote tools: listing", "err", err)
		return nil
	}
	return reg.Schemas()
}

// Lookup returns what is stored for a call: for a node that takes over a session,
// a tool step that started and has no result may have finished while the old
// owner died. It returns an error wrapping ErrNoResult when nothing is stored.
func (r *Registry) Lookup(ctx context.Context, session, callID string) (wire.StoredCall, error) {
	return r.results.Find(ctx, session, callID)
}

// Await waits for the outcome of a call that another node started: it returns
// the stored result once there is one; a failed result with code "interrupted"
// when the runner that claimed the call is gone without a result; and an error
// wrapping ErrNoResult when nothing is stored (the call may never have reached a
// runner, or its runner does not claim calls).
func (r *Registry) Await(ctx context.Context, session, callID string) (tools.Result, error) {
	every := r.cfg.ProbeEvery
	if every < 0 {
		every = time.Second
	}
	for {
		s, err := r.results.Find(ctx, session, callID)
		if err != nil {
			return tools.Result{}, err
		}
		if s.State == wire.CallDone && s.Result != nil {
			return *s.Result, nil
		}
		if !r.alive(ctx, s) {
			if s2, err := r.results.Find(ctx, session, callID); err == nil && s2.State == wire.CallDone && s2.Result != nil {
				return *s2.Result, nil
			}
			return interrupted(s), nil
		}
		select {
		case <-ctx.Done():
			return tools.Result{}, ctx.Err()
		case <-time.After(every):
		}
	}
}

// alive reports whether the runner that claims s still answers pings. Only a
// definite "no responders" counts as gone.
func (r *Registry) alive(ctx context.Context, s wire.StoredCall) bool {
	if s.Service == "" || s.Instance == "" {
		return true
	}
	subj, err := micro.ControlSubject(micro.PingVerb, s.Service, s.Instance)
	if err != nil {
		return true
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = r.nc.RequestWithContext(pctx, subj, nil)
	return !errors.Is(err, nats.ErrNoResponders)
}
