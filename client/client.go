package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/internal/stopgroup"
)

// How Connect dials and reconnects.
const (
	// dialTimeout bounds the connection to one server.
	dialTimeout = 3 * time.Second
	// reconnectWait is the pause between two reconnection attempts.
	reconnectWait = 500 * time.Millisecond
)

// Client is a connection to TAH over NATS: the API, inputs, turns and the
// log. It is safe for concurrent use. Close stops every Turn and Follower it
// started.
type Client struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	opts  Options
	owned bool // Close closes nc
	// denials ends the operations whose publish NATS refused: the
	// connection's error handler (Connect's), or a step before the
	// caller's (New's, shared by the Clients of that connection).
	denials *denials

	status chan nats.Status // the OnConnection listener; nil without one
	wg     sync.WaitGroup
	// unnamedInputs: the credential may not name its sender on the default
	// tenant's sessions' inputs, nor on the API's commands (issued before
	// they did; inputSender, apiSubject).
	unnamedInputs bool
	// anonUnnamed: this Client's inputs that would name
	// wire.AnonymousSender name nobody (tah.sess.<sid>.in): a connection of
	// the caller's given no Sender (New), or one whose server refused the
	// anonymous form (publish).
	anonUnnamed atomic.Bool
	// shards is the log's shard count once read (see shardOf), 0 before.
	shards atomic.Int32

	mu     sync.Mutex
	closed bool
	open   map[closer]struct{} // the Turns and Followers to stop on Close
	// stopping runs the Followers' consumer stops in the background, so
	// that a Follower's Close (a Ctrl-C) does not wait out a consumer's
	// reset (package stopgroup). A Client that owns its connection waits
	// for them in Close, after closing it; one on the caller's connection
	// leaves them to end with their request.
	stopping stopgroup.Group
}

// closer is what Close stops: a Turn or a Follower.
type closer interface{ Close() }

// Connect connects to NATS as opts say, reconnecting by itself without
// limit once connected. It fails with a *ConnectError that unwraps to
// ErrNoServer when nothing answers at the URL and to ErrAuth when the server
// refused the credentials, or with ErrInvalidOptions. When ctx ends first it
// returns ctx's error (the attempt under way ends within the dial timeout,
// and a connection it makes is closed).
func Connect(ctx context.Context, opts Options) (*Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.URL == "" {
		return nil, fmt.Errorf("client options: no URL: %w", ErrInvalidOptions)
	}
	opts = opts.withDefaults()
	d := &denials{}
	nopts := []nats.Option{
		nats.ErrorHandler(d.handle),
		nats.Name(opts.Name),
		nats.Timeout(dialTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
	}
	if opts.CredsFile != "" {
		nopts = append(nopts, credsOptions(opts.CredsFile)...)
	}
	nopts = append(nopts, opts.tlsOptions()...)
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() { // ends within the dial timeout per server
		nc, err := nats.Connect(opts.URL, nopts...)
		done <- result{nc, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		go func() { // close the connection the abandoned attempt may still make
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, &ConnectError{URL: opts.URL, Kind: connectKind(r.err), Err: r.err}
	}
	c, err := newClient(r.nc, opts, true)
	if err != nil {
		r.nc.Close()
		return nil, err
	}
	c.denials = d
	return c, nil
}

// connectKind classifies an error of nats.Connect: ErrAuth, ErrNoServer,
// ErrTLS or nil (a credentials file that cannot be read, say).
func connectKind(err error) error {
	msg := strings.ToLower(err.Error())
	var opErr *net.OpError
	var unknownCA x509.UnknownAuthorityError
	var badHost x509.HostnameError
	var badCert *tls.CertificateVerificationError
	switch {
	case errors.As(err, &unknownCA), errors.As(err, &badHost), errors.As(err, &badCert),
		errors.Is(err, nats.ErrSecureConnRequired), errors.Is(err, nats.ErrSecureConnWanted),
		strings.Contains(msg, "tls:"), strings.Contains(msg, "x509:"):
		return ErrTLS
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked),
		strings.Contains(msg, "authorization violation"), strings.Contains(msg, "authentication"):
		return ErrAuth
	case errors.Is(err, nats.ErrNoServers), errors.Is(err, nats.ErrTimeout), errors.As(err, &opErr):
		return ErrNoServer
	}
	return nil
}

// New makes a Client over a connection of the caller's (an embedded node's
// in-process connection, say), which Close leaves open; opts' URL and TLS
// files are not used. Without a Sender its inputs to the default tenant's sessions name
// nobody on tah.sess.<sid>.in (the form any user allowed inputs without a
// name of its own may publish; TAH_TIN stores it, TAH_IN sources it); with
// Sender wire.AnonymousSender on tah.sess.<sid>.in.by.$anon, which TAH_IN
// stores at once: one durable write instead of two. A publish that NATS
// refuses the connection's credential ends its operation at once with
// ErrPermissionDenied, as with Connect: New puts a step before the
// connection's error handler (once per connection; every error still
// reaches the handler), which a handler set afterwards replaces.
func New(nc *nats.Conn, opts Options) (*Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c, err := newClient(nc, opts.withDefaults(), false)
	if err != nil {
		return nil, err
	}
	c.denials = watchDenials(nc)
	// Without a Sender, the form naming nobody, as documented above: the
	// caller's connection may be a user's that may publish only that one.
	c.anonUnnamed.Store(opts.Sender == "" && opts.CredsFile == "")
	return c, nil
}

func newClient(nc *nats.Conn, opts Options, owned bool) (*Client, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	c := &Client{nc: nc, js: js, opts: opts, owned: owned, open: map[closer]struct{}{}}
	c.unnamedInputs = opts.CredsFile != "" && !namesInputs(opts.CredsFile, opts.Sender)
	if opts.OnConnection != nil {
		c.status = nc.StatusChanged(nats.RECONNECTING, nats.DISCONNECTED, nats.CONNECTED, nats.CLOSED)
		c.wg.Add(1)
		go c.reportConnection()
	}
	return c, nil
}

// reportConnection tells OnConnection of the connection's changes, once
// each, until Close removes the listener.
func (c *Client) reportConnection() {
	defer c.wg.Done()
	var last ConnEvent
	for s := range c.status {
		ev := Disconnected
		switch s {
		case nats.CONNECTED:
			ev = Reconnected
		case nats.CLOSED:
			ev = Closed
		}
		if ev != last {
			last = ev
			c.opts.OnConnection(ev)
		}
	}
}

// Conn is the Client's NATS connection.
func (c *Client) Conn() *nats.Conn { return c.nc }

// URL is the URL of the server the Client is connected to (empty while it
// is not).
func (c *Client) URL() string { return c.nc.ConnectedUrlRedacted() }

// Close stops every Turn and Follower of the Client and waits for them, then
// closes the connection if Connect made it (sending what is buffered first).
func (c *Client) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	open := make([]closer, 0, len(c.open))
	for o := range c.open {
		open = append(open, o)
	}
	c.mu.Unlock()
	for _, o := range open {
		o.Close()
	}
	if c.owned {
		_ = c.nc.FlushTimeout(time.Second)
		c.nc.Close()
		c.stopping.Wait()
	}
	if c.status != nil {
		c.nc.RemoveStatusListener(c.status)
	}
	c.wg.Wait()
}

// track registers o to be stopped by Close; it fails with ErrClosed after
// Close.
func (c *Client) track(o closer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.open[o] = struct{}{}
	return nil
}

func (c *Client) untrack(o closer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.open, o)
}

// retrying is the retry callback of an operation named what: Options.OnRetry,
// or nil.
func (c *Client) retrying(what string) func(error) {
	if c.opts.OnRetry == nil {
		return nil
	}
	return func(err error) { c.opts.OnRetry(what, err) }
}
