package auth_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/wire"
)

// twoMembers are the trust materials of two nodes of a cluster, in
// <root>/one and <root>/two: the second a copy of the first.
func twoMembers(t *testing.T) (one, two *auth.Trust, root string) {
	t.Helper()
	root = t.TempDir()
	var err error
	one, err = auth.Ensure(filepath.Join(root, "one"))
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.CopyTrust(filepath.Join(root, "one"), filepath.Join(root, "two")); err != nil {
		t.Fatal(err)
	}
	if two, err = auth.Ensure(filepath.Join(root, "two")); err != nil {
		t.Fatal(err)
	}
	return one, two, root
}

func userKey(t *testing.T) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	return pub
}

func claims(t *testing.T, token string) *jwt.AccountClaims {
	t.Helper()
	ac, err := jwt.DecodeAccountClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	return ac
}

// TestRevokeMergesTheOthers: a member revoking with its own, older account
// JWT alone would drop the other member's revocation in a newer JWT (what
// servers keep); merged with the other's JWT, both hold, in a JWT signed
// after both.
func TestRevokeMergesTheOthers(t *testing.T) {
	ctx := context.Background()
	one, two, _ := twoMembers(t)
	a, b := userKey(t), userKey(t)
	issued := time.Now() // of a's and b's JWTs
	ja, err := one.Revoke(ctx, []string{a})
	if err != nil {
		t.Fatal(err)
	}
	alone, err := two.Revoke(ctx, []string{b})
	if err != nil {
		t.Fatal(err)
	}
	if ac := claims(t, alone); ac.IssuedAt < claims(t, ja).IssuedAt || ac.Revocations.IsRevoked(a, issued) {
		t.Fatal("the test's premise: alone, the second member's JWT, as new (what a server keeps), does not hold the first's revocation")
	}
	merged, err := two.Revoke(ctx, []string{b}, ja)
	if err != nil {
		t.Fatal(err)
	}
	ac := claims(t, merged)
	if !ac.Revocations.IsRevoked(a, issued) || !ac.Revocations.IsRevoked(b, issued) {
		t.Fatalf("merged revocations: %v", ac.Revocations)
	}
	if ac.IssuedAt <= claims(t, ja).IssuedAt || ac.IssuedAt <= claims(t, alone).IssuedAt {
		t.Fatal("the merged JWT is not signed after the ones it merges")
	}
	if two.AccountJWT() != merged {
		t.Fatal("the trust does not keep the merged JWT")
	}
}

// TestMergeAdoptsTheNewest: a member whose JWT is older takes the newer one
// that holds all revocations as it is, and keeps it across a restart.
func TestMergeAdoptsTheNewest(t *testing.T) {
	ctx := context.Background()
	one, two, root := twoMembers(t)
	ja, err := one.Revoke(ctx, []string{userKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := two.Merge(ctx, ja, "")
	if err != nil || got != ja {
		t.Fatalf("merge: %v", err)
	}
	again, err := auth.Load(filepath.Join(root, "two"))
	if err != nil || again.AccountJWT() != ja {
		t.Fatalf("after a restart: %v", err)
	}
	// Nothing new: the same JWT again, not a new one.
	if got, err := one.Merge(ctx, ja); err != nil || got != ja {
		t.Fatalf("a merge with itself: %v", err)
	}
}

func TestRevokeRefusesWhatItCannotMerge(t *testing.T) {
	ctx := context.Background()
	one, _, _ := twoMembers(t)
	other, _, _ := twoMembers(t)
	if _, err := one.Merge(ctx, other.AccountJWT()); !errors.Is(err, auth.ErrForeignAccount) {
		t.Fatalf("another operator's account: %v", err)
	}
	if _, err := one.Merge(ctx, "not a jwt"); !errors.Is(err, auth.ErrForeignAccount) {
		t.Fatalf("not a JWT: %v", err)
	}
	if _, err := one.Revoke(ctx, []string{one.Account()}); !errors.Is(err, auth.ErrBadPublicKey) {
		t.Fatalf("an account's key: %v", err)
	}
	u, err := auth.RoleUser(wire.RoleClient, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := one.IssueFor(u, "UNOTAKEY"); !errors.Is(err, auth.ErrBadPublicKey) {
		t.Fatalf("issue for a bad key: %v", err)
	}
}
