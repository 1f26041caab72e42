package inspector

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// cancelReason is recorded in agent.cancelled for a cancel from the page.
const cancelReason = "cancelled from the inspector"

// newSession creates a session and starts its first turn with the message.
func (h *Handler) newSession(w http.ResponseWriter, r *http.Request) {
	text := strings.TrimSpace(r.PostFormValue("text"))
	if text == "" {
		redirect(w, r, "/", flash{Err: "write a message first"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	s, err := h.c.Create(ctx, wire.CreateRequest{})
	if err != nil {
		redirect(w, r, "/", errFlash("create", err))
		return
	}
	h.startTurn(w, r, s.Session, func(ctx context.Context) (*client.Turn, error) {
		return h.c.Run(ctx, s.Session, wire.Input{Text: text})
	})
}

// send starts the session's next turn with the message, or, with the form's
// when_busy (the buttons "Steer this turn" and "Interrupt and send"), gives
// it to the running turn: steer joins that turn at its next step, interrupt
// cancels it and runs next (docs/protocol.md, "Input while busy"). A
// when_busy the page does not offer is refused here, nothing sent.
func (h *Handler) send(w http.ResponseWriter, r *http.Request) {
	sid, text := r.PathValue("sid"), strings.TrimSpace(r.PostFormValue("text"))
	when, err := whenBusyOf(r.PostFormValue("when_busy"))
	if err != nil {
		redirect(w, r, "/s/"+sid, flash{Err: err.Error()})
		return
	}
	if text == "" {
		redirect(w, r, "/s/"+sid, flash{Err: "write a message first"})
		return
	}
	in := wire.Input{Text: text}
	if when != "" {
		in.Options = &wire.RunOptions{WhenBusy: when}
	}
	h.startTurnSaying(w, r, sid, sentNote[when], func(ctx context.Context) (*client.Turn, error) {
		return h.c.Run(ctx, sid, in)
	})
}

// whenBusyOf reads the send form's when_busy: empty (the Send button: the
// message queues behind a running turn), steer or interrupt. Queue is not
// offered (it is what Send does), so that a page and its server agree on
// the three buttons.
func whenBusyOf(s string) (wire.WhenBusy, error) {
	switch w := wire.WhenBusy(s); w {
	case "", wire.WhenBusySteer, wire.WhenBusyInterrupt:
		return w, nil
	}
	return "", fmt.Errorf("send: when_busy %q is not %q or %q: nothing was sent", s, wire.WhenBusySteer, wire.WhenBusyInterrupt)
}

// sentNote says what a send did when its outcome is not there yet: a steer
// waits in the running turn, whose end is its outcome.
var sentNote = map[wire.WhenBusy]string{
	"":                     "turn started",
	wire.WhenBusySteer:     "steer sent: it joins the running turn at its next step",
	wire.WhenBusyInterrupt: "interrupt sent: the running turn is cancelled, and this message runs next",
}

// resume continues a turn a crash or a stop left unfinished. A session
// with no such turn is answered here, from its log, and no input is sent:
// the node would load the session to find that out, and its load writes a
// session.claimed (a refused click would change the log).
func (h *Handler) resume(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("sid")
	if st, ok := h.applies(w, r, sid, "resume", canResume); !ok {
		if st != nil {
			redirect(w, r, "/s/"+sid, flash{Err: fmt.Sprintf("resume: nothing to resume: the session is %s, no turn was left unfinished", st.Status), Code: wire.FailureNothingToResume})
		}
		return
	}
	h.startTurn(w, r, sid, func(ctx context.Context) (*client.Turn, error) { return h.c.Resume(ctx, sid) })
}

// applies reads session sid's log and reports whether action applies to
// it now (can), so that a refusal writes nothing to the log. It returns
// the state it read; on an error it has answered (st is nil).
func (h *Handler) applies(w http.ResponseWriter, r *http.Request, sid, action string, can func(*projection.State) bool) (*projection.State, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	t, err := load(ctx, h.c, sid)
	if err != nil {
		redirect(w, r, "/s/"+sid, errFlash(action, err))
		return nil, false
	}
	return &t.state, can(&t.state)
}

// startTurn starts a turn and waits a moment for a refusal (a busy session,
// nothing to resume, an unknown session: said at once by the owner) or a
// quick end, then shows the session page, where a running turn goes on live.
func (h *Handler) startTurn(w http.ResponseWriter, r *http.Request, sid string, start func(context.Context) (*client.Turn, error)) {
	h.startTurnSaying(w, r, sid, sentNote[""], start)
}

// startTurnSaying is startTurn that says pending, with the input's id, when
// the turn goes on past the moment it waits.
func (h *Handler) startTurnSaying(w http.ResponseWriter, r *http.Request, sid, pending string, start func(context.Context) (*client.Turn, error)) {
	page := "/s/" + sid
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	turn, err := start(ctx)
	if err != nil {
		redirect(w, r, page, errFlash("", err))
		return
	}
	defer turn.Close()
	wait, stop := context.WithTimeout(ctx, settle)
	defer stop()
	out, err := turn.Outcome(wait)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		redirect(w, r, page, flash{OK: pending + " (input " + turn.InputID() + ")"})
	case err != nil:
		redirect(w, r, page, errFlash("", err))
	default:
		redirect(w, r, page, outcomeFlash(out))
	}
}

// outcomeFlash says how a turn ended, as tahctl does: a refusal or a
// command not carried out with its failure code (client returns those as a
// *CommandError; an outcome that says so is read the same), a failed or
// cancelled turn with its error's code.
func outcomeFlash(o wire.Outcome) flash {
	if o.Refused() {
		return flash{Err: "refused: " + o.Failure, Code: o.FailureCode}
	}
	if o.Failure != "" {
		return flash{Err: o.Failure, Code: o.FailureCode}
	}
	msg := fmt.Sprintf("turn %d %s", o.Turn, o.Status)
	if o.Error != "" {
		return flash{Err: msg + ": " + o.Error, Code: o.Code}
	}
	return flash{OK: msg}
}

// cancel cancels the running turn (or compaction): the node answers once
// the work it cancelled ended, with that work's outcome (WasRunning), or at
// once with the session's state when it ran nothing.
//
// A session with no turn in progress is answered here, as for resume,
// without an input.
func (h *Handler) cancel(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("sid")
	if st, ok := h.applies(w, r, sid, "cancel", canCancel); !ok {
		if st != nil {
			redirect(w, r, "/s/"+sid, flash{OK: fmt.Sprintf("nothing to cancel: the session was not running (it is %s)", st.Status)})
		}
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), commandTimeout)
	defer cancel()
	out, err := h.c.Cancel(ctx, sid, cancelReason)
	switch {
	case err != nil:
		redirect(w, r, "/s/"+sid, errFlash("cancel", err))
	case !out.WasRunning:
		redirect(w, r, "/s/"+sid, flash{OK: fmt.Sprintf("nothing to cancel: the session was not running (it is %s)", out.Status)})
	case out.Status == projection.StatusCancelled:
		redirect(w, r, "/s/"+sid, flash{OK: fmt.Sprintf("cancelled: turn %d stopped", out.Turn)})
	default:
		redirect(w, r, "/s/"+sid, flash{OK: fmt.Sprintf("the cancel came too late: turn %d ended %s first", out.Turn, out.Status)})
	}
}

// compact summarises the session's turns so far. A session that has no
// turn to summarise, or runs one, is answered here, as for resume, without
// an input.
func (h *Handler) compact(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("sid")
	if st, ok := h.applies(w, r, sid, "compact", canCompact); !ok {
		switch {
		case st == nil:
		case st.Status.Active():
			redirect(w, r, "/s/"+sid, flash{Err: "compact: a turn is in progress: compact once it ends", Code: wire.FailureBusy})
		default:
			redirect(w, r, "/s/"+sid, flash{OK: "nothing to compact: no turn since the last summary"})
		}
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), commandTimeout)
	defer cancel()
	res, err := h.c.Compact(ctx, sid)
	switch {
	case err != nil:
		redirect(w, r, "/s/"+sid, errFlash("compact", err))
	case res == nil:
		redirect(w, r, "/s/"+sid, flash{OK: "nothing to compact"})
	default:
		redirect(w, r, "/s/"+sid, flash{OK: fmt.Sprintf("compacted: %d turn(s) summarised in %d characters", res.Turns, res.Chars)})
	}
}

// fork makes a session of the first turns of this one and opens it.
func (h *Handler) fork(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("sid")
	req := wire.ForkRequest{Session: sid}
	if s := r.PostFormValue("turns"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			redirect(w, r, "/s/"+sid, flash{Err: fmt.Sprintf("fork: %q is not a number of turns", s)})
			return
		}
		req.Turns = &n
	}
	ctx, cancel := context.WithTimeout(r.Context(), commandTimeout)
	defer cancel()
	rep, err := h.c.Fork(ctx, req)
	if err != nil {
		redirect(w, r, "/s/"+sid, errFlash("fork", err))
		return
	}
	redirect(w, r, "/s/"+rep.Session, flash{OK: "forked from " + sid})
}
