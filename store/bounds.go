package store

import (
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
//
// payload is e's, decoded (nil when it did not decode: then Apply rejects e,
// and the bounds are unused).
func changeBounds(st *projection.State, e event.Event, payload any) bounds {
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
		p, ok := peek(payload)
		if !ok {
			return n
		}
		n.step = stepIndex(st, p.StepID, n.step)
		return n

	case event.ToolStarted:
		// Appends a step and updates the record of its call.
		p, ok := peek(payload)
		if !ok {
			return n
		}
		n.call = callIndex(st, p.CallOf, n.call)
		return n

	case event.ToolFinished:
		// Inserts the result after the assistant message that made the call,
		// and updates the call's record and step.
		p, ok := peek(payload)
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
		p, ok := peek(payload)
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
	StepID string
	CallID string
	CallOf string // the id of the call a tool.started starts
	At     *int
}

// peek reads the ids of a decoded payload; ok is false for none (a payload
// that did not decode, which projection.Apply rejects anyway).
func peek(payload any) (ids, bool) {
	switch p := payload.(type) {
	case *event.LLMStreamingData:
		return ids{StepID: p.StepID}, true
	case *event.LLMFailedData:
		return ids{StepID: p.StepID}, true
	case *event.LLMCompletedData:
		return ids{StepID: p.StepID}, true
	case *event.ToolStartedData:
		return ids{CallOf: p.Call.ID}, true
	case *event.ToolFinishedData:
		return ids{StepID: p.StepID, CallID: p.CallID}, true
	case *event.SummaryAddedData:
		return ids{At: &p.At}, true
	}
	return ids{}, false
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
