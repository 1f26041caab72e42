package bus

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus/bustest"
)

// oldDataDir writes a data directory as a node of the user-and-password era
// did: its server without operator (every user of such a server is in the
// global account $G), TAH's streams and buckets set up, a session's events
// appended, and credentials.json beside. It returns the directory and the
// names of the streams.
func oldDataDir(t *testing.T, sid string, n int) (string, []string) {
	dir := t.TempDir()
	srv := bustest.ServerWith(t, func(o *server.Options) { o.StoreDir = filepath.Join(dir, "nats") })
	old := connected(t, srv.ClientURL())
	w, _ := old.Writer(sid, 1, 0)
	for i := range n {
		mustAppend(t, w, turn(sid, i))
	}
	names := streamNames(t, old)
	if err := old.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	if err := os.WriteFile(filepath.Join(dir, legacyCredentialsFile), []byte(`{"user":"tah","password":"old"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, names
}

func streamNames(t *testing.T, b *Bus) []string {
	var names []string
	for name := range b.js.StreamNames(ctxT(t)).Name() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// TestUpgradeKeepsTheSessions: the first start in operator mode on a data
// directory of the user-and-password era finds every stream and the
// session's events in the TAH account, and removes the plaintext password.
func TestUpgradeKeepsTheSessions(t *testing.T) {
	t.Parallel()
	const sid = "s_old"
	dir, names := oldDataDir(t, sid, 3)
	cfg := testConfig(t)
	cfg.DataDir = dir
	b := open(t, cfg)
	if evs, _ := mustReplay(t, b, sid, 0); len(evs) != 3 {
		t.Fatalf("the upgraded log has %d events of %s, want 3", len(evs), sid)
	}
	if got := streamNames(t, b); !slices.Equal(got, names) {
		t.Fatalf("streams after the upgrade %v, before %v", got, names)
	}
	trust, err := auth.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nats", "jetstream", globalAccount)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the old account's directory is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nats", "jetstream", trust.Account())); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, legacyCredentialsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the plaintext password is still there: %v", err)
	}
	// Restarted, the node finds the same log (nothing left to upgrade).
	if err := b.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	again := open(t, cfg)
	if evs, _ := mustReplay(t, again, sid, 0); len(evs) != 3 {
		t.Fatalf("after a restart: %d events", len(evs))
	}
}

// TestUpgradeRefusesWhatItCannotMove: both accounts' directories, or a
// clustered store, are refused with what to do, and nothing is moved.
func TestUpgradeRefusesWhatItCannotMove(t *testing.T) {
	t.Parallel()
	dir, _ := oldDataDir(t, "s_old", 1)
	trust, err := auth.Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	both := filepath.Join(dir, "nats", "jetstream", trust.Account())
	if err := os.MkdirAll(both, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.DataDir = dir
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := Open(ctx, cfg); !errors.Is(err, ErrUpgrade) {
		t.Fatalf("both accounts: %v", err)
	}
	os.Remove(both)
	cfg.Cluster = ClusterConfig{Name: "tah", Port: -1}
	if _, err := Open(ctx, cfg); !errors.Is(err, ErrUpgrade) || !strings.Contains(err.Error(), "`tahctl upgrade-cluster --from ") {
		t.Fatalf("a clustered store: %v; want the command that copies its sessions", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nats", "jetstream", globalAccount)); err != nil {
		t.Fatalf("the refused upgrade moved the streams: %v", err)
	}
}
