package nodecmd

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLocalURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://0.0.0.0:4222":   "nats://127.0.0.1:4222",
		"nats://[::]:4222":      "nats://127.0.0.1:4222",
		"nats://127.0.0.1:4222": "nats://127.0.0.1:4222",
		"0.0.0.0:9464":          "127.0.0.1:9464",
		"":                      "",
	} {
		if got := localURL(in); got != want {
			t.Errorf("localURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestConfigPath(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", "a.json"}, "a.json"},
		{[]string{"-config=b.json", "--nats-port", "0"}, "b.json"},
		{[]string{"--nats-port", "0"}, ""},
		{[]string{"--", "--config", "c.json"}, ""},
	} {
		if got, err := configPath(tc.args); err != nil || got != tc.want {
			t.Errorf("configPath(%q) = %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
	if _, err := configPath([]string{"--config"}); err == nil {
		t.Error("--config without a value accepted")
	}
}

func TestHelpAndUsageErrors(t *testing.T) {
	var out, errb bytes.Buffer
	err := Run(context.Background(), []string{"--help"}, &out, &errb)
	if !errors.Is(err, flag.ErrHelp) || ExitCode(err) != ExitOK {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"--nats-port N", "[TAH_NATS_PORT] (default 4222)", "--nats-creds FILE", "admin.creds", "Exit status"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the help lacks %q", want)
		}
	}
	err = Run(context.Background(), []string{"--max-steps", "-7", "--http", "nowhere"}, &out, &errb)
	if ExitCode(err) != ExitUsage {
		t.Fatalf("bad settings: %v (exit %d)", err, ExitCode(err))
	}
	var b bytes.Buffer
	Report(&b, err)
	for _, want := range []string{"Error: the configuration cannot work:", "agent.max_steps (--max-steps, TAH_MAX_STEPS)", "http (--http, TAH_HTTP)", "Try: "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "invalid configuration") {
		t.Errorf("the report repeats the sentinel:\n%s", b.String())
	}
	if err := Run(context.Background(), []string{"extra"}, &out, &errb); ExitCode(err) != ExitUsage {
		t.Errorf("an argument: %v", err)
	}
}

// An unknown flag is one error and a hint: no usage, nothing said twice.
func TestUnknownFlag(t *testing.T) {
	var out, errb bytes.Buffer
	err := Run(context.Background(), []string{"--bogus"}, &out, &errb)
	if ExitCode(err) != ExitUsage {
		t.Fatalf("--bogus: %v (exit %d)", err, ExitCode(err))
	}
	Report(&errb, err)
	want := "Error: flag provided but not defined: -bogus\nTry: `tah-node --help` lists the flags\n"
	if got := errb.String(); got != want || out.Len() != 0 {
		t.Errorf("stderr %q, stdout %q; want stderr %q and nothing on stdout", got, out.String(), want)
	}
}

func TestInitTrust(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var out, errb bytes.Buffer
	if err := Run(context.Background(), []string{"--data-dir", dir, "--init-trust"}, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	for _, f := range []string{"trust/operator.jwt", "node.creds", "admin.creds"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.Contains(out.String(), "Give another node") {
		t.Errorf("output: %s", out.String())
	}
	err := Run(context.Background(), []string{"--nats-url", "nats://127.0.0.1:1", "--init-trust"}, &out, &errb)
	if ExitCode(err) != ExitUsage {
		t.Errorf("--init-trust with --nats-url: %v", err)
	}
}

func TestExternalNATSCredentialIsChecked(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if err := Run(context.Background(), []string{"--data-dir", dir, "--init-trust"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), []string{"--data-dir", t.TempDir(), "--nats-url", "nats://127.0.0.1:1", "--nats-creds", filepath.Join(dir, "admin.creds")}, &out, &errb)
	var b bytes.Buffer
	Report(&b, err)
	if ExitCode(err) != ExitFailed || !strings.Contains(b.String(), "does not let it:") || !strings.Contains(b.String(), "publish tah.evt.0.") {
		t.Fatalf("an admin's credential for a node: %s", b.String())
	}
	err = Run(context.Background(), []string{"--data-dir", t.TempDir(), "--nats-url", "nats://127.0.0.1:1", "--nats-creds", filepath.Join(dir, "none.creds")}, &out, &errb)
	if ExitCode(err) != ExitUsage {
		t.Fatalf("a credential that is not there: %v", err)
	}
}
