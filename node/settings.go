package node

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/telemetry/otlp"
	"github.com/tah-dev/tah/tools/builtin"
	"github.com/tah-dev/tah/tools/mcp"
)

// This file turns settings into the parts' configurations, and checks what
// only the parts can: package config knows the settings and the form of
// each, and imports none of the parts it configures (no NATS server).

// Check reports every setting that cannot work, each named, joined in one
// error wrapping config.ErrInvalid: the form of each setting
// (config.Config.Validate), then what the parts say of theirs (the deny
// globs, the approval policy, the price table, the MCP servers' file, the
// bus). tah-node, the Go API's Settings and tahtest check their settings
// with it before Configure.
func Check(cfg config.Config) error {
	var errs []error
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %w", config.Describe(name), fmt.Sprintf(format, args...), config.ErrInvalid))
	}
	if err := builtin.ValidatePatterns(cfg.Tools.Deny); err != nil {
		bad("tools.deny", "%v (use globs such as *.pem or config/prod)", err)
	}
	if err := approvalPolicy(cfg).Validate(); err != nil {
		bad("tools.approval", "%v", err)
	}
	if _, err := pricing.Load(cfg.LLM.Prices); err != nil {
		bad("llm.prices", "%v", err) // Load names the file and what is wrong in it
	}
	if cfg.Tools.MCPConfig != "" {
		if _, err := mcp.LoadConfig(cfg.Tools.MCPConfig); err != nil {
			bad("tools.mcp_config", "%v", err)
		} else if !cfg.Tools.Remote {
			bad("tools.mcp_config", "needs tools.remote: the node calls MCP tools as tool services")
		}
	}
	if len(errs) == 0 { // the bus repeats some of the checks above
		if err := BusConfig(cfg).Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// approvalPolicy is the approval policy of tool calls (tools.approval and
// tools.approval_timeout).
func approvalPolicy(c config.Config) session.ApprovalPolicy {
	return session.ApprovalPolicy{Rules: c.Tools.Approval, Timeout: time.Duration(c.Tools.ApprovalTimeout)}
}

// BusConfig is the NATS configuration of the settings: the node's (Configure)
// and that of a client bus opened with the node's settings (tahtest).
func BusConfig(c config.Config) bus.Config {
	b := bus.Default()
	b.URL, b.DataDir, b.Host, b.Port = c.NATS.URL, c.DataDir, c.NATS.Host, c.NATS.Port
	if b.Port == 0 {
		b.Port = -1 // the server reads 0 as its default port; here it means a free one
	}
	b.SyncInterval, _ = c.NATS.SyncInterval()
	b.CredsFile = c.NATS.Creds
	b.TLS = bus.TLSConfig{CertFile: c.NATS.TLSCert, KeyFile: c.NATS.TLSKey, CAFile: c.NATS.TLSCA, VerifyClients: c.NATS.TLSVerifyClients}
	b.ServerName = c.NATS.ServerName
	b.Cluster = bus.ClusterConfig{Name: c.NATS.ClusterName, Host: c.NATS.ClusterHost, Port: c.NATS.ClusterPort, Routes: c.NATS.Routes}
	switch {
	case c.NATS.Replicas > 0:
		b.Replicas = c.NATS.Replicas
	case c.NATS.URL == "" && c.NATS.ClusterName != "" && otherServers(c.NATS) >= 2:
		b.Replicas = 3 // JetStream R3 once there are three
	}
	if c.NATS.Partitions > 0 {
		b.Partitions = c.NATS.Partitions
	}
	b.Shards = c.NATS.Shards
	b.Conns = c.NATS.Conns
	if c.NATS.InputAckWait > 0 {
		b.InputAckWait = time.Duration(c.NATS.InputAckWait)
	}
	if c.NATS.NodeTTL > 0 {
		// A partition's pin outlives its silent node as long as the node's
		// presence does: both say "dead" at the same time.
		b.NodeTTL = time.Duration(c.NATS.NodeTTL)
		b.InputPinnedTTL = max(b.NodeTTL, 3*time.Second)
	}
	return b
}

// otherServers counts the distinct servers the embedded server's routes name,
// leaving out its own cluster port (the same route list on every node is
// common).
func otherServers(n config.NATS) int {
	seen := map[string]bool{}
	for _, r := range n.Routes {
		u, err := url.Parse(strings.TrimSpace(r))
		if err != nil || u.Host == "" {
			continue
		}
		host, port := u.Hostname(), u.Port()
		ip := net.ParseIP(host)
		local := host == n.ClusterHost || host == n.Host || host == "localhost" || ip != nil && ip.IsLoopback()
		if port == strconv.Itoa(n.ClusterPort) && local {
			continue // this server itself
		}
		seen[u.Host] = true
	}
	return len(seen)
}

// sessionConfig is the loop configuration.
func sessionConfig(c config.Config) session.Config {
	return session.Config{SystemPrompt: c.Agent.SystemPrompt, MaxSteps: c.Agent.MaxSteps, ContextChars: c.Agent.ContextChars,
		Model: c.LLM.Model, IdleTimeout: time.Duration(c.Agent.IdleTimeout), Node: c.NodeID, Budget: nodeBudget(c.Agent.Budget),
		SubAgents: subAgents(c.Agent.SubAgents)}
}

// subAgents are the node's agent.subagents as the sessions run them.
func subAgents(defs []config.SubAgent) []session.SubAgent {
	var out []session.SubAgent
	for _, d := range defs {
		out = append(out, session.SubAgent{Name: d.Name, Description: d.Description, SystemPrompt: d.SystemPrompt, MaxSteps: d.MaxSteps, Model: d.Model,
			Tools: d.Tools, Budget: nodeBudget(config.Budget{Turn: d.Budget}).Turn})
	}
	return out
}

// nodeBudget is the node's agent.budget as the log records it.
func nodeBudget(b config.Budget) event.Budget {
	limits := func(l config.BudgetLimits) event.Limits {
		return event.Limits{Tokens: l.Tokens, CostUSD: l.CostUSD, TimeMS: time.Duration(l.Time).Milliseconds()}
	}
	return event.Budget{Turn: limits(b.Turn), Session: limits(b.Session)}
}

// tracingConfig is the node's OpenTelemetry export (telemetry/otlp).
func tracingConfig(c config.Config) otlp.Config {
	return otlp.Config{Enabled: c.Tracing.Enabled, Protocol: c.Tracing.Protocol, Endpoint: c.Tracing.Endpoint,
		CaptureContent: c.Tracing.CaptureContent}
}

// builtinTools is the configuration of the built-in tools: confined to the
// tools root, refusing the data directory and the deny list inside it.
func builtinTools(c config.Config) builtin.Config {
	return builtin.Config{Root: c.Tools.Root, Write: c.Tools.Write,
		Protect: builtin.Protect{DataDir: c.DataDir, Deny: c.Tools.Deny}}
}
