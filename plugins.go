package tah

import (
	"errors"
	"fmt"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tools"
)

// Plugin configures one part of a Runtime; Use applies it. The plugins mirror
// the specification's storagePlugin, llmPlugin, toolsPlugin and agentPlugin, and
// NATS adds the distributed part.
type Plugin interface {
	// Name identifies the plugin in errors.
	Name() string
	setup(r *Runtime) error
}

type plugin struct {
	name string
	fn   func(r *Runtime) error
}

func (p plugin) Name() string           { return p.name }
func (p plugin) setup(r *Runtime) error { return p.fn(r) }

// StorageOptions configure where a node keeps its data.
type StorageOptions struct {
	// Driver is the read model's database: "sqlite" (the only one; empty means it).
	Driver string
	// Path is the SQLite file of the read model; default .tah/data.db. The log
	// (NATS JetStream) of an embedded server lives beside it, in <dir>/nats.
	Path string
}

// Storage is the specification's storagePlugin.
func Storage(o StorageOptions) Plugin {
	return plugin{"storage", func(r *Runtime) error {
		if o.Driver != "" && o.Driver != "sqlite" {
			return fmt.Errorf("storage driver %q is not supported: use \"sqlite\"", o.Driver)
		}
		if o.Path != "" {
			r.storePath = o.Path // the log beside it, unless NATS says otherwise
		}
		return nil
	}}
}

// LLMOptions choose the model provider. Either Provider names one of the
// built-in providers ("mock", "openai", "anthropic"), configured by Config, or
// Instance is a provider of your own.
type LLMOptions struct {
	Provider string
	// Model overrides Config.Model.
	Model string
	// Config is the full provider configuration; zero fields take
	// llm.DefaultConfig's values.
	Config *llm.Config
	// Instance, when set, is used as it is.
	Instance llm.Provider
}

// LLM is the specification's llmPlugin.
func LLM(o LLMOptions) Plugin {
	return plugin{"llm", func(r *Runtime) error {
		if o.Instance != nil {
			r.provider = o.Instance
			return nil
		}
		cfg := llm.DefaultConfig()
		if o.Config != nil {
			cfg = *o.Config
		}
		if o.Provider != "" {
			cfg.Provider = o.Provider
		}
		if o.Model != "" {
			cfg.Model = o.Model
		}
		if err := cfg.Validate(); err != nil {
			return err
		}
		r.llmCfg = &cfg
		return nil
	}}
}

// Tools is the specification's toolsPlugin: the tools offered to the model,
// such as builtin.ListFiles(".") and builtin.ReadFile(".").
func Tools(ts ...tools.Tool) Plugin {
	return plugin{"tools", func(r *Runtime) error {
		if r.registry == nil {
			reg, err := tools.NewRegistry()
			if err != nil {
				return err
			}
			r.registry = reg
		}
		return r.registry.Add(ts...)
	}}
}

// ApprovalPolicy says which tool calls wait for a person's approval
// (Session.Approve, Session.Deny): rules by tool name or glob ("fs__*"),
// "always" or "never", and an optional timeout that denies.
type ApprovalPolicy = session.ApprovalPolicy

// Approval sets which tool calls wait for approval; without it, those of
// the settings (tah-node's default: write_file).
func Approval(p ApprovalPolicy) Plugin {
	return plugin{"approval", func(r *Runtime) error {
		if err := p.Validate(); err != nil {
			return err
		}
		r.approval = &p
		return nil
	}}
}

// AgentOptions are the specification's agentPlugin({ systemPrompt, maxSteps,
// contextChars }), and the node's budget.
type AgentOptions struct {
	// SystemPrompt is the first system message of a new session; a reopened
	// session takes the current one too.
	SystemPrompt string
	// SubAgents are agents the model may call as tools (agent_<name>):
	// each call works on its task in a child session of its own, and the
	// turn waits for its answer (tah-node's agent.subagents).
	SubAgents []SubAgent
	// MaxSteps is the most LLM calls per turn: 0 means 20, Unlimited none.
	MaxSteps int
	// ContextChars is the character budget of each LLM request; 0 sends the
	// whole history.
	ContextChars int
	// IdleTimeout passivates a session actor idle this long (default 5 minutes).
	IdleTimeout time.Duration
	// Budget is the node's limits on every turn and every session (tah-node's
	// agent.budget): a session's own budget (CreateOptions.Budget,
	// SetBudget) and a turn's (WithBudget) apply too, the tightest winning,
	// and no session's raises it. Zero keeps the settings' (none by
	// default).
	Budget Budget
}

// SubAgent is an agent a session's model may call as a tool: its name
// (the tool is agent_<name>), the description the model reads to know
// when to call it, and the child session's system prompt, maxSteps and
// model.
type SubAgent = session.SubAgent

// Unlimited, as AgentOptions.MaxSteps, lets a turn make any number of LLM calls.
const Unlimited = -1

// Agent is the specification's agentPlugin.
func Agent(o AgentOptions) Plugin {
	return plugin{"agent", func(r *Runtime) error {
		if o.ContextChars < 0 {
			return errors.New("agent: ContextChars is negative")
		}
		if err := o.Budget.Validate(); err != nil {
			return fmt.Errorf("agent: Budget: %w", err)
		}
		if err := session.ValidateSubAgents(o.SubAgents); err != nil {
			return fmt.Errorf("agent: SubAgents: %w", err)
		}
		r.agent = &o
		return nil
	}}
}

// NATS sets how the runtime reaches NATS: an embedded server (the default: data
// under .tah, listening on a free port of 127.0.0.1) or an external server or
// cluster (Config.URL). Start from bus.Default() (port 4222; 0 picks a free
// one).
func NATS(c bus.Config) Plugin {
	return plugin{"nats", func(r *Runtime) error {
		if err := c.Validate(); err != nil {
			return err
		}
		r.busCfg = &c
		return nil
	}}
}

// Settings sets the whole node as tah-node's settings say (package config:
// what a JSON file, TAH_* variables and tah-node's flags set), so that the
// node is the one tah-node would make of them (node.Configure). The other
// plugins, used after or before it, override their parts. Settings are
// checked at Start.
func Settings(cfg config.Config) Plugin {
	return plugin{"settings", func(r *Runtime) error {
		if err := node.Check(cfg); err != nil {
			return err
		}
		r.settings = cfg
		return nil
	}}
}
