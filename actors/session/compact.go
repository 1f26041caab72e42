package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// autoCompact summarises the turns before the current one (specification 0.31):
// once per turn, on success a summary before the current user message and
// agent.context.compacted, on failure agent.context.compact-failed and the loop
// falls back to trimming.
func autoCompact(ctx context.Context, a *AgentContext) error {
	msgs, offset, err := a.compactionView(ctx)
	if err != nil {
		return err
	}
	plan, ok := projection.PlanCompaction(msgs, true)
	if !ok {
		return nil
	}
	plan.At += offset
	content, call, err := summarise(ctx, a, plan)
	if err != nil {
		if ctx.Err() != nil {
			return nil // the loop records the cancel
		}
		return a.Append(ctx, event.ContextCompactFailed, compactFailed(a, call, err, true))
	}
	if err := a.Stage(event.SummaryAdded, event.SummaryAddedData{Content: content, At: plan.At, Turns: plan.Turns, Auto: true}); err != nil {
		return err
	}
	return a.Append(ctx, event.ContextCompacted, event.ContextCompactedData{SessionID: a.Session, Turns: plan.Turns,
		Chars: len([]rune(content)), Auto: true, CompactionCall: call})
}

// Compact is the specification's manual session.compact(): it summarises every
// turn so far and appends the summary at the end. It returns nil when there is no
// turn to compact. The caller makes sure no turn is running.
func Compact(ctx context.Context, a *AgentContext) (*wire.CompactResult, error) {
	msgs, _, err := a.compactionView(ctx)
	if err != nil {
		return nil, err
	}
	plan, ok := projection.PlanCompaction(msgs, false)
	if !ok {
		return nil, nil
	}
	// A compaction's call counts in its tenant's quotas as a step's does,
	// and is checked before it runs the same way: over a quota, no call.
	if q := reachedQuota(ctx, a); q != nil {
		return nil, &QuotaError{Quota: *q}
	}
	content, call, err := summarise(ctx, a, plan)
	if err != nil {
		if ctx.Err() == nil {
			if aerr := a.Append(ctx, event.ContextCompactFailed, compactFailed(a, call, err, false)); aerr != nil {
				return nil, aerr
			}
		}
		// The caller's reply and the node's log carry it: redacted as the event.
		return nil, fmt.Errorf("compaction: %w", llm.RedactError(err))
	}
	if err := a.Stage(event.SummaryAdded, event.SummaryAddedData{Content: content, At: -1, Turns: plan.Turns}); err != nil {
		return nil, err
	}
	res := &wire.CompactResult{Turns: plan.Turns, Chars: len([]rune(content))}
	if err := a.Append(ctx, event.ContextCompacted, event.ContextCompactedData{SessionID: a.Session, Turns: res.Turns,
		Chars: res.Chars, CompactionCall: call}); err != nil {
		return nil, err
	}
	return res, nil
}

// summarise asks the model for plan's summary: a step of its own (call names
// it, with the model, the usage, its cost and the duration, whatever the
// outcome), streamed as every model call is, since some providers serve only
// streams. Its deltas are not published: they are no part of the turn's
// answer. An answer that summarises nothing fails with
// projection.ErrEmptySummary.
func summarise(ctx context.Context, a *AgentContext, plan projection.CompactionPlan) (string, event.CompactionCall, error) {
	call := event.CompactionCall{StepID: a.NewStepID("llm")}
	begin := a.now()
	cctx, span := chatSpan(ctx, a, call.StepID, plan.Request, true)
	resp, err := llm.Run(cctx, a.Provider, plan.Request, func(llm.Delta) {})
	call.DurationMS = a.now().Sub(begin).Milliseconds()
	call.Model, call.Usage, call.Cost = resp.Model, resp.Usage, a.cost(plan.Request, resp)
	if err == nil {
		err = projection.CheckSummary(resp)
	}
	endChat(span, a, resp, err)
	if err != nil {
		return "", call, err
	}
	return projection.SummaryContent(resp.Content), call, nil
}

// compactFailed is the agent.context.compact-failed of a compaction whose
// call failed with err.
func compactFailed(a *AgentContext, call event.CompactionCall, err error, auto bool) event.ContextCompactFailedData {
	code := event.CodeProvider
	if errors.Is(err, projection.ErrEmptySummary) {
		code = event.CodeEmptySummary
	}
	// Redacted as failStep's, in case the provider did not.
	return event.ContextCompactFailedData{SessionID: a.Session, Error: llm.Redact(err.Error()), Auto: auto, Code: code, CompactionCall: call}
}
