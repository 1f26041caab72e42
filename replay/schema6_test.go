package replay_test

import (
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/replay"
)

// TestALogOfTheSchemaBefore: a session a node of the build before (log
// schema version 6: no turn.forked, no definition in turn.started) wrote,
// two turns with a tool call each (testdata/schema6_session.jsonl, `tahctl
// events --json` of that node), replays identically under the definition
// it ran with; under another system prompt it diverges at its first step.
func TestALogOfTheSchemaBefore(t *testing.T) {
	evs := readLogFile(t, "testdata/schema6_session.jsonl")
	var offered []llm.ToolSchema
	for _, e := range evs {
		if e.Type == event.ToolsOffered {
			d, _ := event.DecodeAs[event.ToolsOfferedData](e)
			offered = d.Tools
		}
	}
	cfg := event.Config{MaxSteps: 20}
	rep, err := replay.Run(evs, replay.Definition{Config: cfg, Tools: offered}, replay.Options{})
	if err != nil || !rep.Identical || rep.Turns != 2 || rep.Steps != 4 {
		t.Fatalf("its own definition: %+v %v", rep, err)
	}
	cfg.SystemPrompt = "You are terse."
	rep, err = replay.Run(evs, replay.Definition{Config: cfg, Tools: offered}, replay.Options{})
	if err != nil || rep.Divergence == nil || rep.Divergence.Turn != 1 || rep.Divergence.Step != 1 {
		t.Fatalf("another prompt: %+v %v", rep, err)
	}
}
