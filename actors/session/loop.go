package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tah-dev/tah/actors/toolrunner"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// Loop drives a turn that has begun (its turn.started is in the state) until it
// ends with agent.finished, agent.failed or agent.cancelled. It may be called on a
// turn that a previous owner left half done: it continues from the state. The
// specification's other loops (Coding, Research, Parallel, Team) implement it too.
type Loop interface {
	Run(ctx context.Context, a *AgentContext) error
}

// DefaultLoop is the specification's default loop: ask the model; if it asks for
// tools, run them, add their results, and ask again; stop when it answers without
// tool calls, at maxSteps, on a failure or on a cancel.
type DefaultLoop struct{}

var _ Loop = DefaultLoop{}

// Run implements Loop. It returns an error only when the log could not be written
// (fenced, or NATS gone); every other failure ends the turn in the log.
func (DefaultLoop) Run(ctx context.Context, a *AgentContext) error {
	ctx, stop := budgetDeadline(ctx, a)
	defer stop()
	// The tenant's running turn this run holds, once it makes a call
	// (quota.go): given back when the run returns, the turn ended or
	// waiting (for an approval, its sub-agents) holding nothing.
	var slot func()
	defer func() {
		if slot != nil {
			slot()
		}
	}()
	for {
		st := a.State()
		if !st.Status.Active() {
			return nil
		}
		if _, ok := budgetCause(ctx); ok {
			if err := answerAwaiting(a); err != nil {
				return err
			}
			if err := answerAgents(ctx, a); err != nil {
				return err
			}
			_, err := checkBudget(ctx, a)
			return err
		}
		if ctx.Err() != nil {
			if err := answerAwaiting(a); err != nil {
				return err
			}
			if err := answerAgents(ctx, a); err != nil {
				return err
			}
			return a.Append(ctx, event.AgentCancelled, event.AgentCancelledData{Turn: st.Turn, Reason: cancelReason(ctx), InterruptedBy: interruptedBy(ctx),
				By: cancelledBy(ctx)})
		}
		if st.AwaitingApproval {
			return nil // the turn waits, holding nothing, for approve, deny, its deadline or a cancel
		}
		if len(st.WaitingChildren()) > 0 {
			return nil // the turn waits, holding nothing, for its sub-agents' sessions to end (or a cancel)
		}
		// A previous owner may have stopped after the model answered: finish from
		// the log instead of asking again.
		if last := lastMessage(st.Messages); last != nil && last.Role == llm.RoleAssistant && len(last.ToolCalls) == 0 && st.TurnLLMCalls > 0 {
			return a.Append(ctx, event.AgentFinished, event.AgentFinishedData{Turn: st.Turn, Content: last.Content, Steps: st.TurnLLMCalls,
				Usage: st.TurnUsage, SessionUsage: &st.Usage, Cost: &st.TurnCost, SessionCost: &st.Cost})
		}
		// The budget, before each LLM call and after each step.
		if ended, err := checkBudget(ctx, a); ended || err != nil {
			return err
		}
		if pending := pendingCalls(st); len(pending) > 0 {
			if refused, err := refuseDisallowed(a, pending); err != nil || refused {
				if err != nil {
					return err
				}
				continue // the calls it may make go on
			}
			asked, err := requestApproval(ctx, a, pending)
			if err != nil {
				return err
			}
			if asked {
				continue // a cancel that came meanwhile ends the wait at once
			}
			agents, others := splitAgentCalls(a, pending)
			if len(agents) > 0 {
				if err := spawnAgents(ctx, a, agents); err != nil {
					return err
				}
			}
			if len(others) > 0 {
				if err := runTools(ctx, a, others); err != nil {
					return err
				}
			}
			continue
		}
		max := st.Config.MaxSteps
		if st.TurnMaxSteps != 0 {
			max = st.TurnMaxSteps
		}
		if max > 0 && st.TurnLLMCalls >= max {
			return a.Append(ctx, event.AgentFailed, event.AgentFailedData{Turn: st.Turn, Code: event.CodeMaxSteps, Steps: st.TurnLLMCalls,
				Error: fmt.Sprintf("the turn reached maxSteps (%d LLM calls) without a final answer; send another message to continue, or raise maxSteps", max)})
		}
		// The tenant's quotas, before each LLM call.
		if ended, err := checkQuota(ctx, a); ended || err != nil {
			return err
		}
		if slot == nil {
			var ok bool
			if slot, ok = takeTurn(ctx, a); !ok {
				continue // cancelled or stopped while it waited: the loop records it
			}
		}
		if err := llmStep(ctx, a); err != nil {
			return err
		}
	}
}

// llmStep makes one LLM call: compaction or trimming of the context first, then
// tools.offered when the tools changed, llm.started with a reference to the
// request (projection.NextRequest), the call with deltas streamed, and
// llm.completed or llm.failed.
func llmStep(ctx context.Context, a *AgentContext) error {
	st := a.State()
	budget := st.Config.ContextChars
	if budget > 0 && st.TurnLLMCalls == 0 && !st.TurnCompactTried &&
		st.HistoryChars() > budget {
		if err := autoCompact(ctx, a); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil // the loop records the cancel
		}
	}
	// A tool the last request offered, whose service has not reconnected
	// to a node that just started, is waited for (toolwait.go).
	awaitOffered(ctx, a)
	if ctx.Err() != nil {
		return nil // the loop records the cancel
	}
	// The step boundary: what users sent to steer the turn joins it here,
	// before the request is built (steer.go).
	if err := takeSteers(a); err != nil {
		return err
	}
	next, err := a.nextRequest(ctx, a.offeredTools())
	if err != nil {
		return fmt.Errorf("session %s: the request cannot be recorded: %w", a.Session, err)
	}
	if next.Offer != nil {
		if err := a.Stage(event.ToolsOffered, *next.Offer); err != nil {
			return err
		}
	}
	// The step's one write before the model's answer is used: llm.started,
	// with what was staged since the last write (the tool results the
	// request holds, a new turn's start, the tools offered), so that the
	// request's reference points into the log. The model is asked while it
	// is written (see modelCall): a step costs the longer of the two, not
	// their sum.
	req, stepID := next.Request, a.NewStepID("llm")
	cctx, span := chatSpan(ctx, a, stepID, req, false)
	call := askModel(cctx, a, stepID, req, span)
	if err := a.Append(ctx, event.LLMStarted, next.Started(stepID)); err != nil {
		call.drop()
		endChat(span, a, llm.Response{}, err)
		return err
	}
	if next.Trim.Trimmed() {
		if err := a.Stage(event.ContextTrimmed, event.ContextTrimmedData{StepID: stepID, Report: next.Trim}); err != nil {
			call.drop()
			endChat(span, a, llm.Response{}, err)
			return err
		}
	}
	resp, took, err := call.answer()
	endChat(span, a, resp, err)
	if err != nil {
		return failStep(ctx, a, stepID, err, took)
	}
	// An answer too large for the log is kept whole in the object store, and
	// the history holds a cut copy (see completed).
	done, err := a.completed(ctx, stepID, req, resp, took)
	if errors.Is(err, llm.ErrAnswerTooLarge) {
		return failStep(ctx, a, stepID, err, took)
	}
	if err != nil {
		return err
	}
	// The answer waits for the next write: the tool.started of its calls, or
	// agent.finished. A crash before it asks the model again, as a crash
	// during the call would.
	if err := a.Stage(event.LLMCompleted, done); err != nil {
		return err
	}
	if done.Response.Reasoning != "" {
		return a.Stage(event.Thinking, event.ThinkingData{StepID: a.NewStepID("think"), Content: done.Response.Reasoning})
	}
	return nil
}

// failStep ends LLM step stepID with llm.failed and, unless a cancel stopped
// it (the loop records that), the turn with agent.failed: code
// answer_too_large for an answer over what the node accepts or the log
// keeps, provider for every other failure of the call.
func failStep(ctx context.Context, a *AgentContext, stepID string, err error, took int64) error {
	code := event.CodeProvider
	_, atBudget := budgetCause(ctx)
	switch {
	case atBudget:
		code = event.CodeBudgetExceeded // the loop ends the turn
	case ctx.Err() != nil:
		code = event.CodeCancelled
	case errors.Is(err, llm.ErrAnswerTooLarge):
		code = event.CodeAnswerTooLarge
	}
	// The providers redact their errors; redacted again here, where the
	// error becomes the log's (and so every reader's, the outcome's and the
	// node log's), in case a provider did not.
	msg := llm.Redact(err.Error())
	if err := a.Stage(event.LLMFailed, event.LLMFailedData{StepID: stepID, Error: msg, Code: code, DurationMS: took}); err != nil {
		return err
	}
	if code == event.CodeCancelled || code == event.CodeBudgetExceeded {
		return nil // the loop records the cancel (or the budget), with the staged failure
	}
	st := a.State()
	return a.Append(ctx, event.AgentFailed, event.AgentFailedData{Turn: st.Turn, Error: msg, Code: code, Steps: st.TurnLLMCalls})
}

// quietStart is how long a batch of the node's own idempotent tools may run
// before its tool.started are written (see runTools), on a node whose
// writes are quick: long enough for the quick calls (a file read, a
// listing) to end first, short enough that watchers see a slow call start
// at once. A variable for the tests only.
var quietStart = 5 * time.Millisecond

// quietMax bounds quietFor: however slow the node's writes, a call that
// runs this long has its start written.
const quietMax = 500 * time.Millisecond

// quietFor is how long a batch of quick calls runs before its tool.started
// are written: quietStart, or as long as one of this node's writes takes
// now (bus.AppendLatency), whichever is longer, up to quietMax. Writing the
// start earlier would not show it earlier: the write itself lands about
// one write's time later, when such a call has ended too. On a loaded node
// (a busy disk with fsync on every write, or cores all busy) most calls
// outlast 5 ms, and writing each start would add a write to every step,
// more of the load that made them slow.
func (a *AgentContext) quietFor() time.Duration {
	if a.bus == nil {
		return quietStart
	}
	return max(quietStart, min(a.bus.AppendLatency(), quietMax))
}

// runTools runs calls that have no result yet: tool.started for each, naming
// where it runs, all written in one record (with the answer that asked for
// them, staged) before any runs, then the batch (see runBatch).
//
// When every call is to an idempotent tool of the node's own, the record
// waits instead until the batch has run for quietFor: a batch that ends
// sooner is written with its results and the next llm.started, one record
// and one durable write for the whole step instead of two. That is safe
// because such a call may run twice: a crash before the record loses the
// model's answer with it, and the next owner asks the model again (as after
// a crash during the call), so the calls run again or others do.
func runTools(ctx context.Context, a *AgentContext, calls []llm.ToolCall) error {
	ids := make([]string, len(calls))
	starts := make([]event.ToolStartedData, len(calls))
	quiet := true
	for i, c := range calls {
		ids[i] = a.NewStepID("tool")
		starts[i] = event.ToolStartedData{StepID: ids[i], Call: c, Idempotent: a.Tools.Idempotent(c.Name), Runner: a.Tools.Runner(c.Name)}
		quiet = quiet && starts[i].Idempotent && starts[i].Runner == wire.ToolRunnerLocal
	}
	for i, started := range starts {
		var err error
		if i < len(calls)-1 || quiet {
			err = a.Stage(event.ToolStarted, started)
		} else {
			err = a.Append(ctx, event.ToolStarted, started)
		}
		if err != nil {
			return err
		}
	}
	var flush func() error
	if quiet {
		flush = func() error { return a.Flush(ctx) }
	}
	return runBatch(ctx, a, ids, calls, flush)
}

// runBatch runs calls whose tool.started is in the log, at steps ids (see
// runCalls), and stages their tool.finished in call order: they are written
// with the next write, the next llm.started or the turn's end at the
// latest, before the model sees them. A call a cancel stopped gets its
// result (cancelled, or what its service stored just in time) in the same
// turn; only when the owner stops (or lost the session) does a stopped call
// keep no result, for the next owner to look up. With flush, the
// tool.started are staged instead, and flush writes them if the batch runs
// for quietFor (see runTools).
func runBatch(ctx context.Context, a *AgentContext, ids []string, calls []llm.ToolCall, flush func() error) error {
	spans := toolSpans(ctx, a, ids, calls)
	results, err := runCalls(ctx, a, ids, calls, spanContexts(spans), flush)
	endTools(spans, a, results)
	if err != nil {
		return err
	}
	for i, r := range results {
		if r.Result.Code == event.CodeCancelled && ownerStopping(ctx) {
			continue
		}
		finished, err := a.fitResult(ctx, toolFinished(ids[i], r))
		if err != nil {
			return err
		}
		if err := a.Stage(event.ToolFinished, finished); err != nil {
			return err
		}
	}
	return nil
}

// BeginTurn opens a new turn with msg: first every tool call the previous turn
// left without a result gets a "not executed" result (specification v0.22), then
// turn.started. They are staged: the turn's first write (its first
// llm.started, or how it ended) carries them. A crash before it leaves the
// input to be delivered again, and the turn starts again.
func BeginTurn(ctx context.Context, a *AgentContext, msg llm.Message, inputID string, opts TurnOptions, caller *event.Caller) error {
	for _, c := range projection.DanglingCalls(a.State().Messages) {
		if err := a.Stage(event.ToolFinished, toolFinished("", settled(c, event.CodeNotExecuted, projection.NotExecutedOutput))); err != nil {
			return err
		}
	}
	// The span ctx holds (the work's, when tracing) is the turn's: recorded,
	// so that the work on the turn elsewhere and later joins its trace.
	return a.Stage(event.TurnStarted, event.TurnStartedData{Turn: a.State().Turn + 1, Message: msg, InputID: inputID, MaxSteps: opts.MaxSteps, Caller: caller,
		Trace: turnTrace(ctx), Budget: opts.Budget, Definition: a.definition(), By: opts.By})
}

// TurnOptions are a turn's own settings, from its input: turn.started
// records them, so that whichever node runs the turn keeps them.
type TurnOptions struct {
	// MaxSteps overrides the session's maxSteps: 0 keeps it.
	MaxSteps int
	// Budget is the turn's own limits; nil for none.
	Budget *event.Limits
	// By is who sent the input, as NATS authenticated it ("": unknown).
	By string
}

// PrepareResume settles what a previous owner left open, so that the loop can
// continue the turn (ARCHITECTURE.md, Resume): an LLM step without a result is
// closed as interrupted (the loop asks again); a running tool call gets the
// result a tool service stored, or runs again if its tool is idempotent, or
// gets an "interrupted, outcome unknown" result.
func PrepareResume(ctx context.Context, a *AgentContext) error {
	st := a.State()
	var rerunIDs []string
	var rerun []llm.ToolCall
	for _, s := range openSteps(st) {
		switch s.Type {
		case projection.StepLLM:
			if err := a.Append(ctx, event.LLMFailed, event.LLMFailedData{StepID: s.ID, Code: event.CodeInterrupted,
				Error: "the node running this step stopped before it completed; the call is made again"}); err != nil {
				return err
			}
		case projection.StepTool:
			if s.Child != "" {
				continue // a sub-agent's: collectAgents below
			}
			call := stepCall(s)
			here, err := awaitService(ctx, a, s.ID, call)
			if err != nil {
				return err
			}
			if ctx.Err() != nil {
				if ownerStopping(ctx) {
					return nil // the next owner resumes the call
				}
				// Cancelled while it waited: the previous owner ran the call,
				// and its outcome is unknown. Written with agent.cancelled.
				if err := a.Stage(event.ToolFinished, toolFinished(s.ID, settled(call, event.CodeInterrupted, projection.InterruptedOutput))); err != nil {
					return err
				}
				continue
			}
			if r, found := a.Tools.Lookup(ctx, a.Session, s.CallID); found {
				finished, err := a.fitResult(ctx, toolFinished(s.ID, toolrunner.CallResult{Call: call, Result: r}))
				if err != nil {
					return err
				}
				if err := a.Append(ctx, event.ToolFinished, finished); err != nil {
					return err
				}
				continue
			}
			if s.Idempotent && here {
				rerunIDs, rerun = append(rerunIDs, s.ID), append(rerun, call)
				continue
			}
			if s.Idempotent {
				r := unavailable(ctx, call, a.Tools.waiter.ServiceWait())
				if err := a.Append(ctx, event.ToolFinished, toolFinished(s.ID, r)); err != nil {
					return err
				}
				continue
			}
			if err := a.Append(ctx, event.ToolFinished, toolFinished(s.ID, settled(call, event.CodeInterrupted, projection.InterruptedOutput))); err != nil {
				return err
			}
		}
	}
	if err := collectAgents(ctx, a); err != nil {
		return err
	}
	if len(rerun) > 0 {
		return runBatch(ctx, a, rerunIDs, rerun, nil)
	}
	return nil
}

// pendingCalls are the current turn's calls that never started. The loop
// asks before every step, so it reads only the current turn's records: the
// last ones, since a turn's calls are recorded after every earlier turn's
// (before, the scan of the whole session's calls grew each step's cost with
// the session).
func pendingCalls(st *projection.State) []llm.ToolCall {
	from := len(st.ToolCalls)
	for from > 0 && st.ToolCalls[from-1].Turn == st.Turn {
		from--
	}
	var out []llm.ToolCall
	for _, r := range st.ToolCalls[from:] {
		if r.Status == projection.StepPending && !r.HasResult {
			out = append(out, llm.ToolCall{ID: r.CallID, Name: r.Name, Arguments: r.Arguments})
		}
	}
	return out
}

func openSteps(st *projection.State) []projection.Step {
	var out []projection.Step
	for _, s := range st.Steps {
		if !s.Status.Done() && s.Turn == st.Turn {
			out = append(out, s)
		}
	}
	return out
}

func lastMessage(msgs []llm.Message) *llm.Message {
	if len(msgs) == 0 {
		return nil
	}
	return &msgs[len(msgs)-1]
}

// defaultCancelReason is agent.cancelled's reason when the cancel gave none.
const defaultCancelReason = "cancelled by the user"

// cancelled is the cause a cancel input gives the work's context: its
// reason, which agent.cancelled records.
type cancelled struct {
	reason string
	// by is the input that interrupted the turn (when_busy interrupt).
	by string
	// who sent the cancel, as NATS authenticated it (Command.By).
	who string
}

func (c cancelled) Error() string { return c.reason }

// interruptedBy is the input that interrupted the turn whose context ended,
// or "".
// cancelledBy is who sent the cancel that ended the turn whose context
// ended, when it is known, or "".
func cancelledBy(ctx context.Context) string {
	var c cancelled
	if errors.As(context.Cause(ctx), &c) {
		return c.who
	}
	return ""
}

func interruptedBy(ctx context.Context) string {
	var c cancelled
	if errors.As(context.Cause(ctx), &c) {
		return c.by
	}
	return ""
}

// cancelReason is the reason agent.cancelled records for a turn whose
// context ended: the cancel's, or what else stopped it.
func cancelReason(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c.Error()
	}
	return "cancelled"
}
