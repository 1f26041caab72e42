package projection

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// claim appends a session.claimed of epoch by node.
func (b *logBuilder) claim(epoch uint64, node string) *logBuilder {
	return b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: epoch, Node: node})
}

// input appends the turn.started of turn n, started by input id.
func (b *logBuilder) input(n int, id string) *logBuilder {
	return b.add(event.TurnStarted, event.TurnStartedData{Turn: n, Message: llm.User("hello " + id), InputID: id})
}

// withEpochs gives every event the epoch of the last claim before it (and the
// claims their own), as the owners of a sound log write them.
func withEpochs(evs []event.Event) []event.Event {
	var epoch uint64
	out := slices.Clone(evs)
	for i, e := range out {
		if e.Type == event.SessionClaimed {
			if d, err := event.DecodeAs[event.SessionClaimedData](e); err == nil {
				epoch = d.Epoch
			}
		}
		if e.Type != event.SessionCreated && e.Type != event.SessionForked {
			out[i].Epoch = epoch
		}
	}
	return out
}

// soundLog is two turns: the first with a tool call, the second resumed by n2
// after n1 stopped during its LLM call.
func soundLog(t *testing.T) []event.Event {
	b := newLog(t, "s_audit", event.Config{MaxSteps: 20})
	b.tools = []llm.ToolSchema{{Name: "list_files"}}
	b.claim(1, "n1").input(1, "in_1")
	c := call("c1", "list_files", `{}`)
	b.llm("", c).tool(c, "a.go").llm("two files").finish(1, "two files")
	b.add(event.CheckpointCreated, event.CheckpointCreatedData{ID: "cp1", UpToSeq: b.seq})
	b.input(2, "in_2")
	b.add(event.LLMStarted, event.LLMStartedData{StepID: "st_open", Turn: 2})
	b.claim(2, "n2")
	b.add(event.LLMFailed, event.LLMFailedData{StepID: "st_open", Code: event.CodeInterrupted, Error: "stopped"})
	b.llm("again").finish(2, "again")
	return withEpochs(b.events)
}

// TestAuditToolsNeverOffered: an llm.started that names tools no
// tools.offered recorded cannot be rebuilt, and the audit says so.
func TestAuditToolsNeverOffered(t *testing.T) {
	var evs []event.Event
	for _, e := range soundLog(t) {
		if e.Type != event.ToolsOffered {
			evs = append(evs, e)
		}
	}
	r := Audit(evs)
	if len(r.Problems) == 0 || r.Problems[0].Type != event.LLMStarted || !strings.Contains(r.Problems[0].What, "no tools.offered") {
		t.Fatalf("problems: %s", r.Problems)
	}
}

func TestAuditSoundLog(t *testing.T) {
	r := Audit(soundLog(t))
	if len(r.Problems) > 0 {
		t.Fatalf("problems in a sound log:\n%s\n%s", r.Problems, r.Dump())
	}
	if r.Session != "s_audit" || len(r.Turns) != 2 || len(r.Claims) != 2 || r.Owner() != "n2" {
		t.Fatalf("session %q, %d turns, %d claims, owner %q", r.Session, len(r.Turns), len(r.Claims), r.Owner())
	}
	if r.Resumed() != 1 || r.Turns[0].Claims != 0 || r.Turns[1].Claims != 1 {
		t.Fatalf("resumed %d; claims in the turns: %d, %d", r.Resumed(), r.Turns[0].Claims, r.Turns[1].Claims)
	}
	if p := r.CheckInputs("in_1", "in_2"); len(p) > 0 {
		t.Fatalf("CheckInputs: %s", p)
	}
	if _, ok := r.Running(); ok {
		t.Fatal("a turn runs in a log whose turns all ended")
	}
	first := r.Turns[0]
	if first.Turn != 1 || first.InputID != "in_1" || len(first.Ends) != 1 || first.Ends[0].Type != event.AgentFinished ||
		first.Events[len(first.Events)-1].Seq != first.Ends[0].Seq || first.Start.Type != event.TurnStarted {
		t.Fatalf("first turn: %+v", first)
	}
	if c, ok := r.ClaimAt(r.Turns[1].Ends[0]); !ok || c.Node != "n2" || c.Epoch != 2 {
		t.Fatalf("claim at the second turn's end: %+v %v", c, ok)
	}
	if _, ok := r.ClaimAt(r.Events[0]); ok {
		t.Fatal("session.created was written under a claim")
	}
	if !r.InputEnded("in_2") || r.InputEnded("in_3") {
		t.Fatal("InputEnded")
	}
	if d := r.Dump(); strings.Count(d, "\n") != len(r.Events) || !strings.Contains(d, "e2 agent.finished") {
		t.Fatalf("dump:\n%s", d)
	}
}

// TestAuditRecordedLog: the specification's example is sound once its events
// carry their owner's epoch (the recording leaves envelope epochs out).
func TestAuditRecordedLog(t *testing.T) {
	r := Audit(withEpochs(readLog(t, "testdata/spec_example.jsonl")))
	if len(r.Problems) > 0 || len(r.Turns) == 0 || r.Owner() != "n1" {
		t.Fatalf("%d turns, owner %q, problems:\n%s", len(r.Turns), r.Owner(), r.Problems)
	}
}

func TestAuditRunningTurn(t *testing.T) {
	b := newLog(t, "s_run", event.Config{})
	b.claim(1, "n1").input(1, "in_1")
	c := call("c1", "read_file", `{}`)
	b.llm("", c).tool(c, "text")
	b.add(event.LLMStarted, event.LLMStartedData{StepID: "st_answer", Turn: 1})
	r := Audit(withEpochs(b.events))
	cur, ok := r.Running()
	if !ok || !cur.Answering || cur.InputID != "in_1" || r.InputEnded("in_1") || len(r.Problems) > 0 {
		t.Fatalf("running %v %+v, problems %s", ok, cur, r.Problems)
	}
	if p := r.CheckInputs("in_1"); len(p) != 1 || !strings.Contains(p[0].What, "has not ended") {
		t.Fatalf("CheckInputs: %s", p)
	}
	// Before its tools ran, the model is not answering yet.
	b = newLog(t, "s_run", event.Config{})
	b.claim(1, "n1").input(1, "in_1")
	b.add(event.LLMStarted, event.LLMStartedData{StepID: "st_1", Turn: 1})
	if cur, ok := Audit(withEpochs(b.events)).Running(); !ok || cur.Answering {
		t.Fatalf("running %v %+v", ok, cur)
	}
}

// A cancel may leave a call without a result; the next turn begins by giving
// it one ("not executed").
func TestAuditCancelThenRepair(t *testing.T) {
	b := newLog(t, "s_cancel", event.Config{})
	b.claim(1, "n1").input(1, "in_1")
	c1, c2 := call("c1", "slow", `{}`), call("c2", "slow", `{}`)
	b.llm("", c1, c2)
	b.add(event.ToolStarted, event.ToolStartedData{StepID: "st_t1", Call: c1})
	b.add(event.AgentCancelled, event.AgentCancelledData{Turn: 1, Reason: "enough"})
	for _, c := range []llm.ToolCall{c1, c2} {
		b.add(event.ToolFinished, event.ToolFinishedData{CallID: c.ID, Name: c.Name, Output: NotExecutedOutput, IsError: true, Code: event.CodeNotExecuted})
	}
	b.input(2, "in_2").llm("ok").finish(2, "ok")
	r := Audit(withEpochs(b.events))
	if len(r.Problems) > 0 {
		t.Fatalf("problems:\n%s\n%s", r.Problems, r.Dump())
	}
	if p := r.CheckInputs("in_1", "in_2"); len(p) != 1 || !strings.Contains(p[0].What, "ended with agent.cancelled") {
		t.Fatalf("CheckInputs: %s", p)
	}
}

// TestAuditProblems breaks each invariant once: the audit names it, at the
// event that breaks it.
func TestAuditProblems(t *testing.T) {
	c := call("c1", "list_files", `{}`)
	base := func(t *testing.T) *logBuilder {
		b := newLog(t, "s_bad", event.Config{})
		return b.claim(1, "n1").input(1, "in_1")
	}
	tests := []struct {
		name string
		// build writes the log; edit, when set, changes it after withEpochs.
		build func(b *logBuilder)
		edit  func(evs []event.Event)
		at    event.Type
		want  string
	}{
		{"claim epoch does not grow", func(b *logBuilder) { b.claim(1, "n2") }, nil, event.SessionClaimed, "claims epoch 1 after epoch 1"},
		{"claim envelope epoch", func(b *logBuilder) { b.claim(2, "n2") },
			func(evs []event.Event) { evs[len(evs)-1].Epoch = 3 }, event.SessionClaimed, "envelope epoch 3, payload epoch 2"},
		{"a fenced owner writes", func(b *logBuilder) { b.claim(2, "n2").llm("late") },
			func(evs []event.Event) { evs[len(evs)-1].Epoch = 1 }, event.LLMCompleted, "a fenced owner wrote"},
		{"created after a claim", func(b *logBuilder) { b.add(event.SessionCreated, event.SessionCreatedData{}) }, nil, event.SessionCreated, "after a claim"},
		{"turn numbers", func(b *logBuilder) { b.finish(1, "x").input(3, "in_3") }, nil, event.TurnStarted, "turn 3, want 2"},
		{"turn over turn", func(b *logBuilder) { b.input(2, "in_2") }, nil, event.TurnStarted, "turn 2 starts while turn 1 (input in_1) has not ended"},
		{"turn ends twice", func(b *logBuilder) { b.finish(1, "x").finish(1, "y") }, nil, event.AgentFinished, "after its agent.finished"},
		{"a step after the end", func(b *logBuilder) { b.finish(1, "x").llm("more") }, nil, event.LLMStarted, "in turn 1 (input in_1) after its agent.finished"},
		{"llm end without start", func(b *logBuilder) {
			b.add(event.LLMCompleted, event.LLMCompletedData{StepID: "st_x", Response: llm.Response{Content: "x"}})
		}, nil, event.LLMCompleted, "step st_x never started"},
		{"llm ends twice", func(b *logBuilder) {
			b.llm("x")
			b.add(event.LLMFailed, event.LLMFailedData{StepID: "st1", Code: event.CodeProvider})
		}, nil, event.LLMFailed, "step st1 ends a second time"},
		{"tool finishes twice", func(b *logBuilder) {
			b.llm("", c).tool(c, "x")
			b.add(event.ToolFinished, event.ToolFinishedData{CallID: "c1", Name: "list_files"})
		}, nil, event.ToolFinished, "finished a second time"},
		{"tool runs again", func(b *logBuilder) { b.llm("", c).tool(c, "x").tool(c, "y") }, nil, event.ToolStarted, "starts again after its tool.finished"},
		{"finished without a tool result", func(b *logBuilder) {
			b.llm("", c)
			b.add(event.ToolStarted, event.ToolStartedData{StepID: "st_t", Call: c})
			b.finish(1, "x")
		}, nil, event.AgentFinished, "has no result"},
		{"before any claim", func(b *logBuilder) {}, func(evs []event.Event) {
			evs[1], evs[2] = evs[2], evs[1] // turn.started before session.claimed
			evs[1].Epoch = 0
		}, event.TurnStarted, "before any session.claimed"},
		{"before any turn", func(b *logBuilder) {}, func(evs []event.Event) {
			evs[2].Type, evs[2].Data = event.LLMStarted, []byte(`{"step_id":"st_0"}`)
		}, event.LLMStarted, "before any turn"},
		{"not executed before any turn", func(b *logBuilder) {}, func(evs []event.Event) {
			evs[2].Type, evs[2].Data = event.ToolFinished, []byte(`{"call_id":"c0","code":"not_executed"}`)
		}, event.ToolFinished, "before any turn"},
		{"unknown type", func(b *logBuilder) {}, func(evs []event.Event) { evs[2].Type = "agent.dreamed" }, "agent.dreamed", "unknown event type"},
		{"malformed payload", func(b *logBuilder) {}, func(evs []event.Event) { evs[2].Data = []byte(`{"turn":"one"}`) }, event.TurnStarted, "malformed"},
		{"malformed claim", func(b *logBuilder) {}, func(evs []event.Event) { evs[1].Data = []byte(`{"epoch":0}`) }, event.SessionClaimed, "malformed"},
		{"malformed step", func(b *logBuilder) { b.llm("", c).tool(c, "x") }, func(evs []event.Event) {
			for i := range evs[3:] {
				evs[3+i].Data = []byte(`{"step_id":""}`)
			}
		}, event.ToolStarted, "malformed"},
		{"malformed step end", func(b *logBuilder) { b.llm("x") }, func(evs []event.Event) { evs[4].Data = []byte(`[]`) }, event.LLMCompleted, "malformed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := base(t)
			tc.build(b)
			evs := withEpochs(b.events)
			if tc.edit != nil {
				tc.edit(evs)
			}
			r := Audit(evs)
			for _, p := range r.Problems {
				if p.Type == tc.at && strings.Contains(p.What, tc.want) && p.Seq != 0 && strings.Contains(p.String(), "s_bad seq") {
					return
				}
			}
			t.Fatalf("no problem at %s saying %q; problems:\n%s\n%s", tc.at, tc.want, r.Problems, r.Dump())
		})
	}
}

// A fork's turns number on from the turns it copied, as Apply numbers them:
// its first turn after two copied turns is 3, and a 1 there is a problem.
func TestAuditForkedTurns(t *testing.T) {
	for _, tc := range []struct {
		turn     int
		problems bool
	}{{3, false}, {1, true}, {4, true}} {
		b := newLog(t, "s_fork", event.Config{})
		b.add(event.SessionForked, event.SessionForkedData{From: "s_0", Turns: 2, Messages: []llm.Message{
			llm.User("one"), llm.Assistant("1"), llm.User("two"), llm.Assistant("2")}})
		b.claim(1, "n1").input(tc.turn, "in_1").llm("three").finish(tc.turn, "three")
		r := Audit(withEpochs(b.events))
		if got := len(r.Problems) > 0; got != tc.problems {
			t.Fatalf("turn %d after two copied: problems %v, want %v:\n%s", tc.turn, r.Problems, tc.problems, r.Dump())
		}
	}
}

func TestAuditCheckInputs(t *testing.T) {
	b := newLog(t, "s_in", event.Config{})
	b.claim(1, "n1")
	b.input(1, "in_1").llm("a").finish(1, "a")
	b.input(2, "in_1").llm("b").finish(2, "b") // run twice
	b.input(3, "in_x").llm("c").finish(3, "c") // never sent
	b.input(4, "in_3")
	b.add(event.AgentFailed, event.AgentFailedData{Turn: 4, Code: event.CodeProvider, Error: "down"})
	r := Audit(withEpochs(b.events))
	if len(r.Problems) > 0 {
		t.Fatalf("problems:\n%s", r.Problems)
	}
	got := r.CheckInputs("in_1", "in_2", "in_3").String()
	for _, want := range []string{
		"s_in: input in_1 started 2 turns: turn 1 at seq 3, turn 2 at seq 7",
		"input in_2 started no turn (lost)",
		"turn 4 (input in_3) ended with agent.failed",
		`turn 3 at seq 11 was started by input "in_x", which was not sent`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("CheckInputs lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "\n") != 3 {
		t.Errorf("want 4 problems:\n%s", got)
	}
}

func TestAuditEmpty(t *testing.T) {
	r := Audit(nil)
	if r.Session != "" || len(r.Turns)+len(r.Claims)+len(r.Problems) != 0 || r.Owner() != "" || r.Dump() != "" {
		t.Fatalf("%+v", r)
	}
	if p := r.CheckInputs("in_1"); len(p) != 1 {
		t.Fatalf("an input sent to an empty log: %s", p)
	}
}

// asRecords renumbers a log as the records of a writer that appended its
// events size at a time: consecutive events share a sequence, with indexes
// 0, 1, ... (the epochs of the events of a record must agree: a claim starts
// a record of its own).
func asRecords(evs []event.Event, size int) []event.Event {
	out := slices.Clone(evs)
	seq, index := uint64(0), 0
	for i := range out {
		if i == 0 || index == size-1 || out[i].Type == event.SessionClaimed || out[i].Epoch != out[i-1].Epoch {
			seq, index = seq+1, 0
		} else {
			index++
		}
		out[i].Seq, out[i].Index = seq, index
	}
	return out
}

// TestRecords: a log written as records of several events folds and audits
// as the same log written one event a message; an event of a record folded
// again, or one before it, is out of order, and the claim in force is found
// by sequence and index.
func TestRecords(t *testing.T) {
	single := soundLog(t)
	want, err := Fold(single)
	if err != nil {
		t.Fatal(err)
	}
	recs := asRecords(single, 3)
	got, err := Fold(recs)
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1]
	if got.LastSeq != last.Seq || got.LastIndex != last.Index || got.Events != want.Events ||
		!slices.EqualFunc(got.Messages, want.Messages, func(a, b llm.Message) bool { return a.Content == b.Content && a.Role == b.Role }) {
		t.Fatalf("folded as records: last %d.%d, %d events, %d messages; as single events %d events, %d messages",
			got.LastSeq, got.LastIndex, got.Events, len(got.Messages), want.Events, len(want.Messages))
	}
	if r := Audit(recs); len(r.Problems) > 0 || len(r.Turns) != 2 || len(r.Claims) != 2 {
		t.Fatalf("audit of the records: %d turns, %d claims\n%s\n%s", len(r.Turns), len(r.Claims), r.Problems, r.Dump())
	}
	var st State
	for i, e := range recs {
		if err := Apply(&st, e); err != nil {
			t.Fatal(err)
		}
		if e.Index > 0 {
			again := recs[i-1]
			if err := Apply(&st, again); !errors.Is(err, ErrOutOfOrder) {
				t.Fatalf("event %d.%d after %d.%d: %v", again.Seq, again.Index, e.Seq, e.Index, err)
			}
		}
	}
	r := Audit(recs)
	for _, e := range recs {
		c, ok := r.ClaimAt(e)
		switch {
		case e.Type == event.SessionCreated && ok:
			t.Fatalf("a claim before the first event: %+v", c)
		case e.Type == event.SessionClaimed:
			if ok && c.Epoch >= e.Epoch {
				t.Fatalf("the claim in force at claim %d is %+v", e.Epoch, c)
			}
		case e.Epoch > 0 && (!ok || c.Epoch != e.Epoch):
			t.Fatalf("event %d.%d of epoch %d: claim in force %+v, %v", e.Seq, e.Index, e.Epoch, c, ok)
		}
	}
}
