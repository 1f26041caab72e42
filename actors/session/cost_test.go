package session

import (
	"context"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/pricing"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// The node that makes an LLM call records its cost at its price table with
// the usage: in each llm.completed, in a compaction's event, and, summed, in
// agent.finished (the turn's and the session's) and the outcome. The model
// that answered is priced, a dated snapshot through its glob; an answer of a
// model the table does not price counts as unpriced, never at the price of
// the model asked for.
func TestCostIsRecordedWithTheUsage(t *testing.T) {
	b := openBus(t)
	tab, err := pricing.Parse([]byte(`{"defaults": false, "prices": [
		{"provider": "mock", "model": "m", "input": 2, "cached_input": 0.5, "output": 8},
		{"provider": "mock", "model": "m-2026-*", "input": 4, "output": 16}]}`))
	if err != nil {
		t.Fatal(err)
	}
	u := llm.Usage{InputTokens: 10_000, CacheReadTokens: 4_000, OutputTokens: 500} // $0.012 + $0.002 + $0.004 at m
	p := mock.Scripted(
		mock.CallTool("echo", `{}`).WithUsage(u).OnPrompt("first"),
		mock.Say("done").WithUsage(u).WithModel("m-2026-01-01").OnPrompt("first"),                      // $0.024 + $0.016 + $0.008 (no cached price)
		mock.Say("- facts").WithUsage(llm.Usage{InputTokens: 1_000}).WithModel("m").OnCompaction(true), // $0.002
		mock.Say("elsewhere").WithUsage(u).WithModel("other").OnPrompt("second"))
	m := newManager(t, b, p, Config{Model: "m", Prices: tab})
	if _, err := Create(context.Background(), b, "s1", Config{Model: "m"}, nil); err != nil {
		t.Fatal(err)
	}
	o := do(t, m, "s1", run("first"))
	if o.Err != nil || o.Status != projection.StatusCompleted {
		t.Fatalf("turn 1: %+v", o)
	}
	if want := (pricing.Cost{USD: 0.066}); o.Cost != want || o.SessionCost != want {
		t.Fatalf("turn 1 outcome: cost %+v, session %+v, want %+v", o.Cost, o.SessionCost, want)
	}
	if o := do(t, m, "s1", Command{Kind: wire.CommandCompact}); o.Compact == nil {
		t.Fatalf("compact: %+v", o)
	}
	o = do(t, m, "s1", run("second"))
	if o.Cost != (pricing.Cost{Unpriced: 1}) || o.SessionCost != (pricing.Cost{USD: 0.068, Unpriced: 1}) {
		t.Fatalf("turn 2 outcome: cost %+v, session %+v: %+v", o.Cost, o.SessionCost, o)
	}

	evs, _, err := b.Replay(context.Background(), "s1", 1)
	if err != nil {
		t.Fatal(err)
	}
	var calls []pricing.Cost
	var finished []event.AgentFinishedData
	for _, e := range evs {
		switch e.Type {
		case event.LLMCompleted:
			d, _ := event.DecodeAs[event.LLMCompletedData](e)
			if d.Cost == nil {
				t.Fatalf("%s records no cost", d.StepID)
			}
			calls = append(calls, *d.Cost)
		case event.ContextCompacted:
			d, _ := event.DecodeAs[event.ContextCompactedData](e)
			if d.Cost == nil || *d.Cost != (pricing.Cost{USD: 0.002}) {
				t.Fatalf("compaction cost %v", d.Cost)
			}
		case event.AgentFinished:
			d, _ := event.DecodeAs[event.AgentFinishedData](e)
			finished = append(finished, d)
		}
	}
	if want := []pricing.Cost{{USD: 0.018}, {USD: 0.048}, {Unpriced: 1}}; len(calls) != 3 || calls[0] != want[0] || calls[1] != want[1] || calls[2] != want[2] {
		t.Fatalf("llm.completed costs %+v, want %+v", calls, want)
	}
	if len(finished) != 2 || finished[1].Cost == nil || *finished[1].Cost != o.Cost || *finished[1].SessionCost != o.SessionCost {
		t.Fatalf("agent.finished: %+v", finished)
	}
	if st := fold(t, b, "s1"); st.Cost != o.SessionCost {
		t.Fatalf("the log folds to %+v", st.Cost)
	}
}

// Without a table of its own a node prices at the defaults, which price no
// mock model: its calls show usage and no price.
func TestCostWithTheDefaultPrices(t *testing.T) {
	b := openBus(t)
	m := newManager(t, b, mock.Scripted(mock.Say("hi").WithUsage(llm.Usage{InputTokens: 5, OutputTokens: 1})), Config{})
	Create(context.Background(), b, "s1", Config{}, nil)
	o := do(t, m, "s1", run("hello"))
	if o.Cost != (pricing.Cost{Unpriced: 1}) || o.Cost.String() != "no price" || o.Usage.Total() != 6 {
		t.Fatalf("%+v", o)
	}
}
