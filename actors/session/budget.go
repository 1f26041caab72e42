package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// Budgets (event/budget.go): the loop checks the limits in force before each
// LLM call and after each step (at the top of each of its rounds), and a
// time limit also as a deadline of the turn's context, so that a model call
// or a tool batch running when it passes is stopped then. A turn that
// reaches a limit gives each call still without a result a "not executed"
// result and fails with code budget_exceeded. A budget command (budget.set)
// changes the session's budget; a resume then reopens the turn
// (turn.reopened) once the budget allows it.

// ErrBudgetExceeded: a resume of a turn that failed at its budget, which
// the budget still does not allow: raise it first.
var ErrBudgetExceeded = errors.New("budget exceeded")

// budgetTime is the cause a time limit gives the turn's context when it
// passes.
type budgetTime struct{ limit event.BudgetReached }

func (b budgetTime) Error() string { return "the " + b.limit.Name() + " budget ran out" }

// budgetCause is the time limit that ended ctx, if one did.
func budgetCause(ctx context.Context) (event.BudgetReached, bool) {
	if ctx.Err() == nil {
		// Before bt: errors.As takes its address, which puts it on the
		// heap, and the loop asks at every step.
		return event.BudgetReached{}, false
	}
	var bt budgetTime
	if errors.As(context.Cause(ctx), &bt) {
		return bt.limit, true
	}
	return event.BudgetReached{}, false
}

// budgetDeadline is ctx with the deadline of the first time limit in force
// to run out, if any: its cause says which. stop releases it.
func budgetDeadline(ctx context.Context, a *AgentContext) (_ context.Context, stop func()) {
	st := a.State()
	now := a.now()
	spend := st.Spend(now)
	var first *event.BudgetReached
	var left time.Duration
	for _, l := range st.BudgetLimits() {
		if l.Kind != event.LimitTimeMS {
			continue
		}
		spent := spend.Turn.TimeMS
		if l.Scope == event.ScopeSession {
			spent = spend.Session.TimeMS
		}
		d := time.Duration(l.Limit-float64(spent)) * time.Millisecond
		if first == nil || d < left {
			l := l
			first, left = &l, d
		}
	}
	if first == nil || left <= 0 {
		return ctx, func() {} // none, or reached already: the loop's check ends the turn
	}
	return context.WithDeadlineCause(ctx, time.Now().Add(left), budgetTime{limit: *first})
}

// checkBudget ends the turn when it reached a limit in force, or when a
// time limit ended ctx, and reports whether it did.
func checkBudget(ctx context.Context, a *AgentContext) (ended bool, err error) {
	st := a.State()
	r := st.BudgetReached(a.now())
	if r == nil {
		if l, ok := budgetCause(ctx); ok {
			// The deadline passed a hair before the state's clock says so.
			l.Spent = l.Limit
			r = &l
		}
	}
	if r == nil {
		return false, nil
	}
	return true, failAtBudget(ctx, a, *r)
}

// failAtBudget ends the turn at limit r: every call of the turn still
// without a result gets a "not executed" result that says why (the history
// stays well formed for the model when the turn is reopened), then
// agent.failed of code budget_exceeded says which limit, at what figure.
func failAtBudget(ctx context.Context, a *AgentContext, r event.BudgetReached) error {
	st := a.State()
	for _, c := range pendingCalls(st) {
		out := fmt.Sprintf("Error: the call to %s did not run: %s.", c.Name, r)
		if err := a.Stage(event.ToolFinished, toolFinished("", settled(c, event.CodeNotExecuted, out))); err != nil {
			return err
		}
	}
	st = a.State()
	budgetReachedEvent(ctx, r)
	return a.Append(ctx, event.AgentFailed, event.AgentFailedData{Turn: st.Turn, Code: event.CodeBudgetExceeded, Steps: st.TurnLLMCalls,
		Budget: &r, Error: budgetAdvice(a.Session, r)})
}

// budgetAdvice is agent.failed's error for limit r: what was reached, and
// what to do next.
func budgetAdvice(sid string, r event.BudgetReached) string {
	if r.From == event.FromNode {
		key := r.Name()
		if r.Kind == event.LimitTimeMS { // agent.budget's time is a duration: its key has no _ms
			key = r.Scope + ".time"
		}
		return fmt.Sprintf("%s; the node's configuration (agent.budget.%s) is the tightest limit, which no session's budget raises: raise it there, then resume the session", r, key)
	}
	return fmt.Sprintf("%s; raise it (tahctl budget %s --%s-%s ..., or a budget command) and resume the session to go on", r, sid, r.Scope, event.KindWord(r.Kind))
}

// reopenAtBudget reopens the last turn, which failed at its budget, when
// the budget now allows it (turn.reopened): the resume then runs it on. It
// fails with ErrBudgetExceeded, writing nothing, when a limit still stops
// it, and returns that limit.
func reopenAtBudget(ctx context.Context, a *AgentContext) (*event.BudgetReached, error) {
	st := a.State()
	// The turn's time so far is what it ran before it failed (it stands
	// still between), so a time limit is reached until it is raised too.
	if r := st.BudgetReached(a.now()); r != nil {
		return r, fmt.Errorf("session %s: %s: %w", a.Session, budgetAdvice(a.Session, *r), ErrBudgetExceeded)
	}
	return nil, a.Append(ctx, event.TurnReopened, event.TurnReopenedData{Turn: st.Turn, After: event.CodeBudgetExceeded})
}

// reopenable reports whether st's last turn failed at its budget: a resume
// may reopen it.
func reopenable(st *projection.State) bool {
	return st.Status == projection.StatusFailed && st.LastCode == event.CodeBudgetExceeded
}

// setBudget carries out a budget command: the session's budget with change
// applied, and the current turn's own limits without those change names,
// in budget.set. The outcome's status is the session's.
func setBudget(ctx context.Context, a *AgentContext, change *wire.BudgetChange, by string) error {
	st := a.State()
	b, turn := change.Apply(st.Budget, st.TurnBudget)
	return a.Append(ctx, event.BudgetSet, event.BudgetSetData{Budget: b, TurnLimits: turn, By: by})
}
