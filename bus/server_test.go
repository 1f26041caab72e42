package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// TestEmbeddedServerRequiresACredential: the embedded server runs in
// operator mode; another process reaches it with a credential of the data
// directory only, and its streams live in the TAH account.
func TestEmbeddedServerRequiresACredential(t *testing.T) {
	t.Parallel()
	b := embedded(t)
	if b.Server() == nil || !strings.HasPrefix(b.ClientURL(), "nats://127.0.0.1:") {
		t.Fatalf("embedded server at %q", b.ClientURL())
	}
	if nc, err := nats.Connect(b.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("connected without credentials")
	}
	// Another node's Bus, with a node credential, works and sees the same log.
	client := connected(t, b.ClientURL(), func(c *Config) { c.NoSetup, c.CredsFile = true, auth.NodeCredsPath(b.cfg.DataDir) })
	w, _ := b.Writer("s_cred", 1, 0)
	mustAppend(t, w, turn("s_cred", 0))
	if evs, _ := mustReplay(t, client, "s_cred", 0); len(evs) != 1 {
		t.Fatalf("client sees %d events", len(evs))
	}
	trust, err := auth.Load(b.cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b.cfg.DataDir, "nats", "jetstream", trust.Account())); err != nil {
		t.Fatalf("the streams are not in the TAH account: %v", err)
	}
}

func TestCloseStopsWhatTheBusStarted(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	b, err := Open(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := b.TailAll(ctxT(t), nil, nil, func(int, uint64, []event.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	ic, err := b.ConsumeInputs(ctxT(t), func(context.Context, *InputMsg) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-tl.Done():
	default:
		t.Fatal("tail still running after Close")
	}
	if ic.ctx.Err() == nil {
		t.Fatal("input consumer still running after Close")
	}
	if _, err := b.TailAll(ctxT(t), nil, nil, func(int, uint64, []event.Event) error { return nil }); !errors.Is(err, ErrClosed) && err == nil {
		t.Fatalf("tail after Close: %v", err)
	}
	// The port is free again: the server is gone.
	if c, err := net.Dial("tcp", strings.TrimPrefix(b.ClientURL(), "nats://")); err == nil {
		c.Close()
		t.Fatal("server still listening after Close")
	}
}

// TestEmbeddedCluster runs three nodes that each embed a server, joined by
// routes (Config.Cluster), with R3 streams: what a three-node deployment does.
func TestEmbeddedCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("three embedded servers: not in -short")
	}
	const n = 3
	ports := make([]int, n)
	var routes []string
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[i]))
	}
	nodes := make([]*Bus, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	first := t.TempDir()
	if _, err := auth.Ensure(first); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		cfg := testConfig(t)
		if err := auth.CopyTrust(first, cfg.DataDir); err != nil { // every server trusts the same operator
			t.Fatal(err)
		}
		cfg.ServerName = fmt.Sprintf("node%d", i)
		cfg.Replicas = 3
		cfg.Partitions = 2
		cfg.Cluster = ClusterConfig{Name: "tah", Port: ports[i], Routes: routes}
		cfg.ReadyTimeout = formingTimeout
		if os.Getenv("TAH_DEBUG") != "" {
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("node", i)
		}
		wg.Add(1)
		go func() { // they need each other to become ready
			defer wg.Done()
			nodes[i], errs[i] = Open(ctxT(t), cfg)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("node %d: %v", i, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	for i := range nodes {
		b := nodes[i]
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = b.Close(ctx)
		})
	}
	const sid = "s_cl"
	si, err := nodes[0].shards[nodes[0].ShardOf(sid)].Info(ctxT(t))
	if err != nil || si.Config.Replicas != 3 || si.Cluster == nil || len(si.Cluster.Replicas) != 2 {
		t.Fatalf("the session's shard: %+v, %v", si, err)
	}
	w0, _ := nodes[0].Writer(sid, 1, 0)
	mustAppend(t, w0, turn(sid, 0), turn(sid, 1))
	_, last := mustReplay(t, nodes[1], sid, 0)
	w1, _ := nodes[1].Writer(sid, 2, last)
	mustAppend(t, w1, claim(sid, 2))
	if _, err := w0.Append(ctxT(t), turn(sid, 2)); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale node: %v", err)
	}
	evs, _ := mustReplay(t, nodes[2], sid, 0)
	if len(evs) != 3 || evs[2].Epoch != 2 {
		t.Fatalf("node 2 sees %+v", evs)
	}
}

// The embedded server lets a shard of the log have more consumers than
// nats-server's default of 1,000 per stream: one per client turn under way.
func TestEmbeddedServerNoConsumerLimit(t *testing.T) {
	t.Parallel()
	b := embedded(t)
	st, err := b.JetStream().Stream(ctxT(t), wire.EventShardStream(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1001 {
		if _, err := st.CreateConsumer(ctxT(t), jetstream.ConsumerConfig{FilterSubject: wire.ShardSubject(0, fmt.Sprintf("s_%d", i)),
			AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, InactiveThreshold: time.Minute}); err != nil {
			t.Fatalf("consumer %d: %v", i+1, err)
		}
	}
}
