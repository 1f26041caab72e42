package store

import (
	"encoding/json"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// bounds are, for one event, the lowest indexes of the state's messages, steps
// and tool calls that folding it may change. Everything below them is left as
// it was, so a batch compares and writes only from the lowest bound of its
// events on: for the events of a running turn that is the last few rows, which
// is what keeps the cost of a batch independent of the length of the history.
type bounds struct{ msg, step, call int }

// changeBounds computes the bounds of e on the state before it is folded. It
// mirrors where projection.Apply writes. Types that are not listed get zero
// bounds (compare everything): correct, only slower. If projection.Apply ever
// changes another part of the state on an event, this must follow; the
// fold-equivalence tests, run with Store.verify on, fail when it does not.
func changeBounds(st *projection.State, e event.Event) bounds {
	n := bounds{msg: len(st.Messages), step: len(st.Steps), call: len(st.ToolCalls)}
	switch e.Type {
	case event.TurnStarted, event.LLMStarted, event.Thinking, event.AgentFinished,
		event.ContextTrimmed, event.ContextCompacted, event.ContextCompactFailed,
		event.CheckpointCreated, event.ArtifactCreated:
		// Appends, or changes nothing of the three.
		return n

	case event.SessionClaimed:
		// ReplaceSystemPrompt rewrites or inserts the first message.
		n.msg = 0
		return n

	case event.LLMStreaming, event.LLMFailed, event.LLMCompleted:
		// Changes its step; llm.completed also appends a message and calls.
		p, ok := peek(e)
		if !ok {
			return n
		}
		n.step = stepIndex(st, p.StepID, n.step)
		return n

	case event.ToolStarted:
		// Appends a step and updates the record of its call.
		p, ok := peek(e)
		if !ok {
			return n
		}
		n.call = callIndex(st, p.Call.ID, n.call)
		return n

	case event.ToolFinished:
		// Inserts the result after the assistant message that made the call,
		// and updates the call's record and step.
		p, ok := peek(e)
		if !ok {
			return n
		}
		n.msg = callerIndex(st.Messages, p.CallID, n.msg)
		n.call = callIndex(st, p.CallID, n.call)
		if n.call < len(st.ToolCalls) {
			n.step = stepIndex(st, st.ToolCalls[n.call].StepID, n.step)
		}
		return n

	case event.SummaryAdded:
		p, ok := peek(e)
		if !ok || p.At == nil {
			return n
		}
		if at := *p.At; at >= 0 && at < n.msg {
			n.msg = at
		}
		return n

	case event.AgentFailed, event.AgentCancelled:
		// Fails the open steps of the current turn and the records of their calls.
		// Steps are appended in turn order, so the turn's steps are a suffix.
		i := len(st.Steps)
		for i > 0 && st.Steps[i-1].Turn == st.Turn {
			i--
		}
		n.step = i
		for _, s := range st.Steps[i:] {
			if s.Type == projection.StepTool && !s.Status.Done() {
				n.call = min(n.call, callIndex(st, s.CallID, n.call))
			}
		}
		return n
	}
	// session.created, session.forked, and types this build does not know.
	return bounds{}
}

// ids is the part of a payload that changeBounds needs.
type ids struct {
	StepID string `json:"step_id"`
	CallID string `json:"call_id"`
	Call   struct {
		ID string `json:"id"`
	} `json:"call"`
	At *int `json:"at"`
}

// peek decodes the ids of e's payload; ok is false for a payload that does not
// decode, which projection.Apply rejects anyway (and then the bounds are unused).
func peek(e event.Event) (ids, bool) {
	var p ids
	if err := json.Unmarshal(e.Data, &p); err != nil {
		return p, false
	}
	return p, true
}

// stepIndex is the index of the last step with id, as State.Step finds it, or
// def when there is none.
func stepIndex(st *projection.State, id string, def int) int {
	for i := len(st.Steps) - 1; i >= 0; i-- {
		if st.Steps[i].ID == id {
			return i
		}
	}
	return def
}

// callIndex is the index of the last record of callID, as State.ToolCall finds
// it, or def when there is none.
func callIndex(st *projection.State, callID string, def int) int {
	for i := len(st.ToolCalls) - 1; i >= 0; i-- {
		if st.ToolCalls[i].CallID == callID {
			return i
		}
	}
	return def
}

// callerIndex is one past the last assistant message that holds callID: the
// result goes at or after it. def when no message holds it.
func callerIndex(msgs []llm.Message, callID string, def int) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != llm.RoleAssistant {
			continue
		}
		for _, c := range msgs[i].ToolCalls {
			if c.ID == callID {
				return i + 1
			}
		}
	}
	return def
}
