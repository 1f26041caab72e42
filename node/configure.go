package node

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/llm/providers"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/builtin"
	"github.com/tah-dev/tah/tools/remote"
)

// Configure is where a node is assembled: it turns settings (package
// config: defaults, a file, TAH_* variables, flags) into the Options of
// Start. tah-node, the cluster harness (tahtest) and the Go API (package
// tah) all start their nodes from it, so that the same settings make the
// same node: the model provider, the built-in tools on the tools root
// (made absolute, the data directory refused in it), the tools of the tool
// services on NATS (tools.remote), the MCP servers' tools served as such
// services (tools.mcp_config, started in the background: MCPConfig), the
// price table the cost of every LLM call is recorded by (llm.prices), the
// approval policy, the API and the agent gateway (agents.enabled). A
// caller may edit the Options before Start (a logger, a bus name, a
// provider of its own).
//
// cfg is expected to be valid (Check); the errors of
// Configure are those of the parts (the model provider's, the tools
// root's), each naming its setting.
func Configure(cfg config.Config) (Options, error) {
	provider, err := providers.New(cfg.LLMConfig())
	if err != nil {
		return Options{}, fmt.Errorf("the model provider: %w", err)
	}
	reg, err := tools.NewRegistry()
	if err != nil {
		return Options{}, err
	}
	if cfg.Tools.Builtin {
		tc := builtinTools(cfg)
		if tc.Root, err = filepath.Abs(tc.Root); err != nil {
			return Options{}, fmt.Errorf("%s: %w", config.Describe("tools.root"), err)
		}
		if tc.Protect.DataDir, err = filepath.Abs(tc.Protect.DataDir); err != nil {
			return Options{}, fmt.Errorf("%s: %w", config.Describe("data_dir"), err)
		}
		if err := reg.Add(builtin.Tools(tc)...); err != nil {
			return Options{}, err
		}
	}
	opts := Options{
		Bus:                BusConfig(cfg),
		Session:            sessionConfig(cfg),
		Tracing:            tracingConfig(cfg),
		Provider:           provider,
		Tools:              reg,
		ToolOptions:        tools.Options{Timeout: time.Duration(cfg.Tools.Timeout)},
		MaxConcurrentTools: cfg.Tools.MaxConcurrent,
		Approval:           approvalPolicy(cfg),
		WakeupTool:         cfg.Tools.Wakeup,
		MaxInputBytes:      cfg.Agent.MaxInputBytes,
		API:                true,
		Worker:             !cfg.ReadModel,
		ReadModelCache:     cfg.ReadModelCache,
	}
	if opts.Session.Prices, err = pricing.Load(cfg.LLM.Prices); err != nil {
		return Options{}, fmt.Errorf("%s: %w", config.Describe("llm.prices"), err)
	}
	if cfg.Tools.Remote {
		opts.RemoteTools = &remote.Config{RefreshEvery: time.Duration(cfg.Tools.RefreshEvery), ServiceWait: time.Duration(cfg.Tools.ServiceWait)}
	}
	if opts.MCP, err = mcpConfig(cfg.Tools.MCPConfig, cfg.DataDir, cfg.Tools.Root, cfg.Tools.Deny, time.Duration(cfg.Tools.Timeout),
		cfg.NATS.URL != "", cfg.NATS.TLSCA); err != nil {
		return Options{}, fmt.Errorf("%s: %w", config.Describe("tools.mcp_config"), err)
	}
	if cfg.Agents.Enabled {
		opts.Agents = &GatewayConfig{Owner: cfg.Agents.Owner, Heartbeat: time.Duration(cfg.Agents.Heartbeat), MinSenderTrust: cfg.Agents.MinSenderTrust,
			DataDir: cfg.DataDir, External: cfg.NATS.URL != "", TLSCA: cfg.NATS.TLSCA}
	}
	return opts, nil
}

// ApprovalPolicy is the policy the node's tool calls wait for approval by
// (Options.Approval).
func (n *Node) ApprovalPolicy() session.ApprovalPolicy { return n.opts.Approval }
