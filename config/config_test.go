package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/bus"
)

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.DataDir != ".tah" || c.NATS.Port != 4222 || c.LLM.Provider != "mock" || c.Tools.Root != "." {
		t.Fatalf("%+v", c)
	}
	if b := c.BusConfig(); b.SyncInterval != 0 || b.DataDir != ".tah" {
		t.Fatalf("default fsync must be on every write: %+v", b)
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

// Replicas 0 means R3 once the embedded server is routed to two or more
// others, R1 otherwise; an explicit value wins.
func TestReplicasFollowTheCluster(t *testing.T) {
	three := []string{"nats-route://127.0.0.1:6222", "nats-route://127.0.0.1:6223", "nats-route://127.0.0.1:6224"}
	for _, c := range []struct {
		name    string
		edit    func(*Config)
		replica int
	}{
		{"alone", func(*Config) {}, 1},
		{"two others", func(c *Config) { c.NATS.ClusterName, c.NATS.ClusterPort, c.NATS.Routes = "tah", 6222, three[1:] }, 3},
		{"all three, itself included", func(c *Config) { c.NATS.ClusterName, c.NATS.ClusterPort, c.NATS.Routes = "tah", 6222, three }, 3},
		{"one other", func(c *Config) { c.NATS.ClusterName, c.NATS.ClusterPort, c.NATS.Routes = "tah", 6222, three[:2] }, 1},
		{"explicit", func(c *Config) {
			c.NATS.ClusterName, c.NATS.ClusterPort, c.NATS.Routes, c.NATS.Replicas = "tah", 6222, three[1:], 1
		}, 1},
		{"external", func(c *Config) { c.NATS.URL = "nats://10.0.0.1:4222" }, 1},
	} {
		cfg := Default()
		c.edit(&cfg)
		if got := cfg.BusConfig().Replicas; got != c.replica {
			t.Errorf("%s: replicas %d, want %d", c.name, got, c.replica)
		}
	}
}

// The TLS settings reach the bus, from the environment as from flags.
func TestTLSSettings(t *testing.T) {
	c := Default()
	env := map[string]string{"TAH_NATS_TLS_CERT": "c.pem", "TAH_NATS_TLS_KEY": "k.pem", "TAH_NATS_TLS_CA": "ca.pem", "TAH_NATS_TLS_VERIFY_CLIENTS": "true"}
	if err := c.Load("", func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	want := bus.TLSConfig{CertFile: "c.pem", KeyFile: "k.pem", CAFile: "ca.pem", VerifyClients: true}
	if got := c.BusConfig().TLS; got != want {
		t.Fatalf("bus TLS = %+v, want %+v", got, want)
	}
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--nats-tls-ca", "other.pem"}); err != nil {
		t.Fatal(err)
	}
	if c.NATS.TLSCA != "other.pem" {
		t.Fatalf("--nats-tls-ca: %q", c.NATS.TLSCA)
	}
}
