package inspector_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/client"
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
	info, err := localnode.ReadNodeInfo(n.dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Connect(ctx, client.Options{URL: info.URL, CredsFile: localnode.AdminCredsPath(n.dir), Name: "inspector test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
