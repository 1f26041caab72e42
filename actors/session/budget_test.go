package session

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// pairedAndAudited is audited, and the history's calls each with its
// result; it returns the fold.
func pairedAndAudited(t *testing.T, m *Manager, sid string) projection.State {
	t.Helper()
	audited(t, m.bus, sid)
	st := fold(t, m.bus, sid)
	if err := llm.CheckPairing(st.Messages); err != nil {
		t.Fatalf("history: %v", err)
	}
	return st
}

func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }
func budgetCmd(c wire.BudgetChange) Command {
	return Command{Kind: wire.CommandBudget, Budget: &c, Decision: &wire.Decision{By: "ann"}}
}

// A turn's own token limit (its input's) stops it after the LLM step that
// reaches it: the calls that step asked for do not run and get a "not
// executed" result, the turn fails with budget_exceeded saying which limit
// at what figure. A resume is refused while the budget still stops it
// (nothing written); a budget command raises it, and a resume reopens the
// turn, which runs to its answer.
func TestTokenBudgetStopsTheTurnAndARaiseResumesIt(t *testing.T) {
	b := openBus(t)
	u := llm.Usage{InputTokens: 80, OutputTokens: 20}
	p := mock.Scripted(
		mock.CallTool("echo", `{"n":1}`).WithUsage(u),
		mock.CallTool("echo", `{"n":2}`).WithUsage(u),
		mock.CallTool("echo", `{"n":3}`).AndCall("echo", `{"n":4}`).WithUsage(u),
		mock.Say("done").WithUsage(u))
	tt := &testTools{}
	m := startManager(t, b, p, Config{}, tt.config())
	Create(context.Background(), b, "s1", Config{}, nil)
	cmd := run("work")
	cmd.TurnBudget = &event.Limits{Tokens: 250}
	o := do(t, m, "s1", cmd)
	want := event.BudgetReached{Scope: event.ScopeTurn, Kind: event.LimitTokens, From: event.FromInput, Limit: 250, Spent: 300}
	if o.Err != nil || o.Status != projection.StatusFailed || o.Code != event.CodeBudgetExceeded || o.Budget == nil || *o.Budget != want ||
		!strings.Contains(o.Error, "tahctl budget s1 --turn-tokens") {
		t.Fatalf("outcome %+v (budget %+v)", o, o.Budget)
	}
	if tt.ran() != 2 {
		t.Fatalf("%d calls ran, want the first two (the third step's were over the budget)", tt.ran())
	}
	st := pairedAndAudited(t, m, "s1")
	for _, r := range st.ToolCalls[2:] {
		if !r.HasResult || r.Code != event.CodeNotExecuted {
			t.Fatalf("call over the budget: %+v", r)
		}
	}

	before := len(types(t, b, "s1"))
	o = do(t, m, "s1", Command{Kind: wire.CommandResume})
	if !errors.Is(o.Err, ErrBudgetExceeded) || o.Wire().FailureCode != wire.FailureBudgetExceeded || !strings.Contains(o.Err.Error(), "turn's token limit of 250") {
		t.Fatalf("resume before a raise: %+v", o)
	}
	if after := len(types(t, b, "s1")); after != before {
		t.Fatalf("a refused resume wrote %d events", after-before)
	}

	o = do(t, m, "s1", budgetCmd(wire.BudgetChange{Turn: &wire.LimitsChange{Tokens: i64(1000)}}))
	if o.Err != nil || o.Status != projection.StatusFailed {
		t.Fatalf("budget: %+v", o)
	}
	st = fold(t, b, "s1")
	if st.Budget.Turn.Tokens != 1000 || st.TurnBudget.Tokens != 0 {
		t.Fatalf("after the raise: session budget %+v, the turn's own %+v", st.Budget, st.TurnBudget)
	}
	o = do(t, m, "s1", Command{Kind: wire.CommandResume})
	if o.Err != nil || o.Status != projection.StatusCompleted || o.Content != "done" || o.Turn != 1 || o.Steps != 4 ||
		o.Usage != (llm.Usage{InputTokens: 320, OutputTokens: 80}) {
		t.Fatalf("resume after the raise: %+v", o)
	}
	if got := types(t, b, "s1"); !contains(got, event.BudgetSet) || !contains(got, event.TurnReopened) {
		t.Fatalf("events %v", got)
	}
	pairedAndAudited(t, m, "s1")
}

// A session's own cost limit (set at create) counts every turn: the second
// turn is stopped before its first LLM call once the first spent it, and
// the failure names the session's limit. A new run is stopped alike until
// the limit is raised.
func TestSessionCostBudgetStopsTheNextTurn(t *testing.T) {
	b := openBus(t)
	tab, err := pricing.Parse([]byte(`{"defaults": false, "prices": [{"provider": "mock", "model": "m", "input": 10, "output": 10}]}`))
	if err != nil {
		t.Fatal(err)
	}
	u := llm.Usage{InputTokens: 1000, OutputTokens: 1000} // $0.02 a call
	p := mock.Scripted(mock.Say("one").WithUsage(u).WithModel("m"), mock.Say("two").WithUsage(u).WithModel("m"))
	m := newManager(t, b, p, Config{Model: "m", Prices: tab})
	if _, err := CreateWithBudget(context.Background(), b, "s1", Config{}, nil, &event.Budget{Session: event.Limits{CostUSD: 0.01}}); err != nil {
		t.Fatal(err)
	}
	if o := do(t, m, "s1", run("first")); o.Status != projection.StatusCompleted {
		t.Fatalf("turn 1, under the limit when it began: %+v", o)
	}
	o := do(t, m, "s1", run("second"))
	if o.Status != projection.StatusFailed || o.Code != event.CodeBudgetExceeded || o.Budget == nil ||
		o.Budget.Scope != event.ScopeSession || o.Budget.Kind != event.LimitCostUSD || o.Budget.From != event.FromSession || o.Steps != 0 {
		t.Fatalf("turn 2: %+v (budget %+v)", o, o.Budget)
	}
	do(t, m, "s1", budgetCmd(wire.BudgetChange{Session: &wire.LimitsChange{CostUSD: f64(0)}}))
	if o := do(t, m, "s1", Command{Kind: wire.CommandResume}); o.Status != projection.StatusCompleted || o.Content != "two" || o.Turn != 2 {
		t.Fatalf("resume with the limit removed: %+v", o)
	}
	pairedAndAudited(t, m, "s1")
}

// The node's turn time limit passes while a parallel batch of calls runs:
// the calls are stopped then, every one gets its result, and the turn fails
// naming the node's limit, which no session's budget raises.
func TestTimeBudgetStopsAParallelBatch(t *testing.T) {
	b := openBus(t)
	p := mock.Scripted(mock.CallTool("block", `{"n":1}`).AndCall("block", `{"n":2}`), mock.Say("never"))
	m := newManager(t, b, p, Config{Budget: event.Budget{Turn: event.Limits{TimeMS: 1500}}})
	Create(context.Background(), b, "s1", Config{}, nil)
	o := do(t, m, "s1", run("wait"))
	if o.Status != projection.StatusFailed || o.Code != event.CodeBudgetExceeded || o.Budget == nil ||
		o.Budget.Kind != event.LimitTimeMS || o.Budget.From != event.FromNode || o.Budget.Spent < 1500 || !strings.Contains(o.Error, "agent.budget.turn.time") {
		t.Fatalf("%+v (budget %+v)", o, o.Budget)
	}
	st := pairedAndAudited(t, m, "s1")
	if len(st.ToolCalls) != 2 {
		t.Fatalf("calls %+v", st.ToolCalls)
	}
	for _, r := range st.ToolCalls {
		if !r.HasResult {
			t.Fatalf("call without its result: %+v", r)
		}
	}
	if st.TurnTimeMS < 1500 || st.TimeMS != st.TurnTimeMS {
		t.Fatalf("time run: turn %d ms, session %d ms", st.TurnTimeMS, st.TimeMS)
	}
	// A session's budget cannot raise the node's limit.
	do(t, m, "s1", budgetCmd(wire.BudgetChange{Turn: &wire.LimitsChange{TimeMS: i64(int64(time.Hour / time.Millisecond))}}))
	o = do(t, m, "s1", Command{Kind: wire.CommandResume})
	if !errors.Is(o.Err, ErrBudgetExceeded) || !strings.Contains(o.Err.Error(), "node's configuration") ||
		o.Budget == nil || o.Budget.From != event.FromNode || o.Budget.Kind != event.LimitTimeMS {
		t.Fatalf("resume: %+v", o)
	}
}

// The session's own turn time limit stops a call that blocks; raised, a
// resume reopens the turn, whose time so far stays counted, and runs it to
// its answer.
func TestTimeBudgetRaisedAndResumed(t *testing.T) {
	b := openBus(t)
	p := mock.Scripted(mock.CallTool("block", `{}`), mock.Say("done"))
	m := newManager(t, b, p, Config{})
	if _, err := CreateWithBudget(context.Background(), b, "s1", Config{}, nil, &event.Budget{Turn: event.Limits{TimeMS: 1000}}); err != nil {
		t.Fatal(err)
	}
	o := do(t, m, "s1", run("wait"))
	if o.Code != event.CodeBudgetExceeded || o.Budget == nil || o.Budget.Kind != event.LimitTimeMS || o.Budget.From != event.FromSession {
		t.Fatalf("%+v (budget %+v)", o, o.Budget)
	}
	ran := fold(t, b, "s1").TurnTimeMS
	do(t, m, "s1", budgetCmd(wire.BudgetChange{Turn: &wire.LimitsChange{TimeMS: i64(ran + int64(time.Hour/time.Millisecond))}}))
	o = do(t, m, "s1", Command{Kind: wire.CommandResume})
	if o.Err != nil || o.Status != projection.StatusCompleted || o.Content != "done" {
		t.Fatalf("resume: %+v", o)
	}
	if st := pairedAndAudited(t, m, "s1"); st.TurnTimeMS < ran || st.TimeMS != st.TurnTimeMS {
		t.Fatalf("time run: turn %d ms (%d before the raise), session %d ms", st.TurnTimeMS, ran, st.TimeMS)
	}
}
