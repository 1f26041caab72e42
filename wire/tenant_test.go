package wire_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tah-dev/tah/wire"
)

func TestTenantAPISubjects(t *testing.T) {
	subj := wire.TenantAPISubject("acme", "alice", wire.EndpointGet)
	if subj != "tah.tapi.acme.alice.get" {
		t.Fatalf("TenantAPISubject: %q", subj)
	}
	if tenant, cred, ep, ok := wire.TenantOfAPISubject(subj); !ok || tenant != "acme" || cred != "alice" || ep != wire.EndpointGet {
		t.Fatalf("TenantOfAPISubject(%q) = %q %q %q %v", subj, tenant, cred, ep, ok)
	}
	for _, bad := range []string{"tah.api.get", "tah.tapi.acme.get", "tah.tapi.Acme.alice.get", "tah.tapi.acme.a b.get", "tah.tapi.acme.alice."} {
		if _, _, _, ok := wire.TenantOfAPISubject(bad); ok {
			t.Errorf("TenantOfAPISubject(%q) is a tenant's API subject", bad)
		}
	}
	if got := wire.TenantAPIEndpointSubject(wire.EndpointList); got != "tah.tapi.*.*.list" {
		t.Errorf("TenantAPIEndpointSubject: %q", got)
	}
	for _, own := range []string{wire.EndpointStatus} {
		if slices.Contains(wire.TenantEndpoints(), own) {
			t.Errorf("a tenant's API serves the node's own %s", own)
		}
	}
}

func TestLiveSubjects(t *testing.T) {
	if got := wire.LiveSubject("acme.s_1"); got != "tah.live.acme.s_1" {
		t.Errorf("LiveSubject: %q", got)
	}
	if got := wire.LiveSubject("s_1"); got != "" {
		t.Errorf("a default tenant's session has a live feed: %q", got)
	}
	// The source matches a tenant's shard subject, one token longer than
	// a default tenant's, which it does not.
	src := strings.Split(wire.LiveRePublishSource(3), ".")
	for subj, want := range map[string]bool{wire.ShardSubject(3, "acme.s_1"): true, wire.ShardSubject(3, "s_1"): false, wire.ShardSubject(4, "acme.s_1"): false} {
		toks := strings.Split(subj, ".")
		match := len(toks) == len(src)
		for i := 0; match && i < len(src); i++ {
			match = src[i] == "*" || src[i] == toks[i]
		}
		if match != want {
			t.Errorf("%s matches %s: %v, want %v", wire.LiveRePublishSource(3), subj, match, want)
		}
	}
}

func TestTenantRolePermissions(t *testing.T) {
	p, err := wire.TenantRolePermissions("acme", wire.RoleClient, "alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tah.tapi.acme.alice.*", "tah.sess.acme.*.in.alice"} {
		if !slices.Contains(p.PublishAllow, want) {
			t.Errorf("a tenant's client may not publish %s: %v", want, p.PublishAllow)
		}
	}
	for _, want := range []string{"_INBOX_alice.>", "tah.sess.acme.*.delta", "tah.sess.acme.*.err", "tah.live.acme.*"} {
		if !slices.Contains(p.SubscribeAllow, want) {
			t.Errorf("a tenant's client may not subscribe %s: %v", want, p.SubscribeAllow)
		}
	}
	for _, subj := range append(p.PublishAllow, p.SubscribeAllow...) {
		own := strings.HasPrefix(subj, "_INBOX_alice.") || strings.HasPrefix(subj, "agents.prompt.tah.tenant-acme.") || strings.HasPrefix(subj, "agents.status.tah.tenant-acme.")
		if strings.HasPrefix(subj, "$JS") || strings.Contains(subj, ">") && !own {
			t.Errorf("a tenant's client reaches %s", subj)
		}
	}
	for _, want := range []string{"agents.prompt.tah.tenant-acme.>", "agents.status.tah.tenant-acme.>", "tah.sess.acme.*.answer.*"} {
		if !slices.Contains(p.PublishAllow, want) {
			t.Errorf("a tenant's client may not publish %s (its agents)", want)
		}
	}
	if !slices.Contains(p.SubscribeAllow, "agents.hb.tah.tenant-acme.*") {
		t.Errorf("a tenant's client hears not its agents' heartbeats: %v", p.SubscribeAllow)
	}
	o, err := wire.TenantRolePermissions("acme", wire.RoleObserver, "olga", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range o.PublishAllow {
		if strings.HasSuffix(subj, "."+wire.EndpointCreate) || strings.Contains(subj, ".in.") || strings.HasSuffix(subj, ".*") ||
			strings.HasPrefix(subj, "agents.prompt.") || strings.Contains(subj, ".answer.") {
			t.Errorf("a tenant's observer may publish %s", subj)
		}
	}
	if _, err := wire.TenantRolePermissions("Acme", wire.RoleClient, "alice", nil); !errors.Is(err, wire.ErrBadTenant) {
		t.Errorf("tenant Acme: %v", err)
	}
	for _, role := range []wire.Role{wire.RoleAdmin, wire.RoleNode, wire.RoleAgents} {
		if _, err := wire.TenantRolePermissions("acme", role, "x", nil); !errors.Is(err, wire.ErrUnknownRole) {
			t.Errorf("role %s of a tenant: %v", role, err)
		}
	}
	for _, c := range []struct {
		role  wire.Role
		tools []string
	}{{wire.RoleTool, nil}, {wire.RoleTool, []string{"fs__*"}}, {wire.RoleTool, []string{"cancel"}}, {wire.RoleTool, []string{"a.b"}}, {wire.RoleClient, []string{"shout"}}} {
		if _, err := wire.TenantRolePermissions("acme", c.role, "x", c.tools); !errors.Is(err, wire.ErrBadToolNames) {
			t.Errorf("a tenant's %s with tools %q: %v", c.role, c.tools, err)
		}
	}
}

// A tenant's agents are owned by tenant-<tenant>, which no deployment's
// owner may be; their answers are on the tenant's sessions' subjects.
func TestTenantAgents(t *testing.T) {
	for _, c := range []struct{ owner, sid, wantOwner, wantName string }{
		{"tah", "s_1", "tah", "s_1"},
		{"tah", "acme.s_1", "tenant-acme", "s_1"},
		{"acme", "acme.s_1", "tenant-acme", "s_1"},
	} {
		if o, n := wire.AgentOf(c.owner, c.sid); o != c.wantOwner || n != c.wantName {
			t.Errorf("AgentOf(%q, %q) = %q, %q", c.owner, c.sid, o, n)
		}
	}
	for _, bad := range []string{"tenant-acme", "tenant-", "a.b", ""} {
		if err := wire.ValidAgentOwner(bad); !errors.Is(err, wire.ErrBadAgentOwner) {
			t.Errorf("owner %q: %v", bad, err)
		}
	}
	if err := wire.ValidAgentOwner("tah"); err != nil {
		t.Error(err)
	}
	for subj, want := range map[string]string{
		"tah.sess.s_1.answer.call_1":      "s_1",
		"tah.sess.acme.s_1.answer.call_1": "acme.s_1",
		"tah.sess.Acme.s_1.answer.call_1": "",
		"tah.sess.a.b.c.answer.call_1":    "",
		"tah.sess.s_1.in.call_1":          "",
	} {
		sid, call, ok := wire.AnswerCall(subj)
		if sid != want || ok != (want != "") || ok && call != "call_1" {
			t.Errorf("AnswerCall(%q) = %q %q %v", subj, sid, call, ok)
		}
	}
	if got := wire.AnswerSubject("acme.s_1", "call_1"); got != "tah.sess.acme.s_1.answer.call_1" {
		t.Errorf("AnswerSubject: %q", got)
	}
}

// A tenant's tool credential serves, describes and stores the calls of its
// tenant's tools named, and nothing of another tenant's or of every
// tenant's tools; it has no JetStream API but the direct gets of its own
// ledger keys (a stream's info would list every key).
func TestTenantToolPermissions(t *testing.T) {
	p, err := wire.TenantRolePermissions("acme", wire.RoleTool, "shouter", []string{"shout"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tah.ttool.acme.shout", "tah.ttool.acme.cancel.*", "$SRV.*.tah-ttool-acme__shout", "$SRV.INFO", "_INBOX_shouter.>"} {
		if !slices.Contains(p.SubscribeAllow, want) {
			t.Errorf("a tenant's tool may not subscribe %s: %v", want, p.SubscribeAllow)
		}
	}
	for _, want := range []string{"$KV.tah_tool_results.t=acme.shout.>", "$JS.API.DIRECT.GET.KV_tah_tool_results.$KV.tah_tool_results.t=acme.shout.>"} {
		if !slices.Contains(p.PublishAllow, want) {
			t.Errorf("a tenant's tool may not publish %s: %v", want, p.PublishAllow)
		}
	}
	for _, subj := range append(p.PublishAllow, p.SubscribeAllow...) {
		if strings.HasPrefix(subj, "$JS.API.") && !strings.HasPrefix(subj, "$JS.API.DIRECT.GET.KV_tah_tool_results.$KV.tah_tool_results.t=acme.") ||
			strings.HasPrefix(subj, "tah.tool.") || strings.Contains(subj, "beta") {
			t.Errorf("a tenant's tool reaches %s", subj)
		}
	}
	if !p.AllowResponses {
		t.Error("a tenant's tool cannot answer its calls")
	}
	if tenant, name, ok := wire.TenantToolOfService(wire.TenantToolService("acme-2", "fs__read")); !ok || tenant != "acme-2" || name != "fs__read" {
		t.Errorf("TenantToolOfService: %q %q %v", tenant, name, ok)
	}
	for _, svc := range []string{"tah-tool-shout", "tah-ttool-acme", "tah-ttool-Acme__shout", "tah-ttool-acme__a.b", "tah-ttool-acme__cancel", "tah-ttool-__shout"} {
		if _, _, ok := wire.TenantToolOfService(svc); ok {
			t.Errorf("%s is taken for a tenant's tool's service", svc)
		}
	}
	if k := wire.CallResultKey(wire.TenantToolService("acme", "shout"), "shout", "acme.s_1", "call_1"); k != "t=acme.shout.=YWNtZS5zXzE.call_1" {
		t.Errorf("a tenant's tool's call is stored at %s", k)
	}
}
