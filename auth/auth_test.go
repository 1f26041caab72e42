package auth_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/wire"
)

func TestEnsureGeneratesOnceWithPrivateModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first, err := auth.Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{auth.NodeCredsPath(dir), auth.AdminCredsPath(dir), filepath.Join(dir, auth.TrustDir, "operator.nk")} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", p, fi, err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, auth.TrustDir)); fi.Mode().Perm() != 0o700 {
		t.Fatalf("trust dir mode %v", fi.Mode().Perm())
	}
	again, err := auth.Ensure(dir)
	if err != nil || again.Account() != first.Account() || again.OperatorKey() != first.OperatorKey() {
		t.Fatalf("a second start made new material: %v", err)
	}
}

func TestEnsureConcurrentStartsAgree(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	accounts := make([]string, 4)
	for i := range accounts {
		wg.Go(func() {
			tr, err := auth.Ensure(dir)
			if err != nil {
				t.Error(err)
				return
			}
			accounts[i] = tr.Account()
		})
	}
	wg.Wait()
	for _, a := range accounts {
		if a != accounts[0] {
			t.Fatalf("two materials: %v", accounts)
		}
	}
}

func TestMissingPartIsRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := auth.Ensure(dir); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, auth.TrustDir, "tah-signing.nk"))
	if _, err := auth.Ensure(dir); !errors.Is(err, auth.ErrNoTrust) {
		t.Fatalf("want ErrNoTrust, got %v", err)
	}
	os.WriteFile(filepath.Join(dir, auth.TrustDir, "tah-signing.nk"), []byte("SUAnotaseed"), 0o600)
	if _, err := auth.Load(dir); !errors.Is(err, auth.ErrBadTrust) {
		t.Fatalf("want ErrBadTrust, got %v", err)
	}
}

// TestEnsureCredsReissuesOutdated: a credential of the data directory that
// an older build issued with its role's older permissions is issued again
// with this build's at the next start; a current one, or a file that is not
// this trust's, is left as it is.
func TestEnsureCredsReissuesOutdated(t *testing.T) {
	dir := t.TempDir()
	trust, err := auth.Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := auth.AdminCredsPath(dir)
	current, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := trust.EnsureCreds(path, wire.RoleAdmin, string(wire.RoleAdmin)); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(path); string(again) != string(current) {
		t.Fatal("a current credential was issued again")
	}
	// As an older build issued it: fewer subjects allowed.
	old, err := auth.RoleUser(wire.RoleAdmin, string(wire.RoleAdmin), nil)
	if err != nil {
		t.Fatal(err)
	}
	old.Permissions.Pub.Allow = old.Permissions.Pub.Allow[:1]
	issued, err := trust.Issue(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, issued.Creds, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := trust.EnsureCreds(path, wire.RoleAdmin, string(wire.RoleAdmin)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	token, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := auth.RoleUser(wire.RoleAdmin, string(wire.RoleAdmin), nil)
	if len(uc.Permissions.Pub.Allow) != len(want.Permissions.Pub.Allow) {
		t.Fatalf("the outdated credential was kept: %d subjects allowed, want %d", len(uc.Permissions.Pub.Allow), len(want.Permissions.Pub.Allow))
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	// Not a credential of this trust: kept.
	if err := os.WriteFile(path, []byte("not a credential"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := trust.EnsureCreds(path, wire.RoleAdmin, string(wire.RoleAdmin)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "not a credential" {
		t.Fatal("a file that is not this trust's credential was replaced")
	}
}
