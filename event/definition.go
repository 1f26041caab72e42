package event

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tah-dev/tah/llm"
)

// AgentDefinition is a digest of what defines the agent that runs a turn:
// its system prompt, the tools it is offered, its model and settings, its
// loop and the node's build. turn.started records it, so that a reader can
// say which turns ran under which definition and what changed between two
// (Changes) without the definitions themselves: the parts that may be long
// (the prompt, the tools' schemas) are digests, the short ones values.
type AgentDefinition struct {
	// Digest is the hex SHA-256 of the canonical JSON of the other fields:
	// two turns of one definition have the same.
	Digest string `json:"digest"`
	// SystemPrompt is the digest (PartDigest) of the system prompt; absent
	// for none.
	SystemPrompt string `json:"system_prompt,omitempty"`
	// Tools are the tools offered, in the order the requests list them,
	// each with the digest of its schema (PartDigest of its canonical JSON);
	// ToolsDigest is the list's (ToolsDigest: tools.offered names it).
	Tools       []ToolDigest `json:"tools,omitempty"`
	ToolsDigest string       `json:"tools_digest,omitempty"`
	// Model and Provider are what answers: the configured model (absent:
	// the provider's default) and the provider's name.
	Model    string `json:"model,omitempty"`
	Provider string `json:"provider,omitempty"`
	// Settings are the loop's settings.
	Settings DefinitionSettings `json:"settings"`
	// Loop names the agent loop (its Go type, "session.DefaultLoop").
	Loop string `json:"loop,omitempty"`
	// Version is the node's build (internal/buildinfo: version, revision,
	// toolchain).
	Version string `json:"version,omitempty"`
}

// ToolDigest is one tool of an AgentDefinition.
type ToolDigest struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// DefinitionSettings are the settings of an AgentDefinition: maxSteps (0:
// unlimited), the context budget, and the digest of the node's budget.
type DefinitionSettings struct {
	MaxSteps     int    `json:"max_steps"`
	ContextChars int    `json:"context_chars,omitempty"`
	Budget       string `json:"budget,omitempty"`
}

// PartDigest is the first 16 hex digits of the SHA-256 of b: enough to
// tell two versions of a part apart, short enough for every turn.
func PartDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// NewAgentDefinition is the definition of an agent of configuration cfg
// (as the log records it) offered tools, answered by provider, run by
// loop on a node of build version.
func NewAgentDefinition(cfg Config, tools []llm.ToolSchema, provider, loop, version string) (AgentDefinition, error) {
	d := AgentDefinition{Model: cfg.Model, Provider: provider, Loop: loop, Version: version,
		Settings: DefinitionSettings{MaxSteps: cfg.MaxSteps, ContextChars: cfg.ContextChars}}
	if cfg.SystemPrompt != "" {
		d.SystemPrompt = PartDigest([]byte(cfg.SystemPrompt))
	}
	if cfg.Budget != nil && !cfg.Budget.IsZero() {
		b, err := json.Marshal(cfg.Budget)
		if err != nil {
			return AgentDefinition{}, fmt.Errorf("definition: budget: %w: %v", ErrMalformed, err)
		}
		d.Settings.Budget = PartDigest(b)
	}
	for _, t := range tools {
		b, err := json.Marshal(t)
		if err != nil {
			return AgentDefinition{}, fmt.Errorf("definition: tool %s: %w: %v", t.Name, ErrMalformed, err)
		}
		d.Tools = append(d.Tools, ToolDigest{Name: t.Name, Digest: PartDigest(b)})
	}
	var err error
	if d.ToolsDigest, err = ToolsDigest(tools); err != nil {
		return AgentDefinition{}, err
	}
	d.Digest, err = canonicalSHA256("definition", d)
	return d, err
}

// The parts of an AgentDefinition, as DefinitionChange names them.
const (
	PartSystemPrompt = "system_prompt"
	PartTools        = "tools"
	PartModel        = "model"
	PartProvider     = "provider"
	PartSettings     = "settings"
	PartLoop         = "loop"
	PartVersion      = "version"
)

// DefinitionChange is one part of a definition that differs from another.
type DefinitionChange struct {
	// Part is one of the Part* constants.
	Part string `json:"part"`
	// From and To are the part's two values: a digest for the system
	// prompt, the value of the others ("" for none); for the tools, the
	// lists' digests; for the settings, those that differ, "key value"
	// joined by ", ", the same keys on both sides.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Added, Removed and Changed name the tools, for Part "tools";
	// Reordered is set when the same tools are offered in another order.
	Added     []string `json:"added,omitempty"`
	Removed   []string `json:"removed,omitempty"`
	Changed   []string `json:"changed,omitempty"`
	Reordered bool     `json:"reordered,omitempty"`
}

// Changes lists the parts of to that differ from d, in the order of the
// Part* constants; none when the digests are equal. Parts that one of the
// two leaves empty because its recorder did not know them (the loop, the
// provider, the version of a definition a replay made) are compared too:
// pass both from the same kind of source, or clear them first.
func (d AgentDefinition) Changes(to AgentDefinition) []DefinitionChange {
	if d.Digest != "" && d.Digest == to.Digest {
		return nil
	}
	var out []DefinitionChange
	value := func(part, a, b string) {
		if a != b {
			out = append(out, DefinitionChange{Part: part, From: a, To: b})
		}
	}
	value(PartSystemPrompt, d.SystemPrompt, to.SystemPrompt)
	if t := toolChanges(d, to); t != nil {
		out = append(out, *t)
	}
	value(PartModel, d.Model, to.Model)
	value(PartProvider, d.Provider, to.Provider)
	if from, into := settingsDiff(d.Settings, to.Settings); from != "" {
		out = append(out, DefinitionChange{Part: PartSettings, From: from, To: into})
	}
	value(PartLoop, d.Loop, to.Loop)
	value(PartVersion, d.Version, to.Version)
	return out
}

// toolChanges is the change of the tools from d to to, nil for none.
func toolChanges(d, to AgentDefinition) *DefinitionChange {
	if d.ToolsDigest == to.ToolsDigest && len(d.Tools) == len(to.Tools) {
		return nil
	}
	c := DefinitionChange{Part: PartTools, From: d.ToolsDigest, To: to.ToolsDigest}
	before := map[string]string{}
	for _, t := range d.Tools {
		before[t.Name] = t.Digest
	}
	after := map[string]bool{}
	for _, t := range to.Tools {
		after[t.Name] = true
		switch digest, ok := before[t.Name]; {
		case !ok:
			c.Added = append(c.Added, t.Name)
		case digest != t.Digest:
			c.Changed = append(c.Changed, t.Name)
		}
	}
	for _, t := range d.Tools {
		if !after[t.Name] {
			c.Removed = append(c.Removed, t.Name)
		}
	}
	if len(c.Added)+len(c.Removed)+len(c.Changed) == 0 {
		c.Reordered = true
	}
	return &c
}

// settingsDiff lists the settings that differ from a to b, the same keys
// in the same order on each side: "max_steps 20, budget (none)" and
// "max_steps 30, budget 1f2e3d4c5b6a7988"; "" for none.
func settingsDiff(a, b DefinitionSettings) (from, to string) {
	steps := func(n int) string {
		if n == 0 {
			return "unlimited"
		}
		return fmt.Sprint(n)
	}
	none := func(s string) string {
		if s == "" {
			return "(none)"
		}
		return s
	}
	var fs, ts []string
	add := func(key, x, y string) {
		if x != y {
			fs, ts = append(fs, key+" "+x), append(ts, key+" "+y)
		}
	}
	add("max_steps", steps(a.MaxSteps), steps(b.MaxSteps))
	add("context_chars", fmt.Sprint(a.ContextChars), fmt.Sprint(b.ContextChars))
	add("budget", none(a.Budget), none(b.Budget))
	return strings.Join(fs, ", "), strings.Join(ts, ", ")
}

// String says the change for a person: "system prompt", "tools: added x;
// changed y", "model a → b".
func (c DefinitionChange) String() string {
	none := func(s string) string {
		if s == "" {
			return "(none)"
		}
		return s
	}
	switch c.Part {
	case PartSystemPrompt:
		switch {
		case c.From == "":
			return "system prompt added"
		case c.To == "":
			return "system prompt removed"
		}
		return "system prompt"
	case PartTools:
		var parts []string
		for _, x := range []struct {
			what  string
			names []string
		}{{"added", c.Added}, {"removed", c.Removed}, {"changed", c.Changed}} {
			if len(x.names) > 0 {
				parts = append(parts, x.what+" "+strings.Join(x.names, ", "))
			}
		}
		if c.Reordered {
			parts = append(parts, "reordered")
		}
		return "tools: " + strings.Join(parts, "; ")
	case PartSettings:
		// "settings: max_steps 20 → 30, budget (none) → 1f2e…": the keys
		// are in the same order on both sides.
		from, to := strings.Split(c.From, ", "), strings.Split(c.To, ", ")
		if len(from) == len(to) {
			parts := make([]string, len(from))
			for i := range from {
				key, x, _ := strings.Cut(from[i], " ")
				_, y, _ := strings.Cut(to[i], " ")
				parts[i] = key + " " + x + " → " + y
			}
			return "settings: " + strings.Join(parts, ", ")
		}
	}
	return strings.ReplaceAll(c.Part, "_", " ") + " " + none(c.From) + " → " + none(c.To)
}

// DescribeChanges joins changes in one line, "" for none.
func DescribeChanges(changes []DefinitionChange) string {
	parts := make([]string, len(changes))
	for i, c := range changes {
		parts[i] = c.String()
	}
	return strings.Join(parts, "; ")
}
