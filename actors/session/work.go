package session

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// The work of a command: a turn, a resume, a decision, the cancel of a turn
// that waits for approval, a compaction. It runs in a goroutine the actor
// starts and owns through its cancel function; the goroutine owns the
// session's state until it reports workDone.

// start runs cmd in a work goroutine of its own. The goroutine answers cmd,
// then reports workDone to the actor, with the checkpoint it wrote after the
// work if any.
func (s *sessionActor) start(ctx actor.Context, cmd *Command) {
	s.resumedInput = ""
	if s.a.state.Status.Active() {
		s.resumedInput = s.a.state.LastInputID
	}
	s.busy, s.claiming = cmd, !s.a.claimed
	s.a.steers = s.box
	s.ended = new(atomic.Bool)
	ended := s.ended
	s.idleGen++
	wctx, cancel := context.WithCancelCause(context.Background())
	s.cancel = cancel
	if cmd.Kind == wire.CommandCancel {
		cancel(cancelled{reason: cancelReasonOf(cmd), by: cmd.interruptedBy, who: cmd.By}) // a cancel of a turn that waits for approval
	}
	s.workGen++
	a, self, last, gen, box := s.a, ctx.Self(), s.lastCP, s.workGen, s.box
	settle := cmd.settle
	if settle != nil {
		settle.started.Store(true)
	}
	s.m.goTracked(func() {
		defer cancel(nil)
		if settle != nil {
			defer close(settle.ended)
		}
		out, a := s.m.workClaimed(wctx, a, cmd, func(epoch uint64) { s.m.sys.Root.Send(self, &claimedHere{epoch: epoch, gen: gen}) })
		s.m.keepDeadline(wctx, a, cmd, out)
		s.m.tellParent(wctx, a)
		// Done first: after a shutdown the actor is gone and would drop the message.
		ended.Store(true)
		cmd.Done(out)
		box.settle(out) // the steers the turn took
		// The checkpoint after the answer: the turn's end is in the log, and
		// its caller need not wait for a snapshot's put and its record (with
		// fsync on every write, two more writes in the disk's queue). The
		// session takes its next work once they are written (workDone).
		cp := s.m.checkpointAfter(wctx, a, out, last)
		s.m.sys.Root.Send(self, &workDone{out: out, checkpointAt: cp, lost: a.lost, a: a})
	})
}

// workClaimed runs cmd, claiming the session first (acquire) unless cmd is
// answered from the log alone (answeredFromLog), so that such a command
// writes nothing. It returns the outcome and the context the work ended
// with (one loaded again when the claim met another writer's append).
// claimed is told the epoch of the claim once it is in the log, so that the
// actor hears other nodes' claims again while the work runs on.
func (m *Manager) workClaimed(ctx context.Context, a *AgentContext, cmd *Command, claimed func(epoch uint64)) (Outcome, *AgentContext) {
	prevNode := a.state.Node // the owner before this node's claim, for the trace
	if !a.claimed && !answeredFromLog(a, cmd) {
		// Not cut short by a cancel: a cancelled run still records its end.
		claimedCtx, err := m.acquire(context.WithoutCancel(ctx), a)
		if err != nil {
			return Outcome{Outcome: wire.Outcome{Session: a.Session, Status: a.state.Status, Fenced: errors.Is(err, bus.ErrFenced)}, Err: err}, a
		}
		claimedCtx.steers = a.steers
		a = claimedCtx
		claimed(a.writer.Epoch())
	}
	if answeredFromLog(a, cmd) {
		return m.workLogged(ctx, a, cmd), a // nothing done: no span
	}
	ctx, span := m.workSpan(ctx, a, cmd, prevNode)
	out := m.workLogged(ctx, a, cmd)
	endWork(span, a, out.Err)
	return out, a
}

// answeredFromLog reports whether cmd needs no write: a resume of a session
// with no unfinished turn, or the redelivery of a run whose input the log
// saw (runAgain).
func answeredFromLog(a *AgentContext, cmd *Command) bool {
	switch cmd.Kind {
	case wire.CommandResume:
		return !a.state.Status.Active() && !reopenable(a.state)
	case wire.CommandRun:
		_, again := redelivered(a.state, cmd)
		return again
	case wire.CommandDeny:
		return cmd.Expired && !deadlinePassed(a)
	}
	return false
}

// deadlinePassed reports whether a's turn waits for approval past its
// deadline: an expired deny (the node's timer, or the schedule it left at
// the deadline) has calls to deny. Otherwise it writes nothing.
func deadlinePassed(a *AgentContext) bool {
	st := a.state
	return st.AwaitingApproval && !st.ApprovalDeadline.IsZero() && !a.now().Before(st.ApprovalDeadline)
}

// work runs one command to its end, in the work goroutine.
func (m *Manager) work(ctx context.Context, a *AgentContext, cmd *Command) Outcome {
	var err error
	switch cmd.Kind {
	case wire.CommandRun:
		if out, ok := m.runAgain(a, cmd); ok {
			return out
		}
		err = m.run(ctx, a, cmd)
	case wire.CommandResume:
		if reopenable(a.state) {
			// A turn that failed at its budget goes on once the budget allows it.
			if still, err := reopenAtBudget(ctx, a); err != nil {
				out := a.outcome(err)
				if still != nil {
					out.Budget = still // the limit that stops it now, not the one it failed at
				}
				return out
			}
		}
		if !a.state.Status.Active() {
			return a.outcome(fmt.Errorf("session %s is %s: %w", a.Session, a.state.Status, ErrNothingToResume))
		}
		// A child's news goes on with the turn its caller follows; any
		// other resume takes the turn over from where it stopped.
		m.watch(a, !isChildNews(cmd))
		if err = PrepareResume(ctx, a); err == nil {
			err = m.loop.Run(ctx, a)
		}
	case wire.CommandBudget:
		by := ""
		if cmd.Decision != nil {
			by = cmd.Decision.By
		}
		err = setBudget(ctx, a, cmd.Budget, by)
	case wire.CommandApprove, wire.CommandDeny:
		if cmd.Expired && !deadlinePassed(a) {
			return a.outcome(nil) // decided meanwhile, or not due yet
		}
		if a.state.Status.Active() {
			// Moved on from its approval wait, or taken over mid-turn.
			m.watch(a, !a.state.AwaitingApproval)
		}
		err = m.decideAndRun(ctx, a, cmd)
	case wire.CommandCancel:
		// A cancel of a turn that waits for approval (ctx is cancelled): the
		// loop answers its calls and records the cancel.
		m.watch(a, false)
		err = m.loop.Run(ctx, a)
		out := a.outcome(err)
		out.WasRunning = true
		a.unwatch(out)
		return out
	case wire.CommandCompact:
		var res *wire.CompactResult
		if res, err = Compact(ctx, a); err == nil {
			err = a.Flush(ctx)
		}
		out := a.outcome(err)
		out.Compact = res
		if qe := (*QuotaError)(nil); errors.As(err, &qe) {
			out.Quota = &qe.Quota
		}
		return out
	default:
		err = fmt.Errorf("unknown command %q", cmd.Kind)
	}
	if err == nil {
		// Whatever the work staged and did not write with its last event.
		err = a.Flush(ctx)
	}
	out := a.outcome(err)
	a.unwatch(out)
	return out
}

// runAgain answers a run whose input the log saw before, and reports
// whether it did: nothing of it is left to do.
func (m *Manager) runAgain(a *AgentContext, cmd *Command) (Outcome, bool) {
	ended, again := redelivered(a.state, cmd)
	if !again {
		return Outcome{}, false
	}
	out := a.outcome(nil)
	if ended && a.state.LastInputID == cmd.InputID && a.endStreamed != cmd.InputID {
		m.watch(a, true)
		a.unwatch(out)
	}
	return out, true
}

// redelivered reports whether run cmd is the redelivery of an input st
// saw, with nothing of it left to do (again), and whether its turn ended:
// an input whose turn has ended (perhaps before a newer input's turn: its
// node died and the newer one came first), whose caller may have missed
// the end and gets the answer again; or one redelivered while a newer turn,
// left open by a dead node, waits for its own input.
func redelivered(st *projection.State, cmd *Command) (ended, again bool) {
	switch {
	case !st.Status.Active() && st.SawInput(cmd.InputID):
		return true, true
	case st.Status.Active() && st.SteeredTurn(cmd.InputID):
		// A steer of the open turn, delivered again after its node died:
		// it resumes the turn (run), whose end answers it.
		return false, false
	case st.Status.Active() && st.LastInputID != cmd.InputID && st.SawInput(cmd.InputID):
		return false, true
	}
	return false, false
}

// run carries out a run: its turn, begun and run by the loop. A turn open in
// the log is either the one this run's input opened (its redelivery: the
// turn goes on) or one a previous owner left when it died mid-turn, which
// is finished first.
func (m *Manager) run(ctx context.Context, a *AgentContext, cmd *Command) error {
	if a.state.Status.Active() {
		m.watch(a, true)
		err := PrepareResume(ctx, a)
		steer := isSteer(cmd) && cmd.InputID != a.state.LastInputID
		if err == nil && steer {
			// A steer that finds the turn open, left by a node that died:
			// it joins the turn, which goes on.
			err = joinTurn(a, cmd)
		}
		if err == nil {
			err = m.loop.Run(ctx, a)
		}
		if err != nil || steer || a.state.Status.Active() || a.state.LastInputID == cmd.InputID {
			return err
		}
		a.unwatch(a.outcome(nil))
	}
	err := BeginTurn(ctx, a, cmd.Message, cmd.InputID, TurnOptions{MaxSteps: cmd.MaxSteps, Budget: cmd.TurnBudget, By: cmd.By}, cmd.Caller)
	if err == nil {
		m.watch(a, false)
		err = m.loop.Run(ctx, a)
	}
	return err
}
