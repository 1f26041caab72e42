package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/wire"
)

func i64(v int64) *int64 { return &v }

// A run's own token limit (options.budget) stops its turn: the outcome says
// which limit at what figure. A resume is refused with ErrBudgetExceeded
// while the limit still stops it; SetBudget raises it (budget.set, with who
// did), and a resume then runs the same turn to its answer.
func TestSetBudgetThenResumeRunsTheStoppedTurnOn(t *testing.T) {
	ctx := ctxT(t)
	u := llm.Usage{InputTokens: 200, OutputTokens: 100}
	n := startNode(t, mock.Scripted(mock.CallTool("echo", `{"n":1}`).WithUsage(u), mock.Say("done").WithUsage(u)))
	c := connect(t, n)
	sid := newSession(t, c)

	run, err := c.Run(ctx, sid, wire.Input{Text: "work", Options: &wire.RunOptions{Budget: &event.Limits{Tokens: 250}}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	o, err := run.Outcome(ctx)
	want := event.BudgetReached{Scope: event.ScopeTurn, Kind: event.LimitTokens, From: event.FromInput, Limit: 250, Spent: 300}
	if err != nil || o.Status != "failed" || o.Code != event.CodeBudgetExceeded || o.Budget == nil || *o.Budget != want {
		t.Fatalf("run: %+v (budget %+v) %v", o, o.Budget, err)
	}

	resume, err := c.Resume(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	defer resume.Close()
	o, err = resume.Outcome(ctx)
	var ce *client.CommandError
	if !errors.Is(err, client.ErrBudgetExceeded) || !errors.As(err, &ce) || ce.Code != wire.FailureBudgetExceeded ||
		!strings.Contains(ce.Message, "turn's token limit of 250") || o.FailureCode != wire.FailureBudgetExceeded {
		t.Fatalf("resume before a raise: %+v %v", o, err)
	}

	o, err = c.SetBudget(ctx, sid, wire.BudgetChange{Turn: &wire.LimitsChange{Tokens: i64(1000)}}, "ann")
	if err != nil || o.Status != "failed" || o.LastSeq == 0 {
		t.Fatalf("set budget: %+v %v", o, err)
	}
	var set *event.BudgetSetData
	for ev, err := range c.Log(ctx, sid, o.LastSeq) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == event.BudgetSet {
			d, _ := event.DecodeAs[event.BudgetSetData](ev)
			set = &d
		}
	}
	if set == nil || set.Budget.Turn.Tokens != 1000 || set.TurnLimits.Tokens != 0 || set.By != "admin" { // the credential's name, not the body's "ann"
		t.Fatalf("budget.set at %d: %+v", o.LastSeq, set)
	}

	resume, err = c.Resume(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	defer resume.Close()
	o, err = resume.Outcome(ctx)
	if err != nil || o.Status != "completed" || o.Content != "done" || o.Budget != nil {
		t.Fatalf("resume after a raise: %+v %v", o, err)
	}
}

// SetBudget tells a change of nothing, a negative limit and an unknown
// session before it sends anything.
func TestSetBudgetRefusals(t *testing.T) {
	ctx := ctxT(t)
	c := connect(t, startNode(t, mock.Scripted()))
	sid := newSession(t, c)
	if _, err := c.SetBudget(ctx, sid, wire.BudgetChange{}, ""); !errors.Is(err, client.ErrMalformedInput) {
		t.Errorf("a change of nothing: %v", err)
	}
	if _, err := c.SetBudget(ctx, sid, wire.BudgetChange{Session: &wire.LimitsChange{Tokens: i64(-1)}}, ""); !errors.Is(err, client.ErrMalformedInput) {
		t.Errorf("a negative limit: %v", err)
	}
	if _, err := c.SetBudget(ctx, "s_00000000000000000000", wire.BudgetChange{Session: &wire.LimitsChange{Tokens: i64(5)}}, ""); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("an unknown session: %v", err)
	}
}
