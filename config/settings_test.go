package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDescribeNamesFlagAndVariable(t *testing.T) {
	if got, want := Describe("nats.port"), "nats.port (--nats-port, TAH_NATS_PORT)"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	if got := Describe("no.such"); got != "no.such" {
		t.Errorf("Describe of an unknown key = %q", got)
	}
	c := Default()
	c.LLM.Provider = "openai" // and no model
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "llm.model (--llm-model, TAH_LLM_MODEL): required") {
		t.Errorf("the provider's error does not name the flag: %v", err)
	}
}

func TestValidateNodeSettings(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*Config)
		want string
	}{
		"http":              {func(c *Config) { c.HTTP = "9464" }, "http (--http, TAH_HTTP)"},
		"http port":         {func(c *Config) { c.HTTP = "127.0.0.1:99999" }, "is not 0 to 65535"},
		"creds":             {func(c *Config) { c.NATS.Creds = "x.creds" }, "nats.creds (--nats-creds, TAH_NATS_CREDS)"},
		"root":              {func(c *Config) { c.Tools.Root = "/no/such/dir" }, "tools.root"},
		"concurrency":       {func(c *Config) { c.Tools.MaxConcurrent = 0 }, "tools.max_concurrent"},
		"tool timeout":      {func(c *Config) { c.Tools.Timeout = 0 }, "tools.timeout"},
		"service wait":      {func(c *Config) { c.Tools.ServiceWait = 0 }, "tools.service_wait"},
		"refresh":           {func(c *Config) { c.Tools.RefreshEvery = -1 }, "tools.refresh_every"},
		"host":              {func(c *Config) { c.NATS.Host = "" }, "nats.host"},
		"write no builtins": {func(c *Config) { c.Tools.Builtin, c.Tools.Write = false, true }, "tools.write (--tools-write, TAH_TOOLS_WRITE): needs tools.builtin"},
	} {
		c := Default()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
	c := Default()
	c.HTTP = "" // off
	if err := c.Validate(); err != nil {
		t.Errorf("http off: %v", err)
	}
}

// The built-in tools are on by default; the file, the environment and a flag
// turn them off.
func TestToolsBuiltin(t *testing.T) {
	if !Default().Tools.Builtin {
		t.Fatal("the built-in tools are off by default")
	}
	file := filepath.Join(t.TempDir(), "tah.json")
	if err := os.WriteFile(file, []byte(`{"tools":{"builtin":false}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Default()
	if err := c.Load(file, nil); err != nil || c.Tools.Builtin {
		t.Errorf("from the file: builtin %v, %v", c.Tools.Builtin, err)
	}
	c = Default()
	if err := c.Load("", func(k string) (string, bool) { return "false", k == "TAH_TOOLS_BUILTIN" }); err != nil || c.Tools.Builtin {
		t.Errorf("from the environment: builtin %v, %v", c.Tools.Builtin, err)
	}
	c = Default()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--tools-builtin=false"}); err != nil || c.Tools.Builtin {
		t.Errorf("from a flag: builtin %v, %v", c.Tools.Builtin, err)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("a node without built-in tools: %v", err)
	}
}
