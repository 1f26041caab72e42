package inspector

import (
	"fmt"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// timeline is a session folded for display: the state (projection.Apply, the
// one fold) and, in log order, its turns with the steps and the notes
// (compactions, summaries) each holds. Notes logged between turns (a compact
// command) form a block of their own. It grows one event at a time, so that
// the page and its live updates come from the same code.
type timeline struct {
	state  projection.State
	blocks []*block
	// foldErr is the first event the fold refused: shown on the page, the
	// rest still displayed as far as it goes.
	foldErr error
}

// block is one turn (Turn > 0) or the notes between two turns (Turn 0).
type block struct {
	Key   string // the element id in the page
	Turn  int
	Input string
	// Ended is set by the turn's end event; Status, Error and Code are what
	// it said.
	Ended  bool
	Status projection.Status
	Error  string
	Code   string
	// Usage is the turn's tokens, set by its end: agent.finished's usage
	// (the turn's, not the session's), or for an older agent.finished, a
	// failure or a cancel, what the fold counted for the turn.
	Usage llm.Usage
	Items []item
	// Changed is the sequence of the last event that changed the block.
	Changed uint64
}

// item is a step (by id, displayed as the state has it now) or a note.
type item struct {
	StepID string
	Note   string
	Seq    uint64
}

// add folds e and places it; it returns the block it changed (nil when none
// did: session.claimed, tools.offered, ...).
func (t *timeline) add(e event.Event) *block {
	b := t.place(e)
	if b != nil {
		b.Changed = e.Seq
	}
	return b
}

// place folds e and returns the block it changes.
func (t *timeline) place(e event.Event) *block {
	if err := projection.Apply(&t.state, e); err != nil && t.foldErr == nil {
		t.foldErr = fmt.Errorf("event %d (%s): %w", e.Seq, e.Type, err)
	}
	if !placed[e.Type] {
		return t.stepOf(e)
	}
	p, err := e.Decode()
	if err != nil {
		return nil
	}
	switch d := p.(type) {
	case *event.TurnStartedData:
		b := &block{Key: fmt.Sprintf("turn-%d", d.Turn), Turn: d.Turn, Input: d.Message.Content, Status: projection.StatusRunning}
		t.blocks = append(t.blocks, b)
		return b
	case *event.LLMStartedData:
		return t.addItem(item{StepID: d.StepID, Seq: e.Seq})
	case *event.ToolStartedData:
		return t.addItem(item{StepID: d.StepID, Seq: e.Seq})
	case *event.ThinkingData:
		return t.addItem(item{StepID: d.StepID, Seq: e.Seq})
	case *event.AgentFinishedData:
		b := t.end(projection.StatusCompleted, "", "")
		if u, ok := d.TurnUsage(); ok && b != nil {
			b.Usage = u
		}
		return b
	case *event.AgentFailedData:
		return t.end(projection.StatusFailed, d.Error, d.Code)
	case *event.AgentCancelledData:
		return t.end(projection.StatusCancelled, d.Reason, event.CodeCancelled)
	case *event.SessionForkedData:
		return t.addItem(item{Note: forkNote(d), Seq: e.Seq})
	case *event.ContextCompactedData:
		return t.compaction(d.StepID, fmt.Sprintf("context compacted: %d turn(s) summarised in %d characters%s", d.Turns, d.Chars, auto(d.Auto)), e.Seq)
	case *event.ContextCompactFailedData:
		return t.compaction(d.StepID, fmt.Sprintf("compaction failed%s: %s", auto(d.Auto), d.Error), e.Seq)
	}
	return t.stepOf(e)
}

// placed are the events that open a block or add an item to one: the only
// ones decoded twice (once by the fold).
var placed = map[event.Type]bool{
	event.SessionForked: true, event.TurnStarted: true, event.LLMStarted: true, event.ToolStarted: true, event.Thinking: true,
	event.AgentFinished: true, event.AgentFailed: true, event.AgentCancelled: true,
	event.ContextCompacted: true, event.ContextCompactFailed: true,
}

// stepOf is the block of the step an event (llm.completed, tool.finished,
// ...) changes: the current turn's.
func (t *timeline) stepOf(e event.Event) *block {
	switch e.Type {
	case event.LLMStreaming, event.LLMCompleted, event.LLMFailed, event.ToolFinished, event.ContextTrimmed, event.ArtifactCreated:
		return t.current()
	}
	return nil
}

// forkNote says where a fork's history comes from.
func forkNote(d *event.SessionForkedData) string {
	turns := "all its turns"
	if d.Turns >= 0 {
		turns = fmt.Sprintf("its first %d turn(s)", d.Turns)
	}
	return fmt.Sprintf("forked from %s: %s, %d message(s) copied", d.From, turns, len(d.Messages))
}

func auto(a bool) string {
	if a {
		return " (automatic)"
	}
	return ""
}

// current is the open turn, or the last block.
func (t *timeline) current() *block {
	if n := len(t.blocks); n > 0 {
		return t.blocks[n-1]
	}
	return nil
}

// addItem appends it to the open turn, or to a block of notes between
// turns.
func (t *timeline) addItem(it item) *block {
	return t.addItems(it.StepID == "", it)
}

// compaction places a compaction: its model call, an LLM step marked as
// compaction (none in a log written before they were steps), then its note,
// in the turn it ran in (automatic) or between turns (a compact command).
func (t *timeline) compaction(stepID, note string, seq uint64) *block {
	its := []item{{Note: note, Seq: seq}}
	if stepID != "" {
		its = append([]item{{StepID: stepID, Seq: seq}}, its...)
	}
	return t.addItems(true, its...)
}

// addItems appends its to the open turn; notes (between says they are)
// after a turn ended go to a block of notes between turns.
func (t *timeline) addItems(between bool, its ...item) *block {
	b := t.current()
	if b == nil || (b.Turn > 0 && b.Ended && between) {
		b = &block{Key: fmt.Sprintf("notes-%d", its[0].Seq)}
		t.blocks = append(t.blocks, b)
	}
	b.Items = append(b.Items, its...)
	return b
}

// end closes the open turn with its outcome.
func (t *timeline) end(status projection.Status, msg, code string) *block {
	b := t.current()
	if b == nil || b.Turn == 0 {
		return nil
	}
	b.Ended, b.Status, b.Error, b.Code, b.Usage = true, status, msg, code, t.state.TurnUsage
	return b
}
