package projection

import "github.com/tah-dev/tah/llm"

// NotExecutedOutput is the result given to a tool call that never ran because its
// turn ended first (specification v0.22).
const NotExecutedOutput = "[not executed: the turn ended before this tool call ran]"

// InterruptedOutput is the result given on resume to a call of a non-idempotent
// tool that was running when its owner stopped: it may or may not have taken effect.
const InterruptedOutput = "[interrupted: the session's node stopped while this tool call ran; its outcome is unknown]"

// DanglingCalls returns, in order, the tool calls in msgs that have no result.
func DanglingCalls(msgs []llm.Message) []llm.ToolCall {
	answered := make(map[string]bool)
	for _, m := range msgs {
		if m.Role == llm.RoleTool {
			answered[m.ToolCallID] = true
		}
	}
	var out []llm.ToolCall
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if m.Role == llm.RoleAssistant && !answered[c.ID] {
				out = append(out, c)
			}
		}
	}
	return out
}

// Repair returns msgs with a NotExecutedOutput result after every tool call that
// has none, placed with the other results of its assistant message, as the
// session does with tool.finished events before a new run. msgs is not mutated;
// when nothing dangles it is returned as it is.
func Repair(msgs []llm.Message) []llm.Message {
	dangling := DanglingCalls(msgs)
	if len(dangling) == 0 {
		return msgs
	}
	out := llm.CloneMessages(msgs)
	for _, c := range dangling {
		at := resultIndex(out, c.ID)
		r := llm.ToolResult(c, NotExecutedOutput, true)
		out = append(out[:at], append([]llm.Message{r}, out[at:]...)...)
	}
	return out
}

// ForkMessages returns the messages a fork of a session with history msgs starts
// from (specification v0.22): the first turns turns (turns < 0 keeps all, 0 keeps
// only what precedes the first user message: the system message). Calls left
// without a result are repaired, so the fork starts from a history providers
// accept. msgs is not mutated.
func ForkMessages(msgs []llm.Message, turns int) []llm.Message {
	end := len(msgs)
	if turns >= 0 {
		ts := Turns(msgs)
		switch {
		case turns == 0:
			end = preambleEnd(msgs)
		case turns < len(ts):
			end = ts[turns].Start
		}
	}
	return Repair(llm.CloneMessages(msgs[:end]))
}
