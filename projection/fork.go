package projection

import (
	"errors"
	"fmt"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// Errors of PlanFork and ForkPlan.Edit, besides ErrUnknownStep (a step
// the source's log does not have, before its fault if it has one).
var (
	// ErrBadFork: a fork that cannot be made as asked: at a step that has
	// not ended or at a compaction, or with an edit of a message the copy
	// does not hold, of a system message, or that changes nothing.
	ErrBadFork = errors.New("fork not made")
)

// ForkSpec says where a fork ends and what it changes.
type ForkSpec struct {
	// Turns keeps the first Turns turns (negative: all; 0: only the
	// system message), when AtStep is empty.
	Turns int
	// AtStep, when set, ends the copy right after that step of the
	// source: its answer, its tool result (see PlanFork).
	AtStep string
	// SystemPrompt replaces the copy's system prompt (the forking node's).
	SystemPrompt string
	// EditStep is the step an edit will name (Edit.StepID), so that the
	// fold finds the answer of an LLM step in the copy.
	EditStep string
}

// ForkPlan is what a fork copies: the messages of whole turns
// (session.forked) and, for a fork inside a turn, the open turn
// (turn.forked).
type ForkPlan struct {
	// Messages are the whole turns, the system message first.
	Messages []llm.Message
	// Open is the open turn, nil when the copy ends between turns.
	Open *event.TurnForkedData
	// FromSeq is the last sequence of the source's log the copy reflects.
	FromSeq uint64
	// src is the source folded as far as the copy; answers maps an LLM
	// step (ForkSpec.EditStep) to the ordinal of its answer among the
	// assistant messages (1 for the first).
	src     State
	answers map[string]int
}

// PlanFork folds the source's log evs (from its start) and returns what
// a fork as spec says copies. With AtStep, the copy is the history as it
// stood right after that step ended: after an LLM step its answer (the
// calls it asked for, pending), after a tool step its result (the calls
// of the same answer whose results came later, pending), after a thinking
// step the answer it reasoned for. When the turn had ended there, or the
// step is the turn's final answer, the copy ends between turns; else the
// turn is open (Open), and a resume runs it on from there. A source whose
// log is faulted gives the history before its fault. Errors wrap
// ErrUnknownStep or ErrBadFork.
func PlanFork(evs []event.Event, spec ForkSpec) (ForkPlan, error) {
	p := ForkPlan{answers: map[string]int{}}
	reached := false
	for _, e := range evs {
		if ApplyLog(&p.src, e) != nil {
			break
		}
		p.FromSeq = p.src.LastSeq
		if spec.EditStep != "" && e.Type == event.LLMCompleted {
			if d, err := event.DecodeAs[event.LLMCompletedData](e); err == nil && d.StepID == spec.EditStep {
				p.answers[d.StepID] = countRole(p.src.Messages, llm.RoleAssistant)
			}
		}
		if spec.AtStep != "" {
			if st := p.src.Step(spec.AtStep); st != nil && st.Status.Done() {
				reached = true
				break
			}
		}
	}
	if spec.AtStep == "" {
		p.Messages = ReplaceSystemPrompt(ForkMessages(p.src.Messages, spec.Turns), spec.SystemPrompt)
		return p, nil
	}
	if !reached {
		if st := p.src.Step(spec.AtStep); st != nil {
			return ForkPlan{}, fmt.Errorf("step %s is %s: fork at a step that has ended: %w", spec.AtStep, st.Status, ErrBadFork)
		}
		return ForkPlan{}, fmt.Errorf("no step %s: %w", spec.AtStep, ErrUnknownStep)
	}
	if st := p.src.Step(spec.AtStep); st.Compaction {
		return ForkPlan{}, fmt.Errorf("step %s is a compaction's: fork at the step before or after it: %w", spec.AtStep, ErrBadFork)
	}
	msgs := p.src.Messages
	if !p.src.Status.Active() || answered(msgs) {
		p.Messages = ReplaceSystemPrompt(Repair(llm.CloneMessages(msgs)), spec.SystemPrompt)
		return p, nil
	}
	ts := Turns(msgs)
	start := ts[len(ts)-1].Start
	p.Messages = ReplaceSystemPrompt(llm.CloneMessages(msgs[:start]), spec.SystemPrompt)
	p.Open = &event.TurnForkedData{Turn: countUsers(p.Messages) + 1, Messages: llm.CloneMessages(msgs[start:]),
		AtStep: spec.AtStep, Steps: p.src.TurnLLMCalls, MaxSteps: p.src.TurnMaxSteps}
	return p, nil
}

// answered reports whether msgs end with the model's answer to the turn:
// an assistant message that asks for no tool.
func answered(msgs []llm.Message) bool {
	n := len(msgs)
	return n > 0 && msgs[n-1].Role == llm.RoleAssistant && len(msgs[n-1].ToolCalls) == 0
}

func countRole(msgs []llm.Message, role llm.Role) int {
	n := 0
	for _, m := range msgs {
		if m.Role == role {
			n++
		}
	}
	return n
}

// Copy is the history the fork starts with: the whole turns, then the
// open turn's messages.
func (p ForkPlan) Copy() []llm.Message {
	if p.Open == nil {
		return p.Messages
	}
	return append(llm.CloneMessages(p.Messages), p.Open.Messages...)
}

// Edit names the message of a fork's copy whose content an edit replaces,
// by exactly one of Message, Turn, CallID and StepID, and what replaces it.
type Edit struct {
	// Message is the index of the message in the copy (as tah.api.messages
	// lists the new session's history: the system message 0).
	Message *int
	// Turn names that turn's user message (from 1).
	Turn int
	// CallID names the result of that tool call.
	CallID string
	// StepID names a step of the source: a tool step's result, or an LLM
	// step's answer (its text).
	StepID string
	// Content replaces the message's content; IsError, when set, whether
	// a tool result is an error.
	Content string
	IsError *bool
	// By says who edits (recorded as given).
	By string
}

// Edit resolves e against the copy and returns the session.edited that
// makes it. Errors wrap ErrBadFork or ErrUnknownStep.
func (p ForkPlan) Edit(e Edit) (event.SessionEditedData, error) {
	msgs := p.Copy()
	at, err := p.target(msgs, e)
	if err != nil {
		return event.SessionEditedData{}, err
	}
	m := msgs[at]
	switch m.Role {
	case llm.RoleUser, llm.RoleAssistant, llm.RoleTool:
	default:
		return event.SessionEditedData{}, fmt.Errorf("message %d is a %s message: only a user's message, an answer or a tool result is edited: %w", at, m.Role, ErrBadFork)
	}
	d := event.SessionEditedData{Message: at, Role: m.Role, CallID: m.ToolCallID, From: m.Content, To: e.Content, By: e.By}
	if e.IsError != nil {
		if m.Role != llm.RoleTool {
			return event.SessionEditedData{}, fmt.Errorf("is_error is for a tool result; message %d is a %s message: %w", at, m.Role, ErrBadFork)
		}
		d.IsError = e.IsError
	}
	if d.From == d.To && (d.IsError == nil || *d.IsError == m.IsError) {
		return event.SessionEditedData{}, fmt.Errorf("the edit changes nothing: message %d already says that: %w", at, ErrBadFork)
	}
	return d, nil
}

// target is the index in msgs of the message e names.
func (p ForkPlan) target(msgs []llm.Message, e Edit) (int, error) {
	named := 0
	for _, set := range []bool{e.Message != nil, e.Turn != 0, e.CallID != "", e.StepID != ""} {
		if set {
			named++
		}
	}
	if named != 1 {
		return 0, fmt.Errorf("an edit names one message: by its index, its turn, the call it answers or its step: %w", ErrBadFork)
	}
	switch {
	case e.Message != nil:
		if *e.Message < 0 || *e.Message >= len(msgs) {
			return 0, fmt.Errorf("message %d: the copy holds messages 0 to %d: %w", *e.Message, len(msgs)-1, ErrBadFork)
		}
		return *e.Message, nil
	case e.Turn != 0:
		n := 0
		for i, m := range msgs {
			if m.StartsTurn() {
				if n++; n == e.Turn {
					return i, nil
				}
			}
		}
		return 0, fmt.Errorf("turn %d: the copy holds %d turn(s): %w", e.Turn, n, ErrBadFork)
	case e.CallID != "":
		return resultOf(msgs, e.CallID)
	}
	st := p.src.Step(e.StepID)
	switch {
	case st == nil:
		return 0, fmt.Errorf("no step %s before the fork's end: %w", e.StepID, ErrUnknownStep)
	case st.Type == StepTool:
		return resultOf(msgs, st.CallID)
	case st.Type == StepLLM && !st.Compaction && p.answers[e.StepID] > 0:
		k := 0
		for i, m := range msgs {
			if m.Role == llm.RoleAssistant {
				if k++; k == p.answers[e.StepID] {
					return i, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("step %s (%s, %s) has no answer or result in the copy: name a model call that answered or a tool step: %w", e.StepID, st.Type, st.Status, ErrBadFork)
}

// resultOf is the index in msgs of the result of call id.
func resultOf(msgs []llm.Message, id string) (int, error) {
	for i, m := range msgs {
		if m.Role == llm.RoleTool && m.ToolCallID == id {
			return i, nil
		}
	}
	return 0, fmt.Errorf("call %s has no result in the copy (a fork that ends before it, or a call that never ran): %w", id, ErrBadFork)
}

// applyTurnForked folds turn.forked: the copied turn's messages join the
// history and the turn is open, its calls without a result pending. It
// follows session.forked, before any claim and any turn of the session's
// own.
func (s *State) applyTurnForked(d *event.TurnForkedData) error {
	switch {
	case s.ForkedFrom == "" || s.Epoch != 0 || len(s.Steps) != 0 || s.Status.Active():
		return fmt.Errorf("turn.forked after the fork's session began: %w", ErrInconsistent)
	case d.Turn != s.Turn+1:
		return fmt.Errorf("turn %d does not follow the %d copied: %w", d.Turn, s.Turn, ErrInconsistent)
	case countUsers(d.Messages) != 1:
		return fmt.Errorf("turn.forked holds %d turns' messages, not one: %w", countUsers(d.Messages), ErrInconsistent)
	}
	if err := llm.CheckPairing(Repair(d.Messages)); err != nil {
		return fmt.Errorf("forked turn: %w: %v", ErrInconsistent, err)
	}
	s.Messages = append(s.Messages, llm.CloneMessages(d.Messages)...)
	for _, c := range DanglingCalls(d.Messages) {
		s.ToolCalls = append(s.ToolCalls, ToolCallRecord{CallID: c.ID, Name: c.Name, Arguments: c.Arguments, Turn: d.Turn, Status: StepPending})
	}
	s.Turn, s.TurnLLMCalls, s.TurnMaxSteps, s.Status = d.Turn, d.Steps, d.MaxSteps, StatusRunning
	return nil
}

// applyEdit folds session.edited: the content of one message of a fork's
// copy is replaced, once the message is the one the edit says it changes
// (its role, its call, its content before).
func (s *State) applyEdit(d *event.SessionEditedData) error {
	if s.ForkedFrom == "" || s.Epoch != 0 || len(s.Steps) != 0 {
		return fmt.Errorf("session.edited of a session that is not a fork's copy before its first claim: %w", ErrInconsistent)
	}
	i := d.Message
	if e := s.Elided; e.Messages > 0 {
		if i >= e.At && i < e.At+e.Messages {
			return fmt.Errorf("edit of message %d, in the history's elided part: %w", i, ErrHistoryNeeded)
		}
		if i >= e.At+e.Messages {
			i -= e.Messages
		}
	}
	if i < 0 || i >= len(s.Messages) {
		return fmt.Errorf("edit of message %d of %d: %w", d.Message, s.HistoryLen(), ErrInconsistent)
	}
	m := s.Messages[i]
	if m.Role != d.Role || m.ToolCallID != d.CallID || m.Content != d.From {
		return fmt.Errorf("edit of message %d (%s %q) that is not the edit's (%s %q) or does not say what it changes: %w", d.Message, m.Role, m.ToolCallID, d.Role, d.CallID, ErrInconsistent)
	}
	// A new array: s may share this one with earlier copies of itself.
	msgs := llm.CloneMessages(s.Messages)
	msgs[i].Content = d.To
	if d.IsError != nil {
		msgs[i].IsError = *d.IsError
	}
	s.Messages = msgs
	s.Edits++
	return nil
}

// TurnDefinition is the definition of the agent (event.AgentDefinition)
// from a turn on.
type TurnDefinition struct {
	Turn int `json:"turn"`
	event.AgentDefinition
}

// noteDefinition keeps def, recorded by turn's turn.started, when it
// differs from the one before (none recorded: nothing).
func (s *State) noteDefinition(turn int, def *event.AgentDefinition) {
	if def == nil {
		return
	}
	if n := len(s.Definitions); n > 0 && s.Definitions[n-1].Digest == def.Digest {
		return
	}
	s.Definitions = append(s.Definitions, TurnDefinition{Turn: turn, AgentDefinition: *def})
}

// DefinitionAt is the definition turn ran under, as far as the log
// recorded it: nil before the first turn that did.
func (s *State) DefinitionAt(turn int) *TurnDefinition {
	for i := len(s.Definitions) - 1; i >= 0; i-- {
		if s.Definitions[i].Turn <= turn {
			return &s.Definitions[i]
		}
	}
	return nil
}
