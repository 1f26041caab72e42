package auth_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/wire"
)

func TestMissingForNode(t *testing.T) {
	dir := t.TempDir()
	tr, err := auth.Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	if missing, err := auth.MissingForNode(auth.NodeCredsPath(dir), "n1"); err != nil || len(missing) != 0 {
		t.Fatalf("the node's own credential misses %v (%v)", missing, err)
	}
	missing, err := auth.MissingForNode(auth.AdminCredsPath(dir), "n1")
	if err != nil || !slices.Contains(missing, "publish tah.evt.0.s_00000000000000000000") || !slices.Contains(missing, "subscribe tah.api.create") {
		t.Fatalf("an admin's credential misses %v (%v)", missing, err)
	}
	// As an operator's nsc might make it: everything but the nodes'
	// subjects (the presence, and the claim notices to another node).
	issued, err := tr.Issue(auth.User{Name: "node", Permissions: jwt.Permissions{Pub: jwt.Permission{Deny: []string{"tah.nodes.>"}}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ext.creds")
	if err := os.WriteFile(path, issued.Creds, 0o600); err != nil {
		t.Fatal(err)
	}
	if missing, err := auth.MissingForNode(path, "n1"); err != nil || strings.Join(missing, ";") != "publish "+wire.NodeSubject("n1")+";publish "+wire.ClaimNoticeSubject("other") {
		t.Fatalf("missing %v (%v)", missing, err)
	}
	if _, err := auth.MissingForNode(filepath.Join(dir, "none.creds"), "n1"); err == nil {
		t.Fatal("a credential that is not there")
	}
}
