package agents

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/wire"
)

// blockingHost creates sessions only when told to.
type blockingHost struct {
	entered chan struct{}
	release chan struct{}
}

func (h *blockingHost) CreateSession(ctx context.Context, _ string) (string, error) {
	h.entered <- struct{}{}
	<-h.release
	return "s_1", nil
}
func (h *blockingHost) CheckSession(context.Context, string) error { return nil }
func (h *blockingHost) PublishInput(context.Context, string, wire.Input) (string, error) {
	return "in-1", nil
}
func (h *blockingHost) MaxInputBytes() int        { return 1 << 20 }
func (h *blockingHost) SessionActive(string) bool { return false }

// TestRateLimited: a prompt beyond the prompts a node admits at once gets
// 429 with a retry_after_s, then the terminator; the one admitted goes on.
func TestRateLimited(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	host := &blockingHost{entered: make(chan struct{}, 1), release: make(chan struct{})}
	g, err := Start(context.Background(), Options{Conn: nc, Host: host, MaxConcurrent: 1, Heartbeat: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	subj := wire.AgentSubject(wire.AgentVerbPrompt, DefaultOwner, wire.AgentController)

	first, err := nc.SubscribeSync(nats.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest(subj, first.Subject, []byte("one")); err != nil {
		t.Fatal(err)
	}
	<-host.entered // the first is being admitted
	second, err := nc.SubscribeSync(nats.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest(subj, second.Subject, []byte("two")); err != nil {
		t.Fatal(err)
	}
	m, err := second.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var e wire.AgentError
	if m.Header.Get(wire.HeaderServiceErrorCode) != "429" || json.Unmarshal(m.Data, &e) != nil || e.Error != wire.AgentErrRateLimited || e.RetryAfterS != 1 {
		t.Fatalf("second: %v %s", m.Header, m.Data)
	}
	if end, err := second.NextMsg(10 * time.Second); err != nil || len(end.Data) != 0 || len(end.Header) != 0 {
		t.Fatalf("no terminator after the 429: %v", err)
	}
	close(host.release)
	if m, err := first.NextMsg(10 * time.Second); err != nil || string(m.Data) != `{"type":"status","data":"ack"}` {
		t.Fatalf("first: %v", err)
	}
}
