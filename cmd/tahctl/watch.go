package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/wire"
)

// How long a watch waits for the node to confirm a Ctrl-C's cancel, and for
// a lost connection to return.
const (
	interruptWait = 10 * time.Second
	reconnectWait = 60 * time.Second
)

// watch shows one command's work on a session (a run or a resume): the turn
// it started (a client.Turn: only that turn's events and deltas), until its
// outcome.
type watch struct {
	c *conn
	// moved is the connection made when the node came back at another
	// address (see reattach), which Close closes; nil before.
	moved *conn
	g     *globals
	sid   string
	json  bool
	st    style // of stderr
	sp    spinner
	turn  *client.Turn
	// stream: the answer is written on stdout as it comes (a terminal).
	// Elsewhere stdout gets the final answer once, after the outcome: a
	// crash's cut answer and its re-run never both reach a file.
	stream bool

	steps     map[string]*llmStep // LLM steps seen, by id
	tools     map[string]event.ToolStartedData
	lineOpen  bool // the answer's last line on stdout has no newline yet
	llmCalls  int
	toolCalls int
	usage     llm.Usage
	started   time.Time
	end       *event.Event // the end of the turn (agent.finished, failed or cancelled), once seen
	shown     bool         // some answer text was written
	// sigs receives Ctrl-C and SIGTERM once the watch listens (interrupts).
	sigs chan os.Signal
}

type llmStep struct {
	printed string
	done    bool
	// started: its llm.started was seen. Deltas and events come on two
	// subscriptions, in no order between them: the text of a step whose
	// llm.started has not come yet is held (in held) until it comes, so
	// that it never lands before the lines of the events logged before
	// that step (the tool calls it answers).
	started bool
	held    string
}

// watch prepares to show the work on session sid. Close it when done.
func (c *conn) watch(sid string) *watch {
	w := &watch{c: c, g: c.g, sid: sid, json: c.g.json, st: newStyle(c.g, c.g.stderr),
		steps: map[string]*llmStep{}, tools: map[string]event.ToolStartedData{}}
	w.sp = spinner{w: c.g.stderr, on: !w.json && isTerminal(c.g.stderr)}
	w.stream = isTerminal(c.g.stdout)
	return w
}

// Close stops the turn's following (not the turn), the spinner and the
// listening to signals.
func (w *watch) Close() {
	if w.sigs != nil {
		signal.Stop(w.sigs)
	}
	if w.turn != nil {
		w.turn.Close()
	}
	if w.moved != nil {
		w.moved.Close()
	}
	w.sp.stop()
}

// reattach follows the turn at the node's new address when the connection
// is lost and the data directory's node.json names another one than tahctl
// is connected to (the node came back on another port): it connects there
// and follows the turn from where it got to. It reports whether it did.
func (w *watch) reattach(ctx context.Context) bool {
	ep := w.g.resolve()
	if ep.url == w.c.ep.url || w.isDecided() {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, w.g.timeout)
	defer cancel()
	nc, err := w.g.connect(cctx)
	if err != nil {
		return false // not up yet: tried again
	}
	turn, err := nc.Attach(cctx, w.turn, client.WithEvents(), client.WithDeltas())
	if err != nil {
		nc.Close()
		if turn, err = w.c.Attach(cctx, w.turn, client.WithEvents(), client.WithDeltas()); err == nil {
			w.turn = turn // back on the old connection, which may come back yet
		}
		return false
	}
	if w.moved != nil {
		w.moved.Close()
	}
	w.c, w.moved, w.turn = nc, nc, turn
	w.note(w.st.dim("  the node is now at " + ep.url + " (" + ep.urlFrom + "): following the turn there"))
	return true
}

// interrupts is where Ctrl-C and SIGTERM arrive, listened to from the first
// call on (Close stops): start calls it before it publishes, so that a
// Ctrl-C while the input is sent is held, and cancels that input once it is
// stored (wait), rather than end tahctl and leave the input to run with no
// one following it.
func (w *watch) interrupts() <-chan os.Signal {
	if w.sigs == nil {
		w.sigs = make(chan os.Signal, 2)
		signal.Notify(w.sigs, os.Interrupt, syscall.SIGTERM)
	}
	return w.sigs
}

// start publishes the command (run or resume) and follows its turn.
func (w *watch) start(ctx context.Context, cmd wire.Command, in wire.Input) error {
	w.interrupts()
	w.started = time.Now()
	var err error
	if cmd == wire.CommandResume {
		w.turn, err = w.c.Resume(ctx, w.sid, client.WithEvents(), client.WithDeltas())
	} else {
		w.turn, err = w.c.Run(ctx, w.sid, in, client.WithEvents(), client.WithDeltas())
	}
	return w.c.inputFailed(w.sid, cmd, err)
}

// wait shows the work until the outcome and returns how it ended: nil for a
// completed turn, an exitStatus for a failed or cancelled one (already
// shown), an error for a command the node refused. Ctrl-C cancels this
// command's turn, and no other (a cancel that names its input: an input
// still queued behind another turn is withdrawn, and never runs), and
// returns exitInterrupted once the node confirms (or after interruptWait);
// a second Ctrl-C returns at once.
func (w *watch) wait(ctx context.Context) error {
	sigs := w.interrupts()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var interrupted, lostSince, looked time.Time
	events, deltas := w.turn.Events(), w.turn.Deltas()
	for events != nil || deltas != nil {
		select {
		case d, ok := <-deltas:
			if !ok {
				deltas = nil
				continue
			}
			w.onDelta(d)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			w.onEvent(ev)
		case s := <-w.c.states:
			switch s {
			case client.Disconnected:
				lostSince = time.Now()
				w.note(w.st.yellow("! lost the connection to the node; waiting for it to come back (Ctrl-C to stop waiting)"))
			case client.Reconnected:
				lostSince = time.Time{}
				w.note(w.st.dim("  reconnected"))
			}
		case <-sigs:
			// A turn that is over has nothing to cancel, nor to wait for.
			if w.isDecided() {
				return w.result(ctx, false)
			}
			if w.end != nil { // its end is shown; its outcome is on the way
				return w.finish(client.EndOutcome(*w.end), false)
			}
			if !interrupted.IsZero() {
				return exitStatus(exitInterrupted)
			}
			interrupted = time.Now()
			w.note(w.st.yellow("^C cancelling the turn… (Ctrl-C again to quit at once)"))
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := w.turn.Cancel(cctx, "cancelled from tahctl (Ctrl-C)")
			cancel()
			if err != nil {
				w.note(w.st.red("the cancel was not sent: " + err.Error()))
				return exitStatus(exitInterrupted)
			}
		case <-tick.C:
			if !w.lineOpen { // never over a line of the answer
				w.sp.tick()
			}
			if !lostSince.IsZero() && time.Since(looked) >= time.Second {
				looked = time.Now()
				if w.reattach(ctx) {
					lostSince = time.Time{}
					events, deltas = w.turn.Events(), w.turn.Deltas()
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
		if !interrupted.IsZero() && time.Since(interrupted) > interruptWait {
			w.note(w.st.yellow("the node did not confirm the cancel; `tahctl show " + w.sid + "` tells how the turn ended"))
			return exitStatus(exitInterrupted)
		}
		if !lostSince.IsZero() && time.Since(lostSince) > reconnectWait {
			return errorf(exitUnavailable, "when a node runs again, `tahctl resume "+w.sid+"` continues the turn (a node resumes it by itself too)",
				"the connection to the node was lost for %v", reconnectWait)
		}
	}
	return w.result(ctx, !interrupted.IsZero())
}

func (w *watch) isDecided() bool {
	select {
	case <-w.turn.Decided():
		return true
	default:
		return false
	}
}

// result shows the turn's outcome and returns how it ended (see wait).
func (w *watch) result(ctx context.Context, interrupted bool) error {
	w.sp.stop()
	o, err := w.turn.Outcome(ctx)
	var ce *client.CommandError
	switch {
	case errors.As(err, &ce):
		if w.json {
			w.printOutcome(ce.Outcome)
		}
		if ce.Code == wire.FailureWithdrawn {
			// Cancelled while it waited behind another turn: that turn goes on.
			w.note(w.st.yellow("⊘ the input was withdrawn before it started: it will not run (the session's other work goes on)"))
			if interrupted {
				return exitStatus(exitInterrupted)
			}
			return exitStatus(exitCancelled)
		}
		if ce.Code == wire.FailureBudgetExceeded {
			return w.c.budgetRefused(ctx, w.sid, ce.Message, ce.Outcome.Budget)
		}
		return inputFailure(w.sid, ce.Code, ce.Message)
	case err != nil:
		return errorf(exitUnavailable, "`tahctl show "+w.sid+"` tells how the turn goes on", "the turn's outcome was not received: %v", err)
	}
	if o.AwaitsApproval() && !interrupted {
		if w.json {
			w.printOutcome(o)
		}
		return w.awaitingApproval(ctx, o)
	}
	return w.finish(o, interrupted)
}

// inputFailure is the error of a command the node could not carry out.
func inputFailure(sid, code, msg string) error {
	switch code {
	case wire.FailureUnknownSession:
		return notFound(sid)
	case wire.CodeMalformedInput, wire.CodeReplySubject:
		return errorf(exitUsage, "`tahctl help`", "the node refused the input: %s", msg)
	case wire.CodeInputTooLarge:
		return errorf(exitUsage, tryFile+"; or raise the limit of every node (tah-node --max-input-bytes, agent.max_input_bytes)", "%s", msg)
	case wire.CodeCorruptLog:
		return errorf(exitFailed, "`tahctl show "+sid+"` says where the log is corrupt; `tahctl fork "+sid+" --turns N` copies the turns before it",
			"the session's log is corrupt: %s", msg)
	case wire.FailureBusy:
		return errorf(exitFailed, "wait for the turn to end, or `tahctl cancel "+sid+"`", "%s", msg)
	case wire.FailureAlreadyDecided, wire.FailureNotPending:
		return errorf(exitFailed, "`tahctl events "+sid+"` shows the calls that waited for approval and how each was decided", "%s", msg)
	case wire.FailureNothingToResume:
		return errorf(exitFailed, "`tahctl send -s "+sid+" TEXT` starts a new turn", "%s", msg)
	}
	return errorf(exitFailed, "see the node's log", "%s", msg)
}

func (w *watch) printOutcome(o wire.Outcome) {
	_ = printJSON(w.g.stdout, struct {
		Kind string `json:"kind"`
		wire.Outcome
	}{"outcome", o})
}

// finish shows how the turn ended and returns its exit status.
func (w *watch) finish(o wire.Outcome, interrupted bool) error {
	if w.json {
		w.printOutcome(o)
	}
	if !w.stream && !w.json && o.Status == "completed" && o.Content != "" {
		fmt.Fprintln(w.g.stdout, strings.TrimSuffix(o.Content, "\n"))
	}
	if w.end == nil && !w.json {
		// The events did not show the end (they were missed): the outcome says it.
		switch o.Status {
		case "completed":
			if !w.shown && o.Content != "" {
				w.text(o.Content)
			}
			w.closeLine()
			w.footer(o.Steps, o.Usage, &o.Cost)
		case "failed":
			if o.Code == event.CodeBudgetExceeded && o.Budget != nil {
				w.budgetReached(*o.Budget)
				break
			}
			w.note(w.st.red("✗ the turn failed: " + o.Error))
		case "cancelled":
			w.note(w.st.yellow("⊘ the turn was cancelled"))
		}
	}
	switch o.Status {
	case "completed", "idle":
		return nil
	case "failed":
		return exitStatus(exitFailed)
	case "cancelled":
		if interrupted {
			return exitStatus(exitInterrupted)
		}
		return exitStatus(exitCancelled)
	}
	return errorf(exitFailed, "`tahctl show "+w.sid+"`", "the node answered with the session %s", o.Status)
}

// step is the LLM step id, seen first in its llm.started or in a delta.
func (w *watch) step(id string) *llmStep {
	st, ok := w.steps[id]
	if !ok {
		st = &llmStep{}
		w.steps[id] = st
	}
	return st
}

func (w *watch) onDelta(d client.Delta) {
	if w.json {
		_ = printJSON(w.g.stdout, struct {
			Kind    string `json:"kind"`
			Session string `json:"session"`
			wire.Delta
		}{"delta", w.sid, d.Delta})
		return
	}
	st := w.step(d.StepID)
	if st.done {
		return
	}
	if d.Reasoning != "" && w.sp.on {
		w.sp.start("thinking: " + oneLine(d.Reasoning, 40))
	}
	if d.Text != "" {
		if !st.started {
			st.held += d.Text
			return
		}
		w.text(d.Text)
		st.printed += d.Text
	}
}

// ended notes the end of the turn.
func (w *watch) ended(ev event.Event) {
	if w.end == nil {
		w.end = &ev
	}
}

// toolLine is one tool call and its outcome on one line.
func (w *watch) toolLine(d event.ToolFinishedData) string {
	mark, outText := w.st.green("✓"), preview(d.Output, 60)
	if d.IsError {
		mark = w.st.red("✗")
		outText = w.st.red(preview(d.Output, 80))
	}
	args := ""
	if s, ok := w.tools[d.CallID]; ok {
		args = " " + compactJSON(s.Call.Arguments, 60)
	}
	line := fmt.Sprintf("  %s %s%s %s %s", mark, w.st.bold(d.Name), w.st.dim(args), w.st.dim("→"), outText)
	if t := ms(d.DurationMS); t != "" {
		line += w.st.dim("  " + t)
	}
	return line
}

// footer sums the turn up on stderr.
func (w *watch) footer(steps int, u llm.Usage, cost *pricing.Cost) {
	if w.json {
		return
	}
	if u == (llm.Usage{}) {
		u = w.usage
	}
	parts := []string{fmt.Sprintf("completed in %s", ms(time.Since(w.started).Milliseconds()))}
	if steps == 0 {
		steps = w.llmCalls
	}
	parts = append(parts, plural(steps, "model call"), plural(w.toolCalls, "tool call"),
		fmt.Sprintf("%s tokens in, %s out", num(u.InputTokens), num(u.OutputTokens)))
	if cost != nil { // nil: an agent.finished written before costs were recorded
		parts = append(parts, cost.String())
	}
	w.note(w.st.green("✓ ") + w.st.dim(strings.Join(parts, " · ")))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// text writes answer text to stdout, as it comes when it streams (see
// watch.stream).
func (w *watch) text(s string) {
	if s == "" || w.json || !w.stream {
		return
	}
	w.sp.stop() // the answer is coming: no spinner over it
	fmt.Fprint(w.g.stdout, s)
	w.lineOpen = !strings.HasSuffix(s, "\n")
	w.shown = true
}

// closeLine ends the answer's open line.
func (w *watch) closeLine() {
	if w.lineOpen {
		fmt.Fprintln(w.g.stdout)
		w.lineOpen = false
	}
}

// note writes a status line to stderr (nothing with --json).
func (w *watch) note(s string) {
	if w.json {
		return
	}
	w.sp.clear()
	w.closeLine()
	fmt.Fprintln(w.g.stderr, s)
}
