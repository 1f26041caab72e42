package projection

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

func TestFoldOneTurnWithTools(t *testing.T) {
	ls := call("c1", "list_files", `{"path":"."}`)
	rd := call("c2", "read_file", `{"path":"README.md"}`)
	b := newLog(t, "s1", event.Config{SystemPrompt: "be brief", MaxSteps: 20}).
		turn(1, "analyse this project's directory structure").
		llm("", ls).tool(ls, "README.md\ncmd/").
		llm("", rd).tool(rd, "# TAH").
		llm("It is a Go project.").finish(1, "It is a Go project.")
	st := mustFold(t, b.events)

	if st.Status != StatusCompleted || st.Turn != 1 || st.TurnLLMCalls != 3 {
		t.Fatalf("status %s turn %d llm calls %d", st.Status, st.Turn, st.TurnLLMCalls)
	}
	wantRoles := []llm.Role{"system", "user", "assistant", "tool", "assistant", "tool", "assistant"}
	if len(st.Messages) != len(wantRoles) {
		t.Fatalf("messages: %s", jsonOf(t, st.Messages))
	}
	for i, r := range wantRoles {
		if st.Messages[i].Role != r {
			t.Errorf("message %d role %s, want %s", i, st.Messages[i].Role, r)
		}
	}
	if err := llm.CheckPairing(st.Messages); err != nil {
		t.Error(err)
	}
	if len(st.Steps) != 5 || st.Steps[1].Type != StepTool || st.Steps[1].Status != StepCompleted || st.Steps[1].Output != "README.md\ncmd/" {
		t.Errorf("steps: %s", jsonOf(t, st.Steps))
	}
	if st.Usage != (llm.Usage{InputTokens: 30, OutputTokens: 15}) {
		t.Errorf("usage %+v", st.Usage)
	}
	if len(st.ToolCalls) != 2 || !st.ToolCalls[0].HasResult || st.ToolCalls[0].StepID == "" {
		t.Errorf("tool calls: %s", jsonOf(t, st.ToolCalls))
	}
	if st.LastOutput != "It is a Go project." || st.LastSeq != uint64(len(b.events)) || st.Events != len(b.events) {
		t.Errorf("last output %q seq %d events %d", st.LastOutput, st.LastSeq, st.Events)
	}
	if st.Steps[0].DurationMS != 1000 {
		t.Errorf("duration from event times: %d", st.Steps[0].DurationMS)
	}
}

func TestStatusMachine(t *testing.T) {
	c := call("c1", "slow", `{}`)
	b := newLog(t, "s1", event.Config{})
	check := func(want Status) {
		t.Helper()
		if st := mustFold(t, b.events); st.Status != want {
			t.Fatalf("after %s: %s, want %s", b.events[len(b.events)-1].Type, st.Status, want)
		}
	}
	check(StatusIdle)
	b.turn(1, "go")
	check(StatusRunning)
	b.add(event.LLMStarted, event.LLMStartedData{StepID: "a"})
	b.add(event.LLMStreaming, event.LLMStreamingData{StepID: "a"})
	if st := mustFold(t, b.events); st.Steps[0].Status != StepStreaming {
		t.Fatalf("llm step %s", st.Steps[0].Status)
	}
	b.add(event.LLMCompleted, event.LLMCompletedData{StepID: "a", Response: llm.Response{ToolCalls: []llm.ToolCall{c}}})
	check(StatusRunning)
	b.add(event.ToolStarted, event.ToolStartedData{StepID: "b", Call: c})
	check(StatusWaitingTool)
	b.add(event.ToolFinished, event.ToolFinishedData{StepID: "b", CallID: "c1", Output: "x"})
	check(StatusRunning)
	b.add(event.AgentFailed, event.AgentFailedData{Turn: 1, Error: "max steps", Code: event.CodeMaxSteps})
	check(StatusFailed)
	b.turn(2, "again")
	b.add(event.AgentCancelled, event.AgentCancelledData{Turn: 2, Reason: "user"})
	check(StatusCancelled)
}

func TestCancelLeavesDanglingCallsThatRepairAnswers(t *testing.T) {
	c1, c2 := call("c1", "a", `{}`), call("c2", "b", `{}`)
	b := newLog(t, "s1", event.Config{SystemPrompt: "sys"}).turn(1, "go").llm("", c1, c2)
	b.add(event.ToolStarted, event.ToolStartedData{StepID: "t1", Call: c1})
	b.add(event.AgentCancelled, event.AgentCancelledData{Turn: 1})
	st := mustFold(t, b.events)
	if st.Steps[1].Status != StepFailed || st.Steps[1].Code != event.CodeCancelled {
		t.Fatalf("open tool step after cancel: %+v", st.Steps[1])
	}
	dangling := DanglingCalls(st.Messages)
	if len(dangling) != 2 {
		t.Fatalf("dangling %v", dangling)
	}
	// A manual summary appended now must not break the pairing of the repair.
	b.add(event.SummaryAdded, event.SummaryAddedData{Content: SummaryPrefix + "\nx", At: -1})
	for _, c := range dangling {
		b.add(event.ToolFinished, event.ToolFinishedData{CallID: c.ID, Name: c.Name, Output: NotExecutedOutput, IsError: true, Code: event.CodeNotExecuted})
	}
	b.turn(2, "next")
	st = mustFold(t, b.events)
	if err := llm.CheckPairing(st.Messages); err != nil {
		t.Fatalf("%v\n%s", err, jsonOf(t, st.Messages))
	}
	if !IsSummary(st.Messages[len(st.Messages)-2]) {
		t.Fatalf("summary moved: %s", jsonOf(t, st.Messages))
	}
	if rec := st.ToolCall("c2"); rec.StepID != "" || !rec.HasResult || rec.Code != event.CodeNotExecuted {
		t.Errorf("never-started call: %+v", rec)
	}
}

func TestClaimReplacesConfigAndSystemPrompt(t *testing.T) {
	b := newLog(t, "s1", event.Config{SystemPrompt: "old", MaxSteps: 5}).turn(1, "hi").llm("hello").finish(1, "hello")
	b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n1", Config: event.Config{SystemPrompt: "new", MaxSteps: 20}})
	st := mustFold(t, b.events)
	if st.Messages[0].Content != "new" || st.Config.MaxSteps != 20 || st.Epoch != 1 || st.Node != "n1" {
		t.Fatalf("%s", jsonOf(t, st))
	}
	b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 2, Node: "n2", Config: event.Config{}})
	st = mustFold(t, b.events)
	if st.Messages[0].Role != llm.RoleUser {
		t.Fatalf("empty prompt should remove the stored one: %s", jsonOf(t, st.Messages))
	}
}

func TestForkedSessionStartsFromCopiedMessages(t *testing.T) {
	src := []llm.Message{llm.System("s"), llm.User("a"), llm.Assistant("b"), llm.User("c"), llm.Assistant("d")}
	b := &logBuilder{t: t, sid: "f1"}
	b.add(event.SessionCreated, event.SessionCreatedData{ForkedFrom: "s1", Config: event.Config{SystemPrompt: "s"}})
	b.add(event.SessionForked, event.SessionForkedData{From: "s1", Turns: 1, Messages: ForkMessages(src, 1)})
	b.turn(2, "again")
	st := mustFold(t, b.events)
	if len(st.Messages) != 4 || st.ForkedFrom != "s1" || st.Turn != 2 || len(st.Steps) != 0 {
		t.Fatalf("%s", jsonOf(t, st))
	}
}

// Every malformed or contradictory event is an error that leaves the state as
// it was; none panics.
func TestApplyRejectsWithoutChange(t *testing.T) {
	base := newLog(t, "s1", event.Config{SystemPrompt: "p"}).turn(1, "x").llm("", call("c1", "t", `{}`))
	raw := func(typ event.Type, data string) event.Event {
		return event.Event{Session: "s1", Type: typ, Data: json.RawMessage(data)}
	}
	cases := []struct {
		name string
		ev   event.Event
		want error
	}{
		{"unknown type", raw("agent.dreamed", `{}`), event.ErrUnknownType},
		{"malformed json", raw(event.TurnStarted, `{"turn":`), event.ErrMalformed},
		{"wrong field type", raw(event.TurnStarted, `{"turn":"one"}`), event.ErrMalformed},
		{"no payload", raw(event.ToolFinished, ``), event.ErrMalformed},
		{"payload not an object", raw(event.LLMCompleted, `[1,2]`), event.ErrMalformed},
		{"missing step id", raw(event.LLMStarted, `{"request":{"messages":[]}}`), event.ErrMalformed},
		{"user message of another role", raw(event.TurnStarted, `{"turn":2,"message":{"role":"assistant"}}`), event.ErrMalformed},
		{"other session", event.MustNew("s2", event.AgentFinished, event.AgentFinishedData{}), ErrWrongSession},
		{"duplicate sequence", func() event.Event { e := base.events[1]; return e }(), ErrOutOfOrder},
		{"turn while running", event.MustNew("s1", event.TurnStarted, event.TurnStartedData{Turn: 2, Message: llm.User("y")}), ErrInconsistent},
		{"result for unknown call", event.MustNew("s1", event.ToolFinished, event.ToolFinishedData{CallID: "nope"}), ErrInconsistent},
		{"start of unknown call", event.MustNew("s1", event.ToolStarted, event.ToolStartedData{StepID: "z", Call: call("nope", "t", `{}`)}), ErrInconsistent},
		{"completion of unknown step", event.MustNew("s1", event.LLMCompleted, event.LLMCompletedData{StepID: "nope"}), ErrInconsistent},
		{"completion of ended step", event.MustNew("s1", event.LLMCompleted, event.LLMCompletedData{StepID: "st1"}), ErrInconsistent},
		{"second creation", event.MustNew("s1", event.SessionCreated, event.SessionCreatedData{}), ErrInconsistent},
		{"old epoch", event.MustNew("s1", event.SessionClaimed, event.SessionClaimedData{Epoch: 1}), nil},
		{"summary inside a tool block", event.MustNew("s1", event.SummaryAdded, event.SummaryAddedData{Content: SummaryPrefix, At: 3}), nil},
		{"fork after start", event.MustNew("s1", event.SessionForked, event.SessionForkedData{From: "x"}), ErrInconsistent},
		{"negative max steps", event.MustNew("s1", event.SessionClaimed, event.SessionClaimedData{Epoch: 9, Config: event.Config{MaxSteps: -1}}), event.ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := mustFold(t, base.events)
			if tc.name == "old epoch" {
				if err := Apply(&st, event.MustNew("s1", event.SessionClaimed, event.SessionClaimedData{Epoch: 2})); err != nil {
					t.Fatal(err)
				}
				tc.want = ErrInconsistent
			}
			if tc.name == "summary inside a tool block" {
				// messages: system, user, assistant(call) → a result goes at 3;
				// give the call its result so that index 3 is inside the block.
				if err := Apply(&st, event.MustNew("s1", event.ToolFinished, event.ToolFinishedData{CallID: "c1", Output: "r"})); err != nil {
					t.Fatal(err)
				}
				tc.want = ErrInconsistent
			}
			before := jsonOf(t, st)
			err := Apply(&st, tc.ev)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if after := jsonOf(t, st); after != before {
				t.Fatalf("state changed by a rejected event:\n%s\n---\n%s", before, after)
			}
		})
	}
}

func TestFoldSkipsBadEventsAndReportsThem(t *testing.T) {
	b := newLog(t, "s1", event.Config{}).turn(1, "x")
	bad := event.Event{Seq: 100, Session: "s1", Type: "future.type", Data: json.RawMessage(`{}`)}
	evs := append(append([]event.Event{}, b.events...), bad)
	b.seq = 100
	b.llm("done").finish(1, "done")
	evs = append(evs, b.events[len(b.events)-3:]...)
	st, err := Fold(evs)
	if !errors.Is(err, event.ErrUnknownType) {
		t.Fatalf("err = %v", err)
	}
	if st.Status != StatusCompleted {
		t.Fatalf("status %s", st.Status)
	}
}

func TestEventBeforeCreationIsRejected(t *testing.T) {
	var st State
	err := Apply(&st, event.MustNew("s1", event.TurnStarted, event.TurnStartedData{Turn: 1, Message: llm.User("x")}))
	if !errors.Is(err, ErrInconsistent) {
		t.Fatalf("err = %v", err)
	}
}

func TestSnapshotThenTailEqualsFullFold(t *testing.T) {
	c := call("c1", "t", `{"a":1}`)
	b := newLog(t, "s1", event.Config{SystemPrompt: "p", ContextChars: 100}).
		turn(1, "x").llm("", c).tool(c, "out").llm("y").finish(1, "y")
	b.add(event.CheckpointCreated, event.CheckpointCreatedData{ID: "cp1", UpToSeq: b.seq})
	b.add(event.ArtifactCreated, event.ArtifactCreatedData{ID: "a1", Name: "f.txt", Ref: event.ArtifactRef{Bucket: "tah_artifacts", Object: "a1", Size: 3}})
	b.turn(2, "z").llm("w").finish(2, "w")
	full := mustFold(t, b.events)
	for cut := 0; cut <= len(b.events); cut++ {
		snap := mustFold(t, b.events[:cut]).Clone()
		if err := FoldInto(&snap, b.events[cut:]); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if got, want := jsonOf(t, snap), jsonOf(t, full); got != want {
			t.Fatalf("cut %d: snapshot+tail differs from full fold", cut)
		}
	}
}

// An input redelivered after newer turns ran (its node died and a newer input
// reached the next owner first) is still recognised, for RecentInputsKept
// turns.
func TestRecentInputsRecogniseRedeliveries(t *testing.T) {
	b := newLog(t, "s1", event.Config{})
	for i := 1; i <= RecentInputsKept+2; i++ {
		b.add(event.TurnStarted, event.TurnStartedData{Turn: i, InputID: fmt.Sprintf("in_%d", i), Message: llm.User("x")})
		b.llm("y").finish(i, "y")
	}
	st := mustFold(t, b.events)
	if st.SawInput("in_1") || st.SawInput("in_2") || st.SawInput("") {
		t.Fatal("inputs older than the window, or no id, are recognised")
	}
	for _, id := range []string{"in_3", fmt.Sprintf("in_%d", RecentInputsKept+2)} {
		if !st.SawInput(id) {
			t.Fatalf("%s not recognised (recent: %d)", id, len(st.RecentInputs))
		}
	}
	if len(st.RecentInputs) != RecentInputsKept {
		t.Fatalf("keeps %d input ids", len(st.RecentInputs))
	}
}

// Turns are numbered 1, 2, 3..., and a fork's on from the turns it copied: a
// turn.started of any other number (a repeat, a gap) is refused, and the
// state stays as it was.
func TestTurnNumbersFollowOn(t *testing.T) {
	started := func(n int) event.Event {
		return event.MustNew("s1", event.TurnStarted, event.TurnStartedData{Turn: n, Message: llm.User("x")})
	}
	fresh := newLog(t, "s1", event.Config{})
	done := newLog(t, "s1", event.Config{}).turn(1, "x").llm("y").finish(1, "y")
	forked := newLog(t, "s1", event.Config{})
	forked.add(event.SessionForked, event.SessionForkedData{From: "s0", Messages: []llm.Message{
		llm.User("one"), llm.Assistant("1"), llm.User("two"), llm.Assistant("2")}})
	for _, tc := range []struct {
		name string
		log  *logBuilder
		ok   int
		bad  []int
	}{
		{"a new session", fresh, 1, []int{2, 5}},
		{"after turn 1", done, 2, []int{1, 3, 100}},
		{"a fork of two turns", forked, 3, []int{1, 2, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := mustFold(t, tc.log.events)
			before := jsonOf(t, st)
			for _, n := range tc.bad {
				if err := Apply(&st, started(n)); !errors.Is(err, ErrInconsistent) {
					t.Fatalf("turn %d: err = %v, want %v", n, err, ErrInconsistent)
				}
				if jsonOf(t, st) != before {
					t.Fatalf("turn %d changed the state", n)
				}
			}
			if err := Apply(&st, started(tc.ok)); err != nil || st.Turn != tc.ok {
				t.Fatalf("turn %d: %v (turn %d)", tc.ok, err, st.Turn)
			}
		})
	}
}
