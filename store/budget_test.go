package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/wire"
)

// budgetLog is a session with a budget from each source: its own (a session
// cost limit of $1), the node's (turn tokens 1,000 and turn time one minute,
// as its claim records it) and its first turn's (tokens 20, the tightest).
// That turn reaches its token limit (30 tokens after two calls) and fails
// at it. With reopen, the budget is raised (budget.set: turn tokens 100 for
// the session, the turn's own removed) and the turn reopened, to run a call
// more, still running at the end.
func budgetLog(t testing.TB, id string, reopen bool) []event.Event {
	b := &sessionLog{t: t, id: id}
	b.add(event.SessionCreated, event.SessionCreatedData{Budget: &event.Budget{Session: event.Limits{CostUSD: 1}}})
	node := event.Config{Budget: &event.Budget{Turn: event.Limits{Tokens: 1000, TimeMS: 60000}}}
	b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n1", Config: node})
	b.turn++
	b.add(event.TurnStarted, event.TurnStartedData{Turn: b.turn, Message: llm.User("spend"), Budget: &event.Limits{Tokens: 20}})
	c := call("c1", "list_files", `{}`)
	b.llm("", c).tool(c, "a.txt").llm("listed")
	b.add(event.AgentFailed, event.AgentFailedData{Turn: b.turn, Error: "the turn's token limit of 20 is reached",
		Code: event.CodeBudgetExceeded, Steps: 2,
		Budget: &event.BudgetReached{Scope: event.ScopeTurn, Kind: event.LimitTokens, From: event.FromInput, Limit: 20, Spent: 30}})
	if reopen {
		b.add(event.BudgetSet, event.BudgetSetData{Budget: event.Budget{Turn: event.Limits{Tokens: 100}, Session: event.Limits{CostUSD: 1}}, By: "ann"})
		b.add(event.TurnReopened, event.TurnReopenedData{Turn: b.turn, After: event.CodeBudgetExceeded})
		b.llm("more")
	}
	return b.events
}

// The read model keeps a session's limits in force with what each has
// spent, and the limit its last turn reached: the row of tah.api.get and
// list says them (wire.SessionBudget) as the fold does, through a reopen of
// the store (the state from its snapshot and tail) and a rebuild from the
// log on a new file.
func TestRowKeepsBudgetAndSpend(t *testing.T) {
	ctx := context.Background()
	failed, running := budgetLog(t, "s_failed", false), budgetLog(t, "s_running", true)
	evs := merge(failed, running)
	path := filepath.Join(t.TempDir(), "data.db")
	s := openAt(t, path, Options{CacheSize: 1})
	apply(t, s, evs, 4)

	// Each call of budgetLog costs 15 tokens, the first two $0.000045
	// each, the third no price; events are a second apart, the failed turn
	// ran from the 3rd to the 10th.
	turnTokens := func(spent float64) event.BudgetReached {
		return event.BudgetReached{Scope: event.ScopeTurn, Kind: event.LimitTokens, From: event.FromInput, Limit: 20, Spent: spent}
	}
	reached := turnTokens(30)
	wantFailed := &wire.SessionBudget{
		Limits: []event.BudgetReached{
			reached,
			{Scope: event.ScopeTurn, Kind: event.LimitTimeMS, From: event.FromNode, Limit: 60000, Spent: 7000},
			{Scope: event.ScopeSession, Kind: event.LimitCostUSD, From: event.FromSession, Limit: 1, Spent: 0.00009},
		},
		Reached: &reached,
	}
	wantRunning := &wire.SessionBudget{
		Limits: []event.BudgetReached{
			{Scope: event.ScopeTurn, Kind: event.LimitTokens, From: event.FromSession, Limit: 100, Spent: 45},
			{Scope: event.ScopeTurn, Kind: event.LimitTimeMS, From: event.FromNode, Limit: 60000, Spent: 7000},
			{Scope: event.ScopeSession, Kind: event.LimitCostUSD, From: event.FromSession, Limit: 1, Spent: 0.00009},
		},
		// turn.reopened, the 12th event of its session.
		RunningSince: t0.Add(12 * time.Second),
	}
	check := func(when string) {
		t.Helper()
		for sid, want := range map[string]*wire.SessionBudget{"s_failed": wantFailed, "s_running": wantRunning} {
			row, err := s.GetSession(ctx, sid)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, when+": "+sid+" budget", row.Budget, want)
			page, err := s.ListSessions(ctx, ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Sessions {
				if r.ID == sid {
					sameJSON(t, when+": "+sid+" listed budget", r.Budget, want)
				}
			}
		}
		checkEquivalent(t, s, evs)
	}
	check("folded")
	if !wantFailed.IsReached(wantFailed.Limits[0]) || wantFailed.IsReached(wantFailed.Limits[1]) {
		t.Error("the reached limit is not told apart")
	}
	if got := wantRunning.SpentAt(wantRunning.Limits[1], wantRunning.RunningSince.Add(1500*time.Millisecond)); got != 8500 {
		t.Errorf("the running turn's time 1.5s later: %v ms", got)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{CacheSize: 1})
	check("reopened")

	s = openTest(t, Options{})
	apply(t, s, evs, len(evs))
	check("rebuilt")

	// A session without a limit has no budget.
	plain := newSession(t, "s_plain", event.Config{}, nil).userTurn("hi").llm("hello").finish("hello")
	apply(t, s, copyLog(plain.events, "after", uint64(len(evs))), 100) // sequences after the others'
	if row, err := s.GetSession(ctx, "s_plain_after"); err != nil || row.Budget != nil {
		t.Fatalf("a session without a limit: %+v, %v", row.Budget, err)
	}
}

// A read model of schema 7 is migrated: its rows have no budget until their
// session's next write, which gives them theirs.
func TestMigrationFrom7KeepsRowsAndAddsTheBudget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range migrations[:7] {
		if _, err := db.Exec(m); err != nil {
			t.Fatalf("migration %d: %v", i+1, err)
		}
	}
	if _, err := db.Exec(`PRAGMA user_version = 7`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO sessions (id, status, turn, cost_usd) VALUES ('s_old', 'failed', 1, 0.5)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s := openAt(t, path, Options{})
	if v := userVersion(t, path); v != SchemaVersion() {
		t.Fatalf("user_version %d, want %d", v, SchemaVersion())
	}
	row, err := s.GetSession(context.Background(), "s_old")
	if err != nil || row.Budget != nil || row.Cost.USD != 0.5 {
		t.Fatalf("the row of before: %+v, %v", row, err)
	}
	evs := budgetLog(t, "s_new", false)
	apply(t, s, evs, 5)
	if row, err := s.GetSession(context.Background(), "s_new"); err != nil || row.Budget == nil || row.Budget.Reached == nil {
		t.Fatalf("a session written after: %+v, %v", row.Budget, err)
	}
}
