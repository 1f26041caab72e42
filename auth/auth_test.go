package auth_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tah-dev/tah/auth"
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
