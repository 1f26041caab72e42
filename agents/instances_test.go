package agents_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/wire"
)

// infos are the service records $SRV.INFO.agents returns within a second.
func infos(t *testing.T, nc *nats.Conn) []micro.Info {
	t.Helper()
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$SRV.INFO."+wire.AgentsService, inbox, nil); err != nil {
		t.Fatal(err)
	}
	var out []micro.Info
	for {
		m, err := sub.NextMsg(time.Second)
		if err != nil {
			return out
		}
		var info micro.Info
		if err := json.Unmarshal(m.Data, &info); err != nil {
			t.Fatal(err)
		}
		out = append(out, info)
	}
}

func instanceOf(infos []micro.Info, session string) *micro.Info {
	for i := range infos {
		if infos[i].Metadata["session"] == session {
			return &infos[i]
		}
	}
	return nil
}

// TestInstances: the controller's registration is the protocol's; a
// session's instance appears with its actor, heartbeats while it lives, is
// gone (no heartbeat, no discovery) once the session passivates, and comes
// back when a prompt through the controller opens it again.
func TestInstances(t *testing.T) {
	c := one(t, mock.Scripted(mock.Say("Hi.").Always()), func(cfg *config.Config) { cfg.Agent.IdleTimeout = config.Duration(2 * time.Second) })
	nc := caller(t, c, 0, wire.RoleClient, "alice")
	ctrl := instanceOf(infos(t, nc), wire.AgentController)
	if ctrl == nil {
		t.Fatal("no controller in $SRV.INFO.agents")
	}
	if ctrl.Name != "agents" || ctrl.Metadata["agent"] != "tah" || ctrl.Metadata["owner"] != "tah" || ctrl.Metadata["protocol_version"] != "0.3" {
		t.Fatalf("controller %+v", ctrl)
	}
	var prompt *micro.EndpointInfo
	for i := range ctrl.Endpoints {
		if ctrl.Endpoints[i].Name == "prompt" {
			prompt = &ctrl.Endpoints[i]
		}
	}
	if prompt == nil || prompt.Subject != "agents.prompt.tah.tah.new" || prompt.QueueGroup != "agents" ||
		prompt.Metadata["attachments_ok"] != "true" || prompt.Metadata["max_payload"] == "" {
		t.Fatalf("prompt endpoint %+v", prompt)
	}

	sid := sessionOf(t, stream(t, nc, prompt.Subject, []byte("hello")))
	beats, err := nc.SubscribeSync(wire.AgentSubject(wire.AgentVerbHeartbeat, "tah", sid))
	if err != nil {
		t.Fatal(err)
	}
	m, err := beats.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no heartbeat of the session's instance: %v", err)
	}
	var hb wire.AgentHeartbeat
	if err := json.Unmarshal(m.Data, &hb); err != nil || hb.Session != sid || hb.InstanceID == "" || hb.IntervalS != 1 {
		t.Fatalf("heartbeat %s: %v", m.Data, err)
	}
	st, err := nc.Request(wire.AgentSubject(wire.AgentVerbStatus, "tah", sid), nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var status wire.AgentHeartbeat
	if err := json.Unmarshal(st.Data, &status); err != nil || status.InstanceID != hb.InstanceID {
		t.Fatalf("status %s", st.Data)
	}

	// Passivated: heartbeats stop, discovery forgets it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := beats.NextMsg(3 * time.Second); err != nil {
			break // three intervals without a heartbeat
		}
		if time.Now().After(deadline) {
			t.Fatal("the session's heartbeats never stopped")
		}
	}
	if instanceOf(infos(t, nc), sid) != nil {
		t.Fatal("a passivated session is still discovered")
	}
	if n := c.Node(0).Gateway().Instances(); n != 1 {
		t.Fatalf("%d instances registered with every session passivated, want the controller alone", n)
	}
	// Opened again through the controller: its instance is back.
	ms := stream(t, nc, prompt.Subject, []byte(`{"prompt":"again","session":"`+sid+`"}`))
	if text(ms) != "Hi." || sessionOf(t, ms) != sid {
		t.Fatalf("%+v", ms)
	}
	if _, err := beats.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("no heartbeat after the session was opened again: %v", err)
	}
	if instanceOf(infos(t, nc), sid) == nil {
		t.Fatal("the opened session is not discovered")
	}
}

// TestPermissions: an observer may discover and ask for status but not
// prompt or answer (NATS refuses it); no credential may send the bare
// discovery verbs; and a reply subject on the log is never written, by the
// gateway or the node.
func TestPermissions(t *testing.T) {
	c := one(t, mock.Scripted(mock.Say("Hi.").Always()), nil)
	alice := caller(t, c, 0, wire.RoleClient, "alice")
	sid := sessionOf(t, stream(t, alice, wire.AgentSubject(wire.AgentVerbPrompt, "tah", wire.AgentController), []byte("hello")))

	errs := make(chan error, 16)
	obsPath := caller(t, c, 0, wire.RoleObserver, "dash")
	obsPath.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err })
	if len(infos(t, obsPath)) == 0 {
		t.Fatal("the observer discovers nothing")
	}
	if _, err := obsPath.Request(wire.AgentSubject(wire.AgentVerbStatus, "tah", wire.AgentController), nil, 5*time.Second); err != nil {
		t.Fatalf("observer status: %v", err)
	}
	for _, subj := range []string{wire.AgentSubject(wire.AgentVerbPrompt, "tah", wire.AgentController), wire.AnswerSubject(sid, "call_1"), "$SRV.INFO"} {
		if err := obsPath.PublishRequest(subj, obsPath.NewRespInbox(), []byte("x")); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errs:
			if err == nil || !strings.Contains(err.Error(), "Permissions Violation") {
				t.Fatalf("%s: %v", subj, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the observer's publish on %s was not refused", subj)
		}
	}

	// A request with the session's log as its reply subject: the gateway
	// may not publish there, and writes nothing.
	k := wire.Shard(sid, c.Bus().Shards())
	before := lastSeq(t, c, k)
	for _, subj := range []string{"$SRV.INFO.agents", "$SRV.PING.agents", wire.AgentSubject(wire.AgentVerbStatus, "tah", sid), wire.AgentSubject(wire.AgentVerbPrompt, "tah", sid)} {
		if err := alice.PublishRequest(subj, wire.ShardSubject(k, sid), []byte("hello")); err != nil {
			t.Fatal(err)
		}
	}
	if err := alice.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // what would be written has been by now
	if after := lastSeq(t, c, k); after != before {
		t.Fatalf("the log's shard moved from %d to %d", before, after)
	}
}

// lastSeq is the last sequence of shard k of the log.
func lastSeq(t *testing.T, c interface{ Bus() *bus.Bus }, k int) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.Bus().JetStream().Stream(ctx, wire.EventShardStream(k))
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}
