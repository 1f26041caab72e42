package projection

import "github.com/tah-dev/tah/event"

// auditApproval checks an approval event: a request names calls that have
// no result and were never asked about; a decision settles a call that
// awaits one, once, before its result.
func (a *auditor) auditApproval(e event.Event) {
	switch e.Type {
	case event.ToolApprovalRequested:
		d, err := event.DecodeAs[event.ToolApprovalRequestedData](e)
		if err != nil {
			a.bad(e, "%v", err)
			return
		}
		for _, c := range d.Calls {
			if at, ok := a.toolDone[c.ID]; ok {
				a.bad(e, "approval requested for tool call %s (%s) after its tool.finished at seq %d", c.ID, c.Name, at)
			}
			if was, ok := a.approval[c.ID]; ok {
				a.bad(e, "approval requested again for tool call %s (%s), already %s", c.ID, c.Name, was)
			}
			a.approval[c.ID] = ApprovalRequested
		}
	case event.ToolApproved:
		d, err := event.DecodeAs[event.ToolApprovedData](e)
		a.decided(e, d.CallID, ApprovalApproved, err)
	case event.ToolDenied:
		d, err := event.DecodeAs[event.ToolDeniedData](e)
		a.decided(e, d.CallID, ApprovalDenied, err)
	}
}

func (a *auditor) decided(e event.Event, callID string, to Approval, err error) {
	if err != nil {
		a.bad(e, "%v", err)
		return
	}
	if at, ok := a.toolDone[callID]; ok {
		a.bad(e, "tool call %s is %s after its tool.finished at seq %d", callID, to, at)
	}
	if was := a.approval[callID]; was != ApprovalRequested {
		a.bad(e, "tool call %s is %s, but it awaited no approval (%q)", callID, to, was)
	}
	a.approval[callID] = to
}

// startApproved checks that a call that needed approval starts only once
// approved.
func (a *auditor) startApproved(e event.Event, call string) {
	if was, ok := a.approval[call]; ok && was != ApprovalApproved {
		a.bad(e, "tool call %s starts while its approval is %s", call, was)
	}
}
