package tah

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/providers"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tools"
)

// Errors of the Go API.
var (
	// ErrNotStarted: the Runtime was not started, or is closed.
	ErrNotStarted = errors.New("tah: runtime not started")
	// ErrStarted: Use after Start.
	ErrStarted = errors.New("tah: runtime already started")
	// ErrNotFound: no session with this id.
	ErrNotFound = errors.New("tah: session not found")
	// ErrBusy: the session is running a turn (compaction is refused then).
	ErrBusy = session.ErrBusy
	// ErrNothingToResume: Resume on a session with no unfinished turn.
	ErrNothingToResume = session.ErrNothingToResume
)

// Runtime is the specification's Runtime: plugins configure it, Start brings up
// a node, and services (SessionKey) are got from it.
type Runtime struct {
	mu         sync.Mutex
	plugins    []Plugin
	started    bool
	busCfg     bus.Config
	dataDirSet bool
	storePath  string
	llmCfg     *llm.Config
	provider   llm.Provider
	registry   *tools.Registry
	sessionCfg session.Config
	logger     *slog.Logger

	node     *node.Node
	sessions *SessionService
}

// New returns a Runtime with the defaults: an embedded NATS server with its data
// in .tah, the mock provider in demo mode, no tools, maxSteps 20.
func New() *Runtime {
	return &Runtime{busCfg: bus.Default()}
}

// Use adds a plugin; its settings are checked at Start. Use returns r so that
// calls chain.
func (r *Runtime) Use(p Plugin) *Runtime {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.plugins = append(r.plugins, p)
	return r
}

// WithLogger sets the logger of the node's structured logs (default: discard,
// so that a program's own output stays clean).
func (r *Runtime) WithLogger(l *slog.Logger) *Runtime {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logger = l
	return r
}

// Start applies the plugins and brings the node up. It fails with an error that
// names the plugin and setting at fault, or the part that could not start.
func (r *Runtime) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return ErrStarted
	}
	for _, p := range r.plugins {
		if err := p.setup(r); err != nil {
			return fmt.Errorf("tah: plugin %s: %w", p.Name(), err)
		}
	}
	provider := r.provider
	if provider == nil {
		cfg := llm.DefaultConfig()
		if r.llmCfg != nil {
			cfg = *r.llmCfg
		}
		p, err := providers.New(cfg)
		if err != nil {
			return fmt.Errorf("tah: plugin llm: %w", err)
		}
		provider = p
	}
	logger := r.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opts := node.Options{Bus: r.busCfg, StorePath: r.storePath, Session: r.sessionCfg, Provider: provider, Logger: logger}
	if r.registry != nil {
		opts.Tools = r.registry
	}
	n, err := node.Start(ctx, opts)
	if err != nil {
		return fmt.Errorf("tah: start: %w", err)
	}
	r.node = n
	r.sessions = &SessionService{rt: r}
	r.started = true
	return nil
}

// Close stops the node. Turns still running stop without an outcome recorded and
// resume when their session is next opened.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		return nil
	}
	r.started = false
	return r.node.Close(ctx)
}

// Node is the running node, for what the Go API does not cover (nil before Start).
func (r *Runtime) Node() *node.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.node
}

// ServiceKey names a service of a Runtime with its type, like the
// specification's createServiceKey<T>(name).
type ServiceKey[T any] struct{ name string }

// Name is the key's name.
func (k ServiceKey[T]) Name() string { return k.name }

// SessionKey is the specification's SESSION: the session service.
var SessionKey = ServiceKey[*SessionService]{name: "session"}

// Get returns the service of r named by key, or the zero value before Start.
func Get[T any](r *Runtime, key ServiceKey[T]) T {
	r.mu.Lock()
	defer r.mu.Unlock()
	var zero T
	switch key.name {
	case SessionKey.name:
		if v, ok := any(r.sessions).(T); ok && r.sessions != nil {
			return v
		}
	}
	return zero
}

func (r *Runtime) running() (*node.Node, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		return nil, ErrNotStarted
	}
	return r.node, nil
}
