package node

import (
	"context"
	"testing"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// A parent that called two sub-agents, and each child, replay identically
// through tah.api.replay: a child's definition is its sub-agent's (its
// system prompt), not the node's, and a change the request makes applies
// to it: without its prompt, a child diverges at once.
func TestReplayOfSubAgents(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := &team{started: make(chan string, 8)}
	_, c := startTeam(t, ctx, m)
	r, err := c.Create(ctx, wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sid := r.Session
	f, err := c.Follow(ctx, sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	turn, err := c.Run(ctx, sid, wire.Input{Text: "what about the sea?"})
	if err != nil {
		t.Fatal(err)
	}
	defer turn.Close()
	for finished := false; !finished; {
		select {
		case ev := <-f.Events():
			finished = ev.Type == event.AgentFinished
		case <-ctx.Done():
			t.Fatal("the parent's turn never finished")
		}
	}
	rep, err := c.Replay(ctx, wire.ReplayRequest{Session: sid})
	if err != nil || !rep.Identical || rep.Steps != 2 || len(rep.Definition.Tools) != 1 || rep.Definition.Tools[0] != "agent_researcher" {
		t.Fatalf("the parent: %+v %v", rep, err)
	}
	for _, call := range []string{"call_a", "call_b"} {
		child := session.ChildID(sid, call)
		rep, err := c.Replay(ctx, wire.ReplayRequest{Session: child})
		if err != nil || !rep.Identical || rep.Steps != 1 || rep.Definition.SystemPromptChars != len("You research.") {
			t.Fatalf("child %s: %+v %v", child, rep, err)
		}
		none := ""
		if rep, err := c.Replay(ctx, wire.ReplayRequest{Session: child, SystemPrompt: &none}); err != nil || rep.Divergence == nil || rep.Divergence.Step != 1 {
			t.Fatalf("child %s without its prompt: %+v %v", child, rep, err)
		}
	}
	if len(m.tasks) != 2 {
		t.Errorf("the researchers ran %d times", len(m.tasks))
	}
}
