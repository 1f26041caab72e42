package tah_test

import (
	"errors"
	"testing"

	"github.com/tah-dev/tah"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// TestReplayLiveThroughTheGoAPI: a replay that diverges at turn 2 goes on
// live in a new session, labelled as the replay of the recorded one, that
// holds turn 1 and runs turn 2's message with the real model and tool
// under the replay's definition: the model is asked with the new system
// prompt and model (a claim restates them, not the node's), and the turn
// completes. The live session replays identically under its own
// definition; an identical replay makes none; tools may not be changed.
func TestReplayLiveThroughTheGoAPI(t *testing.T) {
	tool := &counter{name: "count"}
	model := mock.Scripted(mock.CallTool("count", `{}`), mock.Say("counted"), mock.Say("again"), // the recording
		mock.CallTool("count", `{}`), mock.Say("live")) // the live turn
	rt := env{dir: t.TempDir(), provider: model, tools: []tools.Tool{tool}, agent: tah.AgentOptions{SystemPrompt: "You count."}}.start(t)
	ctx := ctxT(t)
	s, err := tah.Get(rt, tah.SessionKey).Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"count once", "once more"} {
		if r, err := s.Run(ctx, in); err != nil || r.State != tah.StateCompleted {
			t.Fatalf("%+v %v", r, err)
		}
	}

	rep, live, err := s.ReplayLive(ctx, tah.ReplayOptions{})
	if err != nil || !rep.Identical || live != nil || rep.Live != nil {
		t.Fatalf("same agent: %+v %+v %v", rep, live, err)
	}
	none := []llm.ToolSchema{}
	if _, _, err := s.ReplayLive(ctx, tah.ReplayOptions{Tools: &none}); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("other tools: %v, want ErrBadRequest", err)
	}

	other := "You count twice."
	rep, live, err = s.ReplayLive(ctx, tah.ReplayOptions{Turn: 2, SystemPrompt: &other, Model: "counter-2"})
	if err != nil || rep.Divergence == nil || rep.Divergence.Turn != 2 || rep.Divergence.Step != 1 || live == nil {
		t.Fatalf("another prompt from turn 2: %+v %+v %v", rep, live, err)
	}
	if rep.Live == nil || rep.Live.Session != live.Session.ID() || rep.Live.Turn != 2 || rep.Live.Turns != 1 || rep.Live.Message.Content != "once more" {
		t.Fatalf("the report's live session: %+v", rep.Live)
	}
	if live.Turn != 2 || live.Result.State != tah.StateCompleted || live.Result.Content != "live" || live.Result.Turn != 2 {
		t.Fatalf("the live turn: %+v", live)
	}
	calls := model.Calls()
	if len(calls) != 5 {
		t.Fatalf("%d model calls, want the recording's 3 and the live turn's 2", len(calls))
	}
	for _, req := range calls[3:] {
		msgs := req.Messages
		if req.Model != "counter-2" || msgs[0].Role != llm.RoleSystem || msgs[0].Content != other || msgs[1].Content != "count once" || msgs[5].Content != "once more" {
			t.Fatalf("a live request under the node's definition, not the replay's: model %q, %+v", req.Model, msgs)
		}
	}
	if runs := tool.runs.Load(); runs != 2 {
		t.Errorf("the tool ran %d times, want the recording's once and the live turn's", runs)
	}

	st, err := live.Session.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Labels[wire.LabelReplayOf] != s.ID() || st.ForkedFrom != s.ID() || st.Config.SystemPrompt != other || st.Config.Model != "counter-2" || st.Epoch == 0 {
		t.Fatalf("the live session: labels %v, forked from %q, claimed with %+v (epoch %d)", st.Labels, st.ForkedFrom, st.Config, st.Epoch)
	}
	if rep, err := live.Session.Replay(ctx, tah.ReplayOptions{}); err != nil || !rep.Identical || rep.Steps != 2 {
		t.Fatalf("the live session replayed under its own definition: %+v %v", rep, err)
	}
}

// TestReplayLiveFromInsideATurn: a turn that stopped at max_steps 1 after
// its tool call diverges at its second LLM step under max_steps 2; the
// live session is a fork right after that tool call, its turn open, and
// goes on from there (a resume): the model is asked once, with the
// recorded call and result in its history, under the replay's max_steps
// (the node's 1 would fail the turn at once), and answers.
func TestReplayLiveFromInsideATurn(t *testing.T) {
	tool := &counter{name: "count"}
	model := mock.Scripted(mock.CallTool("count", `{}`), mock.Say("counted, live"))
	rt := env{dir: t.TempDir(), provider: model, tools: []tools.Tool{tool}, agent: tah.AgentOptions{SystemPrompt: "You count.", MaxSteps: 1}}.start(t)
	ctx := ctxT(t)
	s, err := tah.Get(rt, tah.SessionKey).Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Run(ctx, "count once"); err != nil || r.State != tah.StateFailed || r.Code != "max_steps" {
		t.Fatalf("the recorded turn: %+v %v", r, err)
	}
	two := 2
	rep, live, err := s.ReplayLive(ctx, tah.ReplayOptions{MaxSteps: &two})
	if err != nil || rep.Divergence == nil || rep.Divergence.Turn != 1 || rep.Divergence.Step != 2 || live == nil {
		t.Fatalf("max_steps 2: %+v %+v %v", rep, live, err)
	}
	if rep.Live.AfterStep == "" || rep.Live.Turns != 0 {
		t.Fatalf("the live session is not a fork inside the turn: %+v", rep.Live)
	}
	if live.Result.State != tah.StateCompleted || live.Result.Content != "counted, live" || live.Result.Turn != 1 {
		t.Fatalf("the live turn: %+v", live.Result)
	}
	calls := model.Calls()
	if len(calls) != 2 {
		t.Fatalf("%d model calls, want the recording's and the live step's", len(calls))
	}
	if msgs := calls[1].Messages; len(msgs) != 4 || msgs[2].ToolCalls[0].Name != "count" || msgs[3].Role != llm.RoleTool || msgs[3].Content != "count run with {}" {
		t.Fatalf("the live step's history is not the recorded turn's up to its tool result: %+v", msgs)
	}
	if runs := tool.runs.Load(); runs != 1 {
		t.Errorf("the tool ran %d times: the live turn runs on after it", runs)
	}
}
