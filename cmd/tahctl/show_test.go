package main

import (
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// show says where a session's log stopped being foldable, and what to do.
func TestShowFault(t *testing.T) {
	var b strings.Builder
	showFault(&b, style{}, "s_1", &projection.Fault{Code: projection.FaultCorruptLog, Seq: 118, Reason: "not JSON"})
	for _, want := range []string{"Failed: log corrupt at seq 118: not JSON [corrupt_log]", "tahctl fork s_1 [--turns N]"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("corrupt: %q does not say %q", b.String(), want)
		}
	}
	b.Reset()
	showFault(&b, style{}, "s_1", &projection.Fault{Code: projection.FaultNeedsNewerNode, Seq: 7, Reason: "version 3"})
	if !strings.Contains(b.String(), "Needs a newer node: the log at seq 7") || !strings.Contains(b.String(), "upgrade") {
		t.Errorf("newer: %q", b.String())
	}
}

// show marks the model calls of compactions and what trimming cut.
func TestShowMarksCompactionsAndTrims(t *testing.T) {
	compaction := projection.Step{Type: projection.StepLLM, Compaction: true, Status: projection.StepCompleted,
		Response: &llm.Response{Usage: llm.Usage{InputTokens: 2185, OutputTokens: 120}}}
	tokens, detail := stepDetail(style{}, compaction)
	if stepKind(compaction) != "llm compaction" || tokens != "2,185 → 120" || detail != "summary of earlier turns" {
		t.Errorf("compaction: %q, %q, %q", stepKind(compaction), tokens, detail)
	}
	trimmed := projection.Step{Type: projection.StepLLM, Status: projection.StepCompleted, Response: &llm.Response{Content: "ok"},
		Trim: &event.TrimReport{Budget: 300, BeforeChars: 1200, AfterChars: 280, TurnsDropped: 2, OutputsOmitted: 1}}
	if _, detail := stepDetail(style{}, trimmed); detail != `[trimmed: 2 turns dropped, 1 tool output omitted, 1,200 → 280 chars] "ok"` {
		t.Errorf("trim: %q", detail)
	}
	if stepKind(trimmed) != "llm" {
		t.Errorf("kind %q", stepKind(trimmed))
	}
}

// show tells a tool output that the log keeps only the start of as cut, not
// by the line count of that start (74 lines, for a 510-line file).
func TestShowTellsACutOutputAsCut(t *testing.T) {
	brief := "# TAH\n\nline\nline\n[… 74 lines, 4230 characters in all]"
	cut := projection.Step{Type: projection.StepTool, Tool: "read_file", Status: projection.StepCompleted, Output: brief,
		Artifact: &event.ArtifactRef{Object: "calls/s_1/c1/output.txt", Size: 36828}}
	_, detail := stepDetail(style{}, cut)
	if strings.Contains(detail, "74 lines") || !strings.Contains(detail, "→ cut: # TAH, line") || !strings.Contains(detail, "36,828 bytes") {
		t.Errorf("a cut output: %q", detail)
	}
	// An output kept whole, with an artifact the tool made: as it is.
	made := projection.Step{Type: projection.StepTool, Tool: "write_file", Status: projection.StepCompleted, Output: brief,
		Artifact: &event.ArtifactRef{Object: "calls/s_1/c2/notes/plan.md", Size: 36828}}
	if _, detail := stepDetail(style{}, made); !strings.Contains(detail, "74 lines: # TAH") {
		t.Errorf("an output kept whole: %q", detail)
	}
}

// show gives each model call its recorded cost, "?" to one logged before
// costs were recorded, and sums them by turn: the last ten turns named.
func TestShowCosts(t *testing.T) {
	used := &llm.Response{Usage: llm.Usage{InputTokens: 10, OutputTokens: 2}}
	var steps []projection.Step
	for turn := 1; turn <= 12; turn++ {
		steps = append(steps,
			projection.Step{Type: projection.StepLLM, Turn: turn, Response: used, Cost: &pricing.Cost{USD: 0.25}},
			projection.Step{Type: projection.StepTool, Turn: turn},
			projection.Step{Type: projection.StepLLM, Turn: turn, Response: used, Cost: &pricing.Cost{Unpriced: 1}})
	}
	old := projection.Step{Type: projection.StepLLM, Turn: 1, Response: used}
	for step, want := range map[*projection.Step]string{&steps[0]: "$0.25", &steps[1]: "", &steps[2]: "no price", &old: "?"} {
		if got := stepCost(*step); got != want {
			t.Errorf("cost of %+v: %q, want %q", step, got, want)
		}
	}
	turns := turnCosts(steps)
	if len(turns) != 12 || turns[0].Cost != (pricing.Cost{USD: 0.25, Unpriced: 1}) || turns[0].Usage.InputTokens != 20 {
		t.Fatalf("turns %+v", turns)
	}
	note := turnsNote(turns)
	if !strings.HasPrefix(note, " (2 turns before, turn 3 $0.25 + 1 call without a price, ") ||
		!strings.HasSuffix(note, "turn 12 $0.25 + 1 call without a price)") {
		t.Errorf("note %q", note)
	}
	if turnsNote(turns[:1]) != "" {
		t.Error("a session of one turn lists no turn")
	}
}

// show's Budget line: each limit in force with what its scope spent and
// where it was set, "reached" on the one the last turn stopped at, a
// running turn's time carried on to now; the limit reached said apart when
// it has been raised since; nothing without a budget.
func TestShowBudget(t *testing.T) {
	reached := event.BudgetReached{Scope: event.ScopeTurn, Kind: event.LimitTokens, From: event.FromInput, Limit: 250, Spent: 300}
	b := &wire.SessionBudget{Limits: []event.BudgetReached{
		reached,
		{Scope: event.ScopeTurn, Kind: event.LimitTimeMS, From: event.FromNode, Limit: 300000, Spent: 0},
		{Scope: event.ScopeSession, Kind: event.LimitCostUSD, From: event.FromSession, Limit: 1, Spent: 0.42},
	}, Reached: &reached}
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	want := "turn tokens 300 of 250 (input) reached · turn time 0s of 5m0s (node) · session cost $0.42 of $1.00 (session)"
	if got := budgetLine(style{}, b, now); got != want {
		t.Errorf("failed at its budget:\n got %q\nwant %q", got, want)
	}

	// Raised (budget.set) and reopened: running for 90s, nothing reached.
	raised := *b
	raised.Limits = []event.BudgetReached{{Scope: event.ScopeTurn, Kind: event.LimitTokens, From: event.FromSession, Limit: 1000, Spent: 300},
		{Scope: event.ScopeTurn, Kind: event.LimitTimeMS, From: event.FromNode, Limit: 300000, Spent: 2500}}
	raised.Reached, raised.RunningSince = nil, now.Add(-90*time.Second)
	if got, want := budgetLine(style{}, &raised, now), "turn tokens 300 of 1,000 (session) · turn time 1m33s of 5m0s (node)"; got != want {
		t.Errorf("running:\n got %q\nwant %q", got, want)
	}
	// Raised but not resumed: the limit reached is no longer in force.
	raised.Reached, raised.RunningSince = &reached, time.Time{}
	if got := budgetLine(style{}, &raised, now); strings.Contains(got, " reached ·") ||
		!strings.HasSuffix(got, "the last turn stopped: the turn's token limit of 250 (from the input's options.budget) is reached: 300 tokens") {
		t.Errorf("raised: %q", got)
	}
	if budgetLine(style{}, nil, now) != "" {
		t.Error("a session without a budget has a Budget line")
	}
}
