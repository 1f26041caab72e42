package inspector

import (
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/wire"
)

// The header's budget: each limit with its spend in its kind's figures, a
// running turn's time up to now, the limit reached marked; once raised
// (budget.set) the limit reached is said apart, no longer marked.
func TestBudgetView(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	reached := event.BudgetReached{Scope: event.ScopeTurn, Kind: event.LimitTokens, From: event.FromInput, Limit: 250, Spent: 300}
	b := &wire.SessionBudget{Limits: []event.BudgetReached{reached,
		{Scope: event.ScopeTurn, Kind: event.LimitTimeMS, From: event.FromNode, Limit: 300000, Spent: 2000},
		{Scope: event.ScopeSession, Kind: event.LimitCostUSD, From: event.FromSession, Limit: 1, Spent: 0.42}},
		Reached: &reached, RunningSince: now.Add(-time.Minute)}
	v := budgetOf(b, now)
	want := []limitView{
		{Name: "turn.tokens", Label: "Turn tokens", Spent: "300", Limit: "250", Of: "the current (or last) turn", From: "the turn's input", Reached: true},
		{Name: "turn.time_ms", Label: "Turn time", Spent: "1m2s", Limit: "5m0s", Of: "the current (or last) turn", From: "the node's agent.budget"},
		{Name: "session.cost_usd", Label: "Session cost", Spent: "$0.42", Limit: "$1.00", Of: "the session's turns together", From: "the session's budget"},
	}
	if len(v.Limits) != len(want) || v.Stopped != "" {
		t.Fatalf("view %+v", v)
	}
	for i := range want {
		if v.Limits[i] != want[i] {
			t.Errorf("limit %d: %+v, want %+v", i, v.Limits[i], want[i])
		}
	}
	b.Limits[0].Limit, b.Limits[0].From = 1000, event.FromSession
	v = budgetOf(b, now)
	if v.Limits[0].Reached || v.Limits[0].Limit != "1,000" || v.Stopped != reached.String() {
		t.Errorf("raised: %+v", v)
	}
	if budgetOf(nil, now) != nil {
		t.Error("a budget without limits")
	}
}
