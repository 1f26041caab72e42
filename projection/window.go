package projection

import (
	"errors"
	"fmt"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// ErrHistoryNeeded: the state holds a window of its history (Elided) and what
// was asked of it depends on the messages it left out. Restore them first.
var ErrHistoryNeeded = errors.New("the elided part of the history is needed")

// Elided describes the messages of a session's history that a State does not
// hold, so that a snapshot of it (the session actor's checkpoint) does not
// grow with the history: whole turns, right after the preamble (the messages
// before the first user message), that no request can send any more. Their
// holder keeps them elsewhere (the actor, in segments of the checkpoint
// bucket) and gives them back with Restore when the whole history is needed
// (a compaction). The counts let the context rules run as if they were there
// (projectContext): the request of a state with a window is the request of
// the whole history, byte for byte, or NextRequest says ErrHistoryNeeded.
type Elided struct {
	// At is the index in the history of the first message left out.
	At int `json:"at"`
	// Messages is how many; Turns how many turns (user messages) they hold;
	// Summaries how many summaries.
	Messages  int `json:"messages"`
	Turns     int `json:"turns"`
	Summaries int `json:"summaries,omitempty"`
	// Chars is their size (llm.TotalChars); Omittable how many tool outputs
	// among them the rule of old outputs replaces, and Saved the characters
	// that saves.
	Chars     int `json:"chars"`
	Omittable int `json:"omittable,omitempty"`
	Saved     int `json:"saved,omitempty"`
	// Segments is how many messages each piece their holder stored them in
	// holds, in order: the holder's record, kept with the state it
	// belongs to.
	Segments []int `json:"segments,omitempty"`
}

// HistoryLen is the length of the session's whole history: the messages held
// and those elided.
func (s *State) HistoryLen() int { return len(s.Messages) + s.Elided.Messages }

// HistoryChars is the size of what a request starts from, before trimming:
// the whole history after the newest summary (ApplySummary), the elided part
// counted in.
func (s *State) HistoryChars() int {
	k := newestSummary(s.Messages)
	switch {
	case k >= 0 && (s.Elided.Messages == 0 || k >= s.Elided.At):
		return llm.TotalChars(ApplySummary(s.Messages))
	case s.Elided.Messages == 0:
		return s.messageChars() // ApplySummary sends them as they are
	}
	return s.messageChars() + s.Elided.Chars
}

// prepare is Prepare of the session's whole history. With a window, ok is
// false when the request would send some of what the window left out.
//
// Without a summary, the work does not grow with the history (but for a
// scan for summaries): the history's size is taken up from the last step's
// (messageChars), and a history sent whole is not copied, since Apply
// never writes a message of s.Messages again once it is there (it appends,
// and inserts into a new array: insertMessage).
func (s *State) prepare(budget int) (out []llm.Message, report event.TrimReport, ok bool) {
	e := s.Elided
	k := newestSummary(s.Messages)
	switch {
	case k >= 0 && (e.Messages == 0 || k >= e.At):
		// ApplySummary sends nothing before the newest summary: the window
		// starts before it.
		out, report = Prepare(s.Messages, budget)
		return out, report, true
	case e.Messages == 0:
		return projectHistory(s.Messages, s.messageChars(), true, Elided{}, budget)
	case k >= 0 || e.Summaries > 0:
		return nil, event.TrimReport{}, false
	}
	return projectHistory(s.Messages, s.messageChars(), true, e, budget)
}

// charsMemo is llm.TotalChars of the first n messages of the array that
// base begins: State.messageChars takes it up from there.
type charsMemo struct {
	base     *llm.Message
	n, total int
}

// messageChars is llm.TotalChars(s.Messages), counting only the messages
// appended since it last counted. Apply writes no message of s.Messages
// again once it is there, and a change other than an append (an insert, a
// new system prompt, a window) makes a new array: the same array with at
// least as many messages holds those counted, unchanged.
func (s *State) messageChars() int {
	if len(s.Messages) == 0 {
		return 0
	}
	m := &s.chars
	if m.base != &s.Messages[0] || m.n > len(s.Messages) {
		*m = charsMemo{base: &s.Messages[0]}
	}
	m.total += llm.TotalChars(s.Messages[m.n:])
	m.n = len(s.Messages)
	return m.total
}

// CompactionView is what a compaction plans on (PlanCompaction) and what to
// add to the plan's At to place the summary in the whole history. A
// compaction covers the turns since the newest summary: a window holds them
// all when it holds that summary. ok is false when the elided part is
// needed (Restore it first).
func (s *State) CompactionView() (msgs []llm.Message, offset int, ok bool) {
	e := s.Elided
	switch {
	case e.Messages == 0:
		return s.Messages, 0, true
	case newestSummary(s.Messages) >= e.At:
		return s.Messages, e.Messages, true
	}
	return nil, 0, false
}

// newestSummary is the index of the newest summary in msgs, or -1.
func newestSummary(msgs []llm.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if IsSummary(msgs[i]) {
			return i
		}
	}
	return -1
}

// windowMargin is how many times the context budget the turns a window keeps
// must weigh, their old tool outputs omitted, for the requests of the turns
// to come to be made of them: the check (projectContext) is exact, the margin
// makes it hold for many turns, so that the whole history is rarely restored.
const windowMargin = 2

// ElisionCut is how many messages Elide may leave out now: the whole turns
// before the newest summary, or else the oldest turns that the requests to
// come will drop whatever they hold, those that the turns after them (their
// old tool outputs omitted) outweigh windowMargin times over the budget.
// Only turns whose tool calls all have their results in them are left out,
// never the last turn, and nothing without a budget (every request sends the
// whole history then). It returns the messages' index in s.Messages and
// their count.
func (s *State) ElisionCut(budget int) (at, n int) {
	at = preambleEnd(s.Messages)
	if s.Elided.Messages > 0 {
		at = s.Elided.At
	}
	turns := Turns(s.Messages[at:])
	if len(turns) < 2 {
		return at, 0
	}
	if k := newestSummary(s.Messages); k >= at {
		return at, fitPairs(s.Messages[at:k])
	} else if k >= 0 || budget <= 0 {
		return at, 0
	}
	kept, cut := 0, len(turns)-1
	for ; cut > 0 && kept < windowMargin*budget; cut-- {
		t := turns[cut]
		kept += omittedChars(s.Messages[at+t.Start : at+t.End])
	}
	if kept < windowMargin*budget {
		return at, 0
	}
	// turns[cut] is the oldest turn kept when kept just reached the margin:
	// every turn before it goes.
	return at, fitPairs(s.Messages[at : at+turns[cut+1].Start])
}

// fitPairs is the length of the longest prefix of msgs that leaves no tool
// call apart from its results, cut at a turn's start.
func fitPairs(msgs []llm.Message) int {
	for n := len(msgs); n > 0; n-- {
		if n < len(msgs) && !msgs[n].StartsTurn() {
			continue
		}
		if llm.CheckPairing(msgs[:n]) == nil {
			return n
		}
	}
	return 0
}

// omittedChars is the size of msgs with every tool output replaced as the
// rule of old outputs does.
func omittedChars(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		omit(&m) // m is a copy
		n += m.Chars()
	}
	return n
}

// Elide leaves out the n messages at index at of s.Messages, as ElisionCut
// gave them, and returns them: the caller keeps them (the actor, in a segment,
// before the snapshot that needs it). Errors wrap ErrInconsistent when they
// are not right after the preamble or what was elided before.
func (s *State) Elide(at, n int) ([]llm.Message, error) {
	switch {
	case n == 0:
		return nil, nil
	case s.Elided.Messages > 0 && at != s.Elided.At,
		s.Elided.Messages == 0 && at != preambleEnd(s.Messages),
		at+n >= len(s.Messages):
		return nil, fmt.Errorf("elide %d messages at %d of %d: %w", n, at, len(s.Messages), ErrInconsistent)
	}
	out := llm.CloneMessages(s.Messages[at : at+n])
	e := &s.Elided
	e.At = at
	e.Messages += n
	for i := range out {
		m := out[i]
		e.Chars += m.Chars()
		if m.StartsTurn() {
			e.Turns++
		}
		if IsSummary(m) {
			e.Summaries++
		}
		if saved, ok := omit(&m); ok {
			e.Omittable++
			e.Saved += saved
		}
	}
	s.Messages = append(s.Messages[:at:at], s.Messages[at+n:]...)
	return out, nil
}

// Restore puts back the messages Elide left out, all of them, in order.
// Errors wrap ErrInconsistent when their count is not Elided.Messages.
func (s *State) Restore(elided []llm.Message) error {
	e := s.Elided
	if len(elided) != e.Messages {
		return fmt.Errorf("restore %d messages where %d were elided: %w", len(elided), e.Messages, ErrInconsistent)
	}
	if e.Messages == 0 {
		return nil
	}
	msgs := make([]llm.Message, 0, len(s.Messages)+len(elided))
	msgs = append(msgs, s.Messages[:e.At]...)
	msgs = append(msgs, elided...)
	s.Messages = append(msgs, s.Messages[e.At:]...)
	s.Elided = Elided{}
	return nil
}

// Slim drops what a session's own writer no longer reads of the turns that
// have ended: their finished steps but the last LLM step's (the tools its
// request offered are what the next turn's first step waits for after a
// restart: awaitOffered), their tool calls that have a result, the artifacts
// and checkpoints folded so far. A turn in progress keeps its steps and
// calls. The log and the read model keep them all; the snapshot stays the
// size of a turn's messages (a checkpoint after a turn of 200 tool steps
// held their 200 steps and calls too: three quarters of its bytes).
func (s *State) Slim() {
	ended := !s.Status.Active()
	lastLLM := -1
	if ended {
		for i := len(s.Steps) - 1; i >= 0; i-- {
			if s.Steps[i].Type == StepLLM && !s.Steps[i].Compaction {
				lastLLM = i
				break
			}
		}
	}
	steps := s.Steps[:0:0]
	for i, st := range s.Steps {
		if st.Turn == s.Turn && !ended || !st.Status.Done() || i == lastLLM {
			steps = append(steps, st)
		}
	}
	calls := s.ToolCalls[:0:0]
	for _, c := range s.ToolCalls {
		if c.Turn == s.Turn && !ended || !c.HasResult {
			calls = append(calls, c)
		}
	}
	s.Steps, s.ToolCalls, s.stepIndex, s.stampFrom, s.done = steps, calls, nil, 0, 0
	s.Artifacts, s.Checkpoints = []Artifact{}, []Checkpoint{}
}
