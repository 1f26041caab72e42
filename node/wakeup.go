package node

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// WakeupTool names the built-in tool an agent may be given to wake its own
// session later (Options.WakeupTool, tools.wakeup): a schedule of the
// session (wire.ScheduleRequest's @at) that sends it the agent's message,
// as a new turn, at that time. The schedule is named after the call
// (wakeup-<call id>), so that a call run again after a crash replaces its
// own schedule and the session wakes once.
const WakeupTool = "schedule_wakeup"

// MaxWakeup is the furthest ahead an agent may schedule its wake-up.
const MaxWakeup = 30 * 24 * time.Hour

var wakeupSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "in": {"type": "string", "description": "how long from now, as a duration: 90s, 10m, 2h, 1h30m (at most 720h)"},
    "message": {"type": "string", "description": "what you will be told then, as the user's message of a new turn: say what to check or do"}
  },
  "required": ["in", "message"],
  "additionalProperties": false
}`)

type wakeupInput struct {
	In      string `json:"in"`
	Message string `json:"message"`
}

// wakeupTool is the tool WakeupTool of node n (its bus, read when it runs).
func (n *Node) wakeupTool() tools.Tool {
	return tools.Func(tools.Spec{Name: WakeupTool, Schema: wakeupSchema, Idempotent: true,
		Description: "Schedule your own wake-up: after the given time, this session receives your message as a new turn " +
			"(for example, to check a deployment again in 10 minutes). Use it when something must be looked at later; " +
			"the current turn ends as usual. The wake-up is durable: it happens even if the service restarts."},
		func(ctx context.Context, raw json.RawMessage) (tools.Result, error) {
			call, ok := tools.CallFrom(ctx)
			if !ok || call.Session == "" {
				return tools.Failed(event.CodeInvalidInput, "Error: schedule_wakeup runs only in a session's turn."), nil
			}
			var in wakeupInput
			if err := json.Unmarshal(raw, &in); err != nil {
				return tools.Failed(event.CodeInvalidInput, "Error: the input is not {\"in\": duration, \"message\": text}: "+err.Error()), nil
			}
			d, err := time.ParseDuration(in.In)
			if err != nil || d < wire.MinScheduleEvery || d > MaxWakeup {
				return tools.Failed(event.CodeInvalidInput, fmt.Sprintf("Error: \"in\" is %q: give a duration from 1s to %s (10m, 2h, 1h30m).", in.In, MaxWakeup)), nil
			}
			req := wire.ScheduleRequest{Session: call.Session, Name: "wakeup-" + wakeupName(call.ID), At: time.Now().Add(d), Text: in.Message}
			spec, err := req.Spec(time.Now())
			if err != nil {
				return tools.Failed(event.CodeInvalidInput, "Error: "+err.Error()), nil
			}
			if limit := n.maxInputBytes(); len(in.Message) > limit {
				return tools.Failed(event.CodeInvalidInput, fmt.Sprintf("Error: the message is %d bytes, over the limit of %d: say it shorter.", len(in.Message), limit)), nil
			}
			s, err := n.bus.AddSchedule(ctx, call.Session, req.Name, spec, "", in.Message)
			if err != nil {
				return tools.Result{}, fmt.Errorf("schedule the wake-up: %w", err)
			}
			at := req.At.UTC().Truncate(time.Second)
			return tools.Text(fmt.Sprintf("Wake-up scheduled for %s (in %s): this session will receive %q then, as a new turn (schedule %s).",
				at.Format(time.RFC3339), d, in.Message, s.Name)), nil
		})
}

// wakeupName makes a call id a schedule name's tail: its letters, digits,
// '-' and '_', at most 56 of them.
func wakeupName(id string) string {
	out := make([]byte, 0, len(id))
	for i := 0; i < len(id) && len(out) < 56; i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return event.NewID("w")
	}
	return string(out)
}
