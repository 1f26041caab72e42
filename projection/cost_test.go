package projection

import (
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
)

// The costs the LLM steps recorded are the steps', summed into the turn's
// and the session's as their usage is: a compaction's in its turn when it
// ran inside one, a model without a price counted as unpriced. A step of a
// log written before costs were recorded has none (nil) and adds nothing.
func TestCostsAreSummedLikeUsage(t *testing.T) {
	priced, unpriced := &pricing.Cost{USD: 0.25}, &pricing.Cost{Unpriced: 1}
	b := newLog(t, "s_1", event.Config{})
	b.turn(1, "one").llm("a") // before costs were recorded
	b.cost = priced
	b.llm("b").finish(1, "b")
	st := mustFold(t, b.events)
	if st.Steps[0].Cost != nil || *st.Steps[1].Cost != *priced {
		t.Fatalf("step costs %v and %v", st.Steps[0].Cost, st.Steps[1].Cost)
	}
	if st.Cost != (pricing.Cost{USD: 0.25}) || st.TurnCost != st.Cost {
		t.Fatalf("after turn 1: session %+v, turn %+v", st.Cost, st.TurnCost)
	}

	// A compact command between turns is the session's, no turn's.
	b.add(event.ContextCompacted, event.ContextCompactedData{SessionID: "s_1", Turns: 1, Chars: 40,
		CompactionCall: event.CompactionCall{StepID: "llm2.1", Usage: llm.Usage{InputTokens: 1}, Cost: &pricing.Cost{USD: 0.1}}})
	st = mustFold(t, b.events)
	if st.Cost.USD != 0.35 || st.TurnCost.USD != 0.25 || st.Step("llm2.1").Cost.USD != 0.1 {
		t.Fatalf("after a compaction: session %+v, turn %+v", st.Cost, st.TurnCost)
	}

	// Turn 2 starts from nothing: an automatic compaction in it, a priced
	// call and one of a model without a price.
	b.turn(2, "two")
	b.add(event.ContextCompactFailed, event.ContextCompactFailedData{SessionID: "s_1", Error: "empty", Code: event.CodeEmptySummary,
		CompactionCall: event.CompactionCall{StepID: "llm3.1", Usage: llm.Usage{InputTokens: 1}, Cost: &pricing.Cost{USD: 0.5}}})
	b.llm("c")
	b.cost = unpriced
	b.llm("d").finish(2, "d")
	st = mustFold(t, b.events)
	if want := (pricing.Cost{USD: 0.75, Unpriced: 1}); st.TurnCost != want {
		t.Fatalf("turn 2 cost %+v, want %+v", st.TurnCost, want)
	}
	if want := (pricing.Cost{USD: 1.1, Unpriced: 1}); st.Cost != want {
		t.Fatalf("session cost %+v, want %+v", st.Cost, want)
	}
	if got := st.Cost.String(); got != "$1.10 + 1 call without a price" {
		t.Errorf("String %q", got)
	}

	// The state keeps them through JSON (a checkpoint, the read model's
	// snapshot).
	if c := st.Clone(); c.Cost != st.Cost || c.TurnCost != st.TurnCost || *c.Steps[len(c.Steps)-1].Cost != *unpriced {
		t.Fatalf("clone: %+v %+v", c.Cost, c.TurnCost)
	}
}
