package tah_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tah-dev/tah"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/tools"
)

// TestBudgetThroughTheGoAPI: a session created with a budget of its own
// (CreateWith) has its turn stopped at its turn token limit, the RunResult
// saying which; Resume is refused with ErrBudgetExceeded until SetBudget
// raises it, and then runs the same turn to its answer. A turn's own limit
// (WithBudget), tighter, stops the next turn; the node's (AgentOptions)
// is in force beside them.
func TestBudgetThroughTheGoAPI(t *testing.T) {
	ctx := ctxT(t)
	u := llm.Usage{InputTokens: 200, OutputTokens: 100}
	tool := &counter{name: "count"}
	p := mock.Scripted(
		mock.CallTool("count", `{"n":1}`).WithUsage(u), // turn 1: 300 tokens, over the session's turn limit of 250
		mock.Say("counted").WithUsage(u),               // turn 1 resumed
		mock.CallTool("count", `{"n":2}`).WithUsage(u), // turn 2: over its own limit of 100
	)
	rt := env{dir: t.TempDir(), provider: p, tools: []tools.Tool{tool},
		agent: tah.AgentOptions{Budget: tah.Budget{Session: tah.Limits{Tokens: 100_000}}}}.start(t)
	sessions := tah.Get(rt, tah.SessionKey)
	s, err := sessions.CreateWith(ctx, tah.CreateOptions{Labels: map[string]string{"team": "a"}, Budget: &tah.Budget{Turn: tah.Limits{Tokens: 250}}})
	if err != nil {
		t.Fatal(err)
	}

	if st, err := s.Snapshot(ctx); err != nil || st.Labels["team"] != "a" {
		t.Fatalf("created with labels %v: %v", st.Labels, err)
	}
	r, err := s.Run(ctx, "count")
	want := tah.BudgetReached{Scope: event.ScopeTurn, Kind: event.LimitTokens, From: event.FromSession, Limit: 250, Spent: 300}
	if err != nil || r.State != tah.StateFailed || r.Code != event.CodeBudgetExceeded || r.Budget == nil || *r.Budget != want {
		t.Fatalf("run: %+v (budget %+v) %v", r, r.Budget, err)
	}
	if tool.runs.Load() != 0 {
		t.Fatalf("the call over the budget ran %d times", tool.runs.Load())
	}
	if _, err := s.Resume(ctx); !errors.Is(err, tah.ErrBudgetExceeded) || !strings.Contains(err.Error(), "turn's token limit of 250") {
		t.Fatalf("resume before a raise: %v", err)
	}

	if err := s.SetBudget(ctx, tah.BudgetChange{Turn: &tah.LimitsChange{Tokens: new(int64(1000))}}); err != nil {
		t.Fatal(err)
	}
	b, err := s.Budget(ctx)
	if err != nil || b == nil || len(b.Limits) != 2 ||
		b.Limits[0] != (tah.BudgetReached{Scope: event.ScopeTurn, Kind: event.LimitTokens, From: event.FromSession, Limit: 1000, Spent: 300}) ||
		b.Limits[1] != (tah.BudgetReached{Scope: event.ScopeSession, Kind: event.LimitTokens, From: event.FromNode, Limit: 100_000, Spent: 300}) {
		t.Fatalf("the budget after the raise: %+v %v", b, err)
	}
	r, err = s.Resume(ctx)
	if err != nil || r.State != tah.StateCompleted || r.Content != "counted" || r.Turn != 1 || r.Budget != nil {
		t.Fatalf("resume after the raise: %+v %v", r, err)
	}

	r, err = s.Run(ctx, "count again", tah.WithBudget(tah.Limits{Tokens: 100}))
	want = tah.BudgetReached{Scope: event.ScopeTurn, Kind: event.LimitTokens, From: event.FromInput, Limit: 100, Spent: 300}
	if err != nil || r.State != tah.StateFailed || r.Turn != 2 || r.Budget == nil || *r.Budget != want {
		t.Fatalf("a turn's own limit: %+v (budget %+v) %v", r, r.Budget, err)
	}

	// What cannot be a budget is told before anything is sent.
	if _, err := s.Run(ctx, "x", tah.WithBudget(tah.Limits{Tokens: -1})); !errors.Is(err, client.ErrMalformedInput) {
		t.Errorf("a negative turn limit: %v", err)
	}
	if err := s.SetBudget(ctx, tah.BudgetChange{}); !errors.Is(err, client.ErrMalformedInput) {
		t.Errorf("a change of nothing: %v", err)
	}
	if _, err := sessions.CreateWith(ctx, tah.CreateOptions{Budget: &tah.Budget{Session: tah.Limits{CostUSD: -1}}}); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("a negative session limit at create: %v", err)
	}
	nats := bus.Default()
	nats.DataDir, nats.Port = t.TempDir(), -1
	bad := tah.New().Use(tah.NATS(nats)).Use(tah.Agent(tah.AgentOptions{Budget: tah.Budget{Turn: tah.Limits{TimeMS: -5}}}))
	if err := bad.Start(ctx); err == nil || !strings.Contains(err.Error(), "plugin agent: agent: Budget") {
		t.Errorf("a negative node limit: %v", err)
		bad.Close(ctx)
	}
}
