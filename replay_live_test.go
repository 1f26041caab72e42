package tah_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/tah-dev/tah"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
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
	dir := t.TempDir()
	nats := bus.Default()
	nats.DataDir, nats.Port, nats.Partitions = dir, -1, 2
	tool := &counter{name: "count"}
	model := mock.Scripted(mock.CallTool("count", `{}`), mock.Say("counted"), mock.Say("again"), // the recording
		mock.CallTool("count", `{}`), mock.Say("live")) // the live turn
	rt := tah.New().WithLogger(slog.New(slog.DiscardHandler)).
		Use(tah.NATS(nats)).
		Use(tah.Storage(tah.StorageOptions{Path: filepath.Join(dir, "data.db")})).
		Use(tah.LLM(tah.LLMOptions{Instance: model})).
		Use(tah.Agent(tah.AgentOptions{SystemPrompt: "You count."})).
		Use(tah.Tools(tool))
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
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
