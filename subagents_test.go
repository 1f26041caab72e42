package tah_test

import (
	"testing"
	"time"

	"github.com/tah-dev/tah"
	"github.com/tah-dev/tah/llm/mock"
)

// The Go API's AgentOptions.SubAgents: the model's call of agent_researcher
// runs in a child session, Run returns the parent's answer made of the
// child's (not the wait for it), and the parent lists its child, which
// names its parent's call.
func TestSubAgentsThroughTheGoAPI(t *testing.T) {
	ctx := ctxT(t)
	p := mock.Scripted(
		mock.CallTool("agent_researcher", `{"task":"the tides"}`).OnPrompt("research"),
		mock.Say("high at noon").OnPrompt("the tides"),
		mock.Say("the tides are high at noon").OnPrompt("research"),
	)
	rt := env{dir: t.TempDir(), provider: p, agent: tah.AgentOptions{SubAgents: []tah.SubAgent{
		{Name: "researcher", Description: "Finds out about one thing.", SystemPrompt: "You research."}}}}.start(t)
	s, err := tah.Get(rt, tah.SessionKey).Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Run(ctx, "research the sea")
	if err != nil || r.State != tah.StateCompleted || r.Content != "the tides are high at noon" {
		t.Fatalf("run: %+v, %v", r, err)
	}
	st, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	child := ""
	for _, step := range st.Steps {
		if step.Child != "" {
			child = step.Child
		}
	}
	if child == "" {
		t.Fatalf("no step of the parent names a child: %+v", st.Steps)
	}
	var kids []tah.ChildSummary
	for len(kids) == 0 { // the read model may not have the child's row yet
		if kids, _, err = s.Children(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("the parent never listed its child")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if kids[0].ID != child || kids[0].Agent != "researcher" {
		t.Fatalf("children %+v, the step's child %s", kids, child)
	}
	cs, err := tah.Get(rt, tah.SessionKey).Get(ctx, child)
	if err != nil {
		t.Fatal(err)
	}
	cst, err := cs.Snapshot(ctx)
	if err != nil || cst.Parent == nil || cst.Parent.Session != s.ID() || cst.LastOutput != "high at noon" {
		t.Fatalf("the child: parent %+v, answer %q, %v", cst.Parent, cst.LastOutput, err)
	}

	bad := tah.New()
	bad.Use(tah.Agent(tah.AgentOptions{SubAgents: []tah.SubAgent{{Name: "no description"}}}))
	if err := bad.Start(ctx); err == nil {
		bad.Close(ctx)
		t.Fatal("a sub-agent without a description was taken")
	}
}
