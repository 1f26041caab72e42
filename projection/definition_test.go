package projection

import (
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// TestDefinitionsPerTurn: the state keeps a turn's definition when it
// differs from the one before, and says which one each turn ran under.
func TestDefinitionsPerTurn(t *testing.T) {
	d1, _ := event.NewAgentDefinition(event.Config{SystemPrompt: "a", MaxSteps: 20}, nil, "mock", "loop", "v1")
	d2, _ := event.NewAgentDefinition(event.Config{SystemPrompt: "b", MaxSteps: 20}, nil, "mock", "loop", "v1")
	b := newLog(t, "s_def", event.Config{MaxSteps: 20})
	b.add(event.TurnStarted, event.TurnStartedData{Turn: 1, Message: llm.User("one")}).finish(1, "ok") // recorded none
	for _, c := range []struct {
		turn int
		def  event.AgentDefinition
	}{{2, d1}, {3, d1}, {4, d2}} {
		b.add(event.TurnStarted, event.TurnStartedData{Turn: c.turn, Message: llm.User("again"), Definition: &c.def}).finish(c.turn, "ok")
	}
	st := mustFold(t, b.events)
	if len(st.Definitions) != 2 || st.Definitions[0].Turn != 2 || st.Definitions[1].Turn != 4 {
		t.Fatalf("definitions %+v, want turn 2's and turn 4's", st.Definitions)
	}
	for turn, want := range map[int]string{1: "", 2: d1.Digest, 3: d1.Digest, 4: d2.Digest} {
		got := ""
		if d := st.DefinitionAt(turn); d != nil {
			got = d.Digest
		}
		if got != want {
			t.Errorf("turn %d ran under %q, want %q", turn, got, want)
		}
	}
}
