package projection

import (
	"errors"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// A compaction's model call is a step marked as compaction, with its usage
// in the session's; a log written before it was (no step_id) folds as it
// did; a step id used twice is inconsistent.
func TestCompactionCallsFoldAsSteps(t *testing.T) {
	u := llm.Usage{InputTokens: 2185, OutputTokens: 214}
	b := newLog(t, "s_1", event.Config{}).turn(1, "one").llm("a").finish(1, "a")
	before := b.st.Usage
	b.add(event.ContextCompacted, event.ContextCompactedData{SessionID: "s_1", Turns: 1, Chars: 40,
		CompactionCall: event.CompactionCall{StepID: "llm2.1", Model: "m", Usage: u, DurationMS: 3000}})
	b.add(event.ContextCompactFailed, event.ContextCompactFailedData{SessionID: "s_1", Error: "empty", Code: event.CodeEmptySummary,
		CompactionCall: event.CompactionCall{StepID: "llm2.2", Usage: u}})
	// As an older node wrote them: no call, and no step.
	b.add(event.ContextCompacted, event.ContextCompactedData{SessionID: "s_1", Turns: 1, Chars: 40})
	st := mustFold(t, b.events)
	if st.Usage != before.Add(u).Add(u) {
		t.Fatalf("usage %+v, want %+v and twice %+v", st.Usage, before, u)
	}
	ok, failed := st.Step("llm2.1"), st.Step("llm2.2")
	if ok == nil || !ok.Compaction || ok.Type != StepLLM || ok.Status != StepCompleted || ok.Response.Usage != u || ok.DurationMS != 3000 ||
		ok.Response.Model != "m" || ok.StartedAt.After(ok.EndedAt) {
		t.Fatalf("compaction step %+v", ok)
	}
	if failed == nil || !failed.Compaction || failed.Status != StepFailed || failed.Code != event.CodeEmptySummary || failed.Error != "empty" {
		t.Fatalf("failed compaction step %+v", failed)
	}
	if len(st.Steps) != 3 || st.TurnLLMCalls != 1 {
		t.Fatalf("%d steps, %d calls in the turn", len(st.Steps), st.TurnLLMCalls)
	}
	again := event.MustNew("s_1", event.ContextCompacted, event.ContextCompactedData{CompactionCall: event.CompactionCall{StepID: "llm2.1"}})
	again.Seq = st.LastSeq + 1
	if err := Apply(&st, again); !errors.Is(err, ErrInconsistent) {
		t.Fatalf("a step id used twice: %v", err)
	}
}

// An automatic compaction runs inside its turn: its tokens are the turn's as
// well as the session's; a compact command between turns is no turn's.
func TestCompactionCallsCountInTheirTurn(t *testing.T) {
	u := llm.Usage{InputTokens: 2185, OutputTokens: 214}
	compacted := func(id string) event.ContextCompactedData {
		return event.ContextCompactedData{SessionID: "s_1", Turns: 1, Chars: 40, CompactionCall: event.CompactionCall{StepID: id, Usage: u}}
	}
	b := newLog(t, "s_1", event.Config{}).turn(1, "one").llm("a").finish(1, "a")
	before := mustFold(t, b.events)
	b.add(event.ContextCompacted, compacted("llm2.1"))
	between := mustFold(t, b.events)
	if between.TurnUsage != before.TurnUsage || between.Usage != before.Usage.Add(u) {
		t.Fatalf("between turns: turn %+v session %+v", between.TurnUsage, between.Usage)
	}
	b = b.turn(2, "two")
	b.add(event.ContextCompacted, compacted("llm3.1"))
	inside := mustFold(t, b.events)
	if inside.TurnUsage != u {
		t.Fatalf("inside turn 2: turn usage %+v, want %+v", inside.TurnUsage, u)
	}
}
