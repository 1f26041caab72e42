package inspector_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/inspector"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/wire"
)

// TestTenantSessionPages: a tenant's session (acme.s_…, two tokens in its
// subjects, a dot in its id) is listed, searched for, shown and driven in
// the inspector as any other.
func TestTenantSessionPages(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := adminClient(ctx, t, n)
	created, err := c.Create(ctx, wire.CreateRequest{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	sid := created.Session
	b := newBrowser(t, n.base)
	if _, body := b.get("/?q=" + sid); !strings.Contains(body, "/s/"+sid) {
		t.Fatalf("searching %s does not find it:\n%s", sid, body)
	}
	b.post("/s/"+sid, "/s/"+sid+"/send", map[string][]string{"text": {example}})
	page := b.waitFor("/s/"+sid, `Turn 1 <span class="badge completed">`, time.Minute)
	if !strings.Contains(page, example) {
		t.Errorf("the tenant's session page lacks its input:\n%s", page)
	}
	if code, _ := b.get("/s/acme.s_00000000000000000000"); code != http.StatusNotFound {
		t.Errorf("an unknown session of a tenant: %d", code)
	}
}

// TestTenantInspector: an inspector given a tenant's credential (tahctl
// inspect --creds) lists, shows and drives that tenant's sessions only:
// another tenant's and the default tenant's are not found, and an action
// on one (a send, a cancel) is refused, NATS refusing the credential
// their subjects and the tenant's API confining its requests; the turn it
// ran names its credential.
func TestTenantInspector(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := adminClient(ctx, t, n)
	var others []string
	for _, tenant := range []string{"acme", "beta", ""} {
		if tenant != "" {
			if _, err := admin.AddTenant(ctx, tenant); err != nil {
				t.Fatal(err)
			}
		}
		created, err := admin.Create(ctx, wire.CreateRequest{Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, created.Session)
	}
	creds, _, err := admin.IssueTenantCreds(ctx, "acme", "alice", wire.RoleClient)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "alice.creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := client.Connect(ctx, client.Options{URL: admin.Conn().ConnectedUrl(), CredsFile: path, Name: "tenant inspector"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, err := inspector.New(inspector.Options{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	b := newBrowser(t, srv.URL)

	own, others := others[0], others[1:]
	_, list := b.get("/")
	if !strings.Contains(list, "/s/"+own) {
		t.Errorf("the tenant's inspector does not list its session %s:\n%s", own, list)
	}
	b.post("/s/"+own, "/s/"+own+"/send", url.Values{"text": {example}})
	page := b.waitFor("/s/"+own, `Turn 1 <span class="badge completed">`, time.Minute)
	if !strings.Contains(page, "from alice</span>") {
		t.Errorf("the turn does not name who ran it:\n%s", page)
	}
	for _, sid := range others {
		if strings.Contains(list, "/s/"+sid) {
			t.Errorf("the tenant's inspector lists %s", sid)
		}
		if code, _ := b.get("/s/" + sid); code != http.StatusNotFound {
			t.Errorf("another tenant's session %s: %d, want 404", sid, code)
		}
		if code, _ := b.get("/s/" + sid + "/events"); code != http.StatusNotFound {
			t.Errorf("another tenant's events %s: %d, want 404", sid, code)
		}
		for _, action := range []string{"send", "cancel", "compact"} {
			// Refused: the page it goes back to says why (NATS refused
			// the input's subject; the tenant's API finds no such session).
			code, body := b.post("/s/"+own, "/s/"+sid+"/"+action, url.Values{"text": {"x"}})
			if code < 400 && !strings.Contains(body, "permission+denied") && !strings.Contains(body, "not+found") {
				t.Errorf("%s on another tenant's session %s: %d %s", action, sid, code, body)
			}
		}
		st, err := admin.Get(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if st.Turn != 0 {
			t.Errorf("another tenant's session %s ran %d turn(s)", sid, st.Turn)
		}
	}
}

// adminClient connects to n with its admin credential, closed with the test.
func adminClient(ctx context.Context, t *testing.T, n *node) *client.Client {
	t.Helper()
	info, err := localnode.ReadNodeInfo(n.dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Connect(ctx, client.Options{URL: info.URL, CredsFile: localnode.AdminCredsPath(n.dir), Name: "inspector test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
