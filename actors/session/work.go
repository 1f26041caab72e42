package session

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

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
	s.busy = cmd
	s.ended = new(atomic.Bool)
	ended := s.ended
	s.idleGen++
	wctx, cancel := context.WithCancelCause(context.Background())
	s.cancel = cancel
	if cmd.Kind == wire.CommandCancel {
		cancel(cancelled{reason: cancelReasonOf(cmd)}) // a cancel of a turn that waits for approval
	}
	a, self, last := s.a, ctx.Self(), s.lastCP
	s.m.goTracked(func() {
		defer cancel(nil)
		out := s.m.workLogged(wctx, a, cmd)
		cp := s.m.checkpointAfter(wctx, a, out, last)
		// Done first: after a shutdown the actor is gone and would drop the message.
		ended.Store(true)
		cmd.Done(out)
		s.m.sys.Root.Send(self, &workDone{out: out, checkpointAt: cp, lost: a.lost})
	})
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
		if !a.state.Status.Active() {
			return a.outcome(fmt.Errorf("session %s is %s: %w", a.Session, a.state.Status, ErrNothingToResume))
		}
		m.watch(a, true)
		if err = PrepareResume(ctx, a); err == nil {
			err = m.loop.Run(ctx, a)
		}
	case wire.CommandApprove, wire.CommandDeny:
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
	st := a.state
	switch {
	case !st.Status.Active() && st.SawInput(cmd.InputID):
		// A redelivery of an input whose turn has ended (perhaps before a
		// newer input's turn: its node died and the newer one came first).
		// Its caller may have missed the end: it gets the answer again.
		out := a.outcome(nil)
		if st.LastInputID == cmd.InputID && a.endStreamed != cmd.InputID {
			m.watch(a, true)
			a.unwatch(out)
		}
		return out, true
	case st.Status.Active() && st.LastInputID != cmd.InputID && st.SawInput(cmd.InputID):
		// An input redelivered while a newer turn, left open by a dead node,
		// waits for its own input: nothing of this one is left to do.
		return a.outcome(nil), true
	}
	return Outcome{}, false
}

// run carries out a run: its turn, begun and run by the loop. A turn open in
// the log is either the one this run's input opened (its redelivery: the
// turn goes on) or one a previous owner left when it died mid-turn, which
// is finished first.
func (m *Manager) run(ctx context.Context, a *AgentContext, cmd *Command) error {
	if a.state.Status.Active() {
		m.watch(a, true)
		err := PrepareResume(ctx, a)
		if err == nil {
			err = m.loop.Run(ctx, a)
		}
		if err != nil || a.state.Status.Active() || a.state.LastInputID == cmd.InputID {
			return err
		}
		a.unwatch(a.outcome(nil))
	}
	err := BeginTurn(ctx, a, cmd.Message, cmd.InputID, cmd.MaxSteps, cmd.Caller)
	if err == nil {
		m.watch(a, false)
		err = m.loop.Run(ctx, a)
	}
	return err
}
