package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/cmd/node/nodecmd"
	"github.com/tah-dev/tah/internal/localnode"
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

// TestCredsAddWritesOutOfTheWorkingDirectory: an issued credential is a
// secret, and the working directory is often a project under git: creds add
// writes it into the data directory's creds/ (which git ignores), or, with
// no data directory (another machine, --server and --creds), into the
// user's configuration directory; only -o writes elsewhere. It says where,
// and that the file is a secret.
func TestCredsAddWritesOutOfTheWorkingDirectory(t *testing.T) {
	project := t.TempDir()
	dataDir := filepath.Join(project, ".tah")
	args := []string{"--data-dir", dataDir, "--tools-root", project, "--nats-port", "0", "--http", "", "--tools-remote=false"}
	nodeOut, nodeErr := redactOutputFile(t, "stdout"), redactOutputFile(t, "stderr")
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- nodecmd.Run(ctx, args, nodeOut, nodeErr) }() // owned here: ends with cancel below
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("the node: %v", err)
		}
	}()
	info := redactWaitNode(t, dataDir, ran)
	git := exec.Command("git", "init", "-q", project)
	haveGit := git.Run() == nil

	// On the node's machine, in the project: into the data directory.
	t.Chdir(project)
	g, out, errb := testGlobals(nil)
	g.timeout = 20 * time.Second
	if err := run(context.Background(), g, []string{"creds", "add", "--role", "client", "alice"}); err != nil {
		t.Fatalf("creds add: %v\n%s", err, errb)
	}
	want := filepath.Join(".tah", "creds", "alice.creds")
	if !strings.HasPrefix(out.String(), want+": client credential alice (U") {
		t.Errorf("stdout: %q, want the path %s first", out, want)
	}
	if !strings.Contains(errb.String(), "secret key") || !strings.Contains(errb.String(), "--creds "+want) || !strings.Contains(errb.String(), "out of version control") {
		t.Errorf("stderr does not say it is a secret and how to use it: %q", errb)
	}
	credsMode(t, filepath.Join(project, want), 0o600)
	if _, err := os.Stat(filepath.Join(project, "alice.creds")); err == nil {
		t.Error("alice.creds was written into the working directory")
	}
	if haveGit {
		st, err := exec.Command("git", "-C", project, "status", "--porcelain", "--untracked-files=all").CombinedOutput()
		if err != nil {
			t.Fatalf("git status: %v\n%s", err, st)
		}
		if strings.Contains(string(st), ".creds") || strings.Contains(string(st), ".tah") {
			t.Errorf("git would commit the data directory's files:\n%s", st)
		}
	}
	// It works as it is, from the path printed.
	g, _, errb = testGlobals(nil)
	g.timeout = 20 * time.Second
	if err := run(context.Background(), g, []string{"--creds", want, "list"}); err != nil {
		t.Fatalf("list with the new credential: %v\n%s", err, errb)
	}

	// Elsewhere, with no data directory: the user's configuration directory.
	elsewhere := t.TempDir()
	admin := filepath.Join(t.TempDir(), "admin.creds")
	b, err := os.ReadFile(localnode.AdminCredsPath(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(admin, b, 0o600); err != nil {
		t.Fatal(err)
	}
	conf := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", conf)
	t.Setenv("HOME", t.TempDir())
	t.Chdir(elsewhere)
	g, out, errb = testGlobals(nil)
	g.timeout = 20 * time.Second
	remote := []string{"--server", info.URL, "--creds", admin}
	if err := run(context.Background(), g, append([]string{"creds", "add", "--role", "observer", "bob"}, remote...)); err != nil {
		t.Fatalf("creds add from elsewhere: %v\n%s", err, errb)
	}
	userConf, err := os.UserConfigDir()
	if err != nil {
		t.Fatal(err)
	}
	bob := filepath.Join(userConf, "tah", "creds", "bob.creds")
	if !strings.HasPrefix(out.String(), bob+": observer credential bob") {
		t.Errorf("stdout: %q, want the path %s first", out, bob)
	}
	credsMode(t, bob, 0o600)
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("creds add wrote into the working directory: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(bob), localnode.IgnoreFile)); err != nil {
		t.Errorf("the credentials' directory has no .gitignore: %v", err)
	}

	// -o: where the user says.
	g, out, errb = testGlobals(nil)
	g.timeout = 20 * time.Second
	if err := run(context.Background(), g, append([]string{"creds", "add", "--role", "client", "-o", "carol.creds", "carol"}, remote...)); err != nil {
		t.Fatalf("creds add -o: %v\n%s", err, errb)
	}
	credsMode(t, filepath.Join(elsewhere, "carol.creds"), 0o600)
	if !strings.HasPrefix(out.String(), "carol.creds: client credential carol") {
		t.Errorf("stdout: %q", out)
	}
}

// credsMode fails unless path is a file of mode perm.
func credsMode(t *testing.T, path string, perm os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the credential: %v", err)
	}
	if fi.Mode().Perm() != perm {
		t.Errorf("%s has mode %v, want %v", path, fi.Mode().Perm(), perm)
	}
}
