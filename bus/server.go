package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/tah-dev/tah/auth"
)

// Operator mode.
const (
	// resolverDir is the directory, under the server's store, of its account
	// resolver: the JWTs of the system and TAH accounts, as updated.
	resolverDir = "accounts"
	// resolverSync is how often a full resolver compares its accounts with
	// the other servers' of a cluster (updates are pushed at once; this
	// catches a server that was away).
	resolverSync = time.Minute
	// maxControlLine is the server's longest protocol line: a user JWT with
	// a role's permissions travels in the client's CONNECT, longer than the
	// default 4 KiB allows for a tool credential of many tools.
	maxControlLine = 16 << 10
)

// operatorMode puts opts in operator mode with trust: the operator trusted,
// the system account, and a full directory resolver in dir holding the
// system and TAH accounts, so that servers of a cluster share account
// updates (a revocation) over the system account.
func operatorMode(ctx context.Context, opts *server.Options, trust *auth.Trust, dir string) error {
	oc, err := jwt.DecodeOperatorClaims(trust.OperatorJWT())
	if err != nil {
		return fmt.Errorf("operator JWT: %v: %w", err, auth.ErrBadTrust)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("account resolver: %w", err)
	}
	res, err := server.NewDirAccResolver(dir, 0, resolverSync, server.NoDelete)
	if err != nil {
		return fmt.Errorf("account resolver in %s: %w", dir, err)
	}
	// The TAH account's JWT of the trust material and the one the resolver
	// kept (an update pushed by another server of the cluster) are merged:
	// a revocation of either is never rolled back by the other, newer one.
	held, _ := res.LoadAcc(trust.Account())
	accountJWT, err := trust.Merge(ctx, held)
	if err != nil {
		return fmt.Errorf("the TAH account's revocations: %w", err)
	}
	// Stored only when newer than what the resolver has.
	for _, account := range []string{trust.SystemJWT(), accountJWT} {
		claims, err := jwt.DecodeAccountClaims(account)
		if err != nil {
			return fmt.Errorf("account JWT: %v: %w", err, auth.ErrBadTrust)
		}
		if err := res.Store(claims.Subject, account); err != nil {
			return fmt.Errorf("account resolver in %s: %w", dir, err)
		}
	}
	opts.TrustedOperators = []*jwt.OperatorClaims{oc}
	opts.SystemAccount = trust.SystemAccount()
	opts.AccountResolver = res
	opts.MaxControlLine = max(opts.MaxControlLine, maxControlLine)
	return nil
}

// Routes of a silent server. nats-server pings a route every 30 s at most
// and closes it when routeMaxPingsOut pings are unanswered: a server that
// stops answering without closing its sockets (a stopped process, a host
// cut off) keeps its routes for 60 to 90 s, and with them its share of the
// direct gets of every R3 stream it holds (allow_direct: any replica
// answers), which then time out. Pinging every NodeTTL/2 closes them 1 to
// 1.5 NodeTTL after the silence, when the nodes give up on it too. Never
// under routeMinPing: a server merely slow under load answers a ping within
// seconds, and must not lose its routes (and its streams' leaders) for it.
const (
	routeMaxPingsOut = 2
	routeMinPing     = time.Second
)

// routePingInterval is the route ping interval for nodes that take one
// silent for nodeTTL (0: the default's).
func routePingInterval(nodeTTL time.Duration) time.Duration {
	if nodeTTL <= 0 {
		nodeTTL = Default().NodeTTL
	}
	return max(nodeTTL/2, routeMinPing)
}

// loadAccount loads the TAH account (account, whose JWT operatorMode put in
// the resolver) into srv before it starts, so that the account is there,
// whole, before any route or client asks for it.
//
// nats-server otherwise loads an account from its resolver on first use. At
// a restart JetStream loads it from its store directory before the routes
// start; but when a cluster first forms no server holds a stream yet, and
// the first use races: the node's own connection fetches the account,
// builds and registers it, while a route bringing another node's
// subscriptions finds no account and registers an empty placeholder (no
// JWT, no signing keys), which it marks expired only afterwards, so that
// the next lookup loads it. When the route's mark lands on the account the
// node's connection has just loaded into that placeholder (a loaded machine
// descheduled the route between its two steps), the connection is checked
// against an expired account: "Account JWT has expired", logged as
// "authentication error", the in-process pipe closed, and a forming cluster
// refuses its own node (issue 28); the account may stay expired for later
// connections until its JWT changes. A lookup between the route's two
// steps finds the empty account itself, whose signing keys are none.
func loadAccount(srv *server.Server, account string) error {
	if _, err := srv.LookupAccount(account); err != nil {
		return fmt.Errorf("load the TAH account %s from the resolver: %w", account, err)
	}
	return nil
}

// startServer starts the embedded nats-server of cfg in operator mode, with
// the trust material of cfg.DataDir (generated at first start, with the
// node's and the local admin's credentials), and waits until it accepts
// connections. The caller shuts it down with stopServer.
func startServer(ctx context.Context, cfg Config, watch *storeWatch) (*server.Server, error) {
	trust, err := auth.Ensure(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	storeDir := filepath.Join(cfg.DataDir, "nats")
	if err := adoptGlobalAccount(cfg, storeDir, trust.Account()); err != nil {
		return nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	port := cfg.Port
	if port == 0 {
		port = -1 // the server reads 0 as its default port (4222); here it means a free one
	}
	opts := &server.Options{
		ServerName:   cfg.ServerName,
		Host:         cfg.Host,
		Port:         port,
		JetStream:    true,
		StoreDir:     storeDir,
		SyncAlways:   cfg.SyncInterval == 0,
		SyncInterval: cfg.SyncInterval,
		MaxPayload:   cfg.MaxPayload,
		NoSigs:       true,
		NoLog:        cfg.Logger == nil,
		// The streams say MaxConsumers -1, no limit, but nats-server then
		// applies its own default of 1,000 consumers per stream; every
		// client's turn follows the log with a consumer of its own, so a
		// thousand turns at once would be refused.
		JetStreamLimits: server.JSLimitOpts{DefaultMaxConsumers: -1},
		// A server of a cluster is tagged with its name, so that TAH can
		// place a stream on it (placement.go).
		Tags: serverTags(cfg),
	}
	if err := operatorMode(ctx, opts, trust, filepath.Join(storeDir, resolverDir)); err != nil {
		return nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	if cfg.Cluster.Name != "" {
		opts.Cluster = server.ClusterOpts{Name: cfg.Cluster.Name, Host: cfg.Cluster.Host, Port: cfg.Cluster.Port,
			PingInterval: routePingInterval(cfg.NodeTTL), MaxPingsOut: routeMaxPingsOut}
		if opts.Cluster.Host == "" {
			opts.Cluster.Host = cfg.Host
		}
		if len(cfg.Cluster.Routes) > 0 {
			opts.Routes = server.RoutesFromStr(strings.Join(cfg.Cluster.Routes, ","))
		}
	}
	if err := serverTLS(opts, cfg.TLS); err != nil {
		return nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	// Always a logger: the watch reads the server's errors (storeWatch).
	srv.SetLogger(slogAdapter{l: cfg.Logger, watch: watch}, false, false)
	watch.srv, watch.dir = srv, storeDir
	if err := loadAccount(srv, trust.Account()); err != nil {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	srv.Start()
	wait := cfg.ReadyTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
		wait = time.Until(d)
	}
	if !srv.ReadyForConnections(wait) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("embedded NATS server on %s:%d not accepting connections within %v: %w", cfg.Host, cfg.Port, wait, ErrNotReady)
	}
	return srv, nil
}

// stopServer shuts srv down and waits for it, or for ctx. The store is flushed
// and closed by the shutdown; with SyncAlways every acknowledged write was
// already on disk.
func stopServer(ctx context.Context, srv *server.Server) error {
	done := make(chan struct{})
	go func() {
		srv.Shutdown()
		srv.WaitForShutdown()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("embedded NATS server shutdown: %w", ctx.Err())
	}
}

// slogAdapter hands the server's log to a slog.Logger (none: nothing is
// logged), and its errors to the store's watch.
type slogAdapter struct {
	l     *slog.Logger
	watch *storeWatch
}

func (a slogAdapter) log(level slog.Level, format string, v []any, attrs ...any) {
	if a.l == nil {
		return
	}
	a.l.Log(context.Background(), level, fmt.Sprintf(format, v...), append([]any{"component", "nats"}, attrs...)...)
}

func (a slogAdapter) Noticef(format string, v ...any) { a.log(slog.LevelInfo, format, v) }
func (a slogAdapter) Warnf(format string, v ...any)   { a.log(slog.LevelWarn, format, v) }
func (a slogAdapter) Fatalf(format string, v ...any) {
	a.log(slog.LevelError, format, v, "fatal", true)
}
func (a slogAdapter) Errorf(format string, v ...any) {
	a.log(slog.LevelError, format, v)
	if a.watch != nil {
		a.watch.noteError(fmt.Sprintf(format, v...))
	}
}
func (a slogAdapter) Debugf(format string, v ...any) { a.log(slog.LevelDebug, format, v) }
func (a slogAdapter) Tracef(format string, v ...any) {
	a.log(slog.LevelDebug, format, v, "trace", true)
}

// ErrStoreNotWritable: the embedded NATS server's JetStream store failed a
// write (a full disk, an I/O error). NATS then refuses every write to the
// stream that failed (or turns JetStream off) until JetStream starts again,
// which the Bus does by itself once the disk takes writes again: StoreErr
// says why meanwhile, and Failed tells when it could not.
var ErrStoreNotWritable = errors.New("JetStream store not writable")

// storeWatch keeps the embedded server's JetStream store writable. A write
// that fails (ENOSPC, EIO) leaves the stream's file store refusing every
// later write with that error, for good: the server has no way to clear it
// but starting JetStream again, which reloads every stream from its files. A
// clustered server turns JetStream off instead ("JetStream out of resources,
// will be DISABLED"). Either is seen in the server's error log (and the
// second in JetStreamEnabled): the watch then tries a write of its own in the
// store's directory every interval, and once one succeeds (space came back)
// shuts JetStream down and enables it again; not before its next look after
// the failure, nor while the server is turning JetStream off by itself, so
// that the two never race. Nothing acknowledged is lost: every stored
// message is in the files JetStream reloads.
type storeWatch struct {
	srv   *server.Server
	dir   string // the server's store directory (JetStream's is under it)
	log   *slog.Logger
	every time.Duration
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	// failed receives the error of a JetStream that could not be started
	// again (Bus.Failed).
	failed   chan error
	fault    atomic.Pointer[error]
	restarts atomic.Int64
}

// storeWatchEvery is how often the watch looks at the server.
const storeWatchEvery = time.Second

// storeRestartTries is how many times in a row JetStream may fail to start
// again before Failed says so.
const storeRestartTries = 5

// storeProbeSize is the size of the watch's write test: a write that small
// succeeding says the disk has room again, not that it has enough.
const storeProbeSize = 1 << 20

func newStoreWatch(log *slog.Logger) *storeWatch {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &storeWatch{log: log, every: storeWatchEvery, kick: make(chan struct{}, 1), stop: make(chan struct{}),
		done: make(chan struct{}), failed: make(chan error, 1)}
}

// writeFailures are the server's error messages of a write that failed (the
// file store's and the stream's "critical write error", JetStream turned off
// for want of space, the system's ENOSPC).
var writeFailures = []string{"critical write error", "will be disabled", "no space left on device", "out of space"}

// noteError looks at an error the server logs. It runs on the server's
// goroutines, which may hold its locks: it only records and kicks.
func (w *storeWatch) noteError(msg string) {
	lower := strings.ToLower(msg)
	for _, f := range writeFailures {
		if strings.Contains(lower, f) {
			w.setFault(fmt.Errorf("%w: %s", ErrStoreNotWritable, msg), false)
			select {
			case w.kick <- struct{}{}:
			default:
			}
			return
		}
	}
}

// setFault records why the store cannot write; the first reason stays,
// unless replace.
func (w *storeWatch) setFault(err error, replace bool) {
	if replace {
		w.fault.Store(&err)
		return
	}
	w.fault.CompareAndSwap(nil, &err)
}

// err is why the store cannot write, nil when it can.
func (w *storeWatch) err() error {
	if err := w.fault.Load(); err != nil {
		return *err
	}
	return nil
}

func (w *storeWatch) start() { go w.run() } // owned by the Bus: Close stops it

// run looks at the server every interval (and at once on a noted error),
// and starts JetStream again once the disk takes a write.
func (w *storeWatch) run() {
	defer close(w.done)
	t := time.NewTicker(w.every)
	defer t.Stop()
	tries := 0
	seen := false // the fault was there at the previous look already
	for {
		select {
		case <-w.stop:
			return
		case <-w.kick:
		case <-t.C:
		}
		if w.err() == nil {
			seen = false
			if w.srv.JetStreamEnabled() {
				continue
			}
			w.setFault(fmt.Errorf("%w: the embedded NATS server turned JetStream off", ErrStoreNotWritable), false)
		}
		if !seen {
			// The server reacts to the failure too (a clustered one turns
			// JetStream off, which takes a moment): not before the next look.
			seen = true
			continue
		}
		if err := w.probe(); err != nil {
			continue // no room yet: the fault stays what it was
		}
		select {
		case <-w.stop: // Close shuts the server down: no restart now
			return
		default:
		}
		if !w.srv.JetStreamEnabled() && w.srv.JetStreamConfig() != nil {
			continue // the server is turning JetStream off: let it finish
		}
		if err := w.restart(); err != nil {
			tries++
			w.log.Error("JetStream did not start again", "err", err, "try", tries)
			if tries == storeRestartTries {
				err = fmt.Errorf("%w: JetStream could not be started again after a write failure: %w", ErrStoreNotWritable, err)
				w.setFault(err, true)
				select {
				case w.failed <- err:
				default: // said already
				}
			}
			continue
		}
		tries, seen = 0, false
		w.restarts.Add(1)
		w.log.Warn("JetStream store writable again: JetStream restarted", "after", w.err())
		w.fault.Store(nil)
	}
}

// probe writes, syncs and removes a file in the store's directory.
func (w *storeWatch) probe() error {
	f, err := os.CreateTemp(w.dir, ".tah-write-test-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(make([]byte, storeProbeSize))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// restart shuts JetStream down (keeping a cluster member's state) and enables
// it again on the same store: every stream is reloaded from its files.
func (w *storeWatch) restart() error {
	w.log.Warn("JetStream store writable again: restarting JetStream", "store", w.dir, "after", w.err())
	if w.srv.JetStreamEnabled() {
		if err := w.srv.ShutdownJetStream(); err != nil {
			return fmt.Errorf("shut JetStream down: %w", err)
		}
	}
	if err := w.srv.EnableJetStream(&server.JetStreamConfig{StoreDir: w.dir}); err != nil {
		return fmt.Errorf("enable JetStream: %w", err)
	}
	return nil
}

// close stops the watch, waiting for a restart in progress until ctx ends.
func (w *storeWatch) close(ctx context.Context) {
	select {
	case <-w.stop:
		return
	default:
		close(w.stop)
	}
	select {
	case <-w.done:
	case <-ctx.Done():
	}
}
