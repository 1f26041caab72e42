package event

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tah-dev/tah/llm"
)

func TestDefinitionChanges(t *testing.T) {
	tools := []llm.ToolSchema{{Name: "read", InputSchema: json.RawMessage(`{"type":"object"}`)}, {Name: "ls"}}
	a, err := NewAgentDefinition(Config{SystemPrompt: "be brief", MaxSteps: 20, Model: "m1"}, tools, "mock", "session.DefaultLoop", "v1")
	if err != nil {
		t.Fatal(err)
	}
	same, _ := NewAgentDefinition(Config{SystemPrompt: "be brief", MaxSteps: 20, Model: "m1"}, tools, "mock", "session.DefaultLoop", "v1")
	if same.Digest != a.Digest || len(a.Changes(same)) != 0 || len(a.Digest) != 64 || len(a.SystemPrompt) != 16 {
		t.Fatalf("one definition, two digests or changes: %+v %+v", a, same)
	}
	tools2 := []llm.ToolSchema{{Name: "read", Description: "reads", InputSchema: json.RawMessage(`{"type":"object"}`)}, {Name: "grep"}}
	b, err := NewAgentDefinition(Config{SystemPrompt: "be very brief", MaxSteps: 30, Model: "m2", Budget: &Budget{Turn: Limits{Tokens: 100}}}, tools2, "mock", "session.DefaultLoop", "v2")
	if err != nil {
		t.Fatal(err)
	}
	got := DescribeChanges(a.Changes(b))
	for _, want := range []string{"system prompt", "tools: added grep; removed ls; changed read", "model m1 → m2",
		"settings: max_steps 20 → 30, budget (none) → ", "version v1 → v2"} {
		if !strings.Contains(got, want) {
			t.Errorf("changes %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "loop") || strings.Contains(got, "provider") {
		t.Errorf("changes %q name parts that did not change", got)
	}
	reordered, _ := NewAgentDefinition(Config{SystemPrompt: "be brief", MaxSteps: 20, Model: "m1"}, []llm.ToolSchema{tools[1], tools[0]}, "mock", "session.DefaultLoop", "v1")
	if got := DescribeChanges(a.Changes(reordered)); got != "tools: reordered" {
		t.Errorf("reordered tools: %q", got)
	}
}
