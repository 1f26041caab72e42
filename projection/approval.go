package projection

import (
	"fmt"
	"slices"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// Approval is where a tool call stands with the node's approval policy.
type Approval string

// The approvals of a call (ToolCallRecord.Approval); empty for a call that
// needed none.
const (
	ApprovalRequested Approval = "requested" // tool.approval-requested, no decision yet
	ApprovalApproved  Approval = "approved"  // tool.approved: it runs
	ApprovalDenied    Approval = "denied"    // tool.denied: it does not run
)

// Pending reports whether the call awaits a decision: requested, and
// neither decided nor answered (a cancel answers it).
func (r ToolCallRecord) Pending() bool { return r.Approval == ApprovalRequested && !r.HasResult }

// PendingApprovals are the calls of the current turn that await a decision,
// in the model's order.
func (s *State) PendingApprovals() []llm.ToolCall {
	var out []llm.ToolCall
	for _, r := range s.ToolCalls {
		if r.Turn == s.Turn && r.Pending() {
			out = append(out, llm.ToolCall{ID: r.CallID, Name: r.Name, Arguments: r.Arguments})
		}
	}
	return out
}

// applyApproval folds the approval events: a request marks its calls and the
// session waiting_tool, awaiting approval; a decision settles one call, and
// the last one ends the wait (the loop then runs or answers the calls).
func (s *State) applyApproval(e event.Event, payload any) error {
	if err := s.needActive(); err != nil {
		return err
	}
	switch d := payload.(type) {
	case *event.ToolApprovalRequestedData:
		for _, c := range d.Calls {
			rec := s.ToolCall(c.ID)
			if rec == nil || rec.Turn != s.Turn || rec.HasResult || rec.StepID != "" || rec.Approval != "" {
				return fmt.Errorf("approval requested for call %q, which is not a call of turn %d that waits to start: %w", c.ID, s.Turn, ErrInconsistent)
			}
			rec.Approval = ApprovalRequested
		}
		s.Status, s.AwaitingApproval, s.ApprovalDeadline = StatusWaitingTool, true, d.Deadline
	case *event.ToolApprovedData:
		rec, err := s.pendingApproval(d.CallID, e.Type)
		if err != nil {
			return err
		}
		rec.Approval = ApprovalApproved
		if len(d.Arguments) > 0 {
			rec.Arguments = slices.Clone(d.Arguments)
		}
		s.settleApprovals()
	case *event.ToolDeniedData:
		rec, err := s.pendingApproval(d.CallID, e.Type)
		if err != nil {
			return err
		}
		rec.Approval = ApprovalDenied
		s.settleApprovals()
	}
	return nil
}

func (s *State) pendingApproval(callID string, t event.Type) (*ToolCallRecord, error) {
	rec := s.ToolCall(callID)
	if rec == nil || !rec.Pending() {
		return nil, fmt.Errorf("%s of call %q, which awaits no approval: %w", t, callID, ErrInconsistent)
	}
	return rec, nil
}

// settleApprovals ends the wait once no call of the turn awaits a decision.
func (s *State) settleApprovals() {
	if !s.AwaitingApproval || len(s.PendingApprovals()) > 0 {
		return
	}
	s.AwaitingApproval, s.ApprovalDeadline = false, time.Time{}
	if s.Status == StatusWaitingTool && !s.toolRunning() {
		s.Status = StatusRunning
	}
}
