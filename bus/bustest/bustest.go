package bustest

import (
	"flag"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Server starts a JetStream-enabled nats-server on 127.0.0.1 with a random port,
// storing under t.TempDir(), and shuts it down in t.Cleanup.
func Server(t testing.TB) *server.Server {
	t.Helper()
	return ServerWith(t, func(*server.Options) {})
}

// ServerWith is Server with a chance to change the options before start.
func ServerWith(t testing.TB, edit func(*server.Options)) *server.Server {
	t.Helper()
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}
	edit(opts)
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("bustest: new server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		t.Fatal("bustest: server not ready within 10s")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

// Connect opens a client connection to srv, closed in t.Cleanup.
func Connect(t testing.TB, srv *server.Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL(), opts...)
	if err != nil {
		t.Fatalf("bustest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Eventually polls cond every 10ms until it returns true or the deadline passes.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("bustest: %s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitingTestsAtOnce sets go test's -parallel default to n for a package whose
// tests call t.Parallel and mostly wait on their servers (elections, stream
// moves, redeliveries, processes) rather than compute: GOMAXPROCS, the
// default, is two on the machines make test runs on, and such a package then
// takes twice the time for the same CPU. Call it from TestMain before m.Run,
// which parses the flags: a -parallel given to go test still wins.
func WaitingTestsAtOnce(n int) {
	if f := flag.Lookup("test.parallel"); f != nil {
		_ = f.Value.Set(strconv.Itoa(n))
	}
}
