package replay_test

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/replay"
)

// TestRunAForkAtAStepWithAnEdit: the recorded fork of projection's
// testdata (a fork inside a turn, a tool result edited, the turn run on,
// a turn that recorded its definition) replays identically under its own
// definition (but for the build, which its turn 2 names); under another
// prompt a replay of turn 2 says, before its steps, that the prompt
// changed since.
func TestRunAForkAtAStepWithAnEdit(t *testing.T) {
	evs := readLogFile(t, "../projection/testdata/fork_at_step_edit.jsonl")
	var offered []llm.ToolSchema
	for _, e := range evs {
		if e.Type == event.ToolsOffered {
			d, _ := event.DecodeAs[event.ToolsOfferedData](e)
			offered = d.Tools
		}
	}
	cfg := event.Config{SystemPrompt: "You are a helpful agent.", MaxSteps: 20}
	rep, err := replay.Run(evs, replay.Definition{Config: cfg, Tools: offered}, replay.Options{})
	if err != nil || !rep.Identical || rep.Steps != 2 || rep.Turns != 2 {
		t.Fatalf("its own definition: %+v %v", rep, err)
	}
	if c := rep.DefinitionChanged; c == nil || c.Turn != 2 || event.DescribeChanges(c.Changes) != "version v0.3.0 → "+c.Changes[0].To {
		t.Errorf("the recorded turn's definition was of build v0.3.0: %+v", c)
	}
	// The fork's open turn recorded no definition (no turn.started): turn
	// 2's says what changed.
	cfg.SystemPrompt = "You are a terse agent."
	rep, err = replay.Run(evs, replay.Definition{Config: cfg, Tools: offered}, replay.Options{Turn: 2})
	if err != nil || rep.Divergence == nil || rep.Divergence.Turn != 2 || rep.DefinitionChanged == nil ||
		rep.DefinitionChanged.Changes[0].Part != event.PartSystemPrompt {
		t.Fatalf("another prompt: %+v %v", rep, err)
	}
}

// readLogFile reads a log written one event a line (`tahctl events --json`).
func readLogFile(t *testing.T, path string) []event.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []event.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e event.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}
