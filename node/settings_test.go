package node

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/config"
)

// config writes the session's defaults out rather than import the package
// that owns them: they must stay the same.
func TestDefaultsAgreeWithTheSession(t *testing.T) {
	t.Parallel()
	c := config.Default()
	if c.Agent.MaxSteps != session.DefaultMaxSteps {
		t.Errorf("agent.max_steps defaults to %d, the session to %d", c.Agent.MaxSteps, session.DefaultMaxSteps)
	}
	if got := c.Tools.Approval["write_file"]; got != session.ApprovalAlways {
		t.Errorf("write_file's approval defaults to %q, want %q", got, session.ApprovalAlways)
	}
}

func TestDefaultIsValid(t *testing.T) {
	t.Parallel()
	c := config.Default()
	if err := Check(c); err != nil {
		t.Fatal(err)
	}
	if b := BusConfig(c); b.SyncInterval != 0 || b.DataDir != ".tah" {
		t.Fatalf("default fsync must be on every write: %+v", b)
	}
}

// The checks only the parts can make name the setting as config's do.
func TestCheckNodeSettings(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		edit func(*config.Config)
		want string
	}{
		"deny glob": {func(c *config.Config) { c.Tools.Deny = []string{"*.pem", "[a-"} }, `tools.deny (--tools-deny, TAH_TOOLS_DENY): pattern "[a-"`},
		"mcp file":  {func(c *config.Config) { c.Tools.MCPConfig = "/no/such.json" }, "tools.mcp_config (--mcp-config, TAH_MCP_CONFIG)"},
		"no price file": {func(c *config.Config) { c.LLM.Prices = "/no/such/prices.json" },
			"llm.prices (--llm-prices, TAH_LLM_PRICES): price table: open /no/such/prices.json: no such file or directory"},
		"bad price file": {func(c *config.Config) {
			c.LLM.Prices = writeFile(t, "prices.json", `{"prices": [{"provider": "openai", "model": "x[", "input": 1}]}`)
		},
			`prices.json: invalid price table: prices[0] (openai "x["): model glob: syntax error in pattern`},
		"unknown field": {func(c *config.Config) {
			c.LLM.Prices = writeFile(t, "prices.json", `{"prices": [], "currency": "EUR"}`)
		},
			`prices.json: invalid price table: json: unknown field "currency"`},
	} {
		c := config.Default()
		tc.edit(&c)
		if err := Check(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
}

// Replicas 0 means R3 once the embedded server is routed to two or more
// others, R1 otherwise; an explicit value wins.
func TestReplicasFollowTheCluster(t *testing.T) {
	t.Parallel()
	three := []string{"nats-route://127.0.0.1:6222", "nats-route://127.0.0.1:6223", "nats-route://127.0.0.1:6224"}
	for _, c := range []struct {
		name    string
		edit    func(*config.Config)
		replica int
	}{
		{"alone", func(*config.Config) {}, 1},
		{"two others", func(c *config.Config) { c.NATS.ClusterName, c.NATS.ClusterPort, c.NATS.Routes = "tah", 6222, three[1:] }, 3},
		{"all three, itself included", func(c *config.Config) { c.NATS.ClusterName, c.NATS.ClusterPort, c.NATS.Routes = "tah", 6222, three }, 3},
		{"one other", func(c *config.Config) { c.NATS.ClusterName, c.NATS.ClusterPort, c.NATS.Routes = "tah", 6222, three[:2] }, 1},
		{"explicit", func(c *config.Config) {
			c.NATS.ClusterName, c.NATS.ClusterPort, c.NATS.Routes, c.NATS.Replicas = "tah", 6222, three[1:], 1
		}, 1},
		{"external", func(c *config.Config) { c.NATS.URL = "nats://10.0.0.1:4222" }, 1},
	} {
		cfg := config.Default()
		c.edit(&cfg)
		if got := BusConfig(cfg).Replicas; got != c.replica {
			t.Errorf("%s: replicas %d, want %d", c.name, got, c.replica)
		}
	}
}

// The TLS settings reach the bus, from the environment as from flags.
func TestTLSSettings(t *testing.T) {
	t.Parallel()
	c := config.Default()
	env := map[string]string{"TAH_NATS_TLS_CERT": "c.pem", "TAH_NATS_TLS_KEY": "k.pem", "TAH_NATS_TLS_CA": "ca.pem", "TAH_NATS_TLS_VERIFY_CLIENTS": "true"}
	if err := c.Load("", func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	want := bus.TLSConfig{CertFile: "c.pem", KeyFile: "k.pem", CAFile: "ca.pem", VerifyClients: true}
	if got := BusConfig(c).TLS; got != want {
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

func TestPortZeroPicksAFreePort(t *testing.T) {
	t.Parallel()
	c := config.Default()
	c.NATS.Port = 0
	if err := Check(c); err != nil {
		t.Fatal(err)
	}
	if p := BusConfig(c).Port; p != -1 {
		t.Errorf("bus port = %d, want -1 (the embedded server reads 0 as 4222)", p)
	}
	c.NATS.InputAckWait = config.Duration(42e9)
	if w := BusConfig(c).InputAckWait; w.Seconds() != 42 {
		t.Errorf("input ack wait = %v", w)
	}
	c.NodeID = "n1"
	if n := sessionConfig(c).Node; n != "n1" {
		t.Errorf("session node = %q", n)
	}
}

// The deny list is read from the file, the environment and a flag, and reaches
// the built-in tools with the data directory.
func TestToolsDeny(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tah.json")
	if err := os.WriteFile(file, []byte(`{"tools":{"deny":["*.pem","config/prod"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := config.Default()
	if err := c.Load(file, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Tools.Deny, ","); got != "*.pem,config/prod" {
		t.Errorf("from the file: %q", got)
	}
	if err := c.Load("", func(k string) (string, bool) { return "*.key, secrets", k == "TAH_TOOLS_DENY" }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Tools.Deny, ","); got != "*.key,secrets" {
		t.Errorf("from the environment: %q", got)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--tools-deny", "*.env", "--data-dir", "/var/lib/tah"}); err != nil {
		t.Fatal(err)
	}
	b := builtinTools(c)
	if strings.Join(b.Protect.Deny, ",") != "*.env" || b.Protect.DataDir != "/var/lib/tah" || b.Root != "." {
		t.Errorf("the tools' configuration: %+v", b)
	}
}

// writeFile writes a file of the test's and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
