package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/wire"
)

// adminElsewhere is the node's admin credential copied into a directory of
// its own, without trust material: an admin on another machine.
func (h *hostile) adminElsewhere() *client.Client {
	h.t.Helper()
	b, err := os.ReadFile(auth.AdminCredsPath(h.dir))
	if err != nil {
		h.t.Fatal(err)
	}
	path := filepath.Join(h.t.TempDir(), "admin.creds")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		h.t.Fatal(err)
	}
	return h.client(path)
}

// writeCreds writes a .creds file and returns its path.
func (h *hostile) writeCreds(name string, b []byte) string {
	h.t.Helper()
	path := filepath.Join(h.t.TempDir(), name+".creds")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		h.t.Fatal(err)
	}
	return path
}

// wiretap records every request to the credentials API, as the node's
// connection (which may subscribe to everything) sees it.
func (h *hostile) wiretap() func() [][]byte {
	var mu sync.Mutex
	var bodies [][]byte
	sub, err := h.n.bus.Conn().Subscribe(wire.CredsAPIPrefix+">", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, m.Data)
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := h.n.bus.Conn().Flush(); err != nil {
		h.t.Fatal(err)
	}
	return func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		return bodies
	}
}

// TestCredsFromAnotherMachine: an admin with no trust material issues a
// client credential through the API, whose seed never travels; the
// credential runs a turn, is listed, and is refused once revoked through
// the API, without a restart.
func TestCredsFromAnotherMachine(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	admin := h.adminElsewhere()
	tapped := h.wiretap()
	creds, c, err := admin.IssueCreds(h.ctx, "bob", wire.RoleClient, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "bob" || c.Role != wire.RoleClient || !nkeys.IsValidPublicUserKey(c.PublicKey) {
		t.Fatalf("issued %+v", c)
	}
	seed, err := nkeys.ParseDecoratedNKey(creds)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := seed.Seed()
	if pub, _ := seed.PublicKey(); pub != c.PublicKey {
		t.Fatalf("the .creds file's key %s is not the credential's %s", pub, c.PublicKey)
	}
	bodies := tapped()
	if len(bodies) != 1 || !bytes.Contains(bodies[0], []byte(c.PublicKey)) || bytes.Contains(bodies[0], raw) {
		t.Fatalf("the request on the wire: %q", bodies)
	}

	bob := h.client(h.writeCreds("bob", creds))
	s, err := bob.Create(h.ctx, wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	h.run(bob, s.Session)

	list, err := admin.ListCreds(h.ctx)
	if err != nil || len(list) != 1 || list[0].Name != "bob" || list[0].Revoked {
		t.Fatalf("ls: %+v %v", list, err)
	}
	revoked, err := admin.RevokeCreds(h.ctx, wire.CredsRevokeRequest{Name: "bob"})
	if err != nil || len(revoked) != 1 || revoked[0].PublicKey != c.PublicKey {
		t.Fatalf("revoke: %+v %v", revoked, err)
	}
	if _, err := client.Connect(h.ctx, client.Options{URL: h.n.bus.ClientURL(), CredsFile: h.writeCreds("bob2", creds)}); !errors.Is(err, client.ErrAuth) {
		t.Fatalf("a revoked credential connects: %v", err)
	}
	if list, err := admin.ListCreds(h.ctx); err != nil || len(list) != 1 || !list[0].Revoked {
		t.Fatalf("ls after the revocation: %+v %v", list, err)
	}
	if _, err := admin.RevokeCreds(h.ctx, wire.CredsRevokeRequest{Name: "bob"}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a second revocation: %v", err)
	}
}

// TestCredsAPIOnlyForAdmins: a client, an observer and a tool credential
// can neither call the credentials API nor read its registry.
func TestCredsAPIOnlyForAdmins(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	for _, who := range []struct {
		role  wire.Role
		tools []string
	}{{wire.RoleClient, nil}, {wire.RoleObserver, nil}, {wire.RoleTool, []string{"shout"}}} {
		name := "m" + string(who.role)
		a := h.attacker(h.issue(who.role, name, who.tools...), name)
		for _, endpoint := range []string{wire.EndpointCredsAdd, wire.EndpointCredsList, wire.EndpointCredsRevoke} {
			_ = a.nc.Publish(wire.APISubject(endpoint), []byte(`{}`))
			h.refused(a, string(who.role)+" on "+endpoint)
		}
		for what, subj := range map[string]string{
			"a read of the registry":  "$JS.API.DIRECT.GET.KV_" + wire.CredsBucket,
			"a key of the registry":   "$JS.API.DIRECT.GET.KV_" + wire.CredsBucket + ".$KV." + wire.CredsBucket + "." + wire.CredsAccountKey,
			"a write in the registry": "$KV." + wire.CredsBucket + "." + wire.CredsAccountKey,
			"a consumer of it":        "$JS.API.CONSUMER.CREATE.KV_" + wire.CredsBucket + ".x.$KV." + wire.CredsBucket + ".>",
		} {
			_ = a.nc.Publish(subj, []byte(`{}`))
			h.refused(a, string(who.role)+": "+what)
		}
	}
}

// TestCredsAPIBadInput: an admin's invalid requests get a clear error with
// its code, and nothing is registered.
func TestCredsAPIBadInput(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	admin := h.adminElsewhere()
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	account, _ := nkeys.CreateAccount()
	accountPub, _ := account.PublicKey()
	for _, c := range []struct {
		what, endpoint string
		req            any
		code, says     string
	}{
		{"not JSON", wire.EndpointCredsAdd, "{", wire.APIErrBadRequest, "not the JSON object"},
		{"no public key", wire.EndpointCredsAdd, wire.CredsAddRequest{Name: "x", Role: wire.RoleClient}, wire.APIErrBadRequest, "public_key"},
		{"an account's key", wire.EndpointCredsAdd, wire.CredsAddRequest{Name: "x", Role: wire.RoleClient, PublicKey: accountPub}, wire.APIErrBadRequest, "not a user's public key"},
		{"unknown role", wire.EndpointCredsAdd, wire.CredsAddRequest{Name: "x", Role: "root", PublicKey: pub}, wire.APIErrBadRequest, "unknown role"},
		{"the node role", wire.EndpointCredsAdd, wire.CredsAddRequest{Name: "x", Role: wire.RoleNode, PublicKey: pub}, wire.APIErrBadRequest, "node role is not issued"},
		{"bad name", wire.EndpointCredsAdd, wire.CredsAddRequest{Name: "a.b", Role: wire.RoleClient, PublicKey: pub}, wire.APIErrBadRequest, "invalid credential name"},
		{"tool without tools", wire.EndpointCredsAdd, wire.CredsAddRequest{Name: "x", Role: wire.RoleTool, PublicKey: pub}, wire.APIErrBadRequest, "needs the names of the tools"},
		{"tools for a client", wire.EndpointCredsAdd, wire.CredsAddRequest{Name: "x", Role: wire.RoleClient, Tools: []string{"t"}, PublicKey: pub}, wire.APIErrBadRequest, "only a tool credential"},
		{"revoke nothing named", wire.EndpointCredsRevoke, wire.CredsRevokeRequest{}, wire.APIErrBadRequest, "give the name"},
		{"revoke both", wire.EndpointCredsRevoke, wire.CredsRevokeRequest{Name: "x", PublicKey: pub}, wire.APIErrBadRequest, "give the name"},
		{"revoke unknown", wire.EndpointCredsRevoke, wire.CredsRevokeRequest{Name: "nobody"}, wire.APIErrNotFound, "no valid credential"},
		{"a tenant's tool of a namespace", wire.EndpointCredsAdd, wire.CredsAddRequest{Name: "x", Role: wire.RoleTool, Tenant: "acme", Tools: []string{"fs__*"}, PublicKey: pub}, wire.APIErrBadRequest, "names its tools one by one"},
		{"a tenant's tool without tools", wire.EndpointCredsAdd, wire.CredsAddRequest{Name: "x", Role: wire.RoleTool, Tenant: "acme", PublicKey: pub}, wire.APIErrBadRequest, "needs the names of the tools"},
		{"a tenant's admin", wire.EndpointCredsAdd, wire.CredsAddRequest{Name: "x", Role: wire.RoleAdmin, Tenant: "acme", PublicKey: pub}, wire.APIErrBadRequest, "client, an observer or a tool"},
		{"a tenant not added", wire.EndpointCredsAdd, wire.CredsAddRequest{Name: "x", Role: wire.RoleClient, Tenant: "ghost", PublicKey: pub}, wire.APIErrNotFound, "tahctl tenant add ghost"},
		{"a bad tenant name", wire.EndpointTenantsAdd, wire.TenantRequest{Name: "Acme"}, wire.APIErrBadRequest, "lower-case"},
		{"remove a tenant not added", wire.EndpointTenantsRemove, wire.TenantRequest{Name: "ghost"}, wire.APIErrNotFound, "no tenant ghost"},
	} {
		body, ok := c.req.(string)
		if !ok {
			b, _ := json.Marshal(c.req)
			body = string(b)
		}
		m, err := admin.Conn().RequestWithContext(h.ctx, wire.APISubject(c.endpoint), []byte(body))
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if code, says := m.Header.Get(wire.HeaderServiceErrorCode), m.Header.Get(wire.HeaderServiceError); code != c.code || !strings.Contains(says, c.says) {
			t.Errorf("%s: %s %q, want %s %q", c.what, code, says, c.code, c.says)
		}
	}
	// A public key registered already.
	req, _ := json.Marshal(wire.CredsAddRequest{Name: "x", Role: wire.RoleClient, PublicKey: pub})
	for i, want := range []string{"", wire.APIErrConflict} {
		m, err := admin.Conn().RequestWithContext(h.ctx, wire.APISubject(wire.EndpointCredsAdd), req)
		if err != nil || m.Header.Get(wire.HeaderServiceErrorCode) != want {
			t.Fatalf("add #%d of one key: %v %v", i+1, m.Header, err)
		}
	}
	if list, err := admin.ListCreds(h.ctx); err != nil || len(list) != 1 {
		t.Fatalf("registered: %+v %v", list, err)
	}
}

// TestCredsIssuedWhileNoNodeRan: the credentials issued and revoked from the
// data directory while no node ran are registered, and stay revoked, when
// the node starts.
func TestCredsIssuedWhileNoNodeRan(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	trust, err := auth.Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	var creds []wire.Credential
	for _, name := range []string{"early", "gone"} {
		u, err := auth.RoleUser(wire.RoleClient, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		issued, err := trust.Issue(u)
		if err != nil {
			t.Fatal(err)
		}
		c := wire.Credential{Name: name, Role: wire.RoleClient, PublicKey: issued.PublicKey, Issued: issued.IssuedAt}
		if err := trust.Record(c); err != nil {
			t.Fatal(err)
		}
		creds = append(creds, c)
	}
	if _, err := trust.Revoke(ctx, []string{creds[1].PublicKey}); err != nil {
		t.Fatal(err)
	}
	n := startWithAPI(ctx, t, dir)
	admin, err := client.Connect(ctx, client.Options{URL: n.bus.ClientURL(), CredsFile: auth.AdminCredsPath(dir)})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	list, err := admin.ListCreds(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "early" || list[0].Revoked || list[1].Name != "gone" || !list[1].Revoked {
		t.Fatalf("ls: %+v %v", list, err)
	}
}

// TestCredsStaleTrustAtStart: a node that starts with a data directory's
// account JWT older than its server's (restored from a backup, say) does
// not roll a revocation back: it merges them, and keeps the merge.
func TestCredsStaleTrustAtStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	n := startWithAPI(ctx, t, dir)
	stale, err := os.ReadFile(filepath.Join(dir, auth.TrustDir, "tah.jwt"))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.Connect(ctx, client.Options{URL: n.bus.ClientURL(), CredsFile: auth.AdminCredsPath(dir)})
	if err != nil {
		t.Fatal(err)
	}
	creds, c, err := admin.IssueCreds(ctx, "old", wire.RoleClient, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RevokeCreds(ctx, wire.CredsRevokeRequest{Name: "old"}); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, auth.TrustDir, "tah.jwt"), stale, 0o600); err != nil {
		t.Fatal(err)
	}
	n = startWithAPI(ctx, t, dir)
	path := filepath.Join(t.TempDir(), "old.creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Connect(ctx, client.Options{URL: n.bus.ClientURL(), CredsFile: path}); !errors.Is(err, client.ErrAuth) {
		t.Fatalf("a revoked credential connects after a start with a stale trust/tah.jwt: %v", err)
	}
	trust, err := auth.Load(dir)
	if err != nil || !auth.Revoked(trust.AccountJWT(), c.PublicKey, c.Issued) {
		t.Fatalf("the data directory's account JWT does not hold the revocation: %v", err)
	}
}
