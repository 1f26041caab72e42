package store

import (
	"context"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// family is a parent whose one answer calls two sub-agents (a researcher
// twice), their two child sessions (one finished, one failed), and a
// grandchild of the first: four sessions, one LLM call each but the
// parent's two (15 tokens a call).
func family(t testing.TB) []event.Event {
	parent := newSession(t, "s_parent", event.Config{}, nil)
	parent.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n1"})
	parent.userTurn("what about the sea?")
	a, b := call("call_a", "agent_researcher", `{"task":"tides"}`), call("call_b", "agent_researcher", `{"task":"waves"}`)
	parent.llm("", a, b)
	sa, sb := parent.nextStep(), parent.nextStep()
	parent.add(event.ToolStarted, event.ToolStartedData{StepID: sa, Call: a, Runner: event.AgentRunnerPrefix + "s_child_a"})
	parent.add(event.ToolStarted, event.ToolStartedData{StepID: sb, Call: b, Runner: event.AgentRunnerPrefix + "s_child_b"})

	childA := &sessionLog{t: t, id: "s_child_a"}
	childA.add(event.SessionCreated, event.SessionCreatedData{Parent: &event.ParentLink{Session: "s_parent", CallID: "call_a", Agent: "researcher", Depth: 1}})
	childA.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n2"})
	childA.userTurn("tides")
	g := call("call_g", "agent_researcher", `{"task":"the moon"}`)
	childA.llm("", g)
	sg := childA.nextStep()
	childA.add(event.ToolStarted, event.ToolStartedData{StepID: sg, Call: g, Runner: event.AgentRunnerPrefix + "s_grandchild"})
	grand := &sessionLog{t: t, id: "s_grandchild"}
	grand.add(event.SessionCreated, event.SessionCreatedData{Parent: &event.ParentLink{Session: "s_child_a", CallID: "call_g", Agent: "researcher", Depth: 2}})
	grand.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n1"})
	grand.userTurn("the moon").llm("it pulls").finish("it pulls")
	childA.add(event.ToolFinished, event.ToolFinishedData{StepID: sg, CallID: g.ID, Name: g.Name, Output: "it pulls"})
	childA.llm("high at noon").finish("high at noon")

	childB := &sessionLog{t: t, id: "s_child_b"}
	childB.add(event.SessionCreated, event.SessionCreatedData{Parent: &event.ParentLink{Session: "s_parent", CallID: "call_b", Agent: "researcher", Depth: 1}})
	childB.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n2"})
	childB.userTurn("waves")
	childB.add(event.LLMStarted, event.LLMStartedData{StepID: childB.nextStep(), Turn: 1, RequestRef: ref(2)})
	childB.add(event.AgentFailed, event.AgentFailedData{Turn: 1, Error: "the model is down", Code: event.CodeProvider})

	parent.add(event.ToolFinished, event.ToolFinishedData{StepID: sa, CallID: a.ID, Name: a.Name, Output: "high at noon"})
	parent.add(event.ToolFinished, event.ToolFinishedData{StepID: sb, CallID: b.ID, Name: b.Name, Output: "Error: the sub-agent failed", IsError: true, Code: event.CodeToolError})
	parent.llm("tides high at noon").finish("tides high at noon")
	return merge(parent.events, childA.events, grand.events, childB.events)
}

// The read model links sub-agents' sessions both ways and rolls their
// usage up: a parent's row lists its children (agent, call, status) and
// the totals of its tree, grandchildren included; a child's row names its
// parent's call; a sub-agent call's step names its child; and the store's
// state is the fold's (checkEquivalent), after a reopen too.
func TestRowsLinkSubAgents(t *testing.T) {
	ctx := context.Background()
	evs := family(t)
	s := openTest(t, Options{CacheSize: 1})
	apply(t, s, evs, 5)
	checkEquivalent(t, s, evs)

	p, err := s.GetSession(ctx, "s_parent")
	if err != nil {
		t.Fatal(err)
	}
	if p.Parent != nil || len(p.Children) != 2 || p.Tree == nil {
		t.Fatalf("parent row: parent %+v, children %+v, tree %+v", p.Parent, p.Children, p.Tree)
	}
	if c := p.Children[0]; c.ID != "s_child_a" || c.Agent != "researcher" || c.CallID != "call_a" || c.Status != projection.StatusCompleted {
		t.Errorf("first child: %+v", c)
	}
	if c := p.Children[1]; c.ID != "s_child_b" || c.CallID != "call_b" || c.Status != projection.StatusFailed {
		t.Errorf("second child: %+v", c)
	}
	// Calls: the parent's 2, child a's 2, the grandchild's 1 (child b's
	// failed call recorded no usage): 5 of 15 tokens each.
	want := llm.Usage{InputTokens: 50, OutputTokens: 25}
	if p.Tree.Sessions != 4 || p.Tree.Usage != want || p.Usage != (llm.Usage{InputTokens: 20, OutputTokens: 10}) {
		t.Errorf("parent's tree %+v (want 4 sessions, %+v), its own usage %+v", *p.Tree, want, p.Usage)
	}
	if p.Tree.Cost.USD <= p.Cost.USD {
		t.Errorf("the tree's cost %+v is not above the parent's own %+v", p.Tree.Cost, p.Cost)
	}

	a, err := s.GetSession(ctx, "s_child_a")
	if err != nil {
		t.Fatal(err)
	}
	if a.Parent == nil || *a.Parent != (event.ParentLink{Session: "s_parent", CallID: "call_a", Agent: "researcher", Depth: 1}) ||
		len(a.Children) != 1 || a.Children[0].ID != "s_grandchild" || a.Tree == nil || a.Tree.Sessions != 2 {
		t.Errorf("child a's row: parent %+v, children %+v, tree %+v", a.Parent, a.Children, a.Tree)
	}
	g, err := s.GetSession(ctx, "s_grandchild")
	if err != nil {
		t.Fatal(err)
	}
	if g.Parent == nil || g.Parent.Depth != 2 || len(g.Children) != 0 || g.Tree != nil {
		t.Errorf("the grandchild's row: parent %+v, children %+v, tree %+v", g.Parent, g.Children, g.Tree)
	}

	steps, err := s.Steps(ctx, "s_parent")
	if err != nil {
		t.Fatal(err)
	}
	var children []string
	for _, st := range steps {
		if st.Child != "" {
			children = append(children, st.CallID+"="+st.Child)
		}
	}
	if len(children) != 2 || children[0] != "call_a=s_child_a" || children[1] != "call_b=s_child_b" {
		t.Errorf("the parent's steps name children %v", children)
	}
}
