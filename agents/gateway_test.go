package agents_test

import (
	"testing"

	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/wire"
)

// TestPromptContinued: a session started through the controller and
// continued over three prompts on its own instance, each streamed as chunks
// (ack first) and ended by the terminator.
func TestPromptContinued(t *testing.T) {
	c := one(t, mock.Scripted(mock.Stream("Hello", ", ", "world.").OnTurn(1), mock.Say("Second.").OnTurn(2), mock.Say("Third.").OnTurn(3)), nil)
	nc := caller(t, c, 0, wire.RoleClient, "alice")
	ms := stream(t, nc, wire.AgentSubject(wire.AgentVerbPrompt, "tah", wire.AgentController), []byte("hi there"))
	if st := statuses(ms); len(st) < 2 || st[0] != wire.StatusAck {
		t.Fatalf("statuses %v: want ack first", st)
	}
	if got := text(ms); got != "Hello, world." {
		t.Fatalf("text %q", got)
	}
	if !ms[len(ms)-1].end {
		t.Fatal("no terminator")
	}
	sid := sessionOf(t, ms)
	subj := wire.AgentSubject(wire.AgentVerbPrompt, "tah", sid)
	for i, want := range []string{"Second.", "Third."} {
		ms := stream(t, nc, subj, []byte(`{"prompt":"again"}`))
		if got := text(ms); got != want || statuses(ms)[0] != wire.StatusAck {
			t.Fatalf("prompt %d: %q, %v", i+2, got, statuses(ms))
		}
	}
}
