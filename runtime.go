package tah

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/providers"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// Errors of the Go API. They are package client's, which the Go API is built
// on: test for them with errors.Is.
var (
	// ErrNotStarted: the Runtime was not started, or is closed.
	ErrNotStarted = errors.New("tah: runtime not started")
	// ErrStarted: Start after Start, or on a connected Runtime.
	ErrStarted = errors.New("tah: runtime already started")
	// ErrNotFound: no session with this id.
	ErrNotFound = client.ErrNotFound
	// ErrBusy: the session is running a turn (compaction is refused then).
	ErrBusy = client.ErrBusy
	// ErrNothingToResume: Resume on a session with no unfinished turn.
	ErrNothingToResume = client.ErrNothingToResume
	// ErrBudgetExceeded: Resume of a turn that failed at its budget, which
	// a limit still stops: raise it first (Session.SetBudget; a limit of
	// the node's, AgentOptions.Budget or agent.budget, there).
	ErrBudgetExceeded = client.ErrBudgetExceeded
	// ErrNoServer: Connect found no NATS server at the URL.
	ErrNoServer = client.ErrNoServer
	// ErrAuth: the NATS server refused Connect's credentials.
	ErrAuth = client.ErrAuth
	// ErrTLS: the TLS handshake with the NATS server failed: its certificate
	// is not signed by the CA Connect trusts (give it with TLSCA).
	ErrTLS = client.ErrTLS
	// ErrDataDirInUse: Start found the data directory in use by another
	// node (a tah-node, or another program's runtime); the error names the
	// process.
	ErrDataDirInUse = errors.New("tah: data directory in use")
)

// Runtime is the specification's Runtime: plugins configure it, Start brings up
// a node, and services (SessionKey) are got from it. A Runtime made by Connect
// uses a node that runs elsewhere instead.
type Runtime struct {
	mu      sync.Mutex
	plugins []Plugin
	started bool
	// settings are the node's, as tah-node reads them (node.Configure):
	// tah-node's defaults, without built-in tools, unless Settings says
	// otherwise. The plugins below override them.
	settings  config.Config
	busCfg    *bus.Config // NATS
	storePath string
	unlock    func() // the data directory's lock, while started
	llmCfg    *llm.Config
	provider  llm.Provider
	registry  *tools.Registry
	agent     *AgentOptions
	approval  *session.ApprovalPolicy
	logger    *slog.Logger

	node     *node.Node // nil when connected to a node elsewhere
	client   *client.Client
	sessions *SessionService
	// nodeInfo is the data directory of the node.json Start wrote (an
	// embedded server's), for Close to remove; empty otherwise.
	nodeInfo string
}

// New returns a Runtime with tah-node's defaults (config.Default), but for
// the built-in tools, which the program offers with Tools, and the port: an
// embedded NATS server on a free port (tahctl finds it through
// .tah/node.json) with its data in .tah, locked while it runs, the mock provider in demo mode, maxSteps
// 20, the tools of the tool services on NATS, write_file waiting for
// approval, the agent protocol gateway.
func New() *Runtime {
	return &Runtime{settings: goDefaults()}
}

// goDefaults are the settings of New.
func goDefaults() config.Config {
	cfg := config.Default()
	cfg.Tools.Builtin = false
	// A free port, so that a program runs beside a tah-node on 4222 (and
	// beside itself); tahctl finds it through <data dir>/node.json.
	cfg.NATS.Port = 0
	return cfg
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

// Start applies the plugins and brings the node up, with the API service that
// the Runtime's sessions use like any client. It fails with an error that
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
	opts, err := r.options()
	if err != nil {
		return err
	}
	if opts.Bus.Embedded() {
		if r.unlock, err = lockDataDir(opts.Bus.DataDir); err != nil {
			return err
		}
	}
	n, err := node.Start(ctx, opts)
	if err != nil {
		r.release()
		return fmt.Errorf("tah: start: %w", err)
	}
	c, err := startAPI(ctx, n)
	if err != nil {
		_ = n.Close(context.WithoutCancel(ctx))
		r.release()
		return fmt.Errorf("tah: start: %w", err)
	}
	if opts.Bus.Embedded() {
		if r.nodeInfo, err = writeNodeInfo(n, opts.Bus.DataDir, opts.Bus.TLS.CAFile); err != nil {
			c.Close()
			_ = n.Close(context.WithoutCancel(ctx))
			r.release()
			return fmt.Errorf("tah: start: %w", err)
		}
	}
	r.node, r.client = n, c
	r.sessions = &SessionService{rt: r}
	r.started = true
	return nil
}

// options are the node's: the settings assembled as tah-node's are
// (node.Configure), with the plugins' settings over them.
func (r *Runtime) options() (node.Options, error) {
	cfg := r.settings
	if r.storePath != "" && r.busCfg == nil {
		cfg.DataDir = filepath.Dir(r.storePath) // the log beside the read model
	}
	opts, err := node.Configure(cfg)
	if err != nil {
		return opts, fmt.Errorf("tah: settings: %w", err)
	}
	opts.StorePath = r.storePath
	if r.busCfg != nil {
		opts.Bus = *r.busCfg
		if opts.Agents != nil {
			opts.Agents.DataDir, opts.Agents.External, opts.Agents.TLSCA = opts.Bus.DataDir, !opts.Bus.Embedded(), opts.Bus.TLS.CAFile
		}
	}
	switch {
	case r.provider != nil:
		opts.Provider = r.provider
	case r.llmCfg != nil:
		p, err := providers.New(*r.llmCfg)
		if err != nil {
			return opts, fmt.Errorf("tah: plugin llm: %w", err)
		}
		opts.Provider = p
	}
	if r.registry != nil {
		if cfg.Tools.Builtin {
			opts.Tools = tools.Merge(opts.Tools, r.registry)
		} else {
			opts.Tools = r.registry
		}
	}
	if a := r.agent; a != nil {
		opts.Session.SystemPrompt, opts.Session.MaxSteps, opts.Session.ContextChars, opts.Session.IdleTimeout = a.SystemPrompt, a.MaxSteps, a.ContextChars, a.IdleTimeout
		if a.SubAgents != nil {
			opts.Session.SubAgents = a.SubAgents
		}
		if !a.Budget.IsZero() { // zero keeps the settings' agent.budget
			opts.Session.Budget = a.Budget
		}
	}
	if r.approval != nil {
		opts.Approval = *r.approval
	}
	opts.Logger = r.logger
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return opts, nil
}

// writeNodeInfo writes <dataDir>/node.json, as tah-node does, so that tahctl
// on this machine finds the embedded server (with the data directory's
// admin.creds, which the server's start wrote) and, when it serves TLS,
// verifies it against tlsCA. It returns the absolute
// data directory.
func writeNodeInfo(n *node.Node, dataDir, tlsCA string) (string, error) {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return "", err
	}
	if tlsCA != "" {
		// node.json names the CA by a path that holds from any directory.
		if tlsCA, err = filepath.Abs(tlsCA); err != nil {
			return "", err
		}
	}
	info := localnode.NodeInfo{Node: n.ID(), PID: os.Getpid(), URL: n.Bus().ClientURL(), TLSCA: tlsCA, Started: time.Now().UTC()}
	if err := localnode.WriteNodeInfo(dir, info); err != nil {
		return "", fmt.Errorf("node.json: %w", err)
	}
	return dir, nil
}

// startAPI returns a client over n's own connection, to n's API (which
// node.Start serves: Options.API). Its inputs name nobody ($anon), which
// TAH_IN stores at once: the node's connection may publish them.
func startAPI(_ context.Context, n *node.Node) (*client.Client, error) {
	return client.New(n.Bus().Conn(), client.Options{Sender: wire.AnonymousSender})
}

// Credential says who a connected Runtime is to NATS, and whom it trusts.
type Credential func(*client.Options)

// CredsFile is a NATS .creds file (a user JWT and its nkey seed): one that
// `tahctl creds add` issued, or a node's .tah/admin.creds.
func CredsFile(path string) Credential { return func(o *client.Options) { o.CredsFile = path } }

// TLSCA is a PEM file of the CA that signed the server's certificate, for a
// node that serves TLS (a tls:// URL): Connect verifies the server against
// it rather than the system's roots.
func TLSCA(path string) Credential { return func(o *client.Options) { o.TLSCAFile = path } }

// Connect returns a Runtime whose sessions are those of the TAH node or
// cluster whose NATS is at url (several URLs comma-separated): its
// SessionService works as a started Runtime's, over the network. Close
// closes the connection; the nodes go on. It fails with errors wrapping
// ErrNoServer, ErrAuth or ErrTLS (see package client for the others).
func Connect(ctx context.Context, url string, creds ...Credential) (*Runtime, error) {
	opts := client.Options{URL: url, Name: "tah"}
	for _, c := range creds {
		c(&opts)
	}
	c, err := client.Connect(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("tah: %w", err)
	}
	r := &Runtime{client: c, started: true}
	r.sessions = &SessionService{rt: r}
	return r, nil
}

// Close stops the node of a started Runtime, or closes the connection of a
// connected one. Turns still running stop without an outcome recorded and
// resume when their session is next opened (their callers get an error).
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		return nil
	}
	r.started = false
	r.client.Close()
	if r.node == nil {
		return nil
	}
	if r.nodeInfo != "" {
		localnode.RemoveNodeInfo(r.nodeInfo, os.Getpid())
	}
	err := r.node.Close(ctx)
	r.release()
	return err
}

// lockDataDir locks dir as tah-node does, so that a runtime and a tah-node
// (or two runtimes) never share one store.
func lockDataDir(dir string) (unlock func(), err error) {
	if err := localnode.MakeDir(dir); err != nil {
		return nil, fmt.Errorf("tah: data directory %s: %w", dir, err)
	}
	unlock, err = localnode.Lock(dir)
	var inUse *localnode.InUseError
	switch {
	case errors.As(err, &inUse):
		return nil, fmt.Errorf("%w: %w: stop it, or give this runtime a directory of its own (tah.NATS with DataDir, or tah.Storage's Path)", ErrDataDirInUse, err)
	case err != nil:
		return nil, fmt.Errorf("tah: %w", err)
	}
	return unlock, nil
}

// release unlocks the data directory, if Start locked it.
func (r *Runtime) release() {
	if r.unlock != nil {
		r.unlock()
		r.unlock = nil
	}
}

// Node is the running node, for what the Go API does not cover (nil before
// Start, and for a connected Runtime).
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

// running is the client of a started or connected Runtime.
func (r *Runtime) running() (*client.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		return nil, ErrNotStarted
	}
	return r.client, nil
}
