package wire

import (
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/projection"
)

// Outcome is how the work an input asked for ended: the body of the message a
// node publishes on the input's Tah-Reply-To subject, once, when the turn
// finished, failed or was cancelled (run, resume), the summary was written or
// there was nothing to compact (compact), or the cancel was delivered (cancel).
// A client keeps the first per InputID: after a failover the same outcome may
// come twice.
type Outcome struct {
	// Session is the session; Turn the number of its last turn.
	Session string `json:"session"`
	// InputID is the id of the input this outcome answers.
	InputID string `json:"input_id,omitempty"`
	Turn    int    `json:"turn"`
	// Status is the session's state after the work: completed, failed or
	// cancelled for a turn; the current state for a compact, or a cancel that
	// found nothing running; refused for an input that was dropped.
	Status projection.Status `json:"status"`
	// Content is the final answer of a completed turn.
	Content string `json:"content,omitempty"`
	// Error and Code say why a turn failed or was cancelled; Code is one of
	// the event codes (max_steps, provider, cancelled, ...).
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
	// Budget, with code budget_exceeded, is the limit the turn reached and
	// at what figure (agent.failed's budget); on a resume refused with
	// failure code budget_exceeded, the limit that still stops it.
	Budget *event.BudgetReached `json:"budget,omitempty"`
	// Quota, with code quota_exceeded, is the tenant's quota the turn
	// reached (agent.failed's quota).
	Quota *event.QuotaReached `json:"quota,omitempty"`
	// Steps counts the LLM calls of the turn.
	Steps int `json:"steps"`
	// Usage is the tokens of the turn's LLM calls; SessionUsage the
	// session's so far, the turn's included.
	Usage        llm.Usage `json:"usage"`
	SessionUsage llm.Usage `json:"session_usage"`
	// Cost is the cost of the turn's LLM calls in US dollars, as their
	// events recorded it (unpriced counts the calls of a model without a
	// price: "no price", never a guessed cost); SessionCost the session's
	// so far, the turn's included.
	Cost        pricing.Cost `json:"cost"`
	SessionCost pricing.Cost `json:"session_cost"`
	// LastSeq is the log's last sequence after the work: read the log, or wait
	// for a read model, up to it.
	LastSeq uint64 `json:"last_seq"`
	// AwaitingApproval, on a turn that waits (Status waiting_tool), are the
	// calls that wait for a person to approve or deny them (the commands
	// approve and deny); ApprovalDeadline is when they are denied, if ever.
	AwaitingApproval []llm.ToolCall `json:"awaiting_approval,omitempty"`
	ApprovalDeadline time.Time      `json:"approval_deadline,omitzero"`
	// AwaitingAgents, on a turn that waits (Status waiting_tool), are the
	// sub-agents' sessions whose answers it waits for. Such an outcome is
	// not the turn's end: the turn goes on by itself when they have
	// answered, on whichever node, and its end is in the session's log
	// (agent.finished, agent.failed, agent.cancelled): follow the log for
	// it (docs/protocol.md, "Sub-agents").
	AwaitingAgents []string `json:"awaiting_agents,omitempty"`
	// Compact is the result of a compact; nil when there was nothing to compact.
	Compact *CompactResult `json:"compact,omitempty"`
	// Fenced is set when another node took the session over during the work.
	Fenced bool `json:"fenced,omitempty"`
	// WasRunning, on a cancel's outcome, says that the cancel reached running
	// work: the outcome is then that work's, sent once it ended (Status
	// cancelled, or how it ended when it ended first). Without it the session
	// ran nothing, and the outcome is its state.
	WasRunning bool `json:"was_running,omitempty"`
	// Failure says why the command could not be carried out (a turn that ran
	// and failed is not a failure of the command: see Status and Error), and
	// FailureCode classifies it: one of the Failure* codes, or, on a refusal
	// (Status refused: see Refusal), one of the Code* refusal codes.
	Failure     string `json:"failure,omitempty"`
	FailureCode string `json:"failure_code,omitempty"`
}

// CompactResult is what a compaction did (specification 0.31): the turns it
// summarised and the summary's length in characters.
type CompactResult struct {
	Turns int `json:"turns"`
	Chars int `json:"chars"`
}

// The failure codes of an Outcome.
const (
	FailureUnknownSession  = "unknown_session"   // no such session
	FailureBusy            = "busy"              // compaction while a turn runs
	FailureNothingToResume = "nothing_to_resume" // resume without an unfinished turn
	FailureStopped         = "stopped"           // the node stopped; the next owner carries on
	FailureFenced          = "fenced"            // another node owns the session now
	FailureError           = "error"             // anything else; Failure says what
	// FailureAlreadyDecided: an approve or deny of a call that was approved
	// or denied before (two approvals of one call: the first wins).
	FailureAlreadyDecided = "already_decided"
	// FailureNotPending: an approve or deny of a call that awaits no
	// approval: unknown, answered (a cancel ended its turn), or not asked.
	FailureNotPending = "not_pending"
	// FailureWithdrawn: the input waited in its session's queue when a
	// cancel named it (Input.InputID): it was dropped and never ran.
	FailureWithdrawn = "withdrawn"
	// FailureBudgetExceeded: a resume of a turn that failed at its budget,
	// which still stops it (Failure says which limit): raise the budget
	// first (the budget command).
	FailureBudgetExceeded = "budget_exceeded"
	// FailureQuotaExceeded: a compact of a tenant's session while its tenant
	// is over a quota (its tokens or cost of the day, its storage: Quota
	// says which, its limit and when it resets); the model was not called.
	FailureQuotaExceeded = CodeQuotaExceeded
)

// AwaitsApproval reports whether o is a turn that waits for a person to
// approve or deny calls (AwaitingApproval).
func (o Outcome) AwaitsApproval() bool { return o.Failure == "" && len(o.AwaitingApproval) > 0 }

// AwaitsAgents reports whether o is a turn that waits for sub-agents
// (AwaitingAgents) and for no person: its end is still to come, in the log.
func (o Outcome) AwaitsAgents() bool {
	return o.Failure == "" && len(o.AwaitingAgents) > 0 && !o.AwaitsApproval() && o.Status.Active()
}

// Ended reports whether o is the end of a turn: it has no failure and its
// status is not an active one.
func (o Outcome) Ended() bool { return o.Failure == "" && !o.Status.Active() }
