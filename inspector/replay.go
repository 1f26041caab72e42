package inspector

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/replay"
	"github.com/tah-dev/tah/wire"
)

// The Replay action of a session's page (issue 30): the session's recorded
// turns replayed against the node's agent definition, or one the form
// changes (a system prompt, a model), with no model call and no tool run
// (tah.api.replay); with "continue live", a divergence goes on in a live
// session (tah.api.replay_live) whose turn the inspector starts (or
// resumes, from the step before the divergence) and links to. The page shows the verdict and, on a divergence at an LLM step, the
// two requests side by side up to where they part: the recorded one as the
// log rebuilds it (tah.api.request), and the replay's, which is the same up
// to the report's first differing message, then that message as the
// report cuts it.

// replayView is the replay page.
type replayView struct {
	Session string
	Report  replay.Report
	// Asked is what the form asked, to show it again for the next try.
	Asked replayAsked
	// Changed says what the form changed of the node's definition.
	Changed []string
	// Messages are the two requests' messages side by side, up to and
	// including the first that differs; More counts the recorded ones
	// after it. Settings are the other diffs: tools, model, budgets.
	Messages []messagePair
	More     int
	Settings []replay.Diff
	// RequestErr says why the recorded request could not be shown.
	RequestErr string
	// LiveErr says why a live session's turn did not start.
	LiveErr string
}

// messagePair is one message of the two requests: the same in both, or
// where they part.
type messagePair struct {
	Index            int
	Role             string
	Same             bool
	Field            string // of a pair that differs: what differs
	Recorded, Replay string
}

// replayAsked is what a replay form asked, as it was typed.
type replayAsked struct {
	Prompt   string
	NoPrompt bool
	Model    string
	MaxSteps string
}

// replayFormView is the replay form of a session (template "replayform"):
// empty on its page, as last asked on a replay's, where it is open.
type replayFormView struct {
	CSRF, Session string
	Asked         replayAsked
	Open          bool
}

func init() {
	// The form is on two pages: the template gets its page's CSRF token.
	funcs["replayForm"] = func(csrf, sid string, asked any) replayFormView {
		v := replayFormView{CSRF: csrf, Session: sid}
		if a, ok := asked.(replayAsked); ok { // nil on the session's page
			v.Asked, v.Open = a, true
		}
		return v
	}
}

// replayForm reads the form: an empty system prompt keeps the node's, the
// box "no system prompt" sends none; an empty model keeps the node's, and
// an empty max_steps (0: unlimited). A max_steps that is not a number of
// 0 or more is an error.
func replayForm(r *http.Request, sid string) (wire.ReplayRequest, []string, error) {
	req := wire.ReplayRequest{Session: sid, Model: strings.TrimSpace(r.PostFormValue("model"))}
	var changed []string
	switch p := r.PostFormValue("system_prompt"); {
	case r.PostFormValue("no_system_prompt") != "":
		none := ""
		req.SystemPrompt = &none
		changed = append(changed, "no system prompt")
	case strings.TrimSpace(p) != "":
		p = strings.ReplaceAll(p, "\r\n", "\n") // a textarea posts CRLF
		req.SystemPrompt = &p
		changed = append(changed, "another system prompt")
	}
	if req.Model != "" {
		changed = append(changed, "model "+req.Model)
	}
	if m := strings.TrimSpace(r.PostFormValue("max_steps")); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 0 {
			return req, nil, fmt.Errorf("max steps %q is not a number of steps (0: unlimited)", m)
		}
		req.MaxSteps = &n
		changed = append(changed, "max_steps "+m)
	}
	return req, changed, nil
}

// replaySession is the form's action: the replay, live when asked, shown.
func (h *Handler) replaySession(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("sid")
	req, changed, err := replayForm(r, sid)
	if err != nil {
		redirect(w, r, "/s/"+sid, flash{Err: "replay: " + err.Error()})
		return
	}
	live := r.PostFormValue("live") != ""
	ctx, cancel := context.WithTimeout(r.Context(), commandTimeout)
	defer cancel()
	var rep replay.Report
	if live {
		rep, err = h.c.ReplayLive(ctx, req)
	} else {
		rep, err = h.c.Replay(ctx, req)
	}
	if err != nil {
		redirect(w, r, "/s/"+sid, errFlash("replay", err))
		return
	}
	v := replayView{Session: sid, Report: rep, Changed: changed, Asked: replayAsked{Prompt: r.PostFormValue("system_prompt"),
		NoPrompt: r.PostFormValue("no_system_prompt") != "", Model: req.Model, MaxSteps: r.PostFormValue("max_steps")}}
	if l := rep.Live; l != nil {
		v.LiveErr = h.startLive(ctx, l)
	}
	if d := rep.Divergence; d != nil {
		v.sideBySide(ctx, h, d)
	}
	h.render(w, r, http.StatusOK, "replay.html", "Replay of "+sid, v)
}

// startLive starts the live session's turn (resumes it from the step
// before the divergence, or sends it the turn's message) and leaves it
// running (the live session's page follows it); it says why it did not.
func (h *Handler) startLive(ctx context.Context, l *replay.Live) string {
	var turn *client.Turn
	var err error
	if l.AfterStep != "" {
		turn, err = h.c.Resume(ctx, l.Session)
	} else {
		msg := l.Message
		turn, err = h.c.Run(ctx, l.Session, wire.Input{Message: &msg})
	}
	if err != nil {
		return err.Error()
	}
	turn.Close() // the turn goes on
	return ""
}

// sideBySide fills v's two requests up to divergence d, and its other
// diffs (tools, settings).
func (v *replayView) sideBySide(ctx context.Context, h *Handler, d *replay.Divergence) {
	var at *replay.Diff
	for i := range d.Diffs {
		if x := &d.Diffs[i]; x.What == "message" && at == nil {
			at = x
		} else if x.What != "message" {
			v.Settings = append(v.Settings, *x)
		}
	}
	if d.StepID == "" {
		return // a decision of the loop (compaction, max_steps): no request
	}
	rec, err := h.c.StepRequest(ctx, v.Session, d.StepID)
	if err != nil {
		v.RequestErr = err.Error()
		return
	}
	msgs := rec.Request.Messages
	upTo := len(msgs)
	if at != nil && at.Index != nil {
		upTo = min(*at.Index, len(msgs))
	}
	for i := range upTo {
		v.Messages = append(v.Messages, messagePair{Index: i, Role: string(msgs[i].Role), Same: true, Recorded: shown(msgs[i])})
	}
	if at != nil && at.Index != nil {
		v.Messages = append(v.Messages, messagePair{Index: *at.Index, Role: at.Role, Field: at.Field, Recorded: at.Recorded, Replay: at.Replayed})
		v.More = max(0, len(msgs)-*at.Index-1)
	}
}

// shown is a message as the side by side shows it: its content, or the
// calls it makes.
func shown(m llm.Message) string {
	if m.Content != "" || len(m.ToolCalls) == 0 {
		return m.Content
	}
	var names []string
	for _, c := range m.ToolCalls {
		names = append(names, c.Name+" "+string(c.Arguments))
	}
	return "calls " + strings.Join(names, ", ")
}
