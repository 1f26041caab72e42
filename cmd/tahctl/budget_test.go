package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
)

// The limit flags take what people type (100_000 tokens, $0.50, 90s) and
// refuse, with a sentence, what cannot be a limit.
func TestLimitFlags(t *testing.T) {
	parse := func(args ...string) (*limitFlags, error) {
		var lf limitFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		lf.register(fs, "", "0 removes the limit")
		return &lf, fs.Parse(args)
	}
	lf, err := parse("--turn-tokens", "100_000", "--session-cost", "$0.50", "--turn-time", "90s", "--session-tokens", "0")
	if err != nil {
		t.Fatal(err)
	}
	c := lf.change()
	if c == nil || c.Turn == nil || *c.Turn.Tokens != 100_000 || *c.Turn.TimeMS != 90_000 || c.Turn.CostUSD != nil ||
		c.Session == nil || *c.Session.CostUSD != 0.5 || *c.Session.Tokens != 0 || c.Session.TimeMS != nil {
		t.Fatalf("change %+v", c)
	}
	if b := lf.budget(); b == nil || *b != (event.Budget{Turn: event.Limits{Tokens: 100_000, TimeMS: 90_000}, Session: event.Limits{CostUSD: 0.5}}) {
		t.Fatalf("budget %+v", b)
	}
	if lf, _ := parse(); lf.change() != nil || lf.budget() != nil {
		t.Fatal("no flag is a change")
	}
	for args, want := range map[[2]string]string{
		{"--turn-tokens", "-1"}:     "a limit cannot be negative (0 means no limit)",
		{"--turn-tokens", "1.5"}:    "not a whole number of tokens",
		{"--session-cost", "NaN"}:   "not a number of US dollars",
		{"--session-cost", "-0.1"}:  "a limit cannot be negative",
		{"--turn-time", "10"}:       "not a duration",
		{"--turn-time", "-1s"}:      "a limit cannot be negative",
		{"--session-time", "500us"}: "under a millisecond",
	} {
		if _, err := parse(args[:]...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want %q", args, err, want)
		}
	}
}

// A limit stopped at says what raises it: the budget command for the
// session's and a turn's own, the node's setting for the node's.
func TestRaiseHint(t *testing.T) {
	for r, want := range map[event.BudgetReached]string{
		{Scope: "turn", Kind: event.LimitTokens, From: event.FromInput}:       "raise it: tahctl budget s_1 --turn-tokens N --resume",
		{Scope: "session", Kind: event.LimitCostUSD, From: event.FromSession}: "raise it: tahctl budget s_1 --session-cost USD --resume",
		{Scope: "turn", Kind: event.LimitTimeMS, From: event.FromSession}:     "raise it: tahctl budget s_1 --turn-time DURATION --resume",
		{Scope: "session", Kind: event.LimitCostUSD, From: event.FromNode}: "the node's agent.budget.session.cost_usd is the tightest limit, which no session's budget raises: " +
			"raise it on the nodes (tah-node --budget-session-cost-usd), then: tahctl resume s_1",
	} {
		if got := raiseHint("s_1", r); got != want {
			t.Errorf("%+v:\n got %s\nwant %s", r, got, want)
		}
	}
}
