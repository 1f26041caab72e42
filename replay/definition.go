package replay

import (
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/buildinfo"
)

// DefinitionChanged says how the definition a replay compares with
// differs from the one the recording's first compared turn ran under (its
// turn.started's definition): before any step is replayed, what will
// differ.
type DefinitionChanged struct {
	// Turn is the recorded turn whose definition is compared.
	Turn int `json:"turn"`
	// Changes are the parts that differ: system prompt, tools, model,
	// settings, version (event.DefinitionChange).
	Changes []event.DefinitionChange `json:"changes"`
}

// definitionAt compares, at the first compared turn that recorded its
// definition (rec), the replay's with it: the report's
// DefinitionChanged, when they differ. The parts the replay does not use
// (the provider, whose answers the log serves, and the loop, whose
// decisions it makes as the default loop does) are the recording's; the
// version is this build's.
func (r *replayer) definitionAt(turn int, rec *event.AgentDefinition) {
	if rec == nil || r.compared {
		return
	}
	r.compared = true
	now, err := event.NewAgentDefinition(r.def.Config, r.def.Tools, rec.Provider, rec.Loop, buildinfo.Read().String())
	if err != nil {
		return // the steps' comparison says what differs
	}
	if changes := rec.Changes(now); len(changes) > 0 {
		r.report.DefinitionChanged = &DefinitionChanged{Turn: turn, Changes: changes}
	}
}
