package projection

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// approvalLog is a turn whose call c1 waited for approval.
func approvalLog(t *testing.T) (*logBuilder, llm.ToolCall) {
	b := newLog(t, "s_approval", event.Config{MaxSteps: 20})
	b.tools = []llm.ToolSchema{{Name: "write_file"}}
	b.claim(1, "n1").input(1, "in_1")
	c := call("c1", "write_file", `{"path":"a"}`)
	b.llm("", c).add(event.ToolApprovalRequested, event.ToolApprovalRequestedData{Turn: 1, Calls: []llm.ToolCall{c}})
	return b, c
}

func TestApprovalFoldsAndAudits(t *testing.T) {
	b, c := approvalLog(t)
	if !b.st.AwaitingApproval || b.st.Status != StatusWaitingTool || len(b.st.PendingApprovals()) != 1 {
		t.Fatalf("waiting: %+v", b.st)
	}
	b.add(event.ToolApproved, event.ToolApprovedData{CallID: "c1", By: "alice", Arguments: []byte(`{"path":"b"}`)})
	if b.st.AwaitingApproval || b.st.Status != StatusRunning || string(b.st.ToolCall("c1").Arguments) != `{"path":"b"}` {
		t.Fatalf("approved: %+v", b.st)
	}
	b.tool(c, "written").llm("done").finish(1, "done")
	if r := Audit(withEpochs(b.events)); len(r.Problems) > 0 {
		t.Fatalf("%v", r.Problems)
	}
}

// TestApprovalInvariants: a call starts only once approved, is decided
// once, and only while it waits; the fold refuses the rest and the audit
// names it.
func TestApprovalInvariants(t *testing.T) {
	for name, bad := range map[string]func(b *logBuilder, c llm.ToolCall){
		"started before its approval": func(b *logBuilder, c llm.ToolCall) {
			b.add(event.ToolStarted, event.ToolStartedData{StepID: "st9", Call: c})
		},
		"decided twice": func(b *logBuilder, _ llm.ToolCall) {
			b.add(event.ToolDenied, event.ToolDeniedData{CallID: "c1"}).add(event.ToolApproved, event.ToolApprovedData{CallID: "c1"})
		},
		"decided after its result": func(b *logBuilder, c llm.ToolCall) {
			b.add(event.ToolFinished, event.ToolFinishedData{CallID: "c1", Name: c.Name, Output: "cancelled", Code: event.CodeCancelled, IsError: true}).
				add(event.ToolApproved, event.ToolApprovedData{CallID: "c1"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			b, c := approvalLog(t)
			bad(b, c)
			if _, err := Fold(b.events); !errors.Is(err, ErrInconsistent) {
				t.Errorf("fold: %v", err)
			}
			r := Audit(withEpochs(b.events))
			if len(r.Problems) == 0 || !strings.Contains(fmt.Sprint(r.Problems), "c1") {
				t.Errorf("audit: %v", r.Problems)
			}
		})
	}
}
