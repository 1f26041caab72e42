package session

import (
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/buildinfo"
	"github.com/tah-dev/tah/llm"
)

// buildVersion is this node's build, as turn.started's definition names
// it: read once, it does not change while the process runs.
var buildVersion = sync.OnceValue(func() string { return buildinfo.Read().String() })

// loopName names a loop in a definition: its Go type.
func loopName(l Loop) string {
	if l == nil {
		return ""
	}
	return fmt.Sprintf("%T", l)
}

// definition is the digest of what defines a's agent for the turn it
// begins: its configuration, the tools it is offered, its provider and
// loop, this node's build. nil (and a warning) when it cannot be made: a
// turn does not fail for want of its digest.
func (a *AgentContext) definition() *event.AgentDefinition {
	provider := ""
	if a.Provider != nil {
		provider = a.Provider.Name()
	}
	cfg, tools := a.Config.eventConfig(), a.offeredTools()
	if !a.def.made(cfg, tools, provider, a.loop) {
		d, err := event.NewAgentDefinition(cfg, tools, provider, a.loop, buildVersion())
		if err != nil {
			a.log.Warn("the turn's definition is not recorded", "session", a.Session, "err", err)
			return nil
		}
		a.def = definitionMemo{cfg: cfg, tools: slices.Clone(tools), provider: provider, loop: a.loop, d: d}
	}
	d := a.def.d
	d.Tools = slices.Clone(d.Tools)
	return &d
}

// definitionMemo is a definition with what it was made of. A session's
// definition changes only with them, and making it encodes and hashes every
// tool's schema: at each turn's start that was 1% of the nodes' CPU in
// bench row 9 (perf, R3), where sessions run short turns back to back.
type definitionMemo struct {
	cfg            event.Config
	tools          []llm.ToolSchema
	provider, loop string
	d              event.AgentDefinition
}

// made reports whether m's definition was made of these (DeepEqual: a
// field that event.Config gains counts without a change here).
func (m *definitionMemo) made(cfg event.Config, tools []llm.ToolSchema, provider, loop string) bool {
	return m.d.Digest != "" && m.provider == provider && m.loop == loop &&
		reflect.DeepEqual(m.cfg, cfg) && reflect.DeepEqual(m.tools, tools)
}
