package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/internal/stopgroup"
	"github.com/tah-dev/tah/wire"
)

// Bus is a node's (or a client's) handle on NATS: the connection, the embedded
// server when there is one, and TAH's streams and buckets. It is safe for
// concurrent use. Everything it starts (tails, subscriptions, input consumers)
// is stopped by Close if its owner did not stop it before.
type Bus struct {
	cfg Config
	srv *server.Server // nil when connected to an external server
	// nc and js are the main connection's (main): control traffic, requests,
	// KV, the input consumers, subscriptions.
	nc   *nats.Conn
	js   jetstream.JetStream
	main *link
	// appendLinks carry the shards' appends (shard k's on
	// appendLinks[k%len]) and tailLink the tails; both are main when
	// Config.Conns is 1. extra are the connections opened beside main
	// (pool.go), which Close drains.
	appendLinks []*link
	tailLink    *link
	// appendLatency averages the appends' times (latency.go).
	appendLatency appendLatency
	// presence carries the node's presence (PresenceConn); main when
	// Config.Conns is 1.
	presence *nats.Conn
	extra    []*link
	// connURL and connOpts are how main was opened; the pool's connections
	// are opened the same way.
	connURL  string
	connOpts []nats.Option

	// shards are the event log's streams, shards[k] is TAH_EVT_<k>.
	shards  []jetstream.Stream
	in      jetstream.Stream
	answers jetstream.Stream
	// tenantAnswers is answers' twin for tenants' sessions.
	tenantAnswers jetstream.Stream
	checkpoints   jetstream.KeyValue
	toolResults   jetstream.KeyValue
	nodes         jetstream.KeyValue
	artifacts     jetstream.ObjectStore

	// commits[k] groups the appends to shard k into atomic batches, nil
	// where they go one by one (batch.go).
	commits []*committer
	// appended[k] is the highest sequence of shard k that this Bus's
	// writers appended (Appended).
	appended []atomic.Uint64
	// inputCommit groups the inputs this node stores in TAH_IN at the same
	// moment (API commands, agent protocol prompts, sub-agents' inputs), nil
	// where they go one by one.
	inputCommit *committer

	// stopping runs the stops of consumers that may wait (Tail.stopLocked)
	// in the background; Close waits for them once the connections are
	// closed, which ends any request they wait on.
	stopping stopgroup.Group

	// publish sends one record on l and waits for its ack. Tests replace it
	// to lose acknowledgements.
	publish func(ctx context.Context, l *link, m *nats.Msg) (*jetstream.PubAck, error)
	// replies routes the replies of batched direct gets.
	replies *replyMux

	mu      sync.Mutex
	closed  bool
	handles map[stopper]struct{}
	// homes says where streams should be (placement.go); nil: anywhere.
	homes func() map[string]string

	// watch keeps the embedded server's JetStream store writable; nil with
	// an external server.
	watch *storeWatch
}

// stopper is anything Close must stop: a tail, a subscription, a consumer.
type stopper interface{ stop() }

// Open connects to NATS as cfg says (embedding a server when cfg.URL is empty),
// waits until JetStream is ready and sets up TAH's streams, consumers and
// buckets (or, with cfg.NoSetup, checks them). It returns an error wrapping
// ErrInvalidConfig, ErrNotReady, ErrNotSetUp or ErrIncompatibleSetup when those
// apply. The caller owns the Bus and must Close it.
func Open(ctx context.Context, cfg Config) (*Bus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Bus{cfg: cfg, handles: make(map[stopper]struct{})}
	// nats.Name comes last, per connection (the pool's are named apart).
	opts := []nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		// nats.go prints asynchronous errors (a consumer gone during a leader
		// election, say) to stderr by default: they belong in the log.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if cfg.Logger == nil {
				return
			}
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			cfg.Logger.Debug("NATS asynchronous error", "subject", subject, "err", err)
		}),
	}
	url := cfg.URL
	if cfg.Embedded() {
		b.watch = newStoreWatch(cfg.Logger)
		srv, err := startServer(ctx, cfg, b.watch)
		if err != nil {
			return nil, err
		}
		b.srv = srv
		// The in-process connection needs no TLS: a tls:// URL would make
		// the client insist on it.
		url = strings.Replace(srv.ClientURL(), "tls://", "nats://", 1)
		opts = append(opts, nats.InProcessServer(srv), nats.UserCredentials(auth.NodeCredsPath(cfg.DataDir)))
	} else {
		opts = append(opts, nats.RetryOnFailedConnect(true))
		if cfg.CredsFile != "" {
			opts = append(opts, nats.UserCredentials(cfg.CredsFile))
		}
		opts = append(opts, clientTLS(cfg.TLS)...)
	}
	// One attempt: the embedded server was found ready by startServer and
	// holds the TAH account already (loadAccount), so its refusal is the
	// credential's (revoked, a broken trust material) and fails at once; an
	// external server that is not up yet is waited for (RetryOnFailedConnect).
	// The pool's connections are opened the same way (pool.go).
	b.connURL, b.connOpts = url, opts
	nc, err := nats.Connect(url, append(opts[:len(opts):len(opts)], nats.Name(cfg.Name))...)
	if err != nil {
		b.shutdownServer(ctx)
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	b.nc = nc
	b.replies = newReplyMux(nc)
	main, err := newLink(nc)
	if err != nil {
		b.abort(ctx)
		return nil, err
	}
	b.main, b.js = main, main.js
	b.publish = func(ctx context.Context, l *link, m *nats.Msg) (*jetstream.PubAck, error) {
		return l.js.PublishMsg(ctx, m)
	}
	if err := b.waitReady(ctx); err != nil {
		b.abort(ctx)
		return nil, err
	}
	if err := b.setupWithRetry(ctx); err != nil {
		b.abort(ctx)
		return nil, err
	}
	if err := b.openPool(); err != nil {
		b.abort(ctx)
		return nil, err
	}
	if err := b.migrateLegacyLog(ctx); err != nil {
		b.abort(ctx)
		return nil, err
	}
	if err := b.ensureTenantInputs(ctx); err != nil { // found by setup, unless it migrated
		b.abort(ctx)
		return nil, err
	}
	if b.watch != nil {
		b.watch.start()
	}
	return b, nil
}

// waitReady polls JetStream until it answers (a cluster must have elected its
// meta leader), within cfg.ReadyTimeout.
func (b *Bus) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ReadyTimeout)
	defer cancel()
	var last error
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := b.js.AccountInfo(actx)
		acancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("JetStream at %s not ready within %v (last: %v): %w", b.ClientURL(), b.cfg.ReadyTimeout, last, ErrNotReady)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// abort undoes a failed Open.
func (b *Bus) abort(ctx context.Context) {
	closeLinks(b.extra)
	if b.nc != nil {
		b.nc.Close()
	}
	b.shutdownServer(ctx)
}

func (b *Bus) shutdownServer(ctx context.Context) {
	if b.srv != nil {
		_ = stopServer(context.WithoutCancel(ctx), b.srv)
	}
}

// Close stops everything the Bus started that is still running, drains its
// connections (so that pending acks and publishes are flushed) and shuts the
// embedded server down, waiting at most until ctx ends. An acknowledged append
// is on disk before Close begins (with the default SyncAlways); Close loses
// nothing that was acknowledged.
func (b *Bus) Close(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	hs := make([]stopper, 0, len(b.handles))
	for h := range b.handles {
		hs = append(hs, h)
	}
	b.handles = nil
	b.mu.Unlock()
	if b.watch != nil {
		b.watch.close(ctx) // first: no JetStream restart while the server stops
	}
	for _, h := range hs {
		h.stop()
	}
	var errs []error
	if err := b.drainAll(ctx); err != nil {
		errs = append(errs, err)
	}
	b.stopping.Wait()
	if b.srv != nil {
		if err := stopServer(ctx, b.srv); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// track registers h to be stopped by Close; it fails when the Bus is closed.
func (b *Bus) track(h stopper) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	b.handles[h] = struct{}{}
	return nil
}

// untrack forgets h once its owner stopped it.
func (b *Bus) untrack(h stopper) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.handles != nil {
		delete(b.handles, h)
	}
}

// Config returns the configuration the Bus was opened with.
func (b *Bus) Config() Config { return b.cfg }

// Conn returns the main NATS connection, for request/reply services,
// subscriptions and the like (the appends and tails may go on connections of
// their own: see Config.Conns). It belongs to the Bus: do not close it.
func (b *Bus) Conn() *nats.Conn { return b.nc }

// PresenceConn returns the connection for the node's presence: one of its
// own beside the main one when Config.Conns is above 1 (pool.go), so that a
// presence never queues behind the main connection's traffic (a node
// catching up after a takeover loads sessions and pulls inputs there), else
// the main connection. It belongs to the Bus: do not close it.
func (b *Bus) PresenceConn() *nats.Conn {
	if b.presence == nil {
		return b.nc
	}
	return b.presence
}

// JetStream returns the JetStream context of the main connection.
func (b *Bus) JetStream() jetstream.JetStream { return b.js }

// Server returns the embedded server, or nil when connected to an external one.
func (b *Bus) Server() *server.Server { return b.srv }

// StoreErr is why the embedded NATS server's JetStream store cannot write
// (wrapping ErrStoreNotWritable), nil when it can, or when the server is not
// embedded (an external server's storage is its operator's to watch). While
// it is not nil, the Bus waits for the disk to take writes again and then
// starts JetStream again by itself.
func (b *Bus) StoreErr() error {
	if b.watch == nil {
		return nil
	}
	return b.watch.err()
}

// StoreRestarts counts the times JetStream was started again after its
// store failed a write.
func (b *Bus) StoreRestarts() int64 {
	if b.watch == nil {
		return 0
	}
	return b.watch.restarts.Load()
}

// Failed receives, once, the error of an embedded server whose JetStream
// could not be started again after a write failure: the node cannot go on,
// and its process should exit (a supervisor starts it again). A nil channel
// (never ready) with an external server.
func (b *Bus) Failed() <-chan error {
	if b.watch == nil {
		return nil
	}
	return b.watch.failed
}

// ClientURL is the URL other processes use to reach this NATS: the embedded
// server's listen address, or the configured URL.
func (b *Bus) ClientURL() string {
	if b.srv != nil {
		return b.srv.ClientURL()
	}
	return b.cfg.URL
}

// MaxPayload is the largest message the server accepts, headers included.
func (b *Bus) MaxPayload() int { return int(b.nc.MaxPayload()) }

// MaxRecordSize is the largest record body (event.EncodeRecord: the events
// of one Append) that Append accepts whatever its headers: the server's max
// payload less headerAllowance. Larger tool outputs belong in the object store
// (PutArtifact).
func (b *Bus) MaxRecordSize() int { return b.MaxPayload() - headerAllowance }

// headerAllowance is the room MaxRecordSize keeps for an append's headers: the
// message id and the fencing header, with a 128-byte session id.
const headerAllowance = 1024

// Shards is the number of shards of the event log.
func (b *Bus) Shards() int { return len(b.shards) }

// Appended returns, per shard of the log, the highest sequence that this
// Bus's writers appended (0 where none): what a read of this node's own
// writes waits for, since its tail may receive a record after the writer
// had its acknowledgement and passed it on (a turn's outcome to its client).
func (b *Bus) Appended() []uint64 {
	out := make([]uint64, len(b.appended))
	for k := range b.appended {
		out[k] = b.appended[k].Load()
	}
	return out
}

// noteAppended records that a writer appended at seq of shard k.
func (b *Bus) noteAppended(k int, seq uint64) {
	a := &b.appended[k]
	for {
		was := a.Load()
		if seq <= was || a.CompareAndSwap(was, seq) {
			return
		}
	}
}

// ShardOf is the shard of the event log that holds session sid's records.
func (b *Bus) ShardOf(sid string) int { return wire.Shard(sid, len(b.shards)) }
