package bus

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The node's connections. One nats.Conn serialises everything sent on it:
// a publish, a request and the flusher all take the connection's lock, one
// goroutine hands every reply to its request (under the same lock), and on
// the server one read loop parses what the connection sends (with the
// embedded server's in-process pipe, the flusher's write waits for that loop
// while it holds the lock). Under row 3's load (1,000 sessions) a mutex
// profile named that lock as the node's serial point: every session's
// appends, the group committers' batches, the delta publishes and the
// projector's tail took turns on it.
//
// So with Config.Conns above 1 the Bus opens, beside its main connection,
// Conns connections for the appends and one for the tails:
//
//   - shard k's appends, single or batched (its committer), go on
//     appendConns[k % len]: every session lives in one shard, so its appends
//     (one in flight at a time, each fenced on the session's last sequence)
//     and its deltas keep their order on one connection;
//   - Tail and TailAll (the projector's feed) run their ordered consumers on
//     a connection of their own, so that a read model catching up does not
//     queue the sessions' appends behind its fetches and acknowledgements;
//   - the node's presence (its heartbeat, the others', the servers'
//     disconnect advisories) goes on a connection of its own,
//     PresenceConn(): a node that does not hear its own presence back
//     fences itself, and a presence queued behind a takeover's replays and
//     pulls on a loaded machine made a live node do so (the one that stays
//     fenced is then the node the others needed);
//   - everything else (requests: replays, last-sequence reads, the API; KV:
//     checkpoints, tah_nodes; the input consumers; subscriptions) stays on
//     the main connection, Conn().
//
// Every connection is opened with the main one's options (the embedded
// server's in-process connection and the node's credential, or the external
// server's URL, credential and TLS; reconnects without end; asynchronous
// errors to the log), belongs to the Bus and is drained by Close. With Conns
// 1 there is only the main connection, as before the pool.

// maxConns bounds Config.Conns.
const maxConns = 64

// DefaultConns is the count of append connections when Config.Conns is 0:
// GOMAXPROCS, at least 2 and at most 8 (the default shard count: a shard's
// appends go on one connection, so more would sit idle). The server's read
// loop of a connection and the client's lock are each one core's work at
// most, so one per core lets the appends use every core.
func DefaultConns() int { return min(max(runtime.GOMAXPROCS(0), 2), 8) }

// conns is the count of append connections c asks for.
func (c Config) conns() int {
	if c.Conns == 0 {
		return DefaultConns()
	}
	return c.Conns
}

// link is one connection of the Bus and its JetStream context.
type link struct {
	nc *nats.Conn
	js jetstream.JetStream
}

func newLink(nc *nats.Conn) (*link, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &link{nc: nc, js: js}, nil
}

// dial opens one more connection to the server the main one reaches, with
// its options, named name (as the server's monitoring shows it).
func (b *Bus) dial(name string) (*link, error) {
	opts := append(append([]nats.Option(nil), b.connOpts...), nats.Name(name))
	nc, err := nats.Connect(b.connURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s (%s): %w", b.connURL, name, err)
	}
	l, err := newLink(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return l, nil
}

// openPool opens the append and tail connections Config.Conns asks for (none
// with 1), at most one append connection per shard, and hands each shard's
// committer its connection. It runs once the shards are known, before
// anything appends.
func (b *Bus) openPool() error {
	n := min(b.cfg.conns(), max(len(b.shards), 1))
	if n <= 1 {
		b.appendLinks, b.tailLink = []*link{b.main}, b.main
	} else {
		var links []*link
		for i := range n {
			l, err := b.dial(fmt.Sprintf("%s append %d", b.cfg.Name, i+1))
			if err != nil {
				closeLinks(links)
				return err
			}
			links = append(links, l)
		}
		tail, err := b.dial(b.cfg.Name + " tail")
		if err != nil {
			closeLinks(links)
			return err
		}
		presence, err := b.dial(b.cfg.Name + " presence")
		if err != nil {
			closeLinks(append(links, tail))
			return err
		}
		b.appendLinks, b.tailLink, b.presence = links, tail, presence.nc
		b.extra = append(links, tail, presence)
	}
	for k, c := range b.commits {
		if c != nil {
			c.setLink(b.appendLink(k))
		}
	}
	return nil
}

// ConnsDown says which of the Bus's connections are not connected now (a
// reconnect under way, or closed), by name and status, or nil when all are:
// a node whose appends' or presence's connection is down cannot serve,
// whatever the main one says.
func (b *Bus) ConnsDown() error {
	var errs []error
	for _, nc := range append([]*nats.Conn{b.nc}, linkConns(b.extra)...) {
		if st := nc.Status(); st != nats.CONNECTED {
			errs = append(errs, fmt.Errorf("NATS connection %q is %s", nc.Opts.Name, st))
		}
	}
	return errors.Join(errs...)
}

func linkConns(ls []*link) []*nats.Conn {
	out := make([]*nats.Conn, len(ls))
	for i, l := range ls {
		out[i] = l.nc
	}
	return out
}

// appendLink is the connection that carries shard k's appends.
func (b *Bus) appendLink(k int) *link {
	if len(b.appendLinks) == 0 {
		return b.main
	}
	return b.appendLinks[k%len(b.appendLinks)]
}

// closeLinks closes connections at once (a failed Open).
func closeLinks(ls []*link) {
	for _, l := range ls {
		l.nc.Close()
	}
}

// drainAll drains the pool's connections and then the main one: the tails
// and appends were stopped or answered first, so that nothing the main
// connection's requests wait for (a read-back) is cut off early.
func (b *Bus) drainAll(ctx context.Context) error {
	errs := make([]error, len(b.extra))
	var wg sync.WaitGroup
	for i, l := range b.extra {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = drainConn(ctx, l.nc)
		}()
	}
	wg.Wait()
	return errors.Join(append(errs, drainConn(ctx, b.nc))...)
}

// drainConn drains nc, so that pending acks and publishes are flushed, and
// waits until it is closed or ctx ends (then it closes it).
func drainConn(ctx context.Context, nc *nats.Conn) error {
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		return nil
	}
	select {
	case <-closed:
		return nil
	case <-ctx.Done():
		nc.Close()
		return fmt.Errorf("drain NATS connection: %w", ctx.Err())
	}
}
