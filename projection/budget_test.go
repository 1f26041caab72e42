package projection

import (
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// The limits in force are the tightest of the node's, the session's and
// the turn's own, each saying where it comes from; the spend counts the
// time a turn ran, not the time it stood failed before its reopen.
func TestBudgetLimitsAndSpend(t *testing.T) {
	node := &event.Budget{Turn: event.Limits{Tokens: 500, TimeMS: 60_000}, Session: event.Limits{CostUSD: 10}}
	b := newLog(t, "s1", event.Config{MaxSteps: 20, Budget: node})
	b.add(event.BudgetSet, event.BudgetSetData{Budget: event.Budget{Turn: event.Limits{Tokens: 900, CostUSD: 1}, Session: event.Limits{CostUSD: 2}}})
	b.add(event.TurnStarted, event.TurnStartedData{Turn: 1, Message: llm.User("go"), Budget: &event.Limits{Tokens: 200}}) // at t0+3s
	got := b.st.BudgetLimits()
	want := []event.BudgetReached{
		{Scope: "turn", Kind: "tokens", From: "input", Limit: 200},
		{Scope: "turn", Kind: "cost_usd", From: "session", Limit: 1},
		{Scope: "turn", Kind: "time_ms", From: "node", Limit: 60_000},
		{Scope: "session", Kind: "cost_usd", From: "session", Limit: 2},
	}
	if jsonOf(t, got) != jsonOf(t, want) {
		t.Fatalf("limits %s, want %s", jsonOf(t, got), jsonOf(t, want))
	}
	b.add(event.AgentFailed, event.AgentFailedData{Turn: 1, Code: event.CodeBudgetExceeded, Error: "over",
		Budget: &event.BudgetReached{Scope: "turn", Kind: "tokens", From: "input", Limit: 200, Spent: 250}}) // t0+4s
	if s := b.st.Spend(t0.Add(time.Hour)); s.Turn.TimeMS != 1000 || s.Session.TimeMS != 1000 {
		t.Fatalf("spend while failed %+v", s)
	}
	b.add(event.TurnReopened, event.TurnReopenedData{Turn: 1, After: event.CodeBudgetExceeded}) // t0+5s
	if b.st.Status != StatusRunning || b.st.LastBudget != nil {
		t.Fatalf("after the reopen: %s %+v", b.st.Status, b.st.LastBudget)
	}
	if s := b.st.Spend(t0.Add(7 * time.Second)); s.Turn.TimeMS != 3000 || s.Session.TimeMS != 3000 {
		t.Fatalf("spend while running again %+v", s)
	}
	b.add(event.AgentFinished, event.AgentFinishedData{Turn: 1, Content: "ok"}) // t0+6s
	if b.st.TurnTimeMS != 2000 || b.st.TimeMS != 2000 {
		t.Fatalf("turn %d ms, session %d ms", b.st.TurnTimeMS, b.st.TimeMS)
	}
	rep := Audit(b.events)
	for _, p := range rep.Problems {
		if !strings.Contains(p.What, "before any session.claimed") { // the builder claims nothing
			t.Fatalf("audit: %s", p)
		}
	}
	if len(rep.Turns) != 1 || len(rep.Turns[0].Reopened) != 1 || len(rep.Turns[0].Ends) != 1 {
		t.Fatalf("audit turns %+v", rep.Turns)
	}
}

// Only a turn that failed at its budget is reopened: the fold refuses any
// other, and the audit reports it.
func TestOnlyATurnFailedAtItsBudgetReopens(t *testing.T) {
	b := newLog(t, "s1", event.Config{})
	b.turn(1, "go").add(event.AgentFailed, event.AgentFailedData{Turn: 1, Code: event.CodeProvider, Error: "down"})
	e, err := event.New("s1", event.TurnReopened, event.TurnReopenedData{Turn: 1, After: event.CodeBudgetExceeded})
	if err != nil {
		t.Fatal(err)
	}
	e.Seq = 99
	st := b.st
	if err := Apply(&st, e); err == nil || !strings.Contains(err.Error(), "not failed at its budget") {
		t.Fatalf("fold: %v", err)
	}
	rep := Audit(append(b.events, e))
	if !strings.Contains(rep.Problems.String(), "reopens turn 1, which ended with agent.failed at seq 3, not failed at its budget") {
		t.Fatalf("audit: %s", rep.Problems)
	}
}
