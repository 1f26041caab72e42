package projection

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
)

// Status is the state of a session, as the specification names it.
type Status string

// The session states.
const (
	StatusIdle        Status = "idle"         // created, no turn yet
	StatusRunning     Status = "running"      // a turn is in progress, waiting on the model
	StatusWaitingTool Status = "waiting_tool" // a turn is waiting on tool calls
	StatusCompleted   Status = "completed"    // the last turn finished
	StatusFailed      Status = "failed"       // the last turn failed (including maxSteps)
	StatusCancelled   Status = "cancelled"    // the last turn was cancelled
	// StatusNeedsNewerNode is an extension of the specification's states: the
	// log holds a record of a newer schema than this node reads (Fault); a
	// node that knows it runs the session.
	StatusNeedsNewerNode Status = "needs_newer_node"
)

// Active reports whether a turn is in progress.
func (s Status) Active() bool { return s == StatusRunning || s == StatusWaitingTool }

// StepType is the kind of a step.
type StepType string

// The step kinds of the specification.
const (
	StepThinking StepType = "thinking"
	StepLLM      StepType = "llm"
	StepTool     StepType = "tool"
)

// StepStatus is the progress of a step. LLM steps go pending → streaming →
// completed | failed; tool steps go pending → running → completed | failed.
type StepStatus string

// The step states.
const (
	StepPending   StepStatus = "pending"
	StepStreaming StepStatus = "streaming"
	StepRunning   StepStatus = "running"
	StepCompleted StepStatus = "completed"
	StepFailed    StepStatus = "failed"
)

// Done reports whether the step has ended.
func (s StepStatus) Done() bool { return s == StepCompleted || s == StepFailed }

// Step is the unit of debugging, billing and resume.
type Step struct {
	ID     string     `json:"id"`
	Type   StepType   `json:"type"`
	Turn   int        `json:"turn"`
	Status StepStatus `json:"status"`

	// LLM steps. RequestRef is what llm.started recorded of the request (nil
	// in a log that recorded requests whole): RebuildRequest rebuilds it.
	RequestRef *event.RequestRef `json:"request_ref,omitempty"`
	Response   *llm.Response     `json:"response,omitempty"`
	Trim       *event.TrimReport `json:"trim,omitempty"`
	// Compaction marks the model call of a compaction (its summary is a
	// summary.added; its usage counts in the session's): no llm.started
	// opened it, and it is not one of the turn's maxSteps.
	Compaction bool `json:"compaction,omitempty"`
	// Cost is what the call cost, as its llm.completed (or compaction
	// event) recorded it; nil when none was recorded (a failed call, or a
	// log written before costs were recorded: unknown).
	Cost *pricing.Cost `json:"cost,omitempty"`

	// Tool steps.
	Tool       string          `json:"tool,omitempty"`
	CallID     string          `json:"call_id,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Output     string          `json:"output,omitempty"`
	Idempotent bool            `json:"idempotent,omitempty"`
	// Child, on a sub-agent's call, is the session that works on it
	// (its tool.started's runner, agent:<child>).
	Child string `json:"child,omitempty"`
	// Artifact refers to the whole output of a tool step, or the whole
	// answer of an LLM step, when the log holds a cut copy.
	Artifact *event.ArtifactRef `json:"artifact,omitempty"`

	// Thinking steps.
	Content string `json:"content,omitempty"`

	// Failures: Error says what went wrong, Code classifies it (event.Code*).
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`

	StartSeq   uint64    `json:"start_seq"`
	EndSeq     uint64    `json:"end_seq,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	EndedAt    time.Time `json:"ended_at,omitzero"`
	DurationMS int64     `json:"duration_ms,omitempty"`
}

// ToolCallRecord follows one tool call from the model's request to its result.
type ToolCallRecord struct {
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Turn      int             `json:"turn"`
	// StepID is the tool step that ran it; empty for a call that never started.
	StepID  string     `json:"step_id,omitempty"`
	Status  StepStatus `json:"status"`
	IsError bool       `json:"is_error,omitempty"`
	Code    string     `json:"code,omitempty"`
	// HasResult is true once a tool result for the call is in the history.
	HasResult bool `json:"has_result,omitempty"`
	// Approval is where the call stands with the approval policy; empty
	// when it needed no approval.
	Approval Approval `json:"approval,omitempty"`
}

// Artifact is a file or blob produced during the session.
type Artifact struct {
	event.ArtifactCreatedData
	Seq uint64 `json:"seq"`
}

// Checkpoint is a recoverable point of the session.
type Checkpoint struct {
	event.CheckpointCreatedData
	Seq uint64 `json:"seq"`
}

// State is a session folded from its events. It is a plain value that round-trips
// through JSON, and it is the checkpoint snapshot. Like any value that Apply
// changes, it is not safe for concurrent use; even Step updates an index.
type State struct {
	ID         string            `json:"id"`
	Config     event.Config      `json:"config"`
	Status     Status            `json:"status"`
	ForkedFrom string            `json:"forked_from,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	Epoch      uint64            `json:"epoch,omitempty"`
	Node       string            `json:"node,omitempty"`

	// Messages is the model-visible history: the full history, never trimmed,
	// but for what Elided describes (a snapshot's window: see Elide).
	Messages    []llm.Message    `json:"messages"`
	Elided      Elided           `json:"elided,omitzero"`
	Steps       []Step           `json:"steps"`
	ToolCalls   []ToolCallRecord `json:"tool_calls"`
	Artifacts   []Artifact       `json:"artifacts"`
	Checkpoints []Checkpoint     `json:"checkpoints"`

	// Turn is the number of the current (or last) turn; 0 before the first.
	Turn int `json:"turn"`
	// LastInputID is the input id of the last turn started, so that a redelivered
	// input is recognised instead of starting the turn twice.
	LastInputID string `json:"last_input_id,omitempty"`
	// RecentInputs are the input ids of the last RecentInputsKept turns and
	// steers, oldest first: an input redelivered after a newer one already
	// ran (its node died while the newer one was delivered to the next
	// owner) is recognised too.
	RecentInputs []string `json:"recent_inputs,omitempty"`
	// TurnSteers are the input ids of the current (or last) turn's steers
	// (turn.steered), in order.
	TurnSteers []string `json:"turn_steers,omitempty"`
	// TurnSteerCallers are the callers that wait, as a stream, for the
	// answer of the turn their steers joined.
	TurnSteerCallers []event.Caller `json:"turn_steer_callers,omitempty"`
	// Parent, on a sub-agent's session, is the call it answers.
	Parent *event.ParentLink `json:"parent,omitempty"`
	// Definition is the agent definition the session runs with on every
	// node (session.created definition: a replay's live session), nil for
	// the node's.
	Definition *event.Config `json:"definition,omitempty"`
	// TurnMaxSteps is the current turn's own maxSteps (turn.started
	// max_steps), 0 when the session's applies.
	TurnMaxSteps int `json:"turn_max_steps,omitempty"`
	// TurnCaller is who waits for the current (or last) turn's answer as a
	// stream (turn.started caller), nil for nobody.
	TurnCaller *event.Caller `json:"turn_caller,omitempty"`
	// TurnTrace is the trace context of the current (or last) turn's span
	// (turn.started trace), nil when tracing was off.
	TurnTrace *event.TraceContext `json:"turn_trace,omitempty"`
	// TurnLLMCalls counts the LLM steps of the current turn, for maxSteps.
	TurnLLMCalls int `json:"turn_llm_calls"`
	// TurnCompactTried is true once the current turn attempted auto-compaction.
	TurnCompactTried bool `json:"turn_compact_tried,omitempty"`
	// Usage totals every LLM step; TurnUsage those of the current turn (a
	// checkpoint written before it existed has none: a turn resumed from it
	// counts its steps since).
	Usage     llm.Usage `json:"usage"`
	TurnUsage llm.Usage `json:"turn_usage"`
	// Cost totals the costs the LLM steps recorded; TurnCost those of the
	// current turn, like Usage and TurnUsage. A step without a recorded
	// cost (a log written before costs were) adds nothing: the totals are
	// of the steps that recorded one.
	Cost     pricing.Cost `json:"cost,omitzero"`
	TurnCost pricing.Cost `json:"turn_cost,omitzero"`
	// Budget is the session's own budget (session.created, budget.set);
	// TurnBudget the current (or last) turn's own limits (turn.started's,
	// as budget.set left them). The node's is Config.Budget; the tightest
	// of the three is in force (BudgetLimits).
	Budget     event.Budget `json:"budget,omitzero"`
	TurnBudget event.Limits `json:"turn_budget,omitzero"`
	// TurnRunningSince is when the current turn last started running
	// (turn.started, turn.reopened); zero between turns. TurnTimeMS is
	// the wall time the current (or last) turn ran before it, and TimeMS
	// the time every turn of the session ran, but for the running part of
	// the current one (Spend adds it).
	TurnRunningSince time.Time `json:"turn_running_since,omitzero"`
	TurnTimeMS       int64     `json:"turn_time_ms,omitempty"`
	TimeMS           int64     `json:"time_ms,omitempty"`
	// ToolsOffered is the digest of the tools the session last offered (its
	// last tools.offered): a step that offers others records them again.
	ToolsOffered string `json:"tools_offered,omitempty"`
	// Summaries counts summaries added; Trims counts agent.context.trimmed.
	Summaries int `json:"summaries,omitempty"`
	Trims     int `json:"trims,omitempty"`
	// Edits counts the messages of a fork's copy that session.edited
	// changed.
	Edits int `json:"edits,omitempty"`
	// Definitions are the definitions of the agent its turns ran under
	// (turn.started's definition), each with the turn it took effect: one
	// entry per change, none for turns that recorded none.
	Definitions []TurnDefinition `json:"definitions,omitempty"`

	// AwaitingApproval is set while the turn waits for a person to approve
	// or deny calls (tool.approval-requested; see PendingApprovals): the
	// session is waiting_tool, but no call runs, and none is to be resumed.
	// ApprovalDeadline is when the undecided calls are denied; zero for
	// never.
	AwaitingApproval bool      `json:"awaiting_approval,omitempty"`
	ApprovalDeadline time.Time `json:"approval_deadline,omitzero"`

	// LastOutput is the final answer of the last finished turn.
	LastOutput string `json:"last_output,omitempty"`
	// LastError and LastCode describe the last failed turn.
	LastError string `json:"last_error,omitempty"`
	LastCode  string `json:"last_code,omitempty"`
	// LastBudget is the limit the last turn reached, when it failed at its
	// budget (agent.failed's budget).
	LastBudget *event.BudgetReached `json:"last_budget,omitempty"`
	// LastQuota is the tenant's quota the last turn reached, when it
	// failed at it (code quota_exceeded).
	LastQuota *event.QuotaReached `json:"last_quota,omitempty"`
	// Fault, when set, is where this node stopped folding the log (see
	// ApplyLog): the session is failed (a corrupt log) or needs a newer node.
	Fault *Fault `json:"fault,omitempty"`

	// LastSeq is the stream sequence of the last event folded (its record's)
	// and LastIndex its index in that record; Events counts them.
	LastSeq   uint64    `json:"last_seq"`
	LastIndex int       `json:"last_index,omitempty"`
	Events    int       `json:"events"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`

	// stepIndex maps step ids to their index in Steps. It is derived, rebuilt
	// when missing (after a JSON round trip) and kept up to date by Apply, so
	// that folding a step costs the same however long the session is.
	stepIndex map[string]int
	// chars is the size of Messages so far (messageChars), derived like
	// stepIndex.
	chars charsMemo
	// stampFrom is the first step that was open at the last Stamp: the
	// steps before it are stamped. Derived like stepIndex; Slim resets it.
	stampFrom int
	// done: every step before it has ended (doneBefore). Derived like
	// stepIndex; Slim resets it.
	done int
	// tools is the digest of the tools last offered (toolsDigest), derived
	// like stepIndex.
	tools toolsMemo
}

// BudgetLimits are the limits in force for the current turn and the
// session: for each, the tightest of the node's (Config.Budget), the
// session's and the turn's own (event.Effective).
func (s *State) BudgetLimits() []event.BudgetReached {
	var node event.Budget
	if s.Config.Budget != nil {
		node = *s.Config.Budget
	}
	return event.Effective(node, s.Budget, s.TurnBudget)
}

// Spend is what the current (or last) turn and the session have spent at
// now: the tokens (input and output) and cost their LLM calls recorded, and
// the wall time their turns ran, the current one's up to now.
func (s *State) Spend(now time.Time) event.Spend {
	var running int64
	if !s.TurnRunningSince.IsZero() && now.After(s.TurnRunningSince) {
		running = now.Sub(s.TurnRunningSince).Milliseconds()
	}
	return event.Spend{
		Turn: event.Limits{Tokens: int64(s.TurnUsage.InputTokens + s.TurnUsage.OutputTokens),
			CostUSD: s.TurnCost.USD, TimeMS: s.TurnTimeMS + running},
		Session: event.Limits{Tokens: int64(s.Usage.InputTokens + s.Usage.OutputTokens),
			CostUSD: s.Cost.USD, TimeMS: s.TimeMS + running},
	}
}

// BudgetReached is the first limit in force (BudgetLimits) that the spend
// at now has reached, or nil.
func (s *State) BudgetReached(now time.Time) *event.BudgetReached {
	limits := s.BudgetLimits()
	if len(limits) == 0 {
		return nil
	}
	return event.Reached(limits, s.Spend(now))
}

// TurnText is the text the model wrote in the current (or last) turn, its
// LLM steps' in order: the assistant messages since the turn's user message.
func (s *State) TurnText() string {
	var b strings.Builder
	start := len(s.Messages)
	for start > 0 && !s.Messages[start-1].StartsTurn() {
		start--
	}
	for _, m := range s.Messages[start:] {
		if m.Role == llm.RoleAssistant {
			b.WriteString(m.Content)
		}
	}
	return b.String()
}

// Step returns the step with the given id, or nil.
func (s *State) Step(id string) *Step {
	if s.stepIndex == nil || len(s.stepIndex) != len(s.Steps) {
		s.stepIndex = make(map[string]int, len(s.Steps))
		for i := range s.Steps {
			s.stepIndex[s.Steps[i].ID] = i
		}
	}
	if i, ok := s.stepIndex[id]; ok && i < len(s.Steps) && s.Steps[i].ID == id {
		return &s.Steps[i]
	}
	return nil
}

// addStep appends st, keeping the index in step.
func (s *State) addStep(st Step) {
	s.Step(st.ID) // make sure the index matches Steps before growing both
	s.Steps = append(s.Steps, st)
	s.stepIndex[st.ID] = len(s.Steps) - 1
}

// ToolCall returns the record of the call with the given id, or nil.
func (s *State) ToolCall(callID string) *ToolCallRecord {
	for i := len(s.ToolCalls) - 1; i >= 0; i-- {
		if s.ToolCalls[i].CallID == callID {
			return &s.ToolCalls[i]
		}
	}
	return nil
}

// Clone returns a deep copy of s that shares nothing mutable with it.
func (s State) Clone() State {
	b, err := json.Marshal(s)
	if err != nil {
		panic("projection: state does not marshal: " + err.Error())
	}
	var c State
	if err := json.Unmarshal(b, &c); err != nil {
		panic("projection: state does not unmarshal: " + err.Error())
	}
	return c
}

// RecentInputsKept is how many turns' input ids State.RecentInputs keeps: far
// more than the inputs of one session in flight at a node's death.
const RecentInputsKept = 64

// SawInput reports whether a turn was started or steered by input id among
// the last RecentInputsKept inputs.
func (s *State) SawInput(id string) bool {
	return id != "" && slices.Contains(s.RecentInputs, id)
}

// SteeredTurn reports whether input id steered the current (or last) turn
// (turn.steered).
func (s *State) SteeredTurn(id string) bool {
	return id != "" && slices.Contains(s.TurnSteers, id)
}

// rememberInput adds id to RecentInputs, keeping the last RecentInputsKept.
func (s *State) rememberInput(id string) {
	if id == "" {
		return
	}
	if len(s.RecentInputs) >= RecentInputsKept {
		s.RecentInputs = slices.Delete(s.RecentInputs, 0, len(s.RecentInputs)-RecentInputsKept+1)
	}
	s.RecentInputs = append(s.RecentInputs, id)
}

// WaitingChildren are the open steps of the current turn's sub-agent calls:
// their results come from the child sessions (Step.Child) when they end.
//
// Only the steps after the turn's last LLM step are read: a sub-agent call
// belongs to the batch of the model's last answer, and no LLM step starts
// while a call of it waits. (The loop asks this at every step: a scan of
// every step was quadratic in a long turn.)
func (s *State) WaitingChildren() []Step {
	var out []Step
	for i := len(s.Steps) - 1; i >= 0; i-- {
		st := s.Steps[i]
		if st.Type == StepLLM || st.Turn != s.Turn {
			break
		}
		if st.Type == StepTool && st.Child != "" && st.Status == StepRunning {
			out = append(out, st)
		}
	}
	slices.Reverse(out)
	return out
}

// Waits reports whether the turn waits, holding nothing, on what others
// decide or do: a person's approval, or sub-agents' sessions.
func (s *State) Waits() bool {
	return s.Status.Active() && (s.AwaitingApproval || len(s.WaitingChildren()) > 0)
}
