package session

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/telemetry"
	"github.com/tah-dev/tah/wire"
)

// Errors a Command's Outcome may carry in Err.
var (
	// ErrUnknownSession: no session.created for this id in the log.
	ErrUnknownSession = errors.New("unknown session")
	// ErrBusy: compaction asked while a turn runs (the specification: it throws).
	ErrBusy = errors.New("session is running a turn")
	// ErrNothingToResume: resume asked of a session with no unfinished turn.
	ErrNothingToResume = errors.New("nothing to resume: the session has no unfinished turn")
	// ErrStopped: the node is shutting down; the work resumes on the next owner.
	ErrStopped = errors.New("session actor stopped")
	// ErrUnavailable: the session's log could not be read or claimed for now (a
	// stream leader election, a lost connection); the input should be
	// delivered again a little later, not dropped.
	ErrUnavailable = errors.New("session log unavailable for now")
	// ErrNotPending: an approve or deny of a call that awaits no approval
	// (unknown, answered, or never asked).
	ErrNotPending = errors.New("the call awaits no approval")
	// ErrAlreadyDecided: an approve or deny of a call approved or denied
	// before: the first decision wins.
	ErrAlreadyDecided = errors.New("the call was decided before")
	// ErrWithdrawn: the command waited in the session's queue when a cancel
	// named its input (Command.Target): it was dropped and never ran.
	ErrWithdrawn = errors.New("withdrawn by a cancel before it started")
)

// Command is one unit of work for a session actor. Done is called exactly once,
// from any goroutine, when the work has ended (or could not start).
type Command struct {
	Kind    wire.Command
	InputID string
	Message llm.Message
	// MaxSteps overrides the session's maxSteps for the turn a run starts: 0
	// keeps it, a negative value means unlimited.
	MaxSteps int
	// TurnBudget, on a run, is the turn's own limits (the input's
	// options.budget): turn.started records them.
	TurnBudget *event.Limits
	// Budget, on a budget command, is the change of the session's budget.
	Budget *wire.BudgetChange
	// Reason says why, for a cancel: agent.cancelled records it.
	Reason string
	// Target, on a cancel, is the input whose work alone it cancels
	// (wire.Input.InputID): its turn or compaction if that runs or waits
	// for approval, else the input itself, withdrawn from the queue
	// (ErrWithdrawn). Empty: whatever work runs.
	Target string
	// Decision is what an approve or a deny decides.
	Decision *wire.Decision
	// Expired, on a deny, denies the calls whose approval deadline passed
	// (the Manager's deadline timer sends it).
	Expired bool
	// Caller, on a run, waits for the turn's answer as a stream: recorded
	// in turn.started, streamed to by every node that works on the turn.
	Caller *event.Caller
	// By is who sent the input, as NATS authenticated it (wire.Input's
	// Sender; empty when it is not known): turn.started records it for a
	// run, agent.cancelled for a cancel.
	By string
	// IfIdle, on a run, refuses it with ErrBusy when the session runs or
	// waits on a turn, or has commands queued, instead of queueing it.
	IfIdle bool
	// WhenBusy, on a run, says what it does when the session is busy:
	// queue (the default), steer or interrupt (steer.go).
	WhenBusy wire.WhenBusy
	// Trace, on a run, is the caller's trace context (the input's W3C
	// headers): the turn's span is its child. Empty: the turn's span starts
	// a trace of its own.
	Trace telemetry.Parent
	Done  func(Outcome)

	// busyOnArrival marks an IfIdle run queued while the session loaded
	// behind other commands (refuseBusy).
	busyOnArrival bool
	// interruptedBy, on a cancel the actor made for an interrupting run, is
	// that run's input: agent.cancelled records it.
	interruptedBy string
	// settle, when set (this package's tests), tells when the command's
	// work has ended: its Done comes before the checkpoint the work writes
	// after it.
	settle *workSettle
}

// workSettle tells whether a command ran as work of its own (started, set
// before its Done) and, if so, when that work ended, its checkpoint
// written (ended closed).
type workSettle struct {
	started atomic.Bool
	ended   chan struct{}
}

// internal messages
type (
	loaded struct {
		a   *AgentContext
		err error
	}
	workDone struct {
		out Outcome
		// checkpointAt is the event count of a checkpoint written after the
		// work, or -1.
		checkpointAt int
		// lost: events the work staged were not written (AgentContext.lost).
		lost bool
		// a is the session's context after the work: the one it started
		// with, or the one its claim loaded again.
		a *AgentContext
	}
	idleTick struct{ gen int }
	// claimedElsewhere tells the actor that a node claimed its session with
	// epoch: if that is newer than its own, it is a stale owner.
	claimedElsewhere struct{ epoch uint64 }
	// claimedHere tells the actor that its work claimed the session with
	// epoch (gen: the work's workGen), so that the claims of other nodes
	// reach it again while the work runs on.
	claimedHere struct {
		epoch uint64
		gen   int
	}
)

// sessionActor owns one session: it is the only writer of its log. Work runs in
// one goroutine at a time (a turn, a resume or a compaction), owned by the actor
// through its cancel function; Receive never blocks on I/O.
type sessionActor struct {
	m   *Manager
	sid string

	a *AgentContext // nil until loaded
	// claiming is set while work started on a context not claimed yet runs
	// and has not claimed it (it claims before its first write; s.a.claimed
	// is the work's then). claimedAt is the epoch the running work claimed
	// (claimedHere), which may be newer than s.a's after a load again; and
	// elsewhere the newest claim of another node heard while it claimed.
	claiming  bool
	claimedAt uint64
	elsewhere uint64
	workGen   int // counts the works started
	loading   bool
	queue     []*Command
	// parked are the runs and compacts that arrived while the turn waits
	// for approval: they wait behind it, as behind any turn.
	parked []*Command
	// box holds the steers of the turn that works or waits (steer.go).
	box *steerBox
	// passivating is set when the actor stops for being idle: the session's
	// approval deadline stays armed.
	passivating bool
	busy        *Command
	cancel      context.CancelCauseFunc
	// cancels are the cancels that reached the running work: they are
	// answered with its outcome when it ends.
	cancels []*Command
	idleGen int
	timer   *time.Timer
	// ended is set by the work goroutine once its work has ended, before it
	// reports the outcome: a command that follows an outcome is never refused as
	// arriving during the work it followed.
	ended  *atomic.Bool
	lastCP int // events folded at the last checkpoint
	// resumedInput is the input of the open turn the busy work took up
	// (read from the state before it started: the work owns it since).
	resumedInput string
	// stopLoad cancels a load still running when the actor stops, so that a
	// stopped actor never claims its session after its node handed it over.
	stopLoad context.CancelFunc
}

// Receive is the actor's mailbox: each message goes to the method that
// deals with it. None blocks: the load and the work run in goroutines of
// their own (load.go, work.go), which report back by message.
func (s *sessionActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.load(ctx)
	case *loaded:
		s.onLoaded(ctx, msg)
	case *Command:
		s.m.received(s.sid)
		s.onCommand(ctx, msg)
	case *workDone:
		s.onWorkDone(ctx, msg)
	case *claimedElsewhere:
		s.onClaimedElsewhere(ctx, msg)
	case *claimedHere:
		s.onClaimedHere(ctx, msg)
	case *idleTick:
		s.onIdleTick(ctx, msg)
	case *actor.Stopping:
		s.onStopping()
	}
}

// onLoaded takes the session its load read and claimed, and starts on the
// commands that waited for it; a load that failed fails them.
func (s *sessionActor) onLoaded(ctx actor.Context, msg *loaded) {
	s.loading = false
	if msg.err != nil {
		s.failAll(msg.err)
		// A command delivered while the load failed is in the mailbox: the
		// actor stays for it (and loads again for it), rather than drop it.
		s.retire(ctx, false)
		return
	}
	s.a = msg.a
	// Counted from the checkpoint the load read, not from the load: a
	// session loaded again and again (its owner changes, it passivates
	// between short turns) still gets one every CheckpointEvery events.
	s.lastCP = s.a.checkpointed
	s.syncDeadline()
	s.refuseBusy()
	s.next(ctx)
}

// onCommand takes a command from the mailbox: a cancel goes to the work at
// once, a compact while work runs and an if_idle run that finds work ahead
// of it are refused, and the rest wait in the queue for their turn (next).
func (s *sessionActor) onCommand(ctx actor.Context, cmd *Command) {
	switch {
	case cmd.Kind == wire.CommandCancel && s.a != nil && cmd.Target != "" && !s.runs(cmd.Target):
		s.withdraw(cmd)
		return
	case cmd.Kind == wire.CommandCancel && s.a != nil:
		s.cancelWork(ctx, cmd)
		return
	case cmd.Kind == wire.CommandCompact && s.working():
		s.refuse(cmd, fmt.Errorf("compact %s: %w", s.sid, ErrBusy))
		return
	case s.onBusyInput(cmd):
		return
	}
	// The redelivery of the input of the turn the work resumes (a
	// taken-over turn is resumed before its input comes back) is no new
	// run: it waits, and is recognised as done when the work ends.
	redelivered := cmd.InputID != "" && cmd.InputID == s.resumedInput
	if busyFor(cmd, s.working() || len(s.queue) > 0 || len(s.parked) > 0, redelivered) {
		if s.a != nil {
			s.refuse(cmd, fmt.Errorf("run %s: %w", s.sid, ErrBusy))
			return
		}
		// Queued behind commands while the session loads (a resume of
		// its open turn, say): only its log tells whether this is that
		// turn's input again; decided once loaded (refuseBusy).
		cmd.busyOnArrival = true
	}
	if s.a == nil && !s.loading {
		s.load(ctx) // the last load failed
	}
	s.queue = append(s.queue, cmd)
	s.next(ctx)
}

// onWorkDone takes the end of the work: the cancels that reached it are
// answered, and the next command starts, unless the session is no longer
// this actor's to run.
func (s *sessionActor) onWorkDone(ctx actor.Context, msg *workDone) {
	s.busy, s.cancel, s.claiming, s.claimedAt, s.elsewhere = nil, nil, false, 0, 0
	s.a = msg.a
	s.cancelTheWait()
	s.answerCancels(msg.out.Outcome)
	if msg.checkpointAt >= 0 {
		s.lastCP = msg.checkpointAt
	}
	switch {
	case msg.out.Fenced || errors.Is(msg.out.Err, bus.ErrOutcomeUnknown):
		// Another node owns the session now (or the log cannot tell): stop
		// without acknowledging anything more; the owner carries on.
		s.stop(ctx, fmt.Errorf("session %s: %w", s.sid, bus.ErrFenced))
	case msg.lost:
		// The state holds staged events the log does not: the commands
		// waiting go back to be delivered again, to an actor that loads
		// the session from its log.
		s.m.cfg.logger().Warn("staged events not written; the session is loaded again", "session", s.sid, "err", msg.out.Err)
		s.stop(ctx, fmt.Errorf("session %s: %w", s.sid, ErrStopped))
	default:
		s.syncDeadline()
		s.unpark()
		s.afterTurn()
		s.next(ctx)
	}
}

// onClaimedElsewhere stops the actor when a node claimed its session with a
// newer epoch than its own. A session loaded and not claimed yet holds the
// epoch it would claim: a claim of that epoch is another node's.
func (s *sessionActor) onClaimedElsewhere(ctx actor.Context, msg *claimedElsewhere) {
	switch {
	case s.a == nil:
		return
	case s.claiming:
		// The work claims the session, perhaps at a newer epoch than s.a's
		// (after loading again): whether this claim is another node's is
		// told once the work's own is in (onClaimedHere).
		s.elsewhere = max(s.elsewhere, msg.epoch)
		return
	case s.claimedAt > 0 && msg.epoch <= s.claimedAt:
		return // the running work's own claim, or an older one
	case s.claimedAt == 0 && (s.a.claimed && msg.epoch <= s.a.writer.Epoch() || !s.a.claimed && msg.epoch < s.a.writer.Epoch()):
		return // our own claim, or an older one
	}
	s.stopClaimed(ctx, msg.epoch)
}

// onClaimedHere records the epoch the running work claimed, and stops the
// actor if another node's newer claim was heard meanwhile.
func (s *sessionActor) onClaimedHere(ctx actor.Context, msg *claimedHere) {
	if !s.claiming || msg.gen != s.workGen {
		return // a work that has ended
	}
	s.claiming, s.claimedAt = false, msg.epoch
	if s.elsewhere > msg.epoch {
		s.stopClaimed(ctx, s.elsewhere)
	}
}

// stopClaimed stops the actor of a session another node claimed with epoch.
func (s *sessionActor) stopClaimed(ctx actor.Context, epoch uint64) {
	// Another node took the session over: stop at once, cancelling the
	// running LLM and tool calls; the work's input is not acknowledged.
	s.m.cfg.logger().Info("session claimed by another node; stopping", "session", s.sid, "epoch", epoch)
	if s.cancel != nil {
		s.cancel(bus.ErrFenced)
	}
	s.stop(ctx, fmt.Errorf("session %s: %w", s.sid, bus.ErrFenced))
}

// onIdleTick passivates the actor when nothing ran or waited since the
// timer was armed.
func (s *sessionActor) onIdleTick(ctx actor.Context, msg *idleTick) {
	if msg.gen == s.idleGen && s.busy == nil && len(s.queue) == 0 && len(s.parked) == 0 && s.box.empty() && !s.loading {
		s.retire(ctx, true)
	}
}

// onStopping ends what the actor owns: its load, its timer, its work (which
// records nothing more), and answers the commands still waiting.
func (s *sessionActor) onStopping() {
	if s.stopLoad != nil {
		s.stopLoad()
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.cancel != nil {
		s.cancel(ErrStopped)
	}
	if !s.passivating {
		s.m.disarmDeadline(s.sid)
	}
	s.answerCancels(wire.Outcome{Session: s.sid, Status: projection.StatusRunning})
	s.failAll(ErrStopped)
}

// retire stops the actor unless a command is on its way to it, in which
// case it waits for another idle timeout. passivating says it stops for
// being idle: the session's approval deadline stays armed.
func (s *sessionActor) retire(ctx actor.Context, passivating bool) {
	if !s.m.retire(s.sid, ctx.Self(), false) {
		s.armIdle(ctx)
		return
	}
	s.passivating = passivating
	ctx.Stop(ctx.Self())
}

// stop stops the actor at once, the commands waiting failed with err: the
// session is not this actor's to run any more (another node owns it, or it
// must be loaded again).
func (s *sessionActor) stop(ctx actor.Context, err error) {
	s.failAll(err)
	s.m.retire(s.sid, ctx.Self(), true)
	ctx.Stop(ctx.Self())
}

// working reports whether work runs and has not ended: a command that
// follows an outcome is never refused as arriving during the work it
// followed.
func (s *sessionActor) working() bool { return s.busy != nil && !s.ended.Load() }

// busyFor is the if_idle rule, in one place: cmd, if it is a run with
// IfIdle, is refused with ErrBusy when work is ahead of it (ahead) that is
// not its own input's (own). What is ahead and what is its own depend on
// when it is asked: as it arrives, work that runs or waits in the queue,
// and the redelivery of the input of the turn the work took up
// (onCommand); once the session is loaded, for a run that arrived while it
// loaded, what was ahead then, and an input its log saw (refuseBusy); as it
// leaves the queue, a turn open in the log (waiting for approval, or left by
// a previous owner), and that turn's input (next).
func busyFor(cmd *Command, ahead, own bool) bool {
	return cmd.Kind == wire.CommandRun && cmd.IfIdle && ahead && !own
}

// refuse answers cmd, which will not run, with err and the session's status.
func (s *sessionActor) refuse(cmd *Command, err error) {
	cmd.Done(Outcome{Outcome: wire.Outcome{Session: s.sid, Status: projectionStatus(s)}, Err: err})
}

// refuseBusy refuses, once the session is loaded, the IfIdle runs that
// arrived behind other commands while it loaded, unless the log saw their
// input: the redelivery of an open turn's input waits for the resume of that
// turn, and is recognised as done.
func (s *sessionActor) refuseBusy() {
	kept := s.queue[:0]
	for _, cmd := range s.queue {
		if busyFor(cmd, cmd.busyOnArrival, s.a.state.SawInput(cmd.InputID)) {
			s.refuse(cmd, fmt.Errorf("run %s: %w", s.sid, ErrBusy))
			continue
		}
		kept = append(kept, cmd)
	}
	clear(s.queue[len(kept):])
	s.queue = kept
}

// next starts the next queued command when nothing runs, answering on the
// way those that need no work (settle).
func (s *sessionActor) next(ctx actor.Context) {
	for s.a != nil && s.busy == nil {
		if len(s.queue) == 0 {
			s.armIdle(ctx)
			return
		}
		cmd := s.queue[0]
		s.queue = s.queue[1:]
		if !s.settle(cmd) {
			s.start(ctx, cmd)
		}
	}
}

// settle answers or parks cmd, taken from the queue while nothing runs,
// when it needs no work of its own, and reports whether it did.
func (s *sessionActor) settle(cmd *Command) bool {
	st := s.a.state
	switch {
	case busyFor(cmd, st.Status.Active(), st.LastInputID == cmd.InputID):
		// An if_idle run finds a turn open (waiting for approval, or left by a
		// previous owner) that is not its own: refused, never queued behind it.
		s.refuse(cmd, fmt.Errorf("run %s: session %s is %s: %w", cmd.InputID, s.sid, st.Status, ErrBusy))
	case cmd.Kind == wire.CommandCancel && cmd.Target != "" && !s.runs(cmd.Target):
		// Queued while the session loaded: its input's turn is not the one
		// that waits for approval.
		s.withdraw(cmd)
	case s.settleBusy(cmd):
	case s.answerWhileWaiting(cmd):
	case cmd.Kind == wire.CommandCompact && st.Status.Active():
		// A turn left running by a previous owner must be resumed first.
		s.refuse(cmd, fmt.Errorf("compact %s: %w (resume or cancel it first)", s.sid, ErrBusy))
	default:
		return false
	}
	return true
}

// cancelWork cancels the running work with cmd's reason; cmd is answered
// with the work's outcome once it ended. A cancel of a turn that waits for
// approval is work of its own, ahead of the queue (it ends the turn). A
// cancel of a session that runs nothing is answered at once with its state.
func (s *sessionActor) cancelWork(ctx actor.Context, cmd *Command) {
	if s.busy != nil && s.cancel != nil {
		s.cancel(cancelled{reason: cancelReasonOf(cmd), who: cmd.By})
		s.cancels = append(s.cancels, cmd)
		return
	}
	if s.a != nil && s.a.state.Waits() {
		s.queue = append([]*Command{cmd}, s.queue...)
		s.next(ctx)
		return
	}
	o := wire.Outcome{Session: s.sid, Status: projection.StatusIdle}
	if s.a != nil {
		o = s.a.outcome(nil).Outcome
	}
	cmd.Done(Outcome{Outcome: o})
}

// runs reports whether the work of input id runs, or its turn waits for
// approval: a cancel naming id cancels that work. The busy work's turn is
// that of the input it took up (resumedInput: a resume, an approve or deny,
// the redelivery of a taken-over turn's input), or its own command's when
// it took up none; a run that first finishes a turn a previous owner left
// open is not yet its own input's work. A steer that joined the running
// turn is part of it: its outcome is that turn's, and so is its cancel.
// s.a.state is read only when nothing runs (the work goroutine owns it
// meanwhile).
func (s *sessionActor) runs(id string) bool {
	if s.busy != nil {
		return s.resumedInput == id || s.busy.InputID == id && (s.busy.Kind != wire.CommandRun || s.resumedInput == "") ||
			s.box.joined(id)
	}
	return s.a.state.Waits() && s.a.state.LastInputID == id
}

// withdraw carries out cancel, which names an input whose work does not run:
// the commands of that input still waiting (queued, or parked behind a
// turn that waits for approval) are dropped, each answered with
// ErrWithdrawn; the cancel is answered with the session's state. Nothing
// else is touched: an input that ended, or is not here, is left alone.
func (s *sessionActor) withdraw(cancel *Command) {
	status := projectionStatus(s)
	drop := func(cmds []*Command) []*Command {
		kept := cmds[:0]
		for _, c := range cmds {
			if c.Kind == wire.CommandCancel || c.InputID != cancel.Target {
				kept = append(kept, c)
				continue
			}
			c.Done(Outcome{Outcome: wire.Outcome{Session: s.sid, Status: status},
				Err: fmt.Errorf("%s %s of session %s: %w", c.Kind, c.InputID, s.sid, ErrWithdrawn)})
		}
		clear(cmds[len(kept):])
		return kept
	}
	s.queue, s.parked = drop(s.queue), drop(s.parked)
	drop(s.box.drop(cancel.Target))
	o := wire.Outcome{Session: s.sid, Status: status}
	if s.busy == nil {
		o = s.a.outcome(nil).Outcome
	}
	cancel.Done(Outcome{Outcome: o})
}

// answerCancels answers the cancels that reached the work that ended with o.
func (s *sessionActor) answerCancels(o wire.Outcome) {
	o.WasRunning = true
	for _, c := range s.cancels {
		c.Done(Outcome{Outcome: o})
	}
	s.cancels = nil
}

func (s *sessionActor) failAll(err error) {
	for _, c := range append(append(s.parked, s.queue...), s.box.drain()...) {
		c.Done(Outcome{Outcome: wire.Outcome{Session: s.sid, Fenced: errors.Is(err, bus.ErrFenced)}, Err: err})
	}
	s.queue, s.parked = nil, nil
}

// armIdle passivates the actor after the idle timeout with a timer message of
// its own (SetReceiveTimeout races in this protoactor version, #1139).
func (s *sessionActor) armIdle(ctx actor.Context) {
	s.idleGen++
	gen, self, sys := s.idleGen, ctx.Self(), s.m.sys
	if s.timer != nil {
		s.timer.Stop()
	}
	s.timer = time.AfterFunc(s.m.cfg.idle(), func() { sys.Root.Send(self, &idleTick{gen: gen}) })
}

// projectionStatus is the session's status as the actor may read it: the state
// belongs to the work goroutine while one runs.
func projectionStatus(s *sessionActor) projection.Status {
	switch {
	case s.busy != nil:
		return projection.StatusRunning
	case s.a == nil:
		return projection.StatusIdle
	}
	return s.a.state.Status
}
