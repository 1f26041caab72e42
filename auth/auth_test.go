package auth_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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

// TestOperatorModeServer: a real server configured by the material takes the
// node's and the admin's credentials (JetStream in the TAH account) and
// refuses a connection without one.
func TestOperatorModeServer(t *testing.T) {
	dir := t.TempDir()
	tr, err := auth.Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(dir, "nats"), NoLog: true, NoSigs: true}
	if err := tr.Configure(opts, filepath.Join(dir, "nats", "resolver")); err != nil {
		t.Fatal(err)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	if nc, err := nats.Connect(srv.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("connected without a credential")
	}
	for _, creds := range []string{auth.NodeCredsPath(dir), auth.AdminCredsPath(dir)} {
		nc, err := nats.Connect(srv.ClientURL(), nats.UserCredentials(creds))
		if err != nil {
			t.Fatalf("%s: %v", creds, err)
		}
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
			t.Fatalf("%s: JetStream: %v", creds, err)
		}
		cancel()
		nc.Close()
	}
	if _, err := os.Stat(filepath.Join(dir, "nats", "jetstream", tr.Account(), "streams", "S")); err != nil {
		t.Fatalf("the stream is not in the TAH account's store: %v", err)
	}
}
