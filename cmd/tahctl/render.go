package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/tah-dev/tah/event"
)

// onEvent shows one event of the turn.
func (w *watch) onEvent(ev event.Event) {
	if w.json {
		_ = printJSON(w.g.stdout, struct {
			Kind  string      `json:"kind"`
			Event event.Event `json:"event"`
		}{"event", ev})
	}
	switch ev.Type {
	case event.LLMStarted:
		d, _ := event.DecodeAs[event.LLMStartedData](ev)
		w.llmCalls++
		st := w.step(d.StepID)
		st.started = true
		if st.held != "" { // its first text came before it
			w.text(st.held)
			st.printed, st.held = st.printed+st.held, ""
		}
		if st.printed == "" {
			label := "waiting for the model"
			if w.llmCalls > 1 {
				label = fmt.Sprintf("waiting for the model (call %d)", w.llmCalls)
			}
			w.sp.start(label)
		}
		if d.Trim != nil && !w.json {
			w.note(w.st.dim(fmt.Sprintf("  · context trimmed to fit %s characters (%s before)", num(d.Trim.Budget), num(d.Trim.BeforeChars))))
		}
	case event.LLMCompleted:
		d, _ := event.DecodeAs[event.LLMCompletedData](ev)
		st := w.step(d.StepID)
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
		st.done, st.held = true, ""
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
			msg := "! the node stopped during this model call (a crash or a restart); the call is made again"
			if st := w.step(d.StepID); st.printed != "" && w.stream {
				msg += ": the answer above is cut short, and starts again below"
			}
			w.note(w.st.yellow(msg))
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
	case event.ToolWaiting:
		d, _ := event.DecodeAs[event.ToolWaitingData](ev)
		w.sp.stop()
		w.note(w.st.yellow(fmt.Sprintf("  · waiting for tool service %s (up to %v)", d.Name, time.Duration(d.WaitMS)*time.Millisecond)))
		w.sp.start("waiting for tool service " + d.Name)
	case event.ToolApproved:
		d, _ := event.DecodeAs[event.ToolApprovedData](ev)
		w.note(w.st.dim("  · call " + d.CallID + " approved" + byWhom(d.By)))
	case event.ToolDenied:
		d, _ := event.DecodeAs[event.ToolDeniedData](ev)
		w.note(w.st.yellow("  · call " + d.CallID + " denied" + byWhom(d.By)))
	case event.ToolFinished:
		d, _ := event.DecodeAs[event.ToolFinishedData](ev)
		w.toolCalls++
		w.sp.stop()
		w.note(w.toolLine(d))
	default:
		w.onEnd(ev)
	}
}

// onEnd shows the end of the turn, and what compaction did on the way.
func (w *watch) onEnd(ev event.Event) {
	switch ev.Type {
	case event.AgentFinished:
		d, _ := event.DecodeAs[event.AgentFinishedData](ev)
		w.ended(ev)
		if !w.shown && d.Content != "" && !w.json {
			w.text(d.Content)
		}
		w.closeLine()
		u, ok := d.TurnUsage()
		if !ok { // an older agent.finished has the session's total: the turn's are its steps'
			u = w.usage
		}
		w.footer(d.Steps, u, d.Cost)
	case event.AgentFailed:
		d, _ := event.DecodeAs[event.AgentFailedData](ev)
		w.ended(ev)
		if d.Code == event.CodeBudgetExceeded && d.Budget != nil {
			w.budgetReached(*d.Budget)
			break
		}
		w.note(w.st.red(fmt.Sprintf("✗ the turn failed: %s [%s]", oneLine(d.Error, 300), d.Code)))
	case event.AgentCancelled:
		d, _ := event.DecodeAs[event.AgentCancelledData](ev)
		w.ended(ev)
		msg := "⊘ the turn was cancelled" + byWhom(d.By)
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

// budgetReached shows a turn that stopped at limit r: which limit, at
// what figure, and what to run to go on.
func (w *watch) budgetReached(r event.BudgetReached) {
	w.note(w.st.red(fmt.Sprintf("✗ budget reached: %s [%s]", r, event.CodeBudgetExceeded)))
	w.note(w.st.dim("  " + raiseHint(w.sid, r)))
}

// byWhom is " by NAME", or nothing when nobody is named.
func byWhom(by string) string {
	if by == "" {
		return ""
	}
	return " by " + by
}
