package tah_test

import (
	"testing"

	"github.com/tah-dev/tah"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// TestForkAtToolStepWithEdit: a fork right after a tool step, with the
// tool's result edited, is an open turn; its resume asks the model with
// the edited result, without running the tool again. Each turn records
// the definition of its agent, and a replay under another prompt says
// the definition changed before it replays.
func TestForkAtToolStepWithEdit(t *testing.T) {
	tool := &counter{name: "count"}
	model := mock.Scripted(mock.CallTool("count", `{}`), mock.Say("counted"), mock.Say("saw the edit"))
	rt := env{dir: t.TempDir(), provider: model, tools: []tools.Tool{tool}, agent: tah.AgentOptions{SystemPrompt: "You count."}}.start(t)
	ctx := ctxT(t)
	sessions := tah.Get(rt, tah.SessionKey)
	s, err := sessions.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Run(ctx, "count once"); err != nil || r.State != tah.StateCompleted {
		t.Fatalf("%+v %v", r, err)
	}
	src, err := s.Snapshot(ctx)
	if err != nil || len(src.Steps) != 3 || src.Steps[1].Type != projection.StepTool {
		t.Fatalf("source: %+v %v", src.Steps, err)
	}
	if len(src.Definitions) != 1 || src.Definitions[0].Turn != 1 || len(src.Definitions[0].Tools) != 1 || src.Definitions[0].Tools[0].Name != "count" {
		t.Fatalf("source's definitions %+v, want turn 1's, offering count", src.Definitions)
	}

	step := src.Steps[1].ID
	f, err := sessions.Fork(ctx, s.ID(), tah.ForkOptions{AtStep: step, Edit: &wire.ForkEdit{Step: step, Content: "42", By: "tester"}})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := f.Snapshot(ctx)
	if err != nil || snap.Status != projection.StatusRunning || snap.Turn != 1 || snap.Edits != 1 || len(snap.Steps) != 0 {
		t.Fatalf("fork: %s turn %d, %d edits, %d steps: %v", snap.Status, snap.Turn, snap.Edits, len(snap.Steps), err)
	}
	if last := snap.Messages[len(snap.Messages)-1]; last.Role != llm.RoleTool || last.Content != "42" {
		t.Fatalf("the fork's last message %+v, want the edited result", last)
	}
	r, err := f.Resume(ctx)
	if err != nil || r.State != tah.StateCompleted || r.Content != "saw the edit" {
		t.Fatalf("resume: %+v %v", r, err)
	}
	calls := model.Calls()
	if len(calls) != 3 {
		t.Fatalf("%d model calls, want 3", len(calls))
	}
	if msgs := calls[2].Messages; msgs[len(msgs)-1].Content != "42" || msgs[0].Content != "You count." {
		t.Errorf("the resumed turn's request ends with %+v, want the edited result", msgs[len(msgs)-1])
	}
	if n := tool.runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once: the fork's result is the edit", n)
	}
	evs, _, err := rt.Node().Bus().Replay(ctx, f.ID(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := projection.Audit(evs); len(r.Problems) > 0 {
		t.Errorf("the fork's log:\n%s", r.Problems)
	}
	var edited *event.SessionEditedData
	for _, e := range evs {
		if e.Type == event.SessionEdited {
			d, _ := event.DecodeAs[event.SessionEditedData](e)
			edited = &d
		}
	}
	if edited == nil || edited.From != "count run with {}" || edited.To != "42" || edited.By != "tester" || edited.Role != llm.RoleTool {
		t.Errorf("session.edited %+v", edited)
	}

	other := "You count twice."
	rep, err := s.Replay(ctx, tah.ReplayOptions{SystemPrompt: &other})
	if err != nil || rep.DefinitionChanged == nil || rep.DefinitionChanged.Turn != 1 ||
		event.DescribeChanges(rep.DefinitionChanged.Changes) != "system prompt" {
		t.Fatalf("replay under another prompt: %+v %v", rep.DefinitionChanged, err)
	}
	if rep, err := s.Replay(ctx, tah.ReplayOptions{}); err != nil || rep.DefinitionChanged != nil {
		t.Fatalf("replay under the same agent: %+v %v", rep.DefinitionChanged, err)
	}
}
