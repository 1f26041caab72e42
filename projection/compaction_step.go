package projection

import (
	"fmt"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
)

// addCompactionStep records the model call of a compaction, which its one
// event (agent.context.compacted or compact-failed) reports whole, as an LLM
// step marked as compaction, and adds its usage to the session's. A log
// written before compaction calls were steps names no step: nothing to add.
func (s *State) addCompactionStep(e event.Event, c event.CompactionCall, status StepStatus, errText, code string) error {
	if c.StepID == "" {
		return nil
	}
	if s.Step(c.StepID) != nil {
		return fmt.Errorf("step %q exists: %w", c.StepID, ErrInconsistent)
	}
	st := Step{ID: c.StepID, Type: StepLLM, Compaction: true, Turn: s.Turn, Status: status,
		Response: &llm.Response{Model: c.Model, Usage: c.Usage}, Error: errText, Code: code,
		StartSeq: e.Seq, EndSeq: e.Seq, EndedAt: e.Time, DurationMS: c.DurationMS}
	if !e.Time.IsZero() {
		st.StartedAt = e.Time.Add(-time.Duration(c.DurationMS) * time.Millisecond)
	}
	var cost pricing.Cost
	if c.Cost != nil {
		cost = *c.Cost
		st.Cost = &cost
	}
	s.addStep(st)
	s.Usage, s.Cost = s.Usage.Add(c.Usage), s.Cost.Add(cost)
	if s.Status.Active() {
		// An automatic compaction, inside the turn: its tokens and cost are
		// the turn's too (a compact command between turns is no turn's).
		s.TurnUsage, s.TurnCost = s.TurnUsage.Add(c.Usage), s.TurnCost.Add(cost)
	}
	return nil
}
