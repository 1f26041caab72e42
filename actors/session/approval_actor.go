package session

import (
	"context"

	"github.com/tah-dev/tah/wire"
)

// answerWhileWaiting answers or parks cmd, taken from the queue, when the
// turn waits for approval and cmd is not one that moves it on (approve,
// deny, cancel): a run or a compact waits behind the turn, a resume is
// answered with the wait (nothing runs to resume). A cancel that finds no
// turn waiting is answered with the state. It reports whether cmd is dealt
// with.
//
// A turn that waits for its sub-agents waits the same way, but a resume
// goes to work: it is how a child that ended tells its parent.
func (s *sessionActor) answerWhileWaiting(cmd *Command) bool {
	waiting := s.a.state.Waits()
	switch {
	case cmd.Kind == wire.CommandCancel && !waiting:
		cmd.Done(s.a.outcome(nil))
	case !waiting:
		return false
	case cmd.Kind == wire.CommandRun || cmd.Kind == wire.CommandCompact:
		s.parked = append(s.parked, cmd)
	case cmd.Kind == wire.CommandResume && s.a.state.AwaitingApproval:
		cmd.Done(s.a.outcome(nil))
	default:
		return false
	}
	return true
}

// cancelTheWait makes the cancels that reached work which ended with its
// turn waiting for approval (they came as it began to wait) work of their
// own, ahead of the queue: the first ends the turn, the others find it ended.
func (s *sessionActor) cancelTheWait() {
	if len(s.cancels) > 0 && s.a.state.Waits() {
		s.queue, s.cancels = append(s.cancels, s.queue...), nil
	}
}

// unpark puts the parked commands back at the head of the queue once the
// turn no longer waits for approval.
func (s *sessionActor) unpark() {
	if len(s.parked) > 0 && !s.a.state.Waits() {
		s.queue, s.parked = append(s.parked, s.queue...), nil
	}
}

// syncDeadline arms the Manager's deadline timer of the session while its
// turn waits for approval with a deadline, and disarms it otherwise.
func (s *sessionActor) syncDeadline() {
	st := s.a.state
	if st.AwaitingApproval && !st.ApprovalDeadline.IsZero() {
		s.m.armDeadline(s.sid, st.ApprovalDeadline)
		return
	}
	s.m.disarmDeadline(s.sid)
}

// decideAndRun carries out an approve or a deny, then runs the turn on: the
// approved calls, the model's next step. A turn that a previous owner left
// running after a decision (this input, delivered again after a crash, say)
// is resumed instead.
func (m *Manager) decideAndRun(ctx context.Context, a *AgentContext, cmd *Command) error {
	if st := a.state; st.Status.Active() && !st.AwaitingApproval {
		if err := PrepareResume(ctx, a); err != nil {
			return err
		}
		return m.loop.Run(ctx, a)
	}
	if err := decide(a, cmd); err != nil {
		return err
	}
	return m.loop.Run(ctx, a)
}

// cancelReasonOf is the reason a cancel command gives.
func cancelReasonOf(cmd *Command) string {
	if cmd.Reason == "" {
		return defaultCancelReason
	}
	return cmd.Reason
}
