package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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
	// RefreshEvery, when positive, refreshes in the background from Open until
	// Close, the first time at once. Zero: only explicit Refresh calls.
	RefreshEvery time.Duration
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

func (c Config) withDefaults() Config {
	if c.DiscoveryWait <= 0 {
		c.DiscoveryWait = time.Second
	}
	if c.DiscoveryQuiet <= 0 {
		c.DiscoveryQuiet = 150 * time.Millisecond
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
type Registry struct {
	nc      *nats.Conn
	cfg     Config
	results *Results

	mu    sync.RWMutex
	tools map[string]*Tool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ tools.Catalog = (*Registry)(nil)

// Open returns a registry over nc. With cfg.RefreshEvery set it starts refreshing
// in the background; Close stops that.
func Open(nc *nats.Conn, cfg Config) (*Registry, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	cfg = cfg.withDefaults()
	r := &Registry{nc: nc, cfg: cfg, results: NewResults(js, cfg.Results), tools: map[string]*Tool{}}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if cfg.RefreshEvery > 0 {
		r.wg.Add(1)
		go r.loop(ctx)
	}
	return r, nil
}

func (r *Registry) loop(ctx context.Context) {
	defer r.wg.Done()
	t := time.NewTicker(r.cfg.RefreshEvery)
	defer t.Stop()
	for {
		if err := r.Refresh(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("remote tools: refresh failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close stops the background refresh and waits for it, or for ctx.
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

// Refresh asks every micro service on the connection for its info ($SRV.INFO)
// and keeps, as the tools of this registry, the endpoints on tah.tool.<name>.
// An endpoint whose name or schema is not valid is left out with a warning.
// When several services offer the same tool, the one with the smallest service
// id is kept (all instances of one service are equivalent).
func (r *Registry) Refresh(ctx context.Context) error {
	inbox := r.nc.NewInbox()
	ch := make(chan *nats.Msg, 256)
	sub, err := r.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return fmt.Errorf("remote: discovery: %w", err)
	}
	defer sub.Unsubscribe()
	subj, _ := micro.ControlSubject(micro.InfoVerb, "", "")
	if err := r.nc.PublishRequest(subj, inbox, nil); err != nil {
		return fmt.Errorf("remote: discovery: %w", err)
	}
	found := map[string]*Tool{}
	total := time.NewTimer(r.cfg.DiscoveryWait)
	defer total.Stop()
	var quiet <-chan time.Time
collect:
	for {
		select {
		case m := <-ch:
			r.absorb(m.Data, found)
			quiet = time.After(r.cfg.DiscoveryQuiet)
		case <-quiet:
			break collect
		case <-total.C:
			break collect
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	r.tools = found
	r.mu.Unlock()
	return nil
}

// absorb adds the tools of one service's info to found.
func (r *Registry) absorb(data []byte, found map[string]*Tool) {
	var info micro.Info
	if err := json.Unmarshal(data, &info); err != nil || info.Type != micro.InfoResponseType {
		return
	}
	for _, ep := range info.Endpoints {
		name, ok := strings.CutPrefix(ep.Subject, wire.ToolPrefix)
		if !ok || strings.Contains(name, ".") {
			continue
		}
		if err := tools.ValidName(name); err != nil || name == "cancel" {
			r.cfg.Logger.Warn("remote tools: endpoint left out: bad name", "service", info.Name, "subject", ep.Subject)
			continue
		}
		t := &Tool{
			reg:        r,
			name:       name,
			service:    info.Name,
			instance:   info.ID,
			desc:       ep.Metadata[wire.MetaToolDesc],
			idempotent: ep.Metadata[wire.MetaToolIdempotent] == "true",
			exclusive:  ep.Metadata[wire.MetaToolExclusive] == "true",
		}
		if t.desc == "" {
			t.desc = info.Description
		}
		if s := ep.Metadata[wire.MetaToolSchema]; s != "" {
			t.schema = json.RawMessage(s)
		}
		if _, err := tools.CompileSchema(tools.SchemaOf(t)); err != nil {
			r.cfg.Logger.Warn("remote tools: endpoint left out: bad schema", "service", info.Name, "tool", name, "err", err)
			continue
		}
		if ms, err := strconv.ParseInt(ep.Metadata[wire.MetaToolTimeoutMS], 10, 64); err == nil && ms > 0 {
			t.timeout = time.Duration(ms) * time.Millisecond
		}
		if old, ok := found[name]; ok && old.instance < t.instance {
			continue
		}
		found[name] = t
	}
}

// Tool returns the remote tool named name, as of the last Refresh.
func (r *Registry) Tool(name string) (tools.Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	if !ok {
		return nil, false
	}
	return t, true
}

// Schemas describes the remote tools, sorted by name.
func (r *Registry) Schemas() []llm.ToolSchema {
	r.mu.RLock()
	ts := make([]tools.Tool, 0, len(r.tools))
	for _, t := range r.tools {
		ts = append(ts, t)
	}
	r.mu.RUnlock()
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
