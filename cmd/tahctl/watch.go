package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/wire"
)

// How long a watch waits for the rest of the events once the outcome came, for
// the node to confirm a Ctrl-C's cancel, and for a lost connection to return.
const (
	drainWait = 3 * time.Second
	// endWait is how long a watch that saw its turn end in the log waits for
	// the outcome before it takes the log's word: the outcome is a core NATS
	// message, and a client that was reconnecting when it was sent missed it.
	endWait       = 2 * time.Second
	interruptWait = 10 * time.Second
	reconnectWait = 60 * time.Second
)

// watch follows one command's work on a session (a run or a resume): it
// subscribes to the session's deltas, events and input errors, and to a reply
// subject of its own, before the input is published, then shows what happens
// until the node publishes the outcome.
type watch struct {
	c       *client
	g       *globals
	sid     string
	inputID string
	replyTo string
	json    bool
	st      style // of stderr
	sp      spinner

	deltas  chan *nats.Msg
	errs    chan *nats.Msg
	replies chan *nats.Msg
	events  chan jetstream.Msg
	subs    []*nats.Subscription
	cc      jetstream.ConsumeContext
	done    chan struct{}

	steps     map[string]*llmStep     // LLM steps seen, by id
	pending   map[string][]wire.Delta // deltas of steps whose llm.started has not come yet
	tools     map[string]event.ToolStartedData
	highEpoch uint64
	lineOpen  bool // the answer's last line on stdout has no newline yet
	lastSeq   uint64
	fromSeq   uint64 // the first sequence the watch follows
	llmCalls  int
	toolCalls int
	usage     llm.Usage
	started   time.Time
	// ours is true once the turn this watch's input runs is in the log: the
	// turn.started with its input id (a run), or from the start (a resume).
	ours  bool
	end   *event.Event // the end of that turn (agent.finished, failed or cancelled), once seen
	endAt time.Time
	shown bool // some answer text was written
}

type llmStep struct {
	printed string
	done    bool
}

// watch subscribes to session sid. Close it when done.
func (c *client) watch(ctx context.Context, sid string) (*watch, error) {
	w := &watch{c: c, g: c.g, sid: sid, json: c.g.json, st: newStyle(c.g, c.g.stderr),
		deltas: make(chan *nats.Msg, 8192), errs: make(chan *nats.Msg, 16), replies: make(chan *nats.Msg, 4),
		events: make(chan jetstream.Msg, 256), done: make(chan struct{}),
		steps: map[string]*llmStep{}, pending: map[string][]wire.Delta{}, tools: map[string]event.ToolStartedData{}}
	w.sp = spinner{w: c.g.stderr, on: !w.json && isTerminal(c.g.stderr)}
	w.replyTo = c.nc.NewRespInbox()
	for subj, ch := range map[string]chan *nats.Msg{wire.DeltaSubject(sid): w.deltas, wire.ErrorSubject(sid): w.errs, w.replyTo: w.replies} {
		sub, err := c.nc.ChanSubscribe(subj, ch)
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("subscribe %s: %w", subj, err)
		}
		w.subs = append(w.subs, sub)
	}
	// The events from the stream's end on: everything this command causes.
	stream, err := c.js.Stream(ctx, wire.EventStream)
	if err != nil {
		w.Close()
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, errorf(exitUnavailable, "start a TAH node first: `tah-node`", "NATS at %s has no TAH streams", c.ep.url)
		}
		return nil, errorf(exitUnavailable, "check that the node runs: `tahctl status`", "the event stream: %v", err)
	}
	w.fromSeq = stream.CachedInfo().State.LastSeq + 1
	if err := w.follow(ctx, w.fromSeq); err != nil {
		w.Close()
		return nil, err
	}
	if err := c.nc.FlushTimeout(5 * time.Second); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// follow consumes the session's events from sequence from on (an ordered
// consumer). It replaces the consumer that ran before only once the new one
// runs (events both deliver are shown once: see onEvent).
func (w *watch) follow(ctx context.Context, from uint64) error {
	cons, err := w.c.js.OrderedConsumer(ctx, wire.EventStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{wire.SessionEvents(w.sid)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    from,
	})
	var cc jetstream.ConsumeContext
	if err == nil {
		cc, err = cons.Consume(func(m jetstream.Msg) {
			select {
			case w.events <- m:
			case <-w.done:
			}
		})
	}
	if err != nil {
		return fmt.Errorf("watch the events of %s: %w", w.sid, err)
	}
	if w.cc != nil {
		w.cc.Stop()
	}
	w.cc = cc
	return nil
}

// Close stops the subscriptions.
func (w *watch) Close() {
	select {
	case <-w.done:
		return
	default:
		close(w.done)
	}
	if w.cc != nil {
		w.cc.Stop()
	}
	for _, s := range w.subs {
		_ = s.Unsubscribe()
	}
	w.sp.stop()
}

// publish sends the command to the session's input subject, with the watch's
// reply subject for the outcome.
func (w *watch) publish(ctx context.Context, cmd string, in wire.Input) error {
	if in.ID == "" {
		in.ID = event.NewID("in_")
	}
	w.inputID = in.ID
	w.ours = cmd == "resume" // a resume continues the turn that is open
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	m := nats.NewMsg(wire.InputSubject(w.sid))
	m.Data = body
	m.Header.Set(wire.HeaderCommand, cmd)
	m.Header.Set(wire.HeaderMsgID, in.ID)
	m.Header.Set(wire.HeaderReplyTo, w.replyTo)
	if limit := w.c.nc.MaxPayload(); int64(len(body)+512) > limit {
		return usageError("put the text in a file under the node's tools root and ask the agent to read it",
			"the input is %s bytes; the server takes messages of at most %s bytes", num(len(body)), num(int(limit)))
	}
	w.started = time.Now()
	if err := w.publishRetrying(ctx, m); err != nil {
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
			return errorf(exitUnavailable, "start a TAH node first: `tah-node`", "no TAH input stream at %s: %v", w.c.ep.url, err)
		}
		return errorf(exitUnavailable, "check that the node runs: `tahctl status`", "publish the %s input: %v", cmd, err)
	}
	return nil
}

// publishRetrying publishes m, trying again for a while when the input
// stream does not answer: the watch found the stream, so it is electing a
// leader (a NATS server just failed). The input id makes every try the same
// message.
func (w *watch) publishRetrying(ctx context.Context, m *nats.Msg) error {
	deadline := time.Now().Add(publishPatience)
	for noted := false; ; {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := w.c.js.PublishMsg(tctx, m)
		cancel()
		retry := errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
			errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
		if err == nil || !retry || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		if !noted {
			w.note(w.st.yellow("! the input stream does not answer (a NATS server may have just failed); trying again"))
			noted = true
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// publishPatience bounds publishRetrying: a stream elects a leader within
// seconds.
const publishPatience = 15 * time.Second

// cancel asks the session to cancel its running work.
func (w *watch) cancel(ctx context.Context, reason string) error {
	in := wire.Input{ID: event.NewID("in_"), Reason: reason}
	body, _ := json.Marshal(in)
	m := nats.NewMsg(wire.InputSubject(w.sid))
	m.Data = body
	m.Header.Set(wire.HeaderCommand, "cancel")
	m.Header.Set(wire.HeaderMsgID, in.ID) // retries are stored once
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return w.publishRetrying(ctx, m)
}

// wait shows the work until the outcome and returns how it ended: nil for a
// completed turn (or a compaction done), an exitStatus for a failed or
// cancelled one (already shown), an error for a command the node refused.
// Ctrl-C cancels the work and returns exitInterrupted once the node confirms
// (or after interruptWait); a second Ctrl-C returns at once.
func (w *watch) wait(ctx context.Context) (*wire.Outcome, error) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()

	var (
		out         *wire.Outcome
		drainBy     time.Time
		interrupted time.Time
		lostSince   time.Time
	)
	for {
		select {
		case m := <-w.deltas:
			w.onDelta(m)
		case m := <-w.events:
			w.onEvent(m)
		case m := <-w.replies:
			var o wire.Outcome
			if err := json.Unmarshal(m.Data, &o); err != nil {
				return nil, fmt.Errorf("the node's outcome is not JSON: %v", err)
			}
			out, drainBy = &o, time.Now().Add(drainWait)
		case m := <-w.errs:
			var ie wire.InputError
			if json.Unmarshal(m.Data, &ie) == nil && ie.InputID == w.inputID {
				w.sp.stop()
				if w.json {
					_ = printJSON(w.g.stdout, struct {
						Kind string `json:"kind"`
						wire.InputError
					}{"error", ie})
				}
				return nil, inputFailure(w.sid, ie.Code, ie.Error)
			}
		case s := <-w.c.conn:
			switch s {
			case "disconnected":
				lostSince = time.Now()
				w.note(w.st.yellow("! lost the connection to the node; waiting for it to come back (Ctrl-C to stop waiting)"))
			case "reconnected":
				lostSince = time.Time{}
				w.note(w.st.dim("  reconnected"))
				// The ordered consumer would notice its gap only after missing
				// heartbeats (seconds): follow again from the last event seen.
				if err := w.follow(ctx, max(w.lastSeq+1, w.fromSeq)); err != nil {
					w.note(w.st.yellow("! " + err.Error() + "; waiting for the outcome"))
				}
			}
		case <-sigs:
			if !interrupted.IsZero() {
				w.sp.stop()
				return out, exitStatus(exitInterrupted)
			}
			interrupted = time.Now()
			w.note(w.st.yellow("^C cancelling the turn… (Ctrl-C again to quit at once)"))
			if err := w.cancel(ctx, "cancelled from tahctl (Ctrl-C)"); err != nil {
				w.note(w.st.red("the cancel was not sent: " + err.Error()))
				return out, exitStatus(exitInterrupted)
			}
		case <-tick.C:
			if !w.lineOpen { // never over a line of the answer
				w.sp.tick()
			}
		case <-ctx.Done():
			return out, ctx.Err()
		}
		now := time.Now()
		if out != nil && (w.lastSeq >= out.LastSeq || w.end != nil || now.After(drainBy)) {
			w.sp.stop()
			err := w.finish(out, !interrupted.IsZero())
			return out, err
		}
		if out == nil && w.end != nil && now.Sub(w.endAt) > endWait {
			// The log says the turn ended; its outcome was lost on the way.
			o := w.outcomeOfEnd()
			w.sp.stop()
			return &o, w.finish(&o, !interrupted.IsZero())
		}
		if !interrupted.IsZero() && now.Sub(interrupted) > interruptWait {
			w.note(w.st.yellow("the node did not confirm the cancel; `tahctl show " + w.sid + "` tells how the turn ended"))
			return out, exitStatus(exitInterrupted)
		}
		if !lostSince.IsZero() && now.Sub(lostSince) > reconnectWait {
			w.sp.stop()
			return out, errorf(exitUnavailable, "when a node runs again, `tahctl resume "+w.sid+"` continues the turn (a node resumes it by itself too)",
				"the connection to the node was lost for %v", reconnectWait)
		}
	}
}

// inputFailure is the error of a command the node could not carry out.
func inputFailure(sid, code, msg string) error {
	switch code {
	case "unknown_session":
		return errorf(exitNotFound, "`tahctl list` shows the sessions", "session %s not found", sid)
	case "malformed_input":
		return errorf(exitUsage, "`tahctl help`", "the node refused the input: %s", msg)
	case "busy":
		return errorf(exitFailed, "wait for the turn to end, or `tahctl cancel "+sid+"`", "%s", msg)
	case "nothing_to_resume":
		return errorf(exitFailed, "`tahctl send -s "+sid+" TEXT` starts a new turn", "%s", msg)
	}
	return errorf(exitFailed, "see the node's log", "%s", msg)
}

// finish shows how the work ended and returns its exit status.
func (w *watch) finish(o *wire.Outcome, interrupted bool) error {
	if w.json {
		_ = printJSON(w.g.stdout, struct {
			Kind string `json:"kind"`
			*wire.Outcome
		}{"outcome", o})
	}
	if o.Failure != "" {
		return inputFailure(w.sid, o.FailureCode, o.Failure)
	}
	if w.end == nil && !w.json {
		// The events did not show the end (they were missed): the outcome says it.
		switch o.Status {
		case "completed":
			if !w.shown && o.Content != "" {
				w.text(o.Content)
			}
			w.closeLine()
			w.footer(o.Steps, o.Usage)
		case "failed":
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

func (w *watch) onDelta(m *nats.Msg) {
	epoch, _ := strconv.ParseUint(m.Header.Get(wire.HeaderEpoch), 10, 64)
	if epoch < w.highEpoch {
		return // from an owner that lost the session
	}
	w.highEpoch = epoch
	var d wire.Delta
	if json.Unmarshal(m.Data, &d) != nil {
		return
	}
	if w.json {
		_ = printJSON(w.g.stdout, struct {
			Kind    string `json:"kind"`
			Session string `json:"session"`
			wire.Delta
		}{"delta", w.sid, d})
		return
	}
	st, ok := w.steps[d.StepID]
	if !ok {
		w.pending[d.StepID] = append(w.pending[d.StepID], d)
		return
	}
	w.showDelta(st, d)
}

func (w *watch) showDelta(st *llmStep, d wire.Delta) {
	if st.done {
		return
	}
	if d.Reasoning != "" && w.sp.on {
		w.sp.start("thinking: " + oneLine(d.Reasoning, 40))
	}
	if d.Text != "" {
		w.text(d.Text)
		st.printed += d.Text
	}
}

func (w *watch) onEvent(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	ev, err := event.Unmarshal(m.Data(), md.Sequence.Stream)
	if err != nil {
		return
	}
	if ev.Seq <= w.lastSeq {
		return // seen already: the watch followed again after a reconnect
	}
	w.lastSeq = ev.Seq
	if w.json {
		_ = printJSON(w.g.stdout, struct {
			Kind  string      `json:"kind"`
			Event event.Event `json:"event"`
		}{"event", ev})
	}
	switch ev.Type {
	case event.TurnStarted:
		d, _ := event.DecodeAs[event.TurnStartedData](ev)
		if d.InputID != "" && d.InputID == w.inputID {
			w.ours, w.end = true, nil
		}
	case event.LLMStarted:
		d, _ := event.DecodeAs[event.LLMStartedData](ev)
		w.llmCalls++
		st := &llmStep{}
		w.steps[d.StepID] = st
		label := "waiting for the model"
		if w.llmCalls > 1 {
			label = fmt.Sprintf("waiting for the model (call %d)", w.llmCalls)
		}
		w.sp.start(label)
		if d.Trim != nil && !w.json {
			w.note(w.st.dim(fmt.Sprintf("  · context trimmed to fit %s characters (%s before)", num(d.Trim.Budget), num(d.Trim.BeforeChars))))
		}
		for _, p := range w.pending[d.StepID] {
			w.showDelta(st, p)
		}
		delete(w.pending, d.StepID)
	case event.LLMCompleted:
		d, _ := event.DecodeAs[event.LLMCompletedData](ev)
		st := w.steps[d.StepID]
		if st == nil {
			st = &llmStep{}
			w.steps[d.StepID] = st
			for _, p := range w.pending[d.StepID] {
				w.showDelta(st, p)
			}
			delete(w.pending, d.StepID)
		}
		// Text the deltas did not bring (some were lost on the way: deltas are
		// not stored) comes from the log.
		if c := d.Response.Content; !w.json && c != st.printed {
			if strings.HasPrefix(c, st.printed) {
				w.text(c[len(st.printed):])
			} else {
				w.note(w.st.yellow("  · some of the streamed answer was lost on the way; here it is whole:"))
				w.text(c)
			}
		}
		st.done = true
		w.usage = w.usage.Add(d.Response.Usage)
		w.sp.stop()
		if len(d.Response.ToolCalls) > 0 {
			w.closeLine()
		}
	case event.LLMFailed:
		d, _ := event.DecodeAs[event.LLMFailedData](ev)
		w.sp.stop()
		switch d.Code {
		case event.CodeCancelled:
			// agent.cancelled says it
		case event.CodeInterrupted:
			w.note(w.st.yellow("  · the model call was interrupted (its node stopped); it is made again"))
		default:
			w.note(w.st.red(fmt.Sprintf("  ✗ the model failed: %s [%s]", oneLine(d.Error, 200), d.Code)))
		}
	case event.Thinking:
		d, _ := event.DecodeAs[event.ThinkingData](ev)
		w.note(w.st.dim("  · thinking: " + oneLine(d.Content, 100)))
	case event.ToolStarted:
		d, _ := event.DecodeAs[event.ToolStartedData](ev)
		w.tools[d.Call.ID] = d
		w.sp.start("running " + d.Call.Name)
	case event.ToolFinished:
		d, _ := event.DecodeAs[event.ToolFinishedData](ev)
		w.toolCalls++
		w.sp.stop()
		w.note(w.toolLine(d))
	case event.AgentFinished:
		d, _ := event.DecodeAs[event.AgentFinishedData](ev)
		w.ended(ev)
		if !w.shown && d.Content != "" && !w.json {
			w.text(d.Content)
		}
		w.closeLine()
		w.footer(d.Steps, d.Usage)
	case event.AgentFailed:
		d, _ := event.DecodeAs[event.AgentFailedData](ev)
		w.ended(ev)
		w.note(w.st.red(fmt.Sprintf("✗ the turn failed: %s [%s]", oneLine(d.Error, 300), d.Code)))
	case event.AgentCancelled:
		d, _ := event.DecodeAs[event.AgentCancelledData](ev)
		w.ended(ev)
		msg := "⊘ the turn was cancelled"
		if d.Reason != "" {
			msg += ": " + d.Reason
		}
		w.note(w.st.yellow(msg))
	case event.ContextCompacted:
		d, _ := event.DecodeAs[event.ContextCompactedData](ev)
		w.note(w.st.dim(fmt.Sprintf("  · %d earlier turns summarised (%s characters)", d.Turns, num(d.Chars))))
	case event.ContextCompactFailed:
		d, _ := event.DecodeAs[event.ContextCompactFailedData](ev)
		w.note(w.st.yellow("  · the summary of earlier turns failed: " + oneLine(d.Error, 200)))
	}
}

// ended notes the end of a turn, if it is this watch's.
func (w *watch) ended(ev event.Event) {
	if w.ours && w.end == nil {
		w.end, w.endAt = &ev, time.Now()
	}
}

// outcomeOfEnd is the outcome that the end of the turn in the log tells.
func (w *watch) outcomeOfEnd() wire.Outcome {
	o := wire.Outcome{Session: w.sid, LastSeq: w.end.Seq, Usage: w.usage, Steps: w.llmCalls}
	switch w.end.Type {
	case event.AgentFinished:
		d, _ := event.DecodeAs[event.AgentFinishedData](*w.end)
		o.Status, o.Turn, o.Content, o.Steps, o.Usage = "completed", d.Turn, d.Content, d.Steps, d.Usage
	case event.AgentFailed:
		d, _ := event.DecodeAs[event.AgentFailedData](*w.end)
		o.Status, o.Turn, o.Error, o.Code, o.Steps = "failed", d.Turn, d.Error, d.Code, d.Steps
	case event.AgentCancelled:
		d, _ := event.DecodeAs[event.AgentCancelledData](*w.end)
		o.Status, o.Turn, o.Error, o.Code = "cancelled", d.Turn, d.Reason, event.CodeCancelled
	}
	return o
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
func (w *watch) footer(steps int, u llm.Usage) {
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
	w.note(w.st.green("✓ ") + w.st.dim(strings.Join(parts, " · ")))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// text writes answer text to stdout.
func (w *watch) text(s string) {
	if s == "" || w.json {
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
