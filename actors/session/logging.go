package session

import (
	"context"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// workLogged is work, with a turn's start and end in the node's log at
// info (session, turn, outcome, duration), so that an operator sees what
// the sessions do and how each turn ended. Compactions and inputs already
// handled (a redelivery) log at debug.
func (m *Manager) workLogged(ctx context.Context, a *AgentContext, cmd *Command) Outcome {
	log := m.cfg.logger()
	if cmd.Kind == wire.CommandCompact || cmd.Kind == wire.CommandCancel || cmd.Kind == wire.CommandBudget {
		out := m.work(ctx, a, cmd)
		log.Debug("command done", "session", a.Session, "command", cmd.Kind, "status", out.Status, "err", out.Err)
		return out
	}
	turn, events, begin := a.state.Turn, a.state.Events, time.Now()
	if !a.state.Status.Active() && cmd.Kind == wire.CommandRun {
		turn++
	}
	level := slog.LevelInfo
	if cmd.Kind == wire.CommandRun && !a.state.Status.Active() && a.state.SawInput(cmd.InputID) {
		level = slog.LevelDebug // a redelivery: work does nothing
	}
	log.Log(ctx, level, "turn started", "session", a.Session, "turn", turn, "command", cmd.Kind, "input", cmd.InputID)
	out := m.work(ctx, a, cmd)
	took := time.Since(begin).Round(time.Millisecond)
	switch {
	case out.Err != nil:
		log.Warn("turn stopped", "session", a.Session, "turn", out.Turn, "status", out.Status, "duration", took, "err", out.Err)
	case a.state.Events == events:
		log.Debug("input already handled", "session", a.Session, "turn", out.Turn, "status", out.Status, "input", cmd.InputID)
	case a.state.AwaitingApproval:
		log.Info("turn waits for approval", "session", a.Session, "turn", out.Turn, "calls", len(out.AwaitingApproval), "duration", took)
	case len(out.AwaitingAgents) > 0:
		log.Info("turn waits for sub-agents", "session", a.Session, "turn", out.Turn, "children", out.AwaitingAgents, "duration", took)
	default:
		log.Info("turn ended", "session", a.Session, "turn", out.Turn, "outcome", out.Status, "duration", took,
			"steps", out.Steps, "code", out.Code, "error", out.Error)
	}
	return out
}

// logFailure reports at warn a failure an event records: a model call that
// failed (not a cancel), a tool call that failed (not a cancel, nor a call
// that never ran), a compaction that failed. The log holds the event; the
// node's log says it happened, for an operator who reads no session.
func (a *AgentContext) logFailure(payload any) {
	switch d := payload.(type) {
	case event.LLMFailedData:
		if d.Code != event.CodeCancelled {
			a.log.Warn("model call failed", "session", a.Session, "turn", a.state.Turn, "step", d.StepID, "code", d.Code, "err", d.Error)
		}
	case event.ToolFinishedData:
		if d.IsError && d.Code != event.CodeCancelled && d.Code != event.CodeNotExecuted && d.Code != event.CodeDenied {
			a.log.Warn("tool call failed", "session", a.Session, "turn", a.state.Turn, "step", d.StepID, "tool", d.Name, "call", d.CallID,
				"code", d.Code, "output", logOutput(d.Output))
		}
	case event.ContextCompactFailedData:
		a.log.Warn("compaction failed; trimming takes over", "session", a.Session, "turn", a.state.Turn, "step", d.StepID, "code", d.Code, "err", d.Error)
	}
}

// logOutput is a tool's output as a log line carries it: whole when short,
// else cut, with a note that says so.
func logOutput(out string) string {
	const most = 200
	if utf8.RuneCountInString(out) <= most {
		return out
	}
	return tools.Truncate("output", out, most, "see the session's log")
}
