package node

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/remote"
	"github.com/tah-dev/tah/tools/toolservice"
	"github.com/tah-dev/tah/wire"
)

// TestTenantTools: a tool credential of tenant acme serves acme's tool
// "shout" to acme's sessions alone. acme's session calls it; beta's and the
// default tenant's are not offered it, and their model's call of it (or of
// its key in the node's registry) is an unknown tool; beta's own "shout"
// serves beta's sessions and never acme's. beta's tool credential cannot
// serve, describe, cancel, store or read acme's tool's calls: the server
// refuses each, and it has no JetStream API to list the stored calls.
func TestTenantTools(t *testing.T) {
	t.Parallel()
	quiet := slog.New(slog.DiscardHandler)
	yes, no := true, false
	after := mock.Say("done").Always()
	after.AfterTool = &yes
	call := mock.CallTool("shout", `{"text":"hi"}`).Always()
	call.AfterTool = &no
	h := startTenants(t, Options{Provider: mock.Scripted(after, call),
		RemoteTools: &remote.Config{DiscoveryQuiet: 50 * time.Millisecond, Logger: quiet}})
	ctx, n := h.ctx, h.n

	// Each tenant's "shout" says whose it is.
	serve := func(tenant string) {
		creds := h.issueTenantTool(tenant, "shouter-"+tenant, "shout")
		nc, err := nats.Connect(n.bus.ClientURL(), nats.UserCredentials(creds), nats.CustomInboxPrefix(wire.CredentialInbox("shouter-"+tenant)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		shout := tools.Func(tools.Spec{Name: "shout", Description: tenant + "'s shout"}, func(_ context.Context, in json.RawMessage) (tools.Result, error) {
			return tools.Text(tenant + ":" + strings.ToUpper(string(in))), nil
		})
		svc, err := toolservice.Start(ctx, nc, toolservice.Config{Logger: quiet, Tenant: tenant}, shout)
		if err != nil {
			t.Fatalf("%s's tool service: %v", tenant, err)
		}
		t.Cleanup(func() { _ = svc.Close(context.Background()) })
	}
	serve("acme")
	bustest.Eventually(t, 30*time.Second, "acme's shout discovered", func() bool {
		_ = n.remote.Refresh(ctx)
		_, ok := n.remote.Tenant("acme").Tool("shout")
		return ok
	})
	if _, ok := n.tools.Tool("shout"); ok {
		t.Fatal("acme's tool is every tenant's")
	}
	if _, ok := n.remote.Tool("acme/shout"); ok {
		t.Fatal("acme's tool is reached by its key in the registry")
	}

	acme, sid := h.acmeSession()
	if out := tenantToolOutput(t, h, acme, sid); out != `acme:{"TEXT":"HI"}` {
		t.Errorf("acme's session's shout: %q", out)
	}
	r, callID := runnerOf(t, h, sid)
	if r != wire.RemoteRunner(wire.TenantToolService("acme", "shout")) {
		t.Errorf("acme's call ran on %q", r)
	}
	// Its service stored it under acme's key, without the JetStream API its
	// credential lacks, where a node that takes the session over finds it.
	stored, err := n.remote.Lookup(ctx, sid, callID)
	if err != nil || stored.State != wire.CallDone || stored.Result == nil || stored.Result.Output != `acme:{"TEXT":"HI"}` {
		t.Errorf("acme's stored call: %+v %v", stored, err)
	}

	// The tools each one is offered, as tahctl tools lists them.
	bob := h.client(h.issueTenant("beta", wire.RoleClient, "bob"))
	admin := h.client(h.issue(wire.RoleAdmin, "root"))
	for _, c := range []struct {
		who   string
		list  func() (wire.ToolsReply, error)
		shout bool
	}{
		{"acme's client", func() (wire.ToolsReply, error) { return acme.Tools(ctx) }, true},
		{"an admin, of acme", func() (wire.ToolsReply, error) { return admin.ToolsOf(ctx, "acme") }, true},
		{"beta's client", func() (wire.ToolsReply, error) { return bob.Tools(ctx) }, false},
		{"an admin", func() (wire.ToolsReply, error) { return admin.Tools(ctx) }, false},
	} {
		r, err := c.list()
		if err != nil {
			t.Fatalf("%s lists the tools: %v", c.who, err)
		}
		has := slices.ContainsFunc(r.Tools, func(s llm.ToolSchema) bool { return s.Name == "shout" })
		if has != c.shout {
			t.Errorf("%s is offered acme's shout: %v, want %v (%+v)", c.who, has, c.shout, r.Tools)
		}
	}

	// beta's session, before and after beta serves its own shout; and the
	// default tenant's.
	created, err := bob.Create(ctx, wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if out := tenantToolOutput(t, h, bob, created.Session); !strings.HasPrefix(out, "["+event.CodeUnknownTool+"]") {
		t.Errorf("beta's session called acme's tool: %q", out)
	}
	def, err := admin.Create(ctx, wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if out := tenantToolOutput(t, h, admin, def.Session); !strings.HasPrefix(out, "["+event.CodeUnknownTool+"]") {
		t.Errorf("a default tenant's session called acme's tool: %q", out)
	}
	serve("beta")
	bustest.Eventually(t, 30*time.Second, "beta's shout discovered", func() bool {
		_ = n.remote.Refresh(ctx)
		_, ok := n.remote.Tenant("beta").Tool("shout")
		return ok
	})
	if out := tenantToolOutput(t, h, bob, created.Session); out != `beta:{"TEXT":"HI"}` {
		t.Errorf("beta's session's shout: %q", out)
	}
	if out := tenantToolOutput(t, h, acme, sid); out != `acme:{"TEXT":"HI"}` {
		t.Errorf("acme's session's shout, beside beta's: %q", out)
	}

	// beta's tool credential against acme's tool.
	creds := h.issueTenantTool("beta", "mallory", "shout")
	// Started as acme's by mistake: refused at once, saying what to do (not
	// left waiting for the bind's answer, which NATS never lets come).
	wrong, err := nats.Connect(n.bus.ClientURL(), nats.UserCredentials(creds), nats.CustomInboxPrefix(wire.CredentialInbox("mallory")))
	if err != nil {
		t.Fatal(err)
	}
	shout := tools.Func(tools.Spec{Name: "shout", Description: "shout"}, func(context.Context, json.RawMessage) (tools.Result, error) { return tools.Text(""), nil })
	if _, err := toolservice.Start(ctx, wrong, toolservice.Config{Logger: quiet, Tenant: "acme"}, shout); err == nil ||
		!strings.Contains(err.Error(), "tool credential of tenant acme") || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("beta's tool credential serving acme's shout: %v", err)
	}
	wrong.Close()
	a := h.attacker(creds, "mallory")
	for what, subj := range map[string]string{
		"acme's tool's calls":        wire.TenantToolSubject("acme", "shout"),
		"acme's tools' calls":        wire.TenantToolPrefix + "acme.>",
		"acme's cancels":             wire.TenantToolCancelPrefix("acme") + "*",
		"acme's tool's discovery":    "$SRV.INFO." + wire.TenantToolService("acme", "shout"),
		"every tenant's tool":        wire.ToolSubject("shout"),
		"every tenant's cancels":     wire.ToolCancelSubjects,
		"every tenant's tool's info": "$SRV.INFO." + wire.ToolServicePrefix + "shout",
		"the stored calls":           "$KV." + wire.ToolResultBucket + ".>",
	} {
		if _, err := a.nc.Subscribe(subj, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		h.refused(a, "beta's tool subscribes to "+what)
	}
	key := wire.TenantResultKey("acme", "shout", sid, "call_1")
	for what, subj := range map[string]string{
		"storing acme's call":         "$KV." + wire.ToolResultBucket + "." + key,
		"reading acme's call":         "$JS.API.DIRECT.GET." + wire.ToolResultStream + ".$KV." + wire.ToolResultBucket + "." + key,
		"reading a call by sequence":  "$JS.API.DIRECT.GET." + wire.ToolResultStream,
		"listing the stored calls":    "$JS.API.STREAM.INFO." + wire.ToolResultStream,
		"the JetStream API":           "$JS.API.INFO",
		"cancelling acme's call":      wire.TenantToolCancelSubject("acme", "call_1"),
		"calling acme's tool":         wire.TenantToolSubject("acme", "shout"),
		"an input to acme's session":  wire.InputSubject(sid, "mallory"),
		"acme's API":                  wire.TenantAPISubject("acme", "mallory", wire.EndpointGet),
		"storing every tenant's call": "$KV." + wire.ToolResultBucket + "." + wire.ResultKey("shout", sid, "call_1"),
	} {
		_ = a.nc.Publish(subj, []byte(`{"seq":1}`))
		h.refused(a, "beta's tool publishes "+what)
	}
	// And acme's tool still serves acme.
	if out := tenantToolOutput(t, h, acme, sid); out != `acme:{"TEXT":"HI"}` {
		t.Errorf("acme's session's shout, after the attacks: %q", out)
	}
}

// startTenants starts a node with opts (its bus and logger filled in) and
// its API, for tests of tenants with the hostile-client suite's helpers.
func startTenants(t *testing.T, opts Options) *hostile {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	opts.Bus = bus.Default()
	opts.Bus.DataDir, opts.Bus.Port, opts.Bus.Partitions = dir, -1, 2
	opts.Logger = slog.New(slog.DiscardHandler)
	n, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	if err := n.StartAPI(ctx); err != nil {
		t.Fatal(err)
	}
	return &hostile{t: t, n: n, dir: dir, ctx: ctx}
}

// issueTenantTool writes a tool credential of tenant named name serving
// tools, issued through the credentials API as tahctl creds add --tenant T
// --role tool --tool NAME does, and returns its path.
func (h *hostile) issueTenantTool(tenant, name string, tools ...string) string {
	h.t.Helper()
	admin := h.client(h.issue(wire.RoleAdmin, "root-"+name))
	if _, err := admin.AddTenant(h.ctx, tenant); err != nil && !errors.Is(err, client.ErrConflict) {
		h.t.Fatal(err)
	}
	creds, c, err := admin.IssueTenantCreds(h.ctx, tenant, name, wire.RoleTool, tools...)
	if err != nil {
		h.t.Fatal(err)
	}
	if c.Tenant != tenant || c.Role != wire.RoleTool {
		h.t.Fatalf("issued %+v", c)
	}
	path := filepath.Join(h.t.TempDir(), name+".creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		h.t.Fatal(err)
	}
	return path
}

// tenantToolOutput runs a turn of session sid with c (the model calls shout,
// then says done) and returns the output of the turn's tool call, with its
// code when it failed.
func tenantToolOutput(t *testing.T, h *hostile, c *client.Client, sid string) string {
	t.Helper()
	h.run(c, sid)
	evs, _, err := h.n.bus.Replay(h.ctx, sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	out := ""
	for _, e := range evs {
		if e.Type == event.ToolFinished {
			var d event.ToolFinishedData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			out = d.Output
			if d.Code != "" {
				out = "[" + d.Code + "] " + out
			}
		}
	}
	return out
}

// runnerOf is the runner and the id of session sid's last tool call.
func runnerOf(t *testing.T, h *hostile, sid string) (runner, callID string) {
	t.Helper()
	evs, _, err := h.n.bus.Replay(h.ctx, sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == event.ToolStarted {
			var d event.ToolStartedData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			runner, callID = d.Runner, d.Call.ID
		}
	}
	return runner, callID
}
