package event

import (
	"errors"
	"fmt"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
)

// The event types. The names from the specification are kept as it gives them.
const (
	// SessionCreated is the first event of every session.
	SessionCreated Type = "session.created"
	// SessionForked follows session.created in a session made by fork: it carries
	// the messages copied from the source session.
	SessionForked Type = "session.forked"
	// SessionClaimed is appended by a node that takes ownership of a session, with
	// a new epoch and the configuration in force from now on (the current
	// configuration replaces the stored one when a session is reopened).
	SessionClaimed Type = "session.claimed"
	// TurnStarted opens a turn with the user's message.
	TurnStarted Type = "turn.started"
	// ToolsOffered records the schemas of the tools offered to the model, once
	// per change: each llm.started names them by their digest.
	ToolsOffered Type = "tools.offered"
	// LLMStarted opens an LLM step with a reference to the request as sent
	// (after trimming), from which the log rebuilds it.
	LLMStarted Type = "llm.started"
	// LLMStreaming marks an LLM step whose first token arrived.
	LLMStreaming Type = "llm.streaming"
	// LLMCompleted closes an LLM step with the model's response.
	LLMCompleted Type = "llm.completed"
	// LLMFailed closes an LLM step that did not complete (an error or a cancel).
	LLMFailed Type = "llm.failed"
	// Thinking records the model's visible reasoning as a step of its own.
	Thinking Type = "agent.thinking"
	// ToolStarted opens a tool step.
	ToolStarted Type = "tool.started"
	// ToolWaiting reports that a started tool call waits for its tool
	// service, which is absent (restarting, reconnecting, moving), before it
	// runs or before its stored result is looked up on resume. The call ends
	// with tool.finished as any other: its result, or code tool_unavailable
	// when the service did not come back in time. Log schema version 3.
	ToolWaiting Type = "tool.waiting"
	// ToolApprovalRequested reports that calls the model asked for need a
	// person's approval (the node's approval policy) before they start: the
	// turn waits (the session waiting_tool, awaiting approval) until every
	// one is approved or denied, the deadline passes (they are denied), or a
	// cancel ends the turn. Log schema version 4.
	ToolApprovalRequested Type = "tool.approval-requested"
	// ToolApproved records a person's approval of a call awaiting it,
	// perhaps with edited arguments: the call runs. Log schema version 4.
	ToolApproved Type = "tool.approved"
	// ToolDenied records the denial of a call awaiting approval, by a person
	// or by its deadline: the call does not run, and its tool.finished (code
	// denied) tells the model why. Log schema version 4.
	ToolDenied Type = "tool.denied"
	// ToolFinished closes a tool step with its output, and adds the tool result to
	// the conversation. It also gives a "not executed" result to a call that never
	// started (NotExecuted), when a turn is repaired before the next run.
	ToolFinished Type = "tool.finished"
	// AgentFinished ends a turn normally: the model answered without tool calls.
	AgentFinished Type = "agent.finished"
	// AgentFailed ends a turn with an error, including reaching maxSteps.
	AgentFailed Type = "agent.failed"
	// AgentCancelled ends a turn that was cancelled.
	AgentCancelled Type = "agent.cancelled"
	// ContextTrimmed reports that the copy of the history sent to the model was cut.
	ContextTrimmed Type = "agent.context.trimmed"
	// ContextCompacted reports a successful compaction.
	ContextCompacted Type = "agent.context.compacted"
	// ContextCompactFailed reports a failed compaction (the turn falls back to trimming).
	ContextCompactFailed Type = "agent.context.compact-failed"
	// SummaryAdded inserts a summary system message into the history.
	SummaryAdded Type = "summary.added"
	// CheckpointCreated records a snapshot of the folded state up to a sequence.
	CheckpointCreated Type = "checkpoint.created"
	// ArtifactCreated records a file or blob a tool produced.
	ArtifactCreated Type = "artifact.created"
	// BudgetSet changes the session's budget (budget.go). Log schema
	// version 5.
	BudgetSet Type = "budget.set"
	// TurnReopened runs on a turn that failed at its budget, once a resume
	// finds the budget raised. Log schema version 5.
	TurnReopened Type = "turn.reopened"
	// TurnSteered adds a user's message to the running turn (a steer
	// input), before its next LLM call: the model sees it without the turn
	// ending. Log schema version 6.
	TurnSteered Type = "turn.steered"
	// SessionEdited replaces the content of one message of a fork's copy
	// (a user's message, a model's answer or a tool result), after
	// session.forked (and turn.forked), before the fork's first claim: who
	// changed what, from what to what. Log schema version 7.
	SessionEdited Type = "session.edited"
	// TurnForked follows session.forked in a fork made at a step inside a
	// turn: it carries the copied turn's messages up to that step, and the
	// turn is open (the session running) until a resume runs it on. Log
	// schema version 7.
	TurnForked Type = "turn.forked"
)

// payloads maps each type to a constructor of its payload.
var payloads = map[Type]func() any{
	SessionCreated:        func() any { return new(SessionCreatedData) },
	SessionForked:         func() any { return new(SessionForkedData) },
	SessionClaimed:        func() any { return new(SessionClaimedData) },
	TurnStarted:           func() any { return new(TurnStartedData) },
	ToolsOffered:          func() any { return new(ToolsOfferedData) },
	LLMStarted:            func() any { return new(LLMStartedData) },
	LLMStreaming:          func() any { return new(LLMStreamingData) },
	LLMCompleted:          func() any { return new(LLMCompletedData) },
	LLMFailed:             func() any { return new(LLMFailedData) },
	Thinking:              func() any { return new(ThinkingData) },
	ToolStarted:           func() any { return new(ToolStartedData) },
	ToolWaiting:           func() any { return new(ToolWaitingData) },
	ToolApprovalRequested: func() any { return new(ToolApprovalRequestedData) },
	ToolApproved:          func() any { return new(ToolApprovedData) },
	ToolDenied:            func() any { return new(ToolDeniedData) },
	ToolFinished:          func() any { return new(ToolFinishedData) },
	AgentFinished:         func() any { return new(AgentFinishedData) },
	AgentFailed:           func() any { return new(AgentFailedData) },
	AgentCancelled:        func() any { return new(AgentCancelledData) },
	ContextTrimmed:        func() any { return new(ContextTrimmedData) },
	ContextCompacted:      func() any { return new(ContextCompactedData) },
	ContextCompactFailed:  func() any { return new(ContextCompactFailedData) },
	SummaryAdded:          func() any { return new(SummaryAddedData) },
	CheckpointCreated:     func() any { return new(CheckpointCreatedData) },
	ArtifactCreated:       func() any { return new(ArtifactCreatedData) },
	BudgetSet:             func() any { return new(BudgetSetData) },
	TurnReopened:          func() any { return new(TurnReopenedData) },
	TurnSteered:           func() any { return new(TurnSteeredData) },
	SessionEdited:         func() any { return new(SessionEditedData) },
	TurnForked:            func() any { return new(TurnForkedData) },
}

// Types lists every event type, in a stable order.
func Types() []Type {
	return []Type{
		SessionCreated, SessionForked, TurnForked, SessionEdited, SessionClaimed, TurnStarted,
		ToolsOffered, LLMStarted, LLMStreaming, LLMCompleted, LLMFailed, Thinking,
		ToolStarted, ToolWaiting, ToolApprovalRequested, ToolApproved, ToolDenied, ToolFinished, AgentFinished, AgentFailed, AgentCancelled,
		ContextTrimmed, ContextCompacted, ContextCompactFailed, SummaryAdded,
		CheckpointCreated, ArtifactCreated, BudgetSet, TurnReopened, TurnSteered,
	}
}

// Known reports whether t is an event type of this version: Payload(t) is
// not nil, without making a payload.
func Known(t Type) bool {
	_, ok := payloads[t]
	return ok
}

// Payload returns a new zero payload of type t (a pointer), or nil for an unknown type.
func Payload(t Type) any {
	if mk, ok := payloads[t]; ok {
		return mk()
	}
	return nil
}

// Config is the loop configuration a session runs with.
type Config struct {
	// SystemPrompt is the first system message; empty for none.
	SystemPrompt string `json:"system_prompt,omitempty"`
	// MaxSteps is the most LLM calls per turn; 0 means unlimited.
	MaxSteps int `json:"max_steps"`
	// ContextChars is the character budget of each LLM request; 0 sends the whole history.
	ContextChars int `json:"context_chars,omitempty"`
	// Model names the model to ask, when the provider serves several.
	Model string `json:"model,omitempty"`
	// Budget is the node's budget (agent.budget), in force beside the
	// session's and the turn's own: the tightest limit wins.
	Budget *Budget `json:"budget,omitempty"`
}

func (c Config) validate() error {
	if c.Budget != nil {
		if err := c.Budget.validate(); err != nil {
			return err
		}
	}
	if c.MaxSteps < 0 {
		return errors.New("max_steps is negative")
	}
	if c.ContextChars < 0 {
		return errors.New("context_chars is negative")
	}
	return nil
}

// SessionCreatedData is the payload of session.created.
type SessionCreatedData struct {
	Config Config `json:"config"`
	// ForkedFrom is the source session of a fork; session.forked follows.
	ForkedFrom string `json:"forked_from,omitempty"`
	// Labels are the creator's free-form tags, shown by list. A node takes
	// only labels within the limits of wire.CheckLabels; the log of an older
	// one may hold labels of any size, which list leaves out.
	Labels map[string]string `json:"labels,omitempty"`
	// Budget is the session's own budget, as its creator set it (absent:
	// none); budget.set changes it.
	Budget *Budget `json:"budget,omitempty"`
	// Parent, on a sub-agent's session, is the session and the tool call
	// that made it (absent: a session of its own).
	Parent *ParentLink `json:"parent,omitempty"`
	// Definition, when set, is the agent definition the session runs with
	// on every node (a replay's live session: the definition it was
	// replayed under): its system prompt, max_steps, context_chars and
	// model replace the claiming node's in every claim (the node's budget
	// stays in force). Absent: the node's (a sub-agent's child: its
	// sub-agent's). A node older than the field ignores it and runs the
	// session with its own.
	Definition *Config `json:"definition,omitempty"`
}

// AgentRunnerPrefix starts the runner of a sub-agent's call: agent:<child>.
const AgentRunnerPrefix = "agent:"

// ParentLink names the call of a parent session that a sub-agent's session
// answers: its result is the call's result.
type ParentLink struct {
	// Session is the parent session; CallID its model's tool call.
	Session string `json:"session"`
	CallID  string `json:"call_id"`
	// Agent is the sub-agent's name (the definition the child runs).
	Agent string `json:"agent"`
	// Depth is how deep the child is: 1 for a session's child, 2 for its
	// grandchild.
	Depth int `json:"depth"`
}

func (d SessionCreatedData) validate() error {
	if p := d.Parent; p != nil {
		if err := ValidSessionID(p.Session); err != nil {
			return fmt.Errorf("parent: %w", err)
		}
		if p.CallID == "" || p.Agent == "" || p.Depth < 1 {
			return errors.New("parent: a call id, an agent and a depth of 1 or more are required")
		}
	}
	if d.Budget != nil {
		if err := d.Budget.validate(); err != nil {
			return err
		}
	}
	if d.Definition != nil {
		if err := d.Definition.validate(); err != nil {
			return fmt.Errorf("definition: %w", err)
		}
	}
	return d.Config.validate()
}

// SessionForkedData is the payload of session.forked, in the new session's log.
type SessionForkedData struct {
	// From is the source session's id.
	From string `json:"from"`
	// FromSeq is the last sequence of the source's log that the copy reflects.
	FromSeq uint64 `json:"from_seq,omitempty"`
	// Turns is how many of the source's turns were kept; -1 for all.
	Turns int `json:"turns"`
	// Messages are the copied messages, the system message first.
	Messages []llm.Message `json:"messages"`
}

func (d SessionForkedData) validate() error {
	if d.From == "" {
		return errors.New("from is empty")
	}
	return nil
}

// TurnForkedData is the payload of turn.forked: the turn of the source
// that a fork at one of its steps ends in. Its messages follow the copy of
// session.forked (which holds the turns before it), and the turn is open:
// the session is running, its calls without a result pending, until a
// resume (or a new input, which runs it on first) continues it. Log schema
// version 7.
type TurnForkedData struct {
	// Turn is the open turn's number: the copied turns' + 1.
	Turn int `json:"turn"`
	// Messages are the turn's messages as the source held them right after
	// AtStep: the user's message first; the calls of the last answer whose
	// results they do not hold are pending.
	Messages []llm.Message `json:"messages"`
	// AtStep is the source's step the copy ends after (informative).
	AtStep string `json:"at_step,omitempty"`
	// Steps are the LLM steps the turn had made in the source by then:
	// they count towards its maxSteps.
	Steps int `json:"steps,omitempty"`
	// MaxSteps is the turn's own maxSteps in the source (turn.started's),
	// kept; absent for the session's.
	MaxSteps int `json:"max_steps,omitempty"`
}

func (d TurnForkedData) validate() error {
	if d.Turn < 1 {
		return errors.New("turn is below 1")
	}
	if len(d.Messages) == 0 || !d.Messages[0].StartsTurn() {
		return errors.New("messages do not start with a user message that starts a turn")
	}
	if d.Steps < 0 || d.MaxSteps < 0 {
		return errors.New("steps or max_steps is negative")
	}
	return nil
}

// SessionEditedData is the payload of session.edited: one message of a
// fork's copy whose content was replaced. Log schema version 7.
type SessionEditedData struct {
	// Message is the index of the message in the history (as
	// tah.api.messages lists it: the system message 0).
	Message int `json:"message"`
	// Role is the message's role: user, assistant or tool.
	Role llm.Role `json:"role"`
	// CallID, on a tool result, is the call it answers.
	CallID string `json:"call_id,omitempty"`
	// From is the content before the edit, To after.
	From string `json:"from"`
	To   string `json:"to"`
	// IsError, on a tool result, is whether the result is an error after
	// the edit; absent: as it was.
	IsError *bool `json:"is_error,omitempty"`
	// By says who edited, as the client said (informative, not
	// authenticated: see docs/security.md).
	By string `json:"by,omitempty"`
}

func (d SessionEditedData) validate() error {
	if d.Message < 0 {
		return errors.New("message is negative")
	}
	switch d.Role {
	case llm.RoleUser, llm.RoleAssistant:
		if d.IsError != nil {
			return errors.New("is_error is for a tool result")
		}
	case llm.RoleTool:
		if d.CallID == "" {
			return errors.New("a tool result's edit names its call_id")
		}
	default:
		return fmt.Errorf("role %q: only a user's, an assistant's or a tool's message is edited", d.Role)
	}
	return nil
}

// SessionClaimedData is the payload of session.claimed.
type SessionClaimedData struct {
	// Epoch grows by one with every claim; deltas of an older epoch are stale.
	Epoch uint64 `json:"epoch"`
	// Node is the id of the node that took ownership.
	Node string `json:"node"`
	// Config is the configuration in force from this claim on.
	Config Config `json:"config"`
}

func (d SessionClaimedData) validate() error {
	if d.Epoch == 0 {
		return errors.New("epoch is 0")
	}
	return d.Config.validate()
}

// TurnStartedData is the payload of turn.started.
type TurnStartedData struct {
	// Turn is the number of the turn, from 1.
	Turn int `json:"turn"`
	// Message is the user's message.
	Message llm.Message `json:"message"`
	// InputID identifies the input that started the turn, for idempotent redelivery.
	InputID string `json:"input_id,omitempty"`
	// MaxSteps overrides the session's maxSteps for this turn (the input's
	// options.max_steps); absent keeps it. Recorded so that a resumed turn keeps it.
	MaxSteps int `json:"max_steps,omitempty"`
	// Caller, when set, waits for the turn's answer as a stream on a reply
	// subject (an agent protocol prompt): whichever node works on the turn
	// streams to it. Older nodes ignore it (they answer nobody).
	Caller *Caller `json:"caller,omitempty"`
	// Trace is the W3C trace context of the turn's span (its parent a
	// client's traceparent, when the input carried one): a node that works
	// on the turn later (an approval, a resume after its owner died)
	// continues the same trace. Absent when tracing was off.
	Trace *TraceContext `json:"trace,omitempty"`
	// Budget is the turn's own limits (the input's options.budget); the
	// tightest of them, the session's and the node's is in force.
	Budget *Limits `json:"budget,omitempty"`
	// Definition is a digest of what defined the agent that ran the turn
	// (AgentDefinition): a reader tells from it what changed between two
	// turns. Absent in logs of nodes that did not record it; older nodes
	// ignore it.
	Definition *AgentDefinition `json:"definition,omitempty"`
	// By is the name of the credential that sent the turn's input, as the
	// NATS server authenticated it (a tenant's session's input names its
	// sender in its subject); absent when not known (the default tenant's
	// inputs name no sender).
	By string `json:"by,omitempty"`
}

// TraceContext is a W3C trace context as its two headers carry it.
type TraceContext struct {
	Traceparent string `json:"traceparent"`
	Tracestate  string `json:"tracestate,omitempty"`
}

// Caller is who waits for a turn's answer, and how: Protocol names the
// stream's format ("agents/0.3": docs/agent-protocol.md), ReplyTo the
// caller's reply subject (under an inbox prefix, checked before the turn
// starts).
type Caller struct {
	Protocol string `json:"protocol"`
	ReplyTo  string `json:"reply_to"`
}

func (d TurnStartedData) validate() error {
	if d.Turn < 1 {
		return errors.New("turn is below 1")
	}
	if !d.Message.StartsTurn() {
		return errors.New("message is not a user message that starts a turn")
	}
	return nil
}

// TurnSteeredData is the payload of turn.steered: a user's message that
// joined the running turn (an input sent with when_busy "steer"), added to
// the history after the turn's last step, before its next LLM call. Log
// schema version 6.
type TurnSteeredData struct {
	// Turn is the running turn's number.
	Turn int `json:"turn"`
	// Message is the user's message, role user, marked steer.
	Message llm.Message `json:"message"`
	// InputID identifies the steer input, for idempotent redelivery.
	InputID string `json:"input_id,omitempty"`
	// Caller, when set, waits for the turn's answer as a stream from here
	// on (a steer sent through the agent protocol), as TurnStartedData's.
	Caller *Caller `json:"caller,omitempty"`
}

func (d TurnSteeredData) validate() error {
	if d.Turn < 1 {
		return errors.New("turn is below 1")
	}
	if d.Message.Role != llm.RoleUser || !d.Message.Steer {
		return errors.New("message is not a user message marked steer")
	}
	return nil
}

// TrimReport says what projectContext cut from the copy sent to the model.
type TrimReport struct {
	// Budget is the character budget in force.
	Budget int `json:"budget"`
	// BeforeChars and AfterChars are the sizes of the history before and after.
	BeforeChars int `json:"before_chars"`
	AfterChars  int `json:"after_chars"`
	// OutputsOmitted counts tool outputs of older turns replaced by a marker (rule 1).
	OutputsOmitted int `json:"outputs_omitted,omitempty"`
	// TurnsDropped counts whole turns dropped, oldest first (rule 2).
	TurnsDropped int `json:"turns_dropped,omitempty"`
	// CurrentOutputsOmitted counts seen tool outputs of the current turn replaced
	// by a marker (rule 3).
	CurrentOutputsOmitted int `json:"current_outputs_omitted,omitempty"`
	// OverBudget is true when even the part that is always kept did not fit.
	OverBudget bool `json:"over_budget,omitempty"`
}

// Trimmed reports whether anything was cut.
func (r TrimReport) Trimmed() bool {
	return r.OutputsOmitted+r.TurnsDropped+r.CurrentOutputsOmitted > 0
}

// ToolsOfferedData is the payload of tools.offered: the tools offered to the
// model from now on, written before the llm.started that first offers them
// (and again whenever they change), so that the log holds each version of the
// schemas once and every request can be rebuilt exactly.
type ToolsOfferedData struct {
	// Digest is ToolsDigest(Tools): llm.started's tools_digest names the list.
	Digest string `json:"digest"`
	// Tools are the schemas, in the order the request lists them.
	Tools []llm.ToolSchema `json:"tools"`
}

func (d ToolsOfferedData) validate() error {
	if len(d.Tools) == 0 {
		return errors.New("tools is empty")
	}
	digest, err := ToolsDigest(d.Tools)
	if err != nil {
		return err
	}
	if digest != d.Digest {
		return fmt.Errorf("digest %q is not the digest of the tools (%s)", d.Digest, digest)
	}
	return nil
}

// RequestRef is what llm.started records of the request an LLM step sent,
// instead of the request itself: the request is a pure function of the
// session's log up to that llm.started (projection.RebuildRequest), and
// RequestSHA256 checks the rebuild. So a step costs the log a few hundred
// bytes whatever the length of the history.
type RequestRef struct {
	// History is how many messages of the session's history (the folded
	// messages, summaries included: every message of the log before this
	// llm.started) the request was prepared from.
	History int `json:"history"`
	// ContextChars is the character budget the history was trimmed to
	// (projection.Prepare); 0 sent it whole.
	ContextChars int `json:"context_chars,omitempty"`
	// Model is the request's model (the session's configuration).
	Model string `json:"model,omitempty"`
	// Options are the request's sampling settings.
	Options llm.Options `json:"options,omitzero"`
	// Tools names the tools offered, in the request's order; absent when
	// none was.
	Tools []string `json:"tools,omitempty"`
	// ToolsDigest is the digest of the tools' schemas (ToolsDigest), which a
	// tools.offered event before this llm.started records.
	ToolsDigest string `json:"tools_digest,omitempty"`
	// RequestSHA256 is the hex SHA-256 of the request as sent, in canonical
	// JSON (RequestSHA256).
	RequestSHA256 string `json:"request_sha256"`
}

// LLMStartedData is the payload of llm.started.
type LLMStartedData struct {
	StepID string `json:"step_id"`
	Turn   int    `json:"turn"`
	// RequestRef rebuilds the request as sent: the trimmed copy of the
	// history, by reference.
	RequestRef
	// Trim reports what was cut, when anything was.
	Trim *TrimReport `json:"trim,omitempty"`
	// Request is the request as sent, recorded whole: only in logs written
	// before llm.started recorded a RequestRef (RequestSHA256 is then empty).
	// Read, never written.
	Request llm.Request `json:"request,omitzero"`
}

// Recorded reports whether d holds the whole request (an event of a log
// written before requests were recorded by reference) rather than a
// RequestRef.
func (d LLMStartedData) Recorded() bool { return d.RequestSHA256 == "" && len(d.Request.Messages) > 0 }

func (d LLMStartedData) validate() error { return needStep(d.StepID) }

// LLMStreamingData is the payload of llm.streaming.
type LLMStreamingData struct {
	StepID string `json:"step_id"`
}

func (d LLMStreamingData) validate() error { return needStep(d.StepID) }

// LLMCompletedData is the payload of llm.completed.
type LLMCompletedData struct {
	StepID string `json:"step_id"`
	// Response is the answer, as the history keeps it: when the answer was
	// too large for the log, its content and reasoning are cut to a preview
	// that ends with a note naming Artifact.
	Response llm.Response `json:"response"`
	// Artifact refers to the whole answer (its llm.Response as JSON) when it
	// was too large for the log.
	Artifact *ArtifactRef `json:"artifact,omitempty"`
	// DurationMS is how long the call took, in milliseconds.
	DurationMS int64 `json:"duration_ms,omitempty"`
	// Cost is what the call cost, by the price table of the node that made
	// it, recorded so that every reader (another node, a replay, a reader
	// after the prices changed) agrees on it; Unpriced 1 for a model
	// without a price. Absent in logs written before costs were recorded:
	// unknown, read as no cost.
	Cost *pricing.Cost `json:"cost,omitempty"`
}

func (d LLMCompletedData) validate() error { return needStep(d.StepID) }

// Error codes of failed steps and turns.
const (
	CodeProvider     = "provider"      // the provider failed
	CodeCancelled    = "cancelled"     // a cancel reached the step
	CodeTimeout      = "timeout"       // the step ran out of time
	CodeMaxSteps     = "max_steps"     // the turn reached maxSteps
	CodeToolError    = "tool_error"    // the tool reported an error
	CodeInvalidInput = "invalid_input" // the tool's input failed its schema
	CodeNotExecuted  = "not_executed"  // the call never ran (repair after a cancel or failure)
	CodeInterrupted  = "interrupted"   // the call was running when its owner died; its outcome is unknown
	CodeInternal     = "internal"      // a fault of TAH itself
	CodeUnknownTool  = "unknown_tool"  // the model called a tool that was never offered to it
	CodeDenied       = "denied"        // the call needed approval and was denied (tool.denied)
	// CodeToolUnavailable: the model called a tool it was offered, and the
	// service that runs it stayed absent for as long as a call waits for it.
	// Retryable: the same call may succeed once the service is back.
	CodeToolUnavailable = "tool_unavailable"
	CodeContextBudget   = "context_budget" // the kept part of the context alone exceeds the budget
	// CodeAnswerTooLarge: the model's answer was over what a node accepts of
	// one answer (llm.MaxAnswerBytes), or its tool calls' arguments alone were
	// too large for the log.
	CodeAnswerTooLarge = "answer_too_large"
	// CodeEmptySummary: a compaction whose answer summarises nothing (empty,
	// or no letter or digit: a reasoning model that ran out of output
	// tokens). Trimming takes over.
	CodeEmptySummary = "empty_summary"
)

// LLMFailedData is the payload of llm.failed.
type LLMFailedData struct {
	StepID     string `json:"step_id"`
	Error      string `json:"error"`
	Code       string `json:"code"`
	DurationMS int64  `json:"duration_ms,omitempty"`
}

func (d LLMFailedData) validate() error { return needStep(d.StepID) }

// ThinkingData is the payload of agent.thinking.
type ThinkingData struct {
	StepID  string `json:"step_id"`
	Content string `json:"content,omitempty"`
}

func (d ThinkingData) validate() error { return needStep(d.StepID) }

// ToolStartedData is the payload of tool.started.
type ToolStartedData struct {
	StepID string       `json:"step_id"`
	Call   llm.ToolCall `json:"call"`
	// Idempotent tools may be run again on resume; others get an "interrupted" result.
	Idempotent bool `json:"idempotent,omitempty"`
	// Runner names where the call runs: "local", the remote service, or,
	// for a sub-agent's call, AgentRunnerPrefix and the child session.
	Runner string `json:"runner,omitempty"`
}

func (d ToolStartedData) validate() error {
	if err := needStep(d.StepID); err != nil {
		return err
	}
	if d.Call.ID == "" {
		return errors.New("call.id is empty")
	}
	return nil
}

// ToolWaitingData is the payload of tool.waiting.
type ToolWaitingData struct {
	// StepID is the tool step (tool.started) whose call waits.
	StepID string `json:"step_id"`
	CallID string `json:"call_id"`
	// Name is the tool whose service the call waits for.
	Name string `json:"name"`
	// WaitMS is the longest the call waits, in milliseconds, before it ends
	// with code tool_unavailable.
	WaitMS int64 `json:"wait_ms"`
}

func (d ToolWaitingData) validate() error {
	if err := needStep(d.StepID); err != nil {
		return err
	}
	if d.CallID == "" {
		return errors.New("call_id is empty")
	}
	return nil
}

// ToolFinishedData is the payload of tool.finished.
type ToolFinishedData struct {
	StepID string `json:"step_id"`
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	// Output is what the model sees as the tool's result.
	Output string `json:"output"`
	// IsError marks a failed call: its Output explains the failure to the model.
	IsError bool `json:"is_error,omitempty"`
	// Code classifies a failure (one of the Code constants).
	Code string `json:"code,omitempty"`
	// Artifact refers to the full output when it was too large for the event.
	Artifact   *ArtifactRef `json:"artifact,omitempty"`
	DurationMS int64        `json:"duration_ms,omitempty"`
}

func (d ToolFinishedData) validate() error {
	if d.CallID == "" {
		return errors.New("call_id is empty")
	}
	return nil
}

// ArtifactRef points at a blob in the object store.
type ArtifactRef struct {
	// Bucket and Object locate the blob in the NATS object store.
	Bucket string `json:"bucket"`
	Object string `json:"object"`
	Size   int64  `json:"size"`
	// SHA256 is the hex digest of the blob.
	SHA256 string `json:"sha256,omitempty"`
}

// AgentFinishedData is the payload of agent.finished.
type AgentFinishedData struct {
	Turn int `json:"turn"`
	// Content is the model's final answer.
	Content string `json:"content"`
	// Steps is how many LLM calls the turn made.
	Steps int `json:"steps"`
	// Usage is the tokens of the turn's LLM calls; SessionUsage the
	// session's total, this turn's included. An agent.finished written
	// before session_usage existed has none, and its usage is the session's
	// total: see TurnUsage.
	Usage        llm.Usage  `json:"usage"`
	SessionUsage *llm.Usage `json:"session_usage,omitempty"`
	// Cost is the cost of the turn's LLM calls (their llm.completed's and
	// compactions' costs, summed); SessionCost the session's, this turn's
	// included. Absent from an agent.finished written before costs were
	// recorded: unknown, read as no cost.
	Cost        *pricing.Cost `json:"cost,omitempty"`
	SessionCost *pricing.Cost `json:"session_cost,omitempty"`
}

// TurnUsage is the turn's usage when the event records it (an event with
// session_usage), and false for one written before, whose usage is the
// session's total: the turn's is then the sum of its llm.completed.
func (d AgentFinishedData) TurnUsage() (llm.Usage, bool) {
	if d.SessionUsage == nil {
		return llm.Usage{}, false
	}
	return d.Usage, true
}

// AgentFailedData is the payload of agent.failed.
type AgentFailedData struct {
	Turn  int    `json:"turn"`
	Error string `json:"error"`
	Code  string `json:"code"`
	Steps int    `json:"steps"`
	// Budget, with code budget_exceeded, is the limit the turn reached.
	Budget *BudgetReached `json:"budget,omitempty"`
	// Quota, with code quota_exceeded, is the tenant's quota the turn
	// reached (docs/tenancy.md).
	Quota *QuotaReached `json:"quota,omitempty"`
}

// AgentCancelledData is the payload of agent.cancelled.
type AgentCancelledData struct {
	Turn int `json:"turn"`
	// Reason is the cancel's reason: the input's reason, or a default.
	Reason string `json:"reason,omitempty"`
	// InterruptedBy, when an input sent with when_busy "interrupt" ended
	// the turn, is that input's id: its turn starts next.
	InterruptedBy string `json:"interrupted_by,omitempty"`
	// By is the name of the credential that sent the cancel, as the NATS
	// server authenticated it (as turn.started's by); absent when not
	// known.
	By string `json:"by,omitempty"`
}

// ContextTrimmedData is the payload of agent.context.trimmed.
type ContextTrimmedData struct {
	StepID string     `json:"step_id"`
	Report TrimReport `json:"report"`
}

// ContextCompactedData is the payload of agent.context.compacted.
type ContextCompactedData struct {
	SessionID string `json:"sessionId"`
	// Turns is how many turns the summary covers.
	Turns int `json:"turns"`
	// Chars is the size of the summary.
	Chars int  `json:"chars"`
	Auto  bool `json:"auto"`
	// CompactionCall is the model call that wrote the summary: an LLM step
	// marked as compaction. Absent in logs written before compaction calls
	// were steps.
	CompactionCall
}

// ContextCompactFailedData is the payload of agent.context.compact-failed.
type ContextCompactFailedData struct {
	SessionID string `json:"sessionId"`
	Error     string `json:"error"`
	Auto      bool   `json:"auto"`
	// Code classifies the failure: CodeProvider, or CodeEmptySummary for an
	// answer that summarises nothing. Absent in older logs.
	Code string `json:"code,omitempty"`
	// CompactionCall is the model call that failed, when one was made.
	CompactionCall
}

// CompactionCall is what the log keeps of a compaction's model call, in
// agent.context.compacted or agent.context.compact-failed: the projection
// makes it an LLM step marked as compaction, and its usage counts in the
// session's. The fields are additive: a reader that predates them sees the
// compaction without its step, as before.
type CompactionCall struct {
	// StepID names the step; empty when no call was made.
	StepID string `json:"step_id,omitempty"`
	// Model is the model that answered, as the provider names it.
	Model string `json:"model,omitempty"`
	// Usage is what the call consumed, even when its answer was refused.
	Usage      llm.Usage `json:"usage,omitzero"`
	DurationMS int64     `json:"duration_ms,omitempty"`
	// Cost is what the call cost, as llm.completed's Cost; absent when no
	// call was made, or in logs written before costs were recorded.
	Cost *pricing.Cost `json:"cost,omitempty"`
}

// SummaryAddedData is the payload of summary.added.
type SummaryAddedData struct {
	// Content is the summary; it begins with projection's summary prefix.
	Content string `json:"content"`
	// At is the index in the message history where the summary is inserted;
	// -1 (or the length of the history) appends it.
	At int `json:"at"`
	// Turns is how many turns the summary covers.
	Turns int  `json:"turns"`
	Auto  bool `json:"auto"`
}

// CheckpointCreatedData is the payload of checkpoint.created.
type CheckpointCreatedData struct {
	ID string `json:"id"`
	// UpToSeq is the last stream sequence folded into the snapshot.
	UpToSeq uint64 `json:"up_to_seq"`
	// Bucket and Key locate the snapshot in a KV bucket.
	Bucket string `json:"bucket,omitempty"`
	Key    string `json:"key,omitempty"`
	// Events is how many events of the session the snapshot folds.
	Events int `json:"events,omitempty"`
}

// ArtifactCreatedData is the payload of artifact.created.
type ArtifactCreatedData struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// StepID and CallID name the tool step that produced it, if any.
	StepID      string      `json:"step_id,omitempty"`
	CallID      string      `json:"call_id,omitempty"`
	ContentType string      `json:"content_type,omitempty"`
	Ref         ArtifactRef `json:"ref"`
}

func needStep(id string) error {
	if id == "" {
		return errors.New("step_id is empty")
	}
	return nil
}
