package session

import (
	"fmt"
	"slices"
	"sync"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// Input while busy (wire.WhenBusy): a steer joins the running turn, an
// interrupt cancels it and runs next.
//
// A steer is handed to the turn through the actor's steerBox, the one thing
// the actor and the work goroutine share: the actor puts steers in while a
// turn works or waits for approval; the loop takes them at its next step
// boundary, before an LLM call (llmStep), and records each as turn.steered,
// written with that step's llm.started; the work answers the steers it took
// with its outcome when it ends. A steer still in the box when the turn has
// ended (it answered without another LLM call, it failed, it was cancelled)
// becomes a run of its own, ahead of the queue.

// steerBox holds the steers of a session's turn: pending until the loop
// takes them, then taken until the work that took them ends.
type steerBox struct {
	mu      sync.Mutex
	pending []*Command
	taken   []*Command
}

// put adds a steer for the turn to take.
func (b *steerBox) put(cmd *Command) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending = append(b.pending, cmd)
}

// take moves the pending steers to taken and returns them (the work
// goroutine, at a step boundary).
func (b *steerBox) take() []*Command {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.pending
	b.pending = nil
	b.taken = append(b.taken, out...)
	return out
}

// settle answers the steers the ended work took with its outcome.
func (b *steerBox) settle(out Outcome) {
	b.mu.Lock()
	taken := b.taken
	b.taken = nil
	b.mu.Unlock()
	for _, c := range taken {
		c.Done(out)
	}
}

// drain removes and returns the pending steers (the actor, once the turn
// they were for has ended).
func (b *steerBox) drain() []*Command {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.pending
	b.pending = nil
	return out
}

// drop removes the pending steers of input id and returns them (a cancel
// that names it).
func (b *steerBox) drop(id string) []*Command {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*Command
	b.pending = slices.DeleteFunc(b.pending, func(c *Command) bool {
		if c.InputID == id {
			out = append(out, c)
			return true
		}
		return false
	})
	return out
}

// joined reports whether a steer of input id joined the work that runs: a
// cancel that names it cancels that work, whose outcome is the steer's.
func (b *steerBox) joined(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.ContainsFunc(b.taken, func(c *Command) bool { return c.InputID == id })
}

// empty reports whether no steer waits for the turn.
func (b *steerBox) empty() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending) == 0
}

// isSteer and isInterrupt tell a run's WhenBusy.
func isSteer(cmd *Command) bool {
	return cmd.Kind == wire.CommandRun && cmd.WhenBusy == wire.WhenBusySteer
}

func isInterrupt(cmd *Command) bool {
	return cmd.Kind == wire.CommandRun && cmd.WhenBusy == wire.WhenBusyInterrupt
}

// turnWork reports whether cmd's work runs the loop on a turn, and so takes
// steers: a run, a resume, an approve or a deny.
func turnWork(cmd *Command) bool {
	switch cmd.Kind {
	case wire.CommandRun, wire.CommandResume, wire.CommandApprove, wire.CommandDeny:
		return true
	}
	return false
}

// onBusyInput deals with a steer or an interrupt that arrives while the
// session is loaded, and reports whether it did; otherwise it is queued
// like any run. A steer joins a turn that works here or waits for
// approval, and otherwise runs ahead of the queue once the work that runs
// has ended. An interrupt cancels the work that runs and runs ahead of the
// queue (ahead of the runs parked behind an approval too); a turn that
// waits for approval is cancelled when it leaves the queue (settleBusy).
func (s *sessionActor) onBusyInput(cmd *Command) bool {
	switch {
	case s.a == nil:
		return false
	case isSteer(cmd) && s.working() && turnWork(s.busy),
		isSteer(cmd) && s.busy == nil && s.a.state.Waits():
		s.box.put(cmd)
		return true
	case isSteer(cmd) && s.busy != nil:
		s.queue = append([]*Command{cmd}, s.queue...)
		return true
	case isInterrupt(cmd) && s.busy != nil:
		if s.working() {
			s.cancel(interruptCause(cmd))
		}
		s.queue = append(append([]*Command{cmd}, s.parked...), s.queue...)
		s.parked = nil
		return true
	}
	return false
}

// settleBusy deals with a steer or an interrupt taken from the queue while
// nothing runs, and reports whether it did: a steer of a turn that waits
// for approval joins it (the box); an interrupt of such a turn goes back to
// the queue behind a cancel of it. Otherwise it starts as a run: a run that
// finds a turn left open by a previous owner resumes it, and a steer joins
// it (run).
func (s *sessionActor) settleBusy(cmd *Command) bool {
	if !s.a.state.Waits() {
		return false
	}
	switch {
	case isSteer(cmd):
		s.box.put(cmd)
		return true
	case isInterrupt(cmd):
		cause := interruptCause(cmd)
		cancel := &Command{Kind: wire.CommandCancel, Reason: cause.reason, interruptedBy: cause.by, Done: func(Outcome) {}}
		s.queue = append(append([]*Command{cancel, cmd}, s.parked...), s.queue...)
		s.parked = nil
		return true
	}
	return false
}

// afterTurn makes the steers the ended turn did not take runs of their
// own, ahead of the queue, once the turn no longer runs or waits.
func (s *sessionActor) afterTurn() {
	if s.a.state.Status.Active() {
		return
	}
	if left := s.box.drain(); len(left) > 0 {
		s.queue = append(left, s.queue...)
	}
}

// interruptCause is the cancel cause an interrupting run gives the turn.
func interruptCause(cmd *Command) cancelled {
	return cancelled{reason: fmt.Sprintf("interrupted by input %s", cmd.InputID), by: cmd.InputID}
}

// takeSteers stages a turn.steered for each steer waiting for the turn:
// the loop calls it at a step boundary, before the request of the next
// LLM call is built, so that the model sees them.
func takeSteers(a *AgentContext) error {
	for _, cmd := range a.steers.take() {
		if err := joinTurn(a, cmd); err != nil {
			return err
		}
	}
	return nil
}

// joinTurn stages cmd's message as a turn.steered of the running turn,
// unless the log has it (a steer delivered again).
func joinTurn(a *AgentContext, cmd *Command) error {
	st := a.State()
	if st.SteeredTurn(cmd.InputID) {
		return nil
	}
	msg := cmd.Message.Clone()
	msg.Steer = true
	if err := a.Stage(event.TurnSteered, event.TurnSteeredData{Turn: st.Turn, Message: msg, InputID: cmd.InputID, Caller: cmd.Caller}); err != nil {
		return err
	}
	// Its caller hears the turn from here on (staged events are told to
	// the watchers when written).
	a.watchSteer(cmd.Caller, false)
	return nil
}
