package session

import (
	"slices"
	"testing"

	"github.com/tah-dev/tah/projection"
)

// pendingCalls reads the current turn's calls that never started, and only
// those: an earlier turn's call still pending (a turn that ended without
// running it) is not the current turn's to run.
func TestPendingCalls(t *testing.T) {
	st := &projection.State{Turn: 3, ToolCalls: []projection.ToolCallRecord{
		{CallID: "old", Turn: 1, Status: projection.StepPending},
		{CallID: "ran", Turn: 2, Status: projection.StepCompleted},
		{CallID: "c1", Turn: 3, Status: projection.StepPending},
		{CallID: "c2", Turn: 3, Status: projection.StepRunning},
		{CallID: "c3", Turn: 3, Status: projection.StepPending, HasResult: true},
		{CallID: "c4", Turn: 3, Status: projection.StepPending},
	}}
	var got []string
	for _, c := range pendingCalls(st) {
		got = append(got, c.ID)
	}
	if want := []string{"c1", "c4"}; !slices.Equal(got, want) {
		t.Fatalf("pending calls %v, want %v", got, want)
	}
	st.Turn = 4 // a new turn, before its model asked for any call
	if got := pendingCalls(st); len(got) != 0 {
		t.Fatalf("pending calls of a turn without calls: %v", got)
	}
	if got := pendingCalls(&projection.State{Turn: 1}); len(got) != 0 {
		t.Fatalf("pending calls of a session without calls: %v", got)
	}
}
