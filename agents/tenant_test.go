package agents_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tahtest"
	"github.com/tah-dev/tah/wire"
)

// TestTenantAgents: a tenant's sessions are agents owned by
// tenant-<tenant>: its controller appears once the tenant is added, a
// prompt there makes a session of the tenant, whose query (an approval) the
// tenant's caller answers on its session's answer subject, and which its
// own instance continues. Another tenant's caller may not prompt, ask,
// answer or discover them (the server refuses it), and through its own
// controller does not find them.
func TestTenantAgents(t *testing.T) {
	c := oneWith(t, mock.Scripted(mock.CallTool("write_file", `{"path":"out.txt","content":"hi"}`).OnCall(1), mock.Say("Done.").Always()),
		func(cfg *config.Config) { cfg.Tools.Write = true }, func(o *node.Options) { o.AgentKeepAlive = 200 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := adminOf(ctx, t, c)
	for _, tenant := range []string{"acme", "beta"} {
		if _, err := admin.AddTenant(ctx, tenant); err != nil {
			t.Fatal(err)
		}
	}
	alice, _ := tenantCaller(t, c, "acme", "alice")
	bob, refused := tenantCaller(t, c, "beta", "bob")
	ctrl := func(tenant string) string {
		return wire.AgentSubject(wire.AgentVerbPrompt, wire.TenantAgentOwner(tenant), wire.AgentController)
	}
	for _, tenant := range []string{"acme", "beta"} {
		status := wire.AgentSubject(wire.AgentVerbStatus, wire.TenantAgentOwner(tenant), wire.AgentController)
		nc := map[string]*nats.Conn{"acme": alice, "beta": bob}[tenant]
		bustest.Eventually(t, 30*time.Second, tenant+"'s controller registered", func() bool {
			_, err := nc.Request(status, nil, time.Second)
			return err == nil
		})
	}

	// acme's caller: a session of acme's, its approval answered, then
	// continued on its own instance.
	cc := &clusterCaller{c: c, nc: alice}
	sub, q := cc.promptUntilQueryOn(t, ctrl("acme"), "write it")
	if !strings.HasPrefix(cc.sid, "acme.s_") || q.ReplySubject != wire.AnswerSubject(cc.sid, q.ID) {
		t.Fatalf("acme's session %q, its query %+v", cc.sid, q)
	}
	if err := alice.Publish(q.ReplySubject, []byte("yes")); err != nil {
		t.Fatal(err)
	}
	if rest := readStream(t, sub); text(rest) != "Done." {
		t.Fatalf("after acme's answer: %+v", rest)
	}
	if b, err := os.ReadFile(filepath.Join(c.ToolsRoot(), "out.txt")); err != nil || string(b) != "hi" {
		t.Fatalf("the approved call did not write: %q %v", b, err)
	}
	_, id, _ := strings.Cut(cc.sid, ".")
	own := wire.AgentSubject(wire.AgentVerbPrompt, wire.TenantAgentOwner("acme"), id)
	bustest.Eventually(t, 30*time.Second, "acme's session's instance", func() bool {
		_, err := alice.Request(wire.AgentSubject(wire.AgentVerbStatus, wire.TenantAgentOwner("acme"), id), nil, time.Second)
		return err == nil
	})
	if ms := streamWhenIdle(t, alice, own, []byte("and again")); text(ms) != "Done." {
		t.Fatalf("acme's session continued on its instance: %+v", ms)
	}
	if ms := streamWhenIdle(t, alice, ctrl("acme"), []byte(`{"prompt":"once more","session":"`+id+`"}`)); text(ms) != "Done." {
		t.Fatalf("acme's session continued by its id within the tenant: %+v", ms)
	}
	evs, err := c.Log(cc.sid)
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.Type != event.AgentFinished {
		t.Fatalf("acme's session ended with %s", last.Type)
	}

	// beta's caller: its own controller does not find acme's session; the
	// server refuses it acme's agents, answers and discovery.
	ms := stream(t, bob, ctrl("beta"), []byte(`{"prompt":"p","session":"`+cc.sid+`"}`))
	if status, e := errorOf(ms); status != "404" || e.Error != wire.AgentErrNotFound {
		t.Fatalf("beta's controller, of acme's session: %s %+v", status, e)
	}
	ms = stream(t, bob, ctrl("beta"), []byte(`{"prompt":"p","session":"`+id+`"}`))
	if status, _ := errorOf(ms); status != "404" {
		t.Fatalf("beta's controller, of acme's session's id: %s", status)
	}
	for what, subj := range map[string]string{
		"acme's controller":        ctrl("acme"),
		"acme's session":           own,
		"acme's status":            wire.AgentSubject(wire.AgentVerbStatus, wire.TenantAgentOwner("acme"), id),
		"an answer of acme's":      wire.AnswerSubject(cc.sid, "call_1"),
		"the default controller":   wire.AgentSubject(wire.AgentVerbPrompt, "tah", wire.AgentController),
		"every agent's discovery":  "$SRV.INFO." + wire.AgentsService,
		"an answer of the default": wire.AnswerSubject("s_00000000000000000000", "call_1"),
	} {
		if err := bob.PublishRequest(subj, bob.NewRespInbox(), []byte("yes")); err != nil {
			t.Fatal(err)
		}
		refused(what, subj)
	}
	if _, err := bob.Subscribe(wire.AgentSubject(wire.AgentVerbHeartbeat, wire.TenantAgentOwner("acme"), "*"), func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	refused("acme's heartbeats", wire.AgentSubject(wire.AgentVerbHeartbeat, wire.TenantAgentOwner("acme"), "*"))

	// A tenant removed: its controller goes (as its credentials do).
	if _, err := admin.RemoveTenant(ctx, "beta"); err != nil {
		t.Fatal(err)
	}
	status := wire.AgentSubject(wire.AgentVerbStatus, wire.TenantAgentOwner("beta"), wire.AgentController)
	bustest.Eventually(t, 30*time.Second, "beta's controller removed", func() bool {
		_, err := admin.Conn().Request(status, nil, time.Second)
		return errors.Is(err, nats.ErrNoResponders)
	})
}

// streamWhenIdle is stream, sent again while the session answers 409: the
// work of the input before (an approval's) may still hold it a moment
// after its stream ended.
func streamWhenIdle(t *testing.T, nc *nats.Conn, subj string, req []byte) []msg {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ms := stream(t, nc, subj, req)
		if status, _ := errorOf(ms); status != "409" || time.Now().After(deadline) {
			return ms
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// adminOf is a client of c's node with an admin credential.
func adminOf(ctx context.Context, t *testing.T, c *tahtest.Cluster) *client.Client {
	t.Helper()
	trust, err := auth.Load(c.Config(0).DataDir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "root.creds")
	if err := trust.EnsureCreds(path, wire.RoleAdmin, "root"); err != nil {
		t.Fatal(err)
	}
	cl, err := client.Connect(ctx, client.Options{URL: c.Node(0).Bus().ClientURL(), CredsFile: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// tenantCaller connects to c's node with a client credential of tenant
// named name, and returns refused, which waits for the server's
// permissions violation of what that connection just did on subj.
func tenantCaller(t *testing.T, c *tahtest.Cluster, tenant, name string) (*nats.Conn, func(what, subj string)) {
	t.Helper()
	trust, err := auth.Load(c.Config(0).DataDir)
	if err != nil {
		t.Fatal(err)
	}
	u, err := auth.TenantUser(tenant, wire.RoleClient, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".creds")
	if err := trust.EnsureUserCreds(path, u); err != nil {
		t.Fatal(err)
	}
	violations := make(chan error, 16)
	nc, err := nats.Connect(c.Node(0).Bus().ClientURL(), nats.UserCredentials(path), nats.CustomInboxPrefix(wire.CredentialInbox(name)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, func(what, subj string) {
		t.Helper()
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-violations:
			if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), subj) {
				t.Errorf("%s (%s): want its permissions violation, got %v", what, subj, err)
			}
		case <-time.After(30 * time.Second): // a deadline, not a measure: the server reports at once
			t.Errorf("%s (%s): no permissions violation", what, subj)
		}
	}
}
