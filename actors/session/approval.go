package session

import (
	"context"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// ApprovalPolicy says which tool calls wait for a person's approval before
// they run.
type ApprovalPolicy struct {
	// Rules map a tool name, or a glob of names (path.Match: "fs__*" is every
	// tool of the MCP server fs), to ApprovalAlways or ApprovalNever. An
	// exact name wins over globs, and the longest matching glob over
	// shorter ones. A tool no rule names needs approval when it asks for it
	// (tools.AsksApproval: an MCP tool that is not read-only), and none
	// otherwise.
	Rules map[string]string
	// Timeout, when positive, denies the calls still undecided this long
	// after they were asked for; 0 waits for ever.
	Timeout time.Duration
}

// The values of an approval rule.
const (
	ApprovalAlways = "always"
	ApprovalNever  = "never"
)

// Validate reports a rule whose value is neither always nor never, or whose
// pattern is not a valid glob.
func (p ApprovalPolicy) Validate() error {
	for pat, v := range p.Rules {
		if v != ApprovalAlways && v != ApprovalNever {
			return fmt.Errorf("approval of %q is %q: use %q or %q", pat, v, ApprovalAlways, ApprovalNever)
		}
		if _, err := path.Match(pat, ""); err != nil {
			return fmt.Errorf("approval pattern %q: %w", pat, err)
		}
	}
	if p.Timeout < 0 {
		return fmt.Errorf("approval timeout %v is negative", p.Timeout)
	}
	return nil
}

// Needs reports whether a call of the tool named name waits for approval,
// by the rules alone.
func (p ApprovalPolicy) Needs(name string) bool {
	needs, _ := p.rule(name)
	return needs
}

// NeedsTool reports whether a call of the tool named name, t (nil when
// unknown), waits for approval: a rule that names the tool decides, else
// what the tool asks (tools.AsksApproval).
func (p ApprovalPolicy) NeedsTool(name string, t tools.Tool) bool {
	if needs, ok := p.rule(name); ok {
		return needs
	}
	return t != nil && tools.AsksApproval(t)
}

// rule is what the rules say of name: whether it needs approval, and
// whether any rule names it.
func (p ApprovalPolicy) rule(name string) (needs, named bool) {
	if v, ok := p.Rules[name]; ok {
		return v == ApprovalAlways, true
	}
	best := -1
	for pat, v := range p.Rules {
		if ok, _ := path.Match(pat, name); ok && len(pat) > best {
			best, needs = len(pat), v == ApprovalAlways
		}
	}
	return needs, best >= 0
}

// requestApproval asks for approval of the calls among pending that the
// policy names and nobody was asked about yet: tool.approval-requested, with
// the deadline of the policy's timeout. It reports whether it asked: the
// turn then waits (the loop returns, and the actor may passivate) until an
// approve, a deny, the deadline or a cancel.
func requestApproval(ctx context.Context, a *AgentContext, pending []llm.ToolCall) (bool, error) {
	st := a.State()
	var ask []llm.ToolCall
	for _, c := range pending {
		if rec := st.ToolCall(c.ID); rec != nil && rec.Approval == "" && a.Tools.NeedsApproval(c.Name) {
			ask = append(ask, c)
		}
	}
	if len(ask) == 0 {
		return false, nil
	}
	d := event.ToolApprovalRequestedData{Turn: st.Turn, Calls: ask}
	if t := a.Tools.approval.Timeout; t > 0 {
		d.Deadline = a.now().Add(t).UTC().Truncate(time.Millisecond)
	}
	a.log.Debug("tool calls wait for approval", "session", a.Session, "calls", len(ask), "deadline", d.Deadline)
	return true, a.Append(ctx, event.ToolApprovalRequested, d)
}

// decide carries out an approve or a deny (cmd.Decision), or the denial of
// the undecided calls whose deadline passed (cmd.Expired): tool.approved for
// each approved call, tool.denied and the call's result (code denied) for
// each denied one, all staged for the loop's next write. It wraps
// ErrNotPending or ErrAlreadyDecided, and writes nothing, when a call named
// awaits no decision.
func decide(a *AgentContext, cmd *Command) error {
	st := a.State()
	if cmd.Expired {
		if !st.AwaitingApproval || st.ApprovalDeadline.IsZero() || a.now().Before(st.ApprovalDeadline) {
			return nil // decided meanwhile, or a timer of an older request
		}
		for _, c := range st.PendingApprovals() {
			if err := deny(a, c, event.ToolDeniedData{CallID: c.ID, Expired: true}); err != nil {
				return err
			}
		}
		return nil
	}
	dec := cmd.Decision
	if dec == nil {
		dec = &wire.Decision{}
	}
	calls, err := decided(st, dec.Calls)
	if err != nil {
		return fmt.Errorf("%s in session %s: %w", cmd.Kind, a.Session, err)
	}
	for _, c := range calls {
		if cmd.Kind == wire.CommandDeny {
			err = deny(a, c, event.ToolDeniedData{CallID: c.ID, By: dec.By, Note: dec.Note})
		} else {
			err = a.Stage(event.ToolApproved, event.ToolApprovedData{CallID: c.ID, By: dec.By, Note: dec.Note, Arguments: dec.Arguments})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decided are the calls a decision names (every pending one when ids is
// empty), each of which must await a decision.
func decided(st *projection.State, ids []string) ([]llm.ToolCall, error) {
	pending := st.PendingApprovals()
	if len(ids) == 0 {
		if len(pending) == 0 {
			return nil, fmt.Errorf("no call awaits approval: %w", ErrNotPending)
		}
		return pending, nil
	}
	var out []llm.ToolCall
	for _, id := range ids {
		i := slices.IndexFunc(pending, func(c llm.ToolCall) bool { return c.ID == id })
		if i >= 0 {
			out = append(out, pending[i])
			continue
		}
		rec := st.ToolCall(id)
		if rec != nil && (rec.Approval == projection.ApprovalApproved || rec.Approval == projection.ApprovalDenied) {
			return nil, fmt.Errorf("call %s was %s before: %w", id, rec.Approval, ErrAlreadyDecided)
		}
		return nil, fmt.Errorf("call %s awaits no approval (unknown, answered, or never asked): %w", id, ErrNotPending)
	}
	return out, nil
}

// deny stages the denial of call c and its result, which the model sees.
func deny(a *AgentContext, c llm.ToolCall, d event.ToolDeniedData) error {
	if err := a.Stage(event.ToolDenied, d); err != nil {
		return err
	}
	return a.Stage(event.ToolFinished, toolFinished("", settled(c, event.CodeDenied, event.DeniedOutput(d))))
}

// answerAwaiting gives every call of a turn waiting for approval that never
// started a result (code cancelled), when a cancel ends the turn: no call
// is left unanswered.
func answerAwaiting(a *AgentContext) error {
	st := a.State()
	if !st.AwaitingApproval {
		return nil
	}
	for _, c := range pendingCalls(st) {
		r := settled(c, event.CodeCancelled, fmt.Sprintf("Error: the call to %s was cancelled while it waited for approval; it did not run.", c.Name))
		if err := a.Stage(event.ToolFinished, toolFinished("", r)); err != nil {
			return err
		}
	}
	return nil
}

// awaiting fills in an outcome the calls that wait for approval.
func awaiting(o *wire.Outcome, st *projection.State) {
	if st.AwaitingApproval {
		o.AwaitingApproval, o.ApprovalDeadline = st.PendingApprovals(), st.ApprovalDeadline
	}
	for _, s := range st.WaitingChildren() {
		o.AwaitingAgents = append(o.AwaitingAgents, s.Child)
	}
}
