package store

import (
	"context"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// A turn that waits for a person's approval is marked so in its row (status
// waiting_tool, awaiting_approval), and no longer once the call is decided.
func TestRowSaysAwaitingApproval(t *testing.T) {
	s := openTest(t, Options{})
	call := llm.ToolCall{ID: "c1", Name: "write_file", Arguments: []byte(`{"path":"a.txt","content":"x"}`)}
	b := newSession(t, "s_wait", event.Config{}, nil).userTurn("write it").llm("", call)
	b.add(event.ToolApprovalRequested, event.ToolApprovalRequestedData{Turn: 1, Calls: []llm.ToolCall{call}})
	apply(t, s, b.events, 100)
	row, err := s.GetSession(context.Background(), "s_wait")
	if err != nil {
		t.Fatal(err)
	}
	if !row.AwaitingApproval || row.Status != "waiting_tool" {
		t.Fatalf("waiting: awaiting_approval %v, status %s", row.AwaitingApproval, row.Status)
	}
	n := len(b.events)
	b.add(event.ToolApproved, event.ToolApprovedData{CallID: "c1", By: "alice"})
	apply(t, s, b.events[n:], 100)
	if row, err = s.GetSession(context.Background(), "s_wait"); err != nil || row.AwaitingApproval {
		t.Fatalf("approved: awaiting_approval %v, %v", row.AwaitingApproval, err)
	}
}
