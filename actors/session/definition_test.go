package session

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
)

// A turn's definition is made again when one of its parts changes, and is
// the one NewAgentDefinition makes of them either way: the memo of the last
// one only saves making it again.
func TestDefinitionFollowsItsParts(t *testing.T) {
	noop := func(context.Context, json.RawMessage) (tools.Result, error) { return tools.Text("ok"), nil }
	tool := func(schema string) tools.Catalog {
		reg, err := tools.NewRegistry(tools.Func(tools.Spec{Name: "t", Schema: json.RawMessage(schema)}, noop))
		if err != nil {
			t.Fatal(err)
		}
		return reg
	}
	provider, err := mock.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &AgentContext{Config: Config{SystemPrompt: "one"}, Provider: provider, Tools: &Tools{catalog: tool(`{"type":"object"}`)},
		state: &projection.State{}, loop: "session.DefaultLoop", log: quiet}
	want := func() string {
		t.Helper()
		d, err := event.NewAgentDefinition(a.Config.eventConfig(), a.offeredTools(), a.Provider.Name(), a.loop, buildVersion())
		if err != nil {
			t.Fatal(err)
		}
		return d.Digest
	}
	seen := map[string]bool{}
	for i, change := range []func(){
		func() {},
		func() {}, // unchanged: the same definition
		func() { a.Config.SystemPrompt = "two" },
		func() { a.Config.Budget = event.Budget{Turn: event.Limits{Tokens: 3}} },
		func() { a.Config.Budget = event.Budget{Turn: event.Limits{Tokens: 4}} },
		func() { a.Tools = &Tools{catalog: tool(`{"type":"object","properties":{}}`)} },
		func() { a.loop = "other" },
	} {
		change()
		d := a.definition()
		if d == nil || d.Digest != want() {
			t.Fatalf("change %d: definition %+v, want digest %s", i, d, want())
		}
		if i != 1 && seen[d.Digest] {
			t.Fatalf("change %d: the definition did not change", i)
		}
		seen[d.Digest] = true
		d.Tools[0].Name = "mutated" // a caller's copy: the memo keeps its own
	}
}
