package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/wire"
)

// plainNATS is a NATS server without TAH and without authentication: what
// tahctl meets on an external cluster whose nodes do not serve the
// credentials API.
func plainNATS(t *testing.T) string {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("the NATS server is not ready")
	}
	return srv.ClientURL()
}

// TestCredsOnAnExternalCluster: NATS answers, but no node serves the
// credentials API (a node on an external cluster does not): tahctl says to
// issue users with nsc, and writes nothing.
func TestCredsOnAnExternalCluster(t *testing.T) {
	url := plainNATS(t)
	dir := t.TempDir()
	if _, err := auth.Ensure(filepath.Join(dir, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	admin := auth.AdminCredsPath(filepath.Join(dir, "elsewhere"))
	t.Chdir(dir)
	g, _, _ := testGlobals(nil)
	g.timeout = 10 * time.Second
	err := run(context.Background(), g, []string{"creds", "add", "--server", url, "--creds", admin, "--role", "client", "x"})
	if exitCode(err) != exitFailed || !strings.Contains(err.Error(), "a node on an external NATS cluster does not") {
		t.Fatalf("creds add on an external cluster: %v (exit %d)", err, exitCode(err))
	}
	var ce *cliError
	if !errors.As(err, &ce) || !strings.Contains(ce.try, "tahctl creds nsc") {
		t.Fatalf("what to do: %+v", ce)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.creds")); err == nil {
		t.Fatal("a credential file was written")
	}
}

// TestCredsNeedsAnAdmin: a credential of another role is refused before
// anything is sent.
func TestCredsNeedsAnAdmin(t *testing.T) {
	url := plainNATS(t)
	dir := t.TempDir()
	trust, err := auth.Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	u, err := auth.RoleUser(wire.RoleObserver, "olive", nil)
	if err != nil {
		t.Fatal(err)
	}
	issued, err := trust.Issue(u)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "olive.creds")
	if err := os.WriteFile(path, issued.Creds, 0o600); err != nil {
		t.Fatal(err)
	}
	g, _, _ := testGlobals(nil)
	err = run(context.Background(), g, []string{"creds", "ls", "--server", url, "--creds", path})
	if exitCode(err) != exitUnavailable || !strings.Contains(err.Error(), "needs an admin credential: "+path+" is a credential of role observer") {
		t.Fatalf("creds ls with an observer's credential: %v (exit %d)", err, exitCode(err))
	}
}
