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
	// IfIdle, on a run, refuses it with ErrBusy when the session runs or
	// waits on a turn, or has commands queued, instead of queueing it.
	IfIdle bool
	Done   func(Outcome)

	// busyOnArrival marks an IfIdle run queued while the session loaded
	// behind other commands (refuseBusy).
	busyOnArrival bool
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
	}
	idleTick struct{ gen int }
	// claimedElsewhere tells the actor that a node claimed its session with
	// epoch: if that is newer than its own, it is a stale owner.
	claimedElsewhere struct{ epoch uint64 }
)

// sessionActor owns one session: it is the only writer of its log. Work runs in
// one goroutine at a time (a turn, a resume or a compaction), owned by the actor
// through its cancel function; Receive never blocks on I/O.
type sessionActor struct {
	m   *Manager
	sid string

	a       *AgentContext // nil until loaded
	loading bool
	queue   []*Command
	// parked are the runs and compacts that arrived while the turn waits
	// for approval: they wait behind it, as behind any turn.
	parked []*Command
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

func (s *sessionActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.load(ctx)
	case *loaded:
		s.loading = false
		if msg.err != nil {
			s.failAll(msg.err)
			// A command delivered while the load failed is in the mailbox: the
			// actor stays for it (and loads again for it), rather than drop it.
			if s.m.retire(s.sid, ctx.Self(), false) {
				ctx.Stop(ctx.Self())
			} else {
				s.armIdle(ctx)
			}
			return
		}
		s.a = msg.a
		s.lastCP = s.a.state.Events
		s.syncDeadline()
		s.refuseBusy()
		s.next(ctx)
	case *Command:
		s.m.received(s.sid)
		if msg.Kind == wire.CommandCancel && s.a != nil {
			if msg.Target != "" && !s.runs(msg.Target) {
				s.withdraw(msg)
				return
			}
			s.cancelWork(ctx, msg)
			return
		}
		if msg.Kind == wire.CommandCompact && s.busy != nil && !s.ended.Load() {
			msg.Done(Outcome{Outcome: wire.Outcome{Session: s.sid, Status: projectionStatus(s)}, Err: fmt.Errorf("compact %s: %w", s.sid, ErrBusy)})
			return
		}
		// The redelivery of the input of the turn the work resumes (a
		// taken-over turn is resumed before its input comes back) is no new
		// run: it waits, and is recognised as done when the work ends.
		redelivered := msg.InputID != "" && msg.InputID == s.resumedInput
		if msg.Kind == wire.CommandRun && msg.IfIdle && !redelivered && ((s.busy != nil && !s.ended.Load()) || len(s.queue) > 0 || len(s.parked) > 0) {
			if s.a != nil {
				msg.Done(Outcome{Outcome: wire.Outcome{Session: s.sid, Status: projectionStatus(s)}, Err: fmt.Errorf("run %s: %w", s.sid, ErrBusy)})
				return
			}
			// Queued behind commands while the session loads (a resume of
			// its open turn, say): only its log tells whether this is that
			// turn's input again; decided once loaded (refuseBusy).
			msg.busyOnArrival = true
		}
		if s.a == nil && !s.loading {
			s.load(ctx) // the last load failed
		}
		s.queue = append(s.queue, msg)
		s.next(ctx)
	case *workDone:
		s.busy, s.cancel = nil, nil
		s.cancelTheWait()
		s.answerCancels(msg.out.Outcome)
		if msg.checkpointAt >= 0 {
			s.lastCP = msg.checkpointAt
		}
		if msg.out.Fenced || errors.Is(msg.out.Err, bus.ErrOutcomeUnknown) {
			// Another node owns the session now (or the log cannot tell): stop
			// without acknowledging anything more; the owner carries on.
			s.failAll(fmt.Errorf("session %s: %w", s.sid, bus.ErrFenced))
			s.m.retire(s.sid, ctx.Self(), true)
			ctx.Stop(ctx.Self())
			return
		}
		if msg.lost {
			// The state holds staged events the log does not: the commands
			// waiting go back to be delivered again, to an actor that loads
			// the session from its log.
			s.m.cfg.logger().Warn("staged events not written; the session is loaded again", "session", s.sid, "err", msg.out.Err)
			s.failAll(fmt.Errorf("session %s: %w", s.sid, ErrStopped))
			s.m.retire(s.sid, ctx.Self(), true)
			ctx.Stop(ctx.Self())
			return
		}
		s.syncDeadline()
		s.unpark()
		s.next(ctx)
	case *claimedElsewhere:
		if s.a == nil || msg.epoch <= s.a.writer.Epoch() {
			return // our own claim, or an older one
		}
		// Another node took the session over: stop at once, cancelling the
		// running LLM and tool calls; the work's input is not acknowledged.
		s.m.cfg.logger().Info("session claimed by another node; stopping", "session", s.sid, "epoch", msg.epoch)
		if s.cancel != nil {
			s.cancel(bus.ErrFenced)
		}
		s.failAll(fmt.Errorf("session %s: %w", s.sid, bus.ErrFenced))
		s.m.retire(s.sid, ctx.Self(), true)
		ctx.Stop(ctx.Self())
	case *idleTick:
		if msg.gen == s.idleGen && s.busy == nil && len(s.queue) == 0 && len(s.parked) == 0 && !s.loading {
			if s.m.retire(s.sid, ctx.Self(), false) {
				s.passivating = true
				ctx.Stop(ctx.Self())
			} else {
				s.armIdle(ctx)
			}
		}
	case *actor.Stopping:
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
}

// load loads the session in a goroutine of its own, which reports loaded.
func (s *sessionActor) load(ctx actor.Context) {
	s.loading = true
	lctx, cancel := context.WithCancel(s.m.ctx)
	s.stopLoad = cancel
	self := ctx.Self()
	s.m.goTracked(func() {
		defer cancel()
		a, err := s.m.loadWithRetry(lctx, s.sid)
		s.m.sys.Root.Send(self, &loaded{a: a, err: err})
	})
}

// refuseBusy refuses, once the session is loaded, the IfIdle runs that
// arrived behind other commands while it loaded, unless the log saw their
// input: the redelivery of an open turn's input waits for the resume of that
// turn, and is recognised as done.
func (s *sessionActor) refuseBusy() {
	kept := s.queue[:0]
	for _, cmd := range s.queue {
		if cmd.busyOnArrival && !s.a.state.SawInput(cmd.InputID) {
			cmd.Done(Outcome{Outcome: wire.Outcome{Session: s.sid, Status: s.a.state.Status}, Err: fmt.Errorf("run %s: %w", s.sid, ErrBusy)})
			continue
		}
		kept = append(kept, cmd)
	}
	clear(s.queue[len(kept):])
	s.queue = kept
}

// next starts the next queued command when nothing runs.
func (s *sessionActor) next(ctx actor.Context) {
	if s.a == nil || s.busy != nil {
		return
	}
	if len(s.queue) == 0 {
		s.armIdle(ctx)
		return
	}
	cmd := s.queue[0]
	s.queue = s.queue[1:]
	// An if_idle run finds a turn open (waiting for approval, or left by a
	// previous owner) that is not its own: refused, never queued behind it.
	if cmd.Kind == wire.CommandRun && cmd.IfIdle && s.a.state.Status.Active() && s.a.state.LastInputID != cmd.InputID {
		cmd.Done(Outcome{Outcome: wire.Outcome{Session: s.sid, Status: s.a.state.Status},
			Err: fmt.Errorf("run %s: session %s is %s: %w", cmd.InputID, s.sid, s.a.state.Status, ErrBusy)})
		s.next(ctx)
		return
	}
	if cmd.Kind == wire.CommandCancel && cmd.Target != "" && !s.runs(cmd.Target) {
		// Queued while the session loaded: its input's turn is not the one
		// that waits for approval.
		s.withdraw(cmd)
		s.next(ctx)
		return
	}
	if s.answerWhileWaiting(cmd) {
		s.next(ctx)
		return
	}
	if cmd.Kind == wire.CommandCompact && s.a.state.Status.Active() {
		// A turn left running by a previous owner must be resumed first.
		cmd.Done(Outcome{Outcome: wire.Outcome{Session: s.sid, Status: s.a.state.Status}, Err: fmt.Errorf("compact %s: %w (resume or cancel it first)", s.sid, ErrBusy)})
		s.next(ctx)
		return
	}
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
	a, self, every := s.a, ctx.Self(), s.m.cfg.checkpointEvery()
	last := s.lastCP
	s.m.goTracked(func() {
		defer cancel(nil)
		out := s.m.workLogged(wctx, a, cmd)
		cp := -1
		// A checkpoint after work that appended enough events since the last one,
		// so that a resume replays only a short tail of the log.
		if !out.Fenced && out.Err == nil && a.state.Events-last >= every {
			if err := s.m.checkpoint(context.WithoutCancel(wctx), a); err != nil {
				s.m.cfg.logger().Error("checkpoint not written: a resume of this session replays more of its log", "session", s.sid, "err", err)
			} else {
				cp = a.state.Events
			}
		}
		// Done first: after a shutdown the actor is gone and would drop the message.
		ended.Store(true)
		cmd.Done(out)
		s.m.sys.Root.Send(self, &workDone{out: out, checkpointAt: cp, lost: a.lost})
	})
}

// cancelWork cancels the running work with cmd's reason; cmd is answered
// with the work's outcome once it ended. A cancel of a turn that waits for
// approval is work of its own, ahead of the queue (it ends the turn). A
// cancel of a session that runs nothing is answered at once with its state.
func (s *sessionActor) cancelWork(ctx actor.Context, cmd *Command) {
	if s.busy != nil && s.cancel != nil {
		s.cancel(cancelled{reason: cancelReasonOf(cmd)})
		s.cancels = append(s.cancels, cmd)
		return
	}
	if s.a != nil && s.a.state.AwaitingApproval {
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
// open is not yet its own input's work. s.a.state is read only when nothing
// runs (the work goroutine owns it meanwhile).
func (s *sessionActor) runs(id string) bool {
	if s.busy != nil {
		return s.resumedInput == id || s.busy.InputID == id && (s.busy.Kind != wire.CommandRun || s.resumedInput == "")
	}
	return s.a.state.AwaitingApproval && s.a.state.LastInputID == id
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
	for _, c := range append(s.parked, s.queue...) {
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

// work runs one command to its end, in the work goroutine.
func (m *Manager) work(ctx context.Context, a *AgentContext, cmd *Command) Outcome {
	var err error
	switch cmd.Kind {
	case wire.CommandRun:
		if !a.state.Status.Active() && a.state.SawInput(cmd.InputID) {
			// A redelivery of an input whose turn has ended (perhaps before a
			// newer input's turn: its node died and the newer one came first).
			// Its caller may have missed the end: it gets the answer again.
			out := a.outcome(nil)
			if a.state.LastInputID == cmd.InputID && a.endStreamed != cmd.InputID {
				m.watch(a, true)
				a.unwatch(out)
			}
			return out
		}
		if a.state.Status.Active() && a.state.LastInputID != cmd.InputID && a.state.SawInput(cmd.InputID) {
			// An input redelivered while a newer turn, left open by a dead node,
			// waits for its own input: nothing of this one is left to do.
			return a.outcome(nil)
		}
		if a.state.Status.Active() {
			// A turn is open in the log: this is either the redelivery of the
			// input that opened it (continue it) or a new input that arrived
			// while the previous owner died mid-turn (finish that one first).
			m.watch(a, true)
			if err = PrepareResume(ctx, a); err == nil {
				err = m.loop.Run(ctx, a)
			}
			if err != nil || a.state.Status.Active() || lastInputID(a.state) == cmd.InputID {
				break
			}
			a.unwatch(a.outcome(nil))
		}
		if err = BeginTurn(ctx, a, cmd.Message, cmd.InputID, cmd.MaxSteps, cmd.Caller); err == nil {
			m.watch(a, false)
			err = m.loop.Run(ctx, a)
		}
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

// lastInputID is the input id of the turn in progress or last ended.
func lastInputID(st *projection.State) string { return st.LastInputID }

// load rebuilds the session from its checkpoint and the tail of its log, then
// claims it with a new epoch and the current configuration.
func (m *Manager) load(ctx context.Context, sid string) (*AgentContext, error) {
	// One attempt: a stream without a leader (an election after a node died)
	// fails it (bus.lastMsg asks in short tries), and loadWithRetry tries again.
	ctx, cancel := context.WithTimeout(ctx, loadAttempt)
	defer cancel()
	var st projection.State
	from := uint64(1)
	cps := m.bus.CheckpointStore()
	if cps != nil {
		snap, ok, err := cps.Snapshot(ctx, sid)
		switch {
		case err != nil:
			m.cfg.logger().Warn("checkpoint not readable; replaying from the start", "session", sid, "err", err)
		case ok:
			st, from = snap, snap.LastSeq+1
		}
	}
	evs, lastSeq, err := m.bus.Replay(ctx, sid, from)
	if err != nil {
		return nil, fmt.Errorf("load session %s: %w", sid, err)
	}
	if needsWholeHistory(&st, evs) {
		msgs, err := readHistory(ctx, cps, sid, st.Elided)
		if err != nil {
			return nil, fmt.Errorf("load session %s: %w", sid, err)
		}
		if err := st.Restore(msgs); err != nil {
			return nil, fmt.Errorf("load session %s: %w", sid, err)
		}
	}
	if fault := projection.FoldLog(&st, evs); fault != nil {
		// Not this node's to run, ever (a corrupt log) or until it is
		// upgraded (a newer schema): nothing is claimed or written.
		return nil, fmt.Errorf("load session %s: %w", sid, fault)
	}
	if st.ID == "" {
		return nil, fmt.Errorf("session %s: %w", sid, ErrUnknownSession)
	}
	if lastSeq < st.LastSeq {
		lastSeq = st.LastSeq
	}
	epoch := st.Epoch + 1
	w, err := m.bus.Writer(sid, epoch, lastSeq)
	if err != nil {
		return nil, err
	}
	deltas, err := m.bus.Deltas(sid, epoch)
	if err != nil {
		return nil, err
	}
	a := &AgentContext{Session: sid, Config: m.cfg, Provider: m.provider, Tools: m.tools,
		state: &st, writer: w, deltas: deltas, segments: cps, log: m.cfg.logger(), now: time.Now}
	if err := a.Append(ctx, event.SessionClaimed, event.SessionClaimedData{Epoch: epoch, Node: m.cfg.Node, Config: m.cfg.eventConfig()}); err != nil {
		return nil, fmt.Errorf("claim session %s: %w", sid, err)
	}
	return a, nil
}

// loadWithRetry loads sid, trying again when another writer appended between
// the replay and the claim (a previous owner finishing its last append), or
// when the log does not answer (a stream leader election after a node died),
// for up to loadPatience. A load that still fails for a reason other than an
// unknown session or a faulted log (a *projection.Fault, which no retry
// cures) wraps ErrUnavailable.
func (m *Manager) loadWithRetry(ctx context.Context, sid string) (*AgentContext, error) {
	deadline := time.Now().Add(loadPatience)
	var err error
	for attempt := 0; ; attempt++ {
		var a *AgentContext
		a, err = m.load(ctx, sid)
		switch {
		case ctx.Err() != nil:
			return nil, ErrStopped
		case err == nil || errors.Is(err, ErrUnknownSession) || errors.As(err, new(*projection.Fault)):
			return a, err
		case time.Now().After(deadline) || (errors.Is(err, bus.ErrFenced) && attempt >= 4):
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		m.cfg.logger().Info("session not loaded yet; trying again", "session", sid, "err", err)
		select {
		case <-ctx.Done():
			return nil, ErrStopped
		case <-time.After(min(time.Duration(attempt+1)*100*time.Millisecond, time.Second)):
		}
	}
}

// loadPatience bounds the retries of a load that meets an unavailable log;
// loadAttempt bounds one attempt.
const (
	loadPatience = 30 * time.Second
	loadAttempt  = 15 * time.Second
)

// checkpoint stores a snapshot of the state in the checkpoint bucket, then
// records it in the log. The state first leaves out what the next requests
// cannot send, kept in segments, and what the loop no longer reads of past
// turns (history.go), so that the snapshot stays the size of a window.
func (m *Manager) checkpoint(ctx context.Context, a *AgentContext) error {
	cps := m.bus.CheckpointStore()
	if cps == nil {
		return nil
	}
	if err := elide(ctx, cps, a); err != nil {
		return err
	}
	a.state.Slim()
	if err := cps.PutSnapshot(ctx, a.Session, a.state); err != nil {
		return err
	}
	return a.Append(ctx, event.CheckpointCreated, event.CheckpointCreatedData{ID: a.NewStepID("cp"), UpToSeq: a.state.LastSeq,
		Bucket: cps.Bucket(), Key: a.Session, Events: a.state.Events})
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
