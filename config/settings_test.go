package config

import (
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
		"http":         {func(c *Config) { c.HTTP = "9464" }, "http (--http, TAH_HTTP)"},
		"http port":    {func(c *Config) { c.HTTP = "127.0.0.1:99999" }, "is not 0 to 65535"},
		"creds":        {func(c *Config) { c.NATS.Creds = "x.creds" }, "nats.creds (--nats-creds, TAH_NATS_CREDS)"},
		"root":         {func(c *Config) { c.Tools.Root = "/no/such/dir" }, "tools.root"},
		"concurrency":  {func(c *Config) { c.Tools.MaxConcurrent = 0 }, "tools.max_concurrent"},
		"tool timeout": {func(c *Config) { c.Tools.Timeout = 0 }, "tools.timeout"},
		"host":         {func(c *Config) { c.NATS.Host = "" }, "nats.host"},
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

func TestPortZeroPicksAFreePort(t *testing.T) {
	c := Default()
	c.NATS.Port = 0
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if p := c.BusConfig().Port; p != -1 {
		t.Errorf("bus port = %d, want -1 (the embedded server reads 0 as 4222)", p)
	}
	c.NATS.InputAckWait = Duration(42e9)
	if w := c.BusConfig().InputAckWait; w.Seconds() != 42 {
		t.Errorf("input ack wait = %v", w)
	}
	c.NodeID = "n1"
	if n := c.SessionConfig().Node; n != "n1" {
		t.Errorf("session node = %q", n)
	}
}
