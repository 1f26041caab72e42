package session

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// turnReplies are the replies of turn prompt: a call of echo, then an answer.
func turnReplies(prompt string) []mock.Reply {
	return []mock.Reply{
		mock.CallTool("echo", fmt.Sprintf(`{"pad":%q}`, strings.Repeat("p", 200))).OnPrompt(prompt).OnCompaction(false),
		mock.Say("answer to " + prompt).OnPrompt(prompt).OnCompaction(false),
	}
}

// snapshot is the session's checkpoint as the bucket holds it.
func snapshot(t *testing.T, m *Manager, sid string) projection.State {
	t.Helper()
	entry, err := m.bus.Checkpoints().Get(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	var st projection.State
	if err := json.Unmarshal(entry.Value(), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// verifyRequests rebuilds every LLM step's request of turn from the log and
// checks it against the hash its llm.started recorded.
func verifyRequests(t *testing.T, m *Manager, sid string, turn int) {
	t.Helper()
	evs, _, err := m.bus.Replay(context.Background(), sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		d, err := event.DecodeAs[event.LLMStartedData](e)
		if e.Type != event.LLMStarted || err != nil || d.Turn != turn {
			continue
		}
		r, err := projection.RebuildRequest(evs, d.StepID)
		if err != nil || !r.Verified {
			t.Fatalf("step %s of turn %d: the request sent is not the log's (%v)", d.StepID, turn, err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("turn %d made no LLM step", turn)
	}
}

// A checkpoint holds a window of the history: the turns no request sends
// any more are in segments. A new owner resumes from it and sends the
// requests of the whole history; a compaction reads the history back.
func TestCheckpointWindowResumeAndCompact(t *testing.T) {
	b := openBus(t)
	cfg := Config{ContextChars: 1500, CheckpointEvery: 1}
	Create(context.Background(), b, "s1", cfg, nil)
	const turns = 40
	var replies []mock.Reply
	for i := range turns {
		replies = append(replies, turnReplies(fmt.Sprintf("[%d]", i))...)
	}
	tt := &testTools{}
	m := startManager(t, b, mock.Scripted(replies...), cfg, tt.config())
	for i := range turns {
		if o := do(t, m, "s1", run(fmt.Sprintf("question [%d]", i))); o.Status != projection.StatusCompleted {
			t.Fatalf("turn %d: %+v", i+1, o)
		}
	}
	snap := snapshot(t, m, "s1")
	full := fold(t, b, "s1")
	switch {
	case snap.Elided.Messages == 0 || len(snap.Elided.Segments) == 0:
		t.Fatalf("the checkpoint holds the whole history: %+v", snap.Elided)
	case snap.HistoryLen() != len(full.Messages):
		t.Fatalf("the checkpoint's history has %d messages, the log's %d", snap.HistoryLen(), len(full.Messages))
	case len(snap.ToolCalls) > 1:
		t.Fatalf("the checkpoint keeps past turns: %d tool calls", len(snap.ToolCalls))
	}
	// The last turn's steps only: a compaction, two model calls and a tool.
	for _, s := range snap.Steps {
		if s.Turn != snap.Turn {
			t.Fatalf("the checkpoint keeps a step of turn %d: %s", s.Turn, mustJSON(snap.Steps))
		}
	}
	m.Close(context.Background())

	facts := mock.Say("- facts").OnCompaction(true).Always()
	p := mock.Scripted(append(append(turnReplies("[after]"), turnReplies("[next]")...), facts)...)
	m2 := startManager(t, b, p, cfg, tt.config())
	if o := do(t, m2, "s1", run("question [after]")); o.Status != projection.StatusCompleted {
		t.Fatalf("after the resume: %+v", o)
	}
	verifyRequests(t, m2, "s1", turns+1)
	// The turn began with a compaction (the history is over the budget): it
	// read the elided history back.
	if c := p.Calls()[0]; !strings.Contains(mustJSON(c.Messages), "question [0]") {
		t.Fatal("the compaction did not see the first turn: the elided history was not read back")
	}
	if o := do(t, m2, "s1", Command{Kind: wire.CommandCompact}); o.Err != nil || o.Compact == nil {
		t.Fatalf("compact: %+v", o)
	}
	if st := fold(t, b, "s1"); !projection.IsSummary(st.Messages[len(st.Messages)-1]) {
		t.Fatal("no summary at the end of the history")
	}

	// Then the checkpoint leaves out everything before the newest summary,
	// and a new owner's requests are still the log's.
	if o := do(t, m2, "s1", run("question [next]")); o.Status != projection.StatusCompleted {
		t.Fatalf("after the compaction: %+v", o)
	}
	if snap := snapshot(t, m2, "s1"); snap.Elided.Summaries == 0 {
		t.Fatalf("the checkpoint keeps the summarised turns: %+v", snap.Elided)
	}
	m2.Close(context.Background())
	m3 := startManager(t, b, mock.Scripted(append(turnReplies("[last]"), facts)...), cfg, tt.config())
	if o := do(t, m3, "s1", run("question [last]")); o.Status != projection.StatusCompleted {
		t.Fatalf("the last turn: %+v", o)
	}
	verifyRequests(t, m3, "s1", turns+3)
}
