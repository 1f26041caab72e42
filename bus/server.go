package bus

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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

// startServer starts the embedded nats-server of cfg in operator mode, with
// the trust material of cfg.DataDir (generated at first start, with the
// node's and the local admin's credentials), and waits until it accepts
// connections. The caller shuts it down with stopServer.
func startServer(ctx context.Context, cfg Config) (*server.Server, error) {
	trust, err := auth.Ensure(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	storeDir := filepath.Join(cfg.DataDir, "nats")
	if err := adoptGlobalAccount(cfg, storeDir, trust.Account()); err != nil {
		return nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	opts := &server.Options{
		ServerName:   cfg.ServerName,
		Host:         cfg.Host,
		Port:         cfg.Port,
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
	}
	if err := operatorMode(ctx, opts, trust, filepath.Join(storeDir, resolverDir)); err != nil {
		return nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	if cfg.Cluster.Name != "" {
		opts.Cluster = server.ClusterOpts{Name: cfg.Cluster.Name, Host: cfg.Cluster.Host, Port: cfg.Cluster.Port}
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
	if cfg.Logger != nil {
		srv.SetLogger(slogAdapter{cfg.Logger}, false, false)
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

// slogAdapter hands the server's log to a slog.Logger.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Noticef(format string, v ...any) {
	a.l.Info(fmt.Sprintf(format, v...), "component", "nats")
}
func (a slogAdapter) Warnf(format string, v ...any) {
	a.l.Warn(fmt.Sprintf(format, v...), "component", "nats")
}
func (a slogAdapter) Fatalf(format string, v ...any) {
	a.l.Error(fmt.Sprintf(format, v...), "component", "nats", "fatal", true)
}
func (a slogAdapter) Errorf(format string, v ...any) {
	a.l.Error(fmt.Sprintf(format, v...), "component", "nats")
}
func (a slogAdapter) Debugf(format string, v ...any) {
	a.l.Debug(fmt.Sprintf(format, v...), "component", "nats")
}
func (a slogAdapter) Tracef(format string, v ...any) {
	a.l.Debug(fmt.Sprintf(format, v...), "component", "nats", "trace", true)
}
