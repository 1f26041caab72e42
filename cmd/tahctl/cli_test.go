package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/internal/localnode"
)

func testGlobals(env map[string]string) (*globals, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &globals{stdout: &out, stderr: &errb, stdin: strings.NewReader(""), timeout: time.Second,
		getenv: func(k string) string { return env[k] }}, &out, &errb
}

func TestParseFlagsAnywhere(t *testing.T) {
	g, _, _ := testGlobals(nil)
	fs := g.flags("show", "ID", "")
	full := fs.Bool("full", false, "")
	pos, err := parse(fs, []string{"s_1", "--json", "--full", "--", "--not-a-flag"})
	if err != nil {
		t.Fatal(err)
	}
	if !g.json || !*full || len(pos) != 2 || pos[0] != "s_1" || pos[1] != "--not-a-flag" {
		t.Fatalf("json %v full %v pos %q", g.json, *full, pos)
	}
	if _, err := parse(fs, []string{"--nope"}); exitCode(err) != exitUsage {
		t.Fatalf("unknown flag: %v", err)
	}
}

func TestExitCodesAndReport(t *testing.T) {
	for err, want := range map[error]int{
		nil:                            exitOK,
		exitStatus(exitCancelled):      exitCancelled,
		errorf(exitNotFound, "", "x"):  exitNotFound,
		errors.New("anything else"):    exitFailed,
		usageError("try this", "bad"):  exitUsage,
		inputFailure("s", "busy", "b"): exitFailed,
	} {
		if got := exitCode(err); got != want {
			t.Errorf("exitCode(%v) = %d, want %d", err, got, want)
		}
	}
	var b bytes.Buffer
	report(&b, errorf(exitNotFound, "`tahctl list`", "session %s not found", "s_x"))
	if b.String() != "Error: session s_x not found\nTry: `tahctl list`\n" {
		t.Errorf("report wrote %q", b.String())
	}
	b.Reset()
	report(&b, exitStatus(exitFailed)) // already shown: nothing more
	if b.Len() != 0 {
		t.Errorf("report of an exit status wrote %q", b.String())
	}
}

func TestResolveFindsTheLocalNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".tah")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	creds := localnode.AdminCredsPath(dir)
	if err := os.WriteFile(creds, []byte("a credential"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := localnode.WriteNodeInfo(dir, localnode.NodeInfo{PID: 1, URL: "nats://127.0.0.1:5555"}); err != nil {
		t.Fatal(err)
	}

	g, _, _ := testGlobals(map[string]string{"TAH_DATA_DIR": dir})
	ep := g.resolve()
	if ep.url != "nats://127.0.0.1:5555" || ep.creds != creds {
		t.Fatalf("from the data directory: %+v", ep)
	}
	g, _, _ = testGlobals(map[string]string{"TAH_DATA_DIR": dir, "TAH_URL": "nats://10.0.0.1:4222", "TAH_NATS_CREDS": "env.creds"})
	ep = g.resolve()
	if ep.url != "nats://10.0.0.1:4222" || ep.creds != "env.creds" || ep.credsFrom != "TAH_NATS_CREDS" {
		t.Fatalf("the environment wins: %+v", ep)
	}
	g.server, g.creds = "nats://127.0.0.1:1", "flag.creds"
	if ep = g.resolve(); ep.url != "nats://127.0.0.1:1" || ep.creds != "flag.creds" {
		t.Fatalf("flags win: %+v", ep)
	}
	// Nothing anywhere: the default, without credentials.
	g, _, _ = testGlobals(map[string]string{"TAH_DATA_DIR": filepath.Join(t.TempDir(), "none")})
	if ep = g.resolve(); ep.url != defaultURL || ep.creds != "" {
		t.Fatalf("default: %+v", ep)
	}
}

func TestPreview(t *testing.T) {
	for in, want := range map[string]string{
		"":                       "(no output)",
		"one line":               "one line",
		"a/\nb/\n\nc.go\n":       "4 lines: a/, b/, c.go",
		strings.Repeat("x", 100): strings.Repeat("x", 19) + "…",
	} {
		if got := preview(in, 20); got != want {
			t.Errorf("preview(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUsageErrorsNeedNoNode(t *testing.T) {
	for _, args := range [][]string{{}, {"frob"}, {"show"}, {"show", "a.b.c"}, {"send", ""}, {"list", "--status", "x"}, {"fork", "s_1", "--turns", "-2"},
		{"budget", "s_1"}, {"budget", "s_1", "--turn-tokens", "-1"}, {"new", "--session-time", "soon"}, {"send", "--budget-cost", "$x", "hi"},
		{"replay"}, {"replay", "s_1", "--turn", "-1"}, {"replay", "s_1", "--system-prompt-file", "/nonexistent/prompt.txt"}} {
		g, _, _ := testGlobals(nil)
		if err := run(context.Background(), g, args); exitCode(err) != exitUsage {
			t.Errorf("tahctl %q: %v (exit %d), want exit %d", args, err, exitCode(err), exitUsage)
		}
	}
	g, out, _ := testGlobals(nil)
	if err := run(context.Background(), g, []string{"help", "send"}); err != nil || !strings.Contains(out.String(), "Usage: tahctl send [-s ID | --tenant NAME] TEXT") {
		t.Errorf("help send: %v\n%s", err, out)
	}
	g, out, _ = testGlobals(nil)
	if err := run(context.Background(), g, []string{"--help"}); err != nil || !strings.Contains(out.String(), "130  interrupted") {
		t.Errorf("--help: %v\n%s", err, out)
	}
}

// TestDoesNotLinkTheNATSServer: tahctl is a client; the server (and the node)
// stay out of its binary.
func TestDoesNotLinkTheNATSServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/nats-io/nats-server") || pkg == "github.com/tah-dev/tah/node" || pkg == "github.com/tah-dev/tah/bus" {
			t.Errorf("tahctl links %s", pkg)
		}
	}
}

// TestExitCodesAreDocumented: every exit code's meaning in `tahctl help` and
// in the README's table names what exits with it: 3 is a missing artifact,
// step or credential too, not only a session.
func TestExitCodesAreDocumented(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := ""
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, "| 3 |") {
			row = l
		}
	}
	help := ""
	for _, l := range strings.Split(exitCodesHelp, "\n") {
		if strings.HasPrefix(l, "  3 ") {
			help = l
		}
	}
	// Every code of the help has its row in the README.
	for _, l := range strings.Split(exitCodesHelp, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] != "Exit" {
			if _, err := strconv.Atoi(f[0]); err == nil && !strings.Contains(string(readme), "\n| "+f[0]+" |") {
				t.Errorf("exit status %s of tahctl help has no row in the README's table", f[0])
			}
		}
	}
	for _, what := range []string{"session", "artifact", "step", "credential"} {
		if !strings.Contains(row, what) {
			t.Errorf("the README's exit status 3 does not name a missing %s: %q", what, row)
		}
		if !strings.Contains(help, what) {
			t.Errorf("tahctl help's exit status 3 does not name a missing %s: %q", what, help)
		}
	}
}

// TestShardOfTheProtocolsExample: tahctl shard computes the shard as
// docs/protocol.md does (its example: shard 1 of 8), with --shards and no
// node.
func TestShardOfTheProtocolsExample(t *testing.T) {
	g, out, _ := testGlobals(nil)
	if err := run(context.Background(), g, []string{"shard", "s_4f2k9q1w7e3r5t6y8v0b", "--shards", "8"}); err != nil {
		t.Fatal(err)
	}
	want := "s_4f2k9q1w7e3r5t6y8v0b is in shard 1 of 8: stream TAH_EVT_1, subject tah.evt.1.s_4f2k9q1w7e3r5t6y8v0b\n" +
		"follow it: nats sub tah.evt.1.s_4f2k9q1w7e3r5t6y8v0b --stream TAH_EVT_1 --all\n"
	if out.String() != want {
		t.Errorf("tahctl shard printed\n%s\nwant\n%s", out, want)
	}
	g, _, _ = testGlobals(nil)
	if err := run(context.Background(), g, []string{"shard", "a.b.c", "--shards", "8"}); exitCode(err) != exitUsage {
		t.Errorf("an invalid id: %v", err)
	}
}
