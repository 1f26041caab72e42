package config

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.DataDir != ".tah" || c.NATS.Port != 4222 || c.LLM.Provider != "mock" || c.Tools.Root != "." {
		t.Fatalf("%+v", c)
	}
}

// Defaults < file < environment < flags.
func TestPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tah.json")
	os.WriteFile(file, []byte(`{"data_dir":"/from/file","agent":{"max_steps":7,"idle_timeout":"1m"},"nats":{"port":5000}}`), 0o644)
	env := map[string]string{"TAH_NATS_PORT": "6000", "TAH_LLM_PROVIDER": "openai", "TAH_LLM_MODEL": "m"}
	c := Default()
	if err := c.Load(file, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--nats-port", "7000", "--tools-write"}); err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/from/file" || c.Agent.MaxSteps != 7 || time.Duration(c.Agent.IdleTimeout) != time.Minute {
		t.Fatalf("file: %+v", c)
	}
	if c.LLM.Provider != "openai" || c.NATS.Port != 7000 || !c.Tools.Write {
		t.Fatalf("env/flags: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestErrorsNameTheSetting(t *testing.T) {
	cases := map[string]func(*Config){
		"agent.max_steps": func(c *Config) { c.Agent.MaxSteps = -5 },
		"nats.sync":       func(c *Config) { c.NATS.Sync = "sometimes" },
		"log_level":       func(c *Config) { c.LogLevel = "loud" },
		"agents.owner":    func(c *Config) { c.Agents.Owner = "tenant-acme" }, // a tenant's agents' owner
		"data_dir":        func(c *Config) { c.DataDir = "" },
		"llm.":            func(c *Config) { c.LLM.Provider = "nope" },
		"nats.tls_key":    func(c *Config) { c.NATS.TLSCert = "cert.pem" },
		"nats.tls_ca": func(c *Config) {
			c.NATS.TLSCert, c.NATS.TLSKey, c.NATS.ClusterName = "cert.pem", "key.pem", "c"
		},
	}
	for name, edit := range cases {
		c := Default()
		edit(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalid) && !strings.Contains(name, "llm") {
			t.Errorf("%s: %v", name, err)
		}
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: the error does not name the setting: %v", name, err)
		}
	}
	c := Default()
	if err := c.Load("", func(k string) (string, bool) { return "x", k == "TAH_NATS_PORT" }); err == nil || !strings.Contains(err.Error(), "TAH_NATS_PORT") {
		t.Errorf("bad env: %v", err)
	}
	file := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(file, []byte(`{"dataa_dir": "x"}`), 0o644)
	if err := c.Load(file, nil); err == nil || !strings.Contains(err.Error(), "dataa_dir") {
		t.Errorf("unknown field: %v", err)
	}
}

// TestImportsNoPartItConfigures: config is a leaf under the parts (the
// settings and their form); turning them into the parts' configurations is
// package node's (node.Configure), so that config links no NATS server.
func TestImportsNoPartItConfigures(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/nats-io/nats-server") || strings.HasPrefix(pkg, "github.com/tah-dev/tah/bus") ||
			strings.HasPrefix(pkg, "github.com/tah-dev/tah/actors") || strings.HasPrefix(pkg, "github.com/tah-dev/tah/tools") ||
			pkg == "github.com/tah-dev/tah/node" {
			t.Errorf("config imports %s", pkg)
		}
	}
}
