package tah_test

import (
	"testing"

	"github.com/tah-dev/tah"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/tools"
)

// TestReplayThroughTheGoAPI: a session replays identically under the
// runtime's own agent, without asking the model or running the tool, and
// diverges at its first step under another system prompt.
func TestReplayThroughTheGoAPI(t *testing.T) {
	tool := &counter{name: "count"}
	model := mock.Scripted(mock.CallTool("count", `{}`), mock.Say("counted"))
	rt := env{dir: t.TempDir(), provider: model, tools: []tools.Tool{tool}, agent: tah.AgentOptions{SystemPrompt: "You count."}}.start(t)
	ctx := ctxT(t)
	s, err := tah.Get(rt, tah.SessionKey).Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Run(ctx, "count once"); err != nil || r.State != tah.StateCompleted {
		t.Fatalf("%+v %v", r, err)
	}
	rep, err := s.Replay(ctx, tah.ReplayOptions{})
	if err != nil || !rep.Identical || rep.Turns != 1 || rep.Steps != 2 {
		t.Fatalf("same agent: %+v %v", rep, err)
	}
	other := "You count twice."
	rep, err = s.Replay(ctx, tah.ReplayOptions{SystemPrompt: &other})
	if err != nil || rep.Divergence == nil || rep.Divergence.Turn != 1 || rep.Divergence.Step != 1 || rep.Divergence.Diffs[0].Role != "system" {
		t.Fatalf("another prompt: %+v %v", rep, err)
	}
	if calls, runs := len(model.Calls()), tool.runs.Load(); calls != 2 || runs != 1 {
		t.Errorf("%d model calls and %d tool runs, want the turn's 2 and 1", calls, runs)
	}
}
