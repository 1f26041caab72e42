package auth_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/wire"
)

// exportsDisconnects reports whether the system account JWT exports every
// account's disconnect advisories to that account alone, and the TAH
// account's imports its own.
func exportsDisconnects(t *testing.T, tr *auth.Trust, accountJWT string) (export, imp bool) {
	t.Helper()
	sc, err := jwt.DecodeAccountClaims(tr.SystemJWT())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range sc.Exports {
		export = export || (e.IsStream() && string(e.Subject) == wire.DisconnectAdvisories && e.AccountTokenPosition == 3)
	}
	ac, err := jwt.DecodeAccountClaims(accountJWT)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ac.Imports {
		imp = imp || (i.IsStream() && i.Account == tr.SystemAccount() && string(i.Subject) == wire.DisconnectAdvisory(tr.Account()))
	}
	return export, imp
}

// New trust material lets the nodes read the servers' disconnect
// advisories of their account; material made before gets the export at the
// next Ensure and the import at the next Merge (a node's start does both),
// its revocations kept.
func TestDisconnectAdvisoriesAreImported(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	tr, err := auth.Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	if e, i := exportsDisconnects(t, tr, tr.AccountJWT()); !e || !i {
		t.Fatalf("new material: export %v, import %v", e, i)
	}

	// The material as an older TAH wrote it: no export, no import, one
	// revocation.
	trust := filepath.Join(dir, auth.TrustDir)
	seed, err := os.ReadFile(filepath.Join(trust, "operator.nk"))
	if err != nil {
		t.Fatal(err)
	}
	op, err := nkeys.FromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := jwt.DecodeAccountClaims(tr.SystemJWT())
	sc.Exports = nil
	ac, _ := jwt.DecodeAccountClaims(tr.AccountJWT())
	ac.Imports = nil
	u, _ := nkeys.CreateUser()
	revoked, _ := u.PublicKey()
	ac.Revocations = jwt.RevocationList{}
	ac.Revocations.Revoke(revoked, time.Now())
	for name, c := range map[string]jwt.Claims{"system.jwt": sc, "tah.jwt": ac} {
		token, err := c.Encode(op)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(trust, name), []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old, err := auth.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if e, i := exportsDisconnects(t, old, old.AccountJWT()); e || i {
		t.Fatalf("the old material was not rewritten: export %v, import %v", e, i)
	}

	up, err := auth.Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := up.Merge(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if e, i := exportsDisconnects(t, up, merged); !e || !i {
		t.Fatalf("upgraded material: export %v, import %v", e, i)
	}
	if mc, _ := jwt.DecodeAccountClaims(merged); mc.Revocations[revoked] == 0 {
		t.Fatalf("the revocation was lost: %v", mc.Revocations)
	}
	// Kept: the next load reads the upgraded material as it is.
	again, err := auth.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if e, i := exportsDisconnects(t, again, again.AccountJWT()); !e || !i {
		t.Fatalf("reloaded material: export %v, import %v", e, i)
	}
	if again.SystemJWT() != up.SystemJWT() || again.AccountJWT() != merged {
		t.Fatal("the upgraded JWTs were not kept in the trust directory")
	}
}
