package bus

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/tahtest/natstest"
)

// Issue 28: "a forming cluster sometimes refuses its own node". The tests
// here form clusters of embedded servers and connect each server's node
// credential to it without any retry; see loadAccount for the cause.

// logRecorder is a slog.Handler that keeps every record, so that a test can
// look for what a server logged.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Level.String() + " " + rec.Message)
	rec.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	r.mu.Lock()
	r.lines = append(r.lines, b.String())
	r.mu.Unlock()
	return nil
}

func (r *logRecorder) WithAttrs(as []slog.Attr) slog.Handler { return &recorderWith{r: r, attrs: as} }
func (r *logRecorder) WithGroup(string) slog.Handler         { return r }

// recorderWith is a logRecorder with attributes (slog.Logger.With).
type recorderWith struct {
	r     *logRecorder
	attrs []slog.Attr
}

func (w *recorderWith) Enabled(context.Context, slog.Level) bool { return true }
func (w *recorderWith) Handle(ctx context.Context, rec slog.Record) error {
	rec.AddAttrs(w.attrs...)
	return w.r.Handle(ctx, rec)
}
func (w *recorderWith) WithAttrs(as []slog.Attr) slog.Handler {
	return &recorderWith{r: w.r, attrs: append(append([]slog.Attr(nil), w.attrs...), as...)}
}
func (w *recorderWith) WithGroup(string) slog.Handler { return w }

// matching returns the recorded lines that contain any of subs.
func (r *logRecorder) matching(subs ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		for _, s := range subs {
			if strings.Contains(l, s) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

// refusals are what a server logs when it turns a client away.
var refusals = []string{"authentication error", "Authorization Violation"}

// formation is the layout of a cluster of embedded servers sharing one
// trust material: each member's configuration, on ports picked together.
type formation struct {
	cfgs  []Config
	trust *auth.Trust
	log   *logRecorder
}

func newFormation(t *testing.T, n int) *formation {
	t.Helper()
	ports, err := natstest.FreePorts(2 * n) // client and route ports, distinct
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[2*i+1]))
	}
	seed := t.TempDir()
	trust, err := auth.Ensure(seed)
	if err != nil {
		t.Fatal(err)
	}
	f := &formation{trust: trust, log: &logRecorder{}}
	for i := range n {
		cfg := testConfig(t)
		if err := auth.CopyTrust(seed, cfg.DataDir); err != nil {
			t.Fatal(err)
		}
		cfg.Port = ports[2*i]
		cfg.ServerName = fmt.Sprintf("node%d", i)
		cfg.Cluster = ClusterConfig{Name: "tah", Port: ports[2*i+1], Routes: routes}
		cfg.Logger = slog.New(f.log).With("node", i)
		f.cfgs = append(f.cfgs, cfg)
	}
	return f
}

// start starts member i's server, shut down at the end of the test.
func (f *formation) start(t *testing.T, i int) *server.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := startServer(ctx, f.cfgs[i], newStoreWatch(nil))
	if err != nil {
		t.Fatalf("server %d: %v", i, err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv
}

// connectNode connects member i's node credential to srv, in process as
// the node does (or over TCP, as a client on the machine does), once.
func (f *formation) connectNode(srv *server.Server, i int, inProcess bool) (*nats.Conn, error) {
	opts := []nats.Option{nats.UserCredentials(auth.NodeCredsPath(f.cfgs[i].DataDir)), nats.NoReconnect()}
	if inProcess {
		opts = append(opts, nats.InProcessServer(srv))
	}
	return nats.Connect(srv.ClientURL(), opts...)
}

// account is what srv holds of the TAH account; nil when it holds nothing.
func (f *formation) account(srv *server.Server) *server.AccountInfo {
	az, err := srv.Accountz(&server.AccountzOptions{Account: f.trust.Account()})
	if err != nil {
		return nil
	}
	return az.Account
}

// whole fails the test unless srv holds the TAH account with its JWT, as
// loaded from the resolver: not the empty, expired placeholder a route
// registers for an account the server has not loaded, against which the
// server refuses the account's valid users.
func (f *formation) whole(t *testing.T, srv *server.Server, what string) {
	t.Helper()
	a := f.account(srv)
	if a == nil {
		t.Errorf("%s: %s does not hold the TAH account", what, srv.Name())
		return
	}
	if a.Jwt == "" || a.Expired || !a.Complete {
		t.Errorf("%s: %s holds the TAH account with a JWT: %v, expired: %v, complete: %v; want it loaded from the resolver (a JWT, not expired)",
			what, srv.Name(), a.Jwt != "", a.Expired, a.Complete)
	}
}

// A server that joins a cluster whose nodes subscribe already holds the TAH
// account, loaded from its resolver, when the routes bring those
// subscriptions and before its own node connects; the node is not refused.
// Before the fix the route registered an empty placeholder account, marked
// expired: the state from which the node's first connection was refused.
func TestFormationLoadsTheAccountFirst(t *testing.T) {
	t.Parallel()
	f := newFormation(t, 2)
	first := f.start(t, 1)
	nc, err := f.connectNode(first, 1, true)
	if err != nil {
		t.Fatalf("the first node: %v", err)
	}
	defer nc.Close()
	const subs = 10
	for j := range subs {
		if _, err := nc.SubscribeSync(fmt.Sprintf("formation.%d", j)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	joining := f.start(t, 0)
	bustest.Eventually(t, 30*time.Second, "the first node's subscriptions reach the joining server", func() bool {
		a := f.account(joining)
		return a != nil && a.SubCnt >= subs
	})
	f.whole(t, joining, "the routes brought the TAH account's subscriptions")
	own, err := f.connectNode(joining, 0, true)
	if err != nil {
		t.Fatalf("the joining server refused its node: %v\n%s", err, strings.Join(f.log.matching(refusals...), "\n"))
	}
	own.Close()
	if seen := f.log.matching(refusals...); len(seen) > 0 {
		t.Errorf("refused:\n%s", strings.Join(seen, "\n"))
	}
}

// TestFormationRefusesNoNode forms three-server clusters again and again,
// every server started at once, each one's node connecting to it as soon as
// it is ready (in process, and a client of the machine over TCP), with
// subscriptions that the routes carry to the others: no connection is
// refused, and every server holds the TAH account whole. No timing is
// asserted. TAH_FORMATION_ROUNDS sets the rounds; TAH_FORMATION_HOG=n busies
// n goroutines meanwhile, to reproduce a loaded machine on a quiet one.
func TestFormationRefusesNoNode(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("three embedded servers, formed repeatedly: not in -short")
	}
	rounds := 3
	if s := os.Getenv("TAH_FORMATION_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	if s := os.Getenv("TAH_FORMATION_HOG"); s != "" {
		n, _ := strconv.Atoi(s)
		hog(t, n)
	}
	for round := range rounds {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
			f := newFormation(t, 3)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var refused []string
			srvs := make([]*server.Server, 3)
			for i := range 3 {
				wg.Add(1)
				go func() { // they form together, as the nodes of a new cluster start
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					srv, err := startServer(ctx, f.cfgs[i], newStoreWatch(nil))
					if err != nil {
						mu.Lock()
						refused = append(refused, fmt.Sprintf("server %d: %v", i, err))
						mu.Unlock()
						return
					}
					srvs[i] = srv
					var cw sync.WaitGroup
					for k := range 2 {
						cw.Add(1)
						go func() {
							defer cw.Done()
							nc, err := f.connectNode(srv, i, k == 0)
							if err != nil {
								mu.Lock()
								refused = append(refused, fmt.Sprintf("server %d refused connection %d: %v", i, k, err))
								mu.Unlock()
								return
							}
							defer nc.Close()
							for j := range 10 {
								_, _ = nc.SubscribeSync(fmt.Sprintf("formation.%d.%d.%d", i, k, j))
							}
							_ = nc.Flush()
						}()
					}
					cw.Wait()
				}()
			}
			wg.Wait()
			for _, srv := range srvs {
				if srv != nil {
					f.whole(t, srv, "formed")
					t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
				}
			}
			if seen := f.log.matching(refusals...); len(refused) > 0 || len(seen) > 0 {
				t.Errorf("the forming cluster refused its nodes:\n%s\n%s", strings.Join(refused, "\n"), strings.Join(seen, "\n"))
			}
		})
	}
}

// busy spins for a while without yielding (the runtime may still preempt).
func busy() {
	x := 0
	for i := range 1_000_000 {
		x ^= i
	}
	runtime.KeepAlive(x)
}

// hog keeps n goroutines busy until the end of the test.
func hog(t *testing.T, n int) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					busy()
				}
			}
		}()
	}
	t.Cleanup(func() { close(stop); wg.Wait() })
}
