package inspector

import (
	"fmt"
	"strings"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
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
	// summaries are the summaries compactions wrote, by the compaction's
	// step id; summary is the last summary.added, until the
	// context.compacted of its record takes it.
	summaries map[string]string
	summary   string
	// stepNodes is the node that owned the session when each LLM step
	// started (its last session.claimed): the provider that answered is
	// that node's.
	stepNodes map[string]string
	// inFlight are the LLM steps that were streaming when the timeline was
	// read from the log (markInFlight): their first tokens went out before
	// this reader subscribed to the deltas, and no node keeps them.
	inFlight map[string]bool
	// providers are the LLM providers of the nodes alive when the page was
	// read (tah.api.status), by node id; nil when the status was not read.
	providers map[string]string
	// hasChildren is set once a sub-agent's call started (its runner names
	// a child session); tree is the session's sub-agents as last read (nil:
	// none, or not read).
	hasChildren bool
	tree        *treeView
}

// block is one turn (Turn > 0) or the notes between two turns (Turn 0).
type block struct {
	Key   string // the element id in the page
	Turn  int
	Input string
	// By is who sent the turn's input (turn.started's by: the credential
	// its subject names), CancelledBy who cancelled it; empty when the log
	// does not say (the default tenant's inputs name no sender).
	By, CancelledBy string
	// Ended is set by the turn's end event; Status, Error and Code are what
	// it said.
	Ended  bool
	Status projection.Status
	Error  string
	Code   string
	// Usage is the turn's tokens, set by its end: agent.finished's usage
	// (the turn's, not the session's), or for an older agent.finished, a
	// failure or a cancel, what the fold counted for the turn. Cost is the
	// turn's cost, the same way: agent.finished's, else the fold's.
	Usage llm.Usage
	Cost  pricing.Cost
	Items []item
	// Changed is the sequence of the last event that changed the block.
	Changed uint64
	// StartedAt is its turn.started's time (a block of notes: its first
	// note's); EndedAt its end's, zero while the turn runs.
	StartedAt, EndedAt time.Time
}

// item is a step (by id, displayed as the state has it now) or a note.
type item struct {
	StepID string
	Note   string
	Seq    uint64
	// At is when the note's event was written.
	At time.Time
	// Summary is the summary a compaction logged without a step of its own
	// (a log written before compactions were steps) wrote.
	Summary string
	// Steer is a turn.steered's: a user's message that joined the running
	// turn. It belongs to the turn it joined and starts none.
	Steer *steer
}

// steer is a user's message that joined a running turn, and the input that
// sent it.
type steer struct {
	Content, InputID string
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
		b := &block{Key: fmt.Sprintf("turn-%d", d.Turn), Turn: d.Turn, Input: d.Message.Content, By: d.By, Status: projection.StatusRunning, StartedAt: e.Time}
		t.blocks = append(t.blocks, b)
		return b
	case *event.TurnSteeredData:
		return t.addSteer(d, e)
	case *event.LLMStartedData:
		if t.stepNodes == nil {
			t.stepNodes = map[string]string{}
		}
		t.stepNodes[d.StepID] = t.state.Node
		return t.addItem(item{StepID: d.StepID, Seq: e.Seq})
	case *event.ToolStartedData:
		if strings.HasPrefix(d.Runner, event.AgentRunnerPrefix) {
			t.hasChildren = true
		}
		return t.addItem(item{StepID: d.StepID, Seq: e.Seq})
	case *event.ThinkingData:
		return t.addItem(item{StepID: d.StepID, Seq: e.Seq})
	case *event.AgentFinishedData:
		b := t.end(projection.StatusCompleted, "", "", e.Time)
		if u, ok := d.TurnUsage(); ok && b != nil {
			b.Usage = u
		}
		if d.Cost != nil && b != nil {
			b.Cost = *d.Cost
		}
		return b
	case *event.AgentFailedData:
		return t.end(projection.StatusFailed, d.Error, d.Code, e.Time)
	case *event.AgentCancelledData:
		b := t.end(projection.StatusCancelled, d.Reason, event.CodeCancelled, e.Time)
		if b != nil {
			b.CancelledBy = d.By
		}
		return b
	case *event.SessionForkedData:
		return t.addItem(item{Note: forkNote(d), Seq: e.Seq, At: e.Time})
	case *event.TurnForkedData:
		// The copied open turn: a turn of its own, which a resume runs on.
		b := &block{Key: fmt.Sprintf("turn-%d", d.Turn), Turn: d.Turn, Input: d.Messages[0].Content, Status: projection.StatusRunning, StartedAt: e.Time}
		b.Items = append(b.Items, item{Note: fmt.Sprintf("copied up to the source's step %s (%d message(s)): a resume runs the turn on from there", d.AtStep, len(d.Messages)), Seq: e.Seq, At: e.Time})
		t.blocks = append(t.blocks, b)
		return b
	case *event.SessionEditedData:
		what := fmt.Sprintf("message %d (%s)", d.Message, d.Role)
		if d.CallID != "" {
			what = fmt.Sprintf("the result of %s (message %d)", t.callName(d.CallID), d.Message)
		}
		return t.addItem(item{Note: fmt.Sprintf("edited %s: %q → %q%s", what, clip(d.From, 80), clip(d.To, 80), by(d.By)), Seq: e.Seq, At: e.Time})
	case *event.SummaryAddedData:
		t.summary = d.Content
		return nil
	case *event.ContextCompactedData:
		summary := t.summary
		t.summary = ""
		return t.compaction(d.StepID, fmt.Sprintf("context compacted: %s turn(s) summarised in %s characters%s", num(d.Turns), num(d.Chars), auto(d.Auto)), summary, e)
	case *event.ContextCompactFailedData:
		return t.compaction(d.StepID, fmt.Sprintf("compaction failed%s: %s", auto(d.Auto), d.Error), "", e)
	case *event.ToolApprovalRequestedData:
		names := make([]string, len(d.Calls))
		for i, c := range d.Calls {
			names[i] = c.Name
		}
		note := strings.Join(names, ", ") + " waits for a person's approval"
		if !d.Deadline.IsZero() {
			note += " (denied at " + d.Deadline.UTC().Format(time.DateTime) + " UTC unless decided)"
		}
		return t.addItem(item{Note: note, Seq: e.Seq, At: e.Time})
	case *event.ToolApprovedData:
		note := t.callName(d.CallID) + " approved" + by(d.By)
		if len(d.Arguments) > 0 {
			note += ", with arguments edited"
		}
		if d.Note != "" {
			note += ": " + d.Note
		}
		return t.addItem(item{Note: note, Seq: e.Seq, At: e.Time})
	case *event.ToolDeniedData:
		note := t.callName(d.CallID) + " denied" + by(d.By)
		if d.Expired {
			note += ": nobody decided before the deadline"
		} else if d.Note != "" {
			note += ": " + d.Note
		}
		return t.addItem(item{Note: note, Seq: e.Seq, At: e.Time})
	}
	return t.stepOf(e)
}

// addSteer places a steer in the turn it joined, where it joined (before the
// LLM call that first sees it): the open turn's block, never a block of its
// own, since a steer starts no turn.
func (t *timeline) addSteer(d *event.TurnSteeredData, e event.Event) *block {
	b := t.current()
	if b == nil || b.Turn != d.Turn {
		// A log the fold refused (it says so on the page): shown as a note
		// where it came.
		return t.addItems(false, item{Note: fmt.Sprintf("steered turn %d (not open here): %s", d.Turn, d.Message.Content), Seq: e.Seq, At: e.Time})
	}
	b.Items = append(b.Items, item{Steer: &steer{Content: d.Message.Content, InputID: d.InputID}, Seq: e.Seq, At: e.Time})
	return b
}

// callName is the tool a call of the session calls.
func (t *timeline) callName(callID string) string {
	if rec := t.state.ToolCall(callID); rec != nil {
		return rec.Name
	}
	return "call " + callID
}

// clip is s cut to n runes, "…" marking the cut.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// by says who decided, as the decision's input said.
func by(who string) string {
	if who == "" {
		return ""
	}
	return " by " + who
}

// placed are the events that open a block or add an item to one: the only
// ones decoded twice (once by the fold).
var placed = map[event.Type]bool{
	event.SessionForked: true, event.TurnForked: true, event.SessionEdited: true, event.TurnStarted: true, event.TurnSteered: true, event.LLMStarted: true, event.ToolStarted: true, event.Thinking: true,
	event.AgentFinished: true, event.AgentFailed: true, event.AgentCancelled: true,
	event.SummaryAdded: true, event.ContextCompacted: true, event.ContextCompactFailed: true,
	event.ToolApprovalRequested: true, event.ToolApproved: true, event.ToolDenied: true,
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
// The summary it wrote goes with its step, or with its note in an older
// log.
func (t *timeline) compaction(stepID, note, summary string, e event.Event) *block {
	its := []item{{Note: note, Seq: e.Seq, At: e.Time}}
	if stepID != "" {
		its = append([]item{{StepID: stepID, Seq: e.Seq}}, its...)
		if summary != "" {
			if t.summaries == nil {
				t.summaries = map[string]string{}
			}
			t.summaries[stepID] = summary
		}
	} else {
		its[0].Summary = summary
	}
	return t.addItems(true, its...)
}

// addItems appends its to the open turn; notes (between says they are)
// after a turn ended go to a block of notes between turns.
func (t *timeline) addItems(between bool, its ...item) *block {
	b := t.current()
	if b == nil || (b.Turn > 0 && b.Ended && between) {
		b = &block{Key: fmt.Sprintf("notes-%d", its[0].Seq), StartedAt: its[0].At}
		t.blocks = append(t.blocks, b)
	}
	b.Items = append(b.Items, its...)
	return b
}

// end closes the open turn with its outcome.
func (t *timeline) end(status projection.Status, msg, code string, at time.Time) *block {
	b := t.current()
	if b == nil || b.Turn == 0 {
		return nil
	}
	b.Ended, b.Status, b.Error, b.Code, b.Usage, b.Cost, b.EndedAt = true, status, msg, code, t.state.TurnUsage, t.state.TurnCost, at
	return b
}

// markInFlight notes the LLM steps that stream an answer now, at the end of
// the log read: the reader missed their first tokens (deltas are not
// stored, and no node keeps a step's text before llm.completed), so that
// their page says so rather than show an answer without its beginning.
func (t *timeline) markInFlight() {
	t.inFlight = map[string]bool{}
	for _, st := range t.state.Steps {
		if st.Type == projection.StepLLM && !st.Status.Done() && !st.Compaction {
			t.inFlight[st.ID] = true
		}
	}
}
