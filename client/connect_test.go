package client_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/wire"
)

func TestConnectErrors(t *testing.T) {
	ctx := ctxT(t)
	var ce *client.ConnectError
	_, err := client.Connect(ctx, client.Options{URL: "nats://127.0.0.1:1"})
	if !errors.Is(err, client.ErrNoServer) || errors.Is(err, client.ErrAuth) || !errors.As(err, &ce) || ce.URL != "nats://127.0.0.1:1" {
		t.Errorf("nothing listens: %v", err)
	}
	n := startNode(t, mock.Scripted())
	other := startNode(t, mock.Scripted()) // another operator's credential
	for _, opts := range []client.Options{
		{URL: n.Bus().ClientURL(), CredsFile: creds(other)},
		{URL: n.Bus().ClientURL()},
	} {
		if _, err := client.Connect(ctx, opts); !errors.Is(err, client.ErrAuth) || errors.Is(err, client.ErrNoServer) {
			t.Errorf("%+v: %v", opts, err)
		}
	}
	if _, err := client.Connect(ctx, client.Options{URL: n.Bus().ClientURL(), CredsFile: filepath.Join(t.TempDir(), "none.creds")}); err == nil ||
		errors.Is(err, client.ErrNoServer) || errors.Is(err, client.ErrAuth) {
		t.Errorf("a credentials file that is not there: %v", err)
	}
	for _, opts := range []client.Options{
		{},
		{URL: "nats://x", RequestTimeout: -time.Second},
	} {
		if _, err := client.Connect(ctx, opts); !errors.Is(err, client.ErrInvalidOptions) {
			t.Errorf("%+v: %v", opts, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := client.Connect(cctx, client.Options{URL: n.Bus().ClientURL(), CredsFile: creds(n)}); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled connect: %v", err)
	}
}

// TestNewOverAnEmbeddedNodesConnection: a client over the node's own
// in-process connection works as one over TCP, and leaves it open.
func TestNewOverAnEmbeddedNodesConnection(t *testing.T) {
	n := startNode(t, mock.Scripted(mock.Say("inside")))
	c, err := client.New(n.Bus().Conn(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if o := run(t, c, newSession(t, c), "hi"); o.Content != "inside" {
		t.Fatalf("%+v", o)
	}
	c.Close()
	if n.Bus().Conn().IsClosed() {
		t.Fatal("Close closed the node's connection")
	}
}

// TestOutcomeFromTheLogWhenTheReplyIsLost: a Turn that misses its outcome
// message (it was reconnecting) takes the end of its turn in the log.
func TestOutcomeFromTheLogWhenTheReplyIsLost(t *testing.T) {
	ctx := ctxT(t)
	model := newGated("lost")
	n := startNode(t, model)
	c := connect(t, n)
	turn := startTurn(t, c, newSession(t, c), "lost", client.WithEvents())
	model.waitStarted(t, "lost")
	client.LoseReplies(turn)
	model.open()
	evs, _ := collect(t, turn)
	o, err := turn.Outcome(ctx)
	if err != nil || o.Status != "completed" || o.Content != "answer to lost" || o.Turn != 1 || o.LastSeq != evs[len(evs)-1].Seq || o.InputID != turn.InputID() {
		t.Fatalf("%+v %v", o, err)
	}
}

// TestOutcomeFromTheLogAfterAReconnect: a Turn asked only for its outcome
// follows no log; when its connection comes back with the outcome still to
// come (it may have been published while the connection was down), it reads
// the end of its turn in the log.
func TestOutcomeFromTheLogAfterAReconnect(t *testing.T) {
	ctx := ctxT(t)
	model := newGated("gone")
	n := startNode(t, model)
	c := connect(t, n)
	turn := startTurn(t, c, newSession(t, c), "gone")
	model.waitStarted(t, "gone")
	client.LoseReplies(turn)
	if err := c.Conn().ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	model.open()
	o, err := turn.Outcome(ctx)
	if err != nil || o.Status != "completed" || o.Content != "answer to gone" || o.InputID != turn.InputID() {
		t.Fatalf("%+v %v", o, err)
	}
}

// TestAnOutcomeAloneCostsNoConsumer: a Turn asked only for its outcome makes
// no consumer on the log (a thousand sessions would make a thousand).
func TestAnOutcomeAloneCostsNoConsumer(t *testing.T) {
	ctx := ctxT(t)
	n := startNode(t, mock.Scripted(mock.Say("one"), mock.Say("two")))
	c := connect(t, n)
	sid := newSession(t, c)
	consumers := func() int {
		t.Helper()
		sum := 0
		for k := range n.Bus().Shards() {
			s, err := n.Bus().JetStream().Stream(ctx, wire.EventShardStream(k))
			if err != nil {
				t.Fatal(err)
			}
			info, err := s.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sum += info.State.Consumers
		}
		return sum
	}
	before := consumers()
	if o := run(t, c, sid, "hi"); o.Content != "one" {
		t.Fatalf("%+v", o)
	}
	turn := startTurn(t, c, sid, "again")
	if o, err := turn.Outcome(ctx); err != nil || o.Content != "two" {
		t.Fatalf("%+v %v", o, err)
	}
	if after := consumers(); after != before {
		t.Fatalf("%d consumers on the log before, %d after", before, after)
	}
}

// TestFollowAcrossAReconnect: a server restarts under a Follower, which
// reports the loss and the return, and delivers the events appended after
// it, each once.
func TestFollowAcrossAReconnect(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	srv := bustest.ServerWith(t, func(o *server.Options) { o.StoreDir = dir })
	port := srv.Addr().(*net.TCPAddr).Port
	cfg := bus.Default()
	cfg.URL = srv.ClientURL()
	b, err := bus.Open(ctx, cfg) // the streams
	if err != nil {
		t.Fatal(err)
	}
	subject := wire.ShardSubject(b.ShardOf("s_f"), "s_f")
	b.Close(ctx)
	states := make(chan client.ConnEvent, 16)
	c, err := client.Connect(ctx, client.Options{URL: srv.ClientURL(), OnConnection: func(e client.ConnEvent) { states <- e }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	appendEvent := func(typ event.Type, data any) {
		t.Helper()
		body, _ := event.EncodeRecord([]event.Event{event.MustNew("s_f", typ, data)})
		if _, err := c.Conn().Request(subject, body, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	appendEvent(event.SessionCreated, event.SessionCreatedData{Config: event.Config{MaxSteps: 1}})
	f, err := c.Follow(ctx, "s_f", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ev := <-f.Events(); ev.Type != event.SessionCreated {
		t.Fatalf("first: %s", ev.Type)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	if e := <-states; e != client.Disconnected {
		t.Fatalf("state %s", e)
	}
	bustest.ServerWith(t, func(o *server.Options) { o.StoreDir, o.Port = dir, port })
	if e := <-states; e != client.Reconnected {
		t.Fatalf("state %s", e)
	}
	appendEvent(event.SessionClaimed, event.SessionClaimedData{Node: "n", Epoch: 1})
	if ev := <-f.Events(); ev.Type != event.SessionClaimed || ev.Seq != 2 {
		t.Fatalf("after the reconnect: %s at %d", ev.Type, ev.Seq)
	}
	select {
	case ev := <-f.Events():
		t.Fatalf("delivered again: %s at %d", ev.Type, ev.Seq)
	default:
	}
}
