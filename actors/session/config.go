package session

import (
	"log/slog"
	"path"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/telemetry"
)

// Config is the loop configuration in force for a session: the specification's
// agentPlugin({ systemPrompt, maxSteps, contextChars }). A session reopened from
// the log uses the current Config, not the stored one.
type Config struct {
	// SystemPrompt is the first system message.
	SystemPrompt string
	// MaxSteps is the most LLM calls per turn: 0 means the default (20), a negative
	// value means unlimited.
	MaxSteps int
	// ContextChars is the character budget of each request; 0 sends everything.
	ContextChars int
	// Model is passed to the provider in each request.
	Model string
	// IdleTimeout passivates a session actor that has had nothing to do for this
	// long; 0 means the default (5 minutes).
	IdleTimeout time.Duration
	// CheckpointEvery writes a checkpoint after a turn once this many events were
	// appended since the last one; 0 means the default (64). A resume replays at
	// most that many events and one turn's after the checkpoint; a checkpoint
	// after every short turn would cost more than the replays it saves.
	CheckpointEvery int
	// Node names this node in session.claimed.
	Node string
	// Logger receives the session's diagnostics; nil means slog.Default().
	Logger *slog.Logger
	// Watch, when set, opens a Watcher for the work on every turn whose
	// caller waits for a stream (the node's agent protocol streams).
	Watch WatchFunc
	// Active, when set, is told when a session's actor starts (true) and
	// when it stops (false), from any goroutine, in order per session; it
	// must not block. A session whose actor stopped costs nothing.
	Active func(sid string, active bool)
	// Claimed, when set, is told once this node's claim of session sid
	// (session.claimed with epoch) is in the log, with the node and the
	// epoch of the claim before it, as the replayed log has them ("" and 0
	// for none): the node tells that previous owner at once, so that its
	// actor, now stale, stops without waiting for a failed append. It runs
	// in the goroutine that claims (the first work after a load) and must
	// not block.
	Claimed func(sid string, epoch uint64, prevNode string, prevEpoch uint64)
	// Tracing makes the spans of the work on turns (trace.go); nil: none.
	Tracing *telemetry.Tracing
	// AgentName names the agent in traces (gen_ai.agent.name); empty: "tah".
	AgentName string
	// Budget is the node's limits per turn and per session (agent.budget),
	// restated with every claim: a session's own and a turn's own apply
	// too, and the tightest wins (budget.go).
	Budget event.Budget
	// Prices gives every LLM call its cost, recorded with its usage
	// (cost.go); nil: the default table (pricing.Default).
	Prices *pricing.Table
	// SubAgents are the agents a session's model may call as tools, each
	// in a child session of its own (subagents.go).
	SubAgents []SubAgent
	// Tools, when set, are the only tools a session may call: names or
	// globs (path.Match: "fs__*") of the node's tools and sub-agents
	// (agent_<name>); a sub-agent's child runs with its definition's.
	// Empty: every tool.
	Tools []string
	// Quotas checks and counts the use of the model by the sessions of a
	// tenant (quota.go); nil: no quota.
	Quotas Quotas
}

// allows reports whether c lets a session call the tool named name.
func (c Config) allows(name string) bool {
	if len(c.Tools) == 0 {
		return true
	}
	for _, pat := range c.Tools {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// DefaultMaxSteps is the specification's default maxSteps.
const DefaultMaxSteps = 20

// eventConfig is the configuration recorded in the log.
func (c Config) eventConfig() event.Config {
	max := c.MaxSteps
	switch {
	case max == 0:
		max = DefaultMaxSteps
	case max < 0:
		max = 0 // the log's "unlimited"
	}
	ec := event.Config{SystemPrompt: c.SystemPrompt, MaxSteps: max, ContextChars: c.ContextChars, Model: c.Model}
	if !c.Budget.IsZero() {
		b := c.Budget
		ec.Budget = &b
	}
	return ec
}

// EventConfig is the configuration as recorded in session.created and
// session.claimed.
func (c Config) EventConfig() event.Config { return c.eventConfig() }

func (c Config) idle() time.Duration {
	if c.IdleTimeout <= 0 {
		return 5 * time.Minute
	}
	return c.IdleTimeout
}

func (c Config) checkpointEvery() int {
	if c.CheckpointEvery <= 0 {
		return 64
	}
	return c.CheckpointEvery
}

func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.Default()
	}
	return c.Logger
}
