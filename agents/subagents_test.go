package agents_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/wire"
)

// TestPromptWithSubAgents: a prompt whose turn calls a sub-agent hears the
// call start, then "awaiting_agents" (the turn waits for the child's
// session: the stream stays open, kept alive), then the parent's answer
// made of the child's, and the terminator, from the node that resumed the
// turn.
func TestPromptWithSubAgents(t *testing.T) {
	p := mock.Scripted(
		mock.CallTool("agent_researcher", `{"task":"the tides"}`).OnPrompt("research"),
		mock.Say("high at noon").OnPrompt("the tides").After(300*time.Millisecond),
		mock.Say("The tides are high at noon.").OnPrompt("research"),
	)
	c := oneWith(t, p, nil, func(o *node.Options) {
		o.AgentKeepAlive = 100 * time.Millisecond
		o.Session.SubAgents = []session.SubAgent{{Name: "researcher", Description: "Finds out about one thing.", SystemPrompt: "You research."}}
	})
	nc := caller(t, c, 0, wire.RoleClient, "alice")
	ms := stream(t, nc, wire.AgentSubject(wire.AgentVerbPrompt, "tah", wire.AgentController), []byte("research the sea"))
	st := statuses(ms)
	tool := slices.Index(st, wire.StatusToolPrefix+"agent_researcher")
	waits := slices.Index(st, wire.StatusAwaitingAgents)
	if tool < 0 || waits < tool {
		t.Fatalf("statuses %v: want the call, then awaiting_agents", st)
	}
	if got := text(ms); got != "The tides are high at noon." || !ms[len(ms)-1].end {
		t.Fatalf("the answer %q, stream %+v", got, ms)
	}
}
