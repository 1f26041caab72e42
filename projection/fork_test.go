package projection

import (
	"errors"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// sourceLog is a session of two turns: the first answered at once (step
// st1); the second asks for two calls (st2), runs them (st3: c1, st4: c2)
// and answers (st5).
func sourceLog(t *testing.T) []event.Event {
	b := newLog(t, "s_src", event.Config{SystemPrompt: "be brief", MaxSteps: 20})
	b.turn(1, "hello").llm("hi").finish(1, "hi")
	c1, c2 := call("c1", "read", `{"path":"a"}`), call("c2", "read", `{"path":"b"}`)
	b.add(event.TurnStarted, event.TurnStartedData{Turn: 2, Message: llm.User("read a and b"), MaxSteps: 7})
	b.llm("", c1, c2).tool(c1, "A").tool(c2, "B").llm("a and b").finish(2, "a and b")
	return b.events
}

// forkOf folds the log a fork as plan says writes (and the edit), with
// the audit of the fork's log.
func forkOf(t *testing.T, plan ForkPlan, edit *event.SessionEditedData) (State, []event.Event) {
	t.Helper()
	b := &logBuilder{t: t, sid: "s_fork"}
	b.add(event.SessionCreated, event.SessionCreatedData{Config: event.Config{SystemPrompt: "be brief", MaxSteps: 20}, ForkedFrom: "s_src"})
	b.add(event.SessionForked, event.SessionForkedData{From: "s_src", FromSeq: plan.FromSeq, Turns: -1, Messages: plan.Messages})
	if plan.Open != nil {
		b.add(event.TurnForked, *plan.Open)
	}
	if edit != nil {
		b.add(event.SessionEdited, *edit)
	}
	st := mustFold(t, b.events)
	if r := Audit(b.events); len(r.Problems) > 0 {
		t.Fatalf("audit of the fork:\n%s", r.Problems)
	}
	return st, b.events
}

func TestPlanForkAtToolStep(t *testing.T) {
	evs := sourceLog(t)
	plan, err := PlanFork(evs, ForkSpec{AtStep: "st3", SystemPrompt: "be brief"})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Open == nil || plan.Open.Turn != 2 || plan.Open.Steps != 1 || plan.Open.MaxSteps != 7 || plan.Open.AtStep != "st3" {
		t.Fatalf("open turn %+v, want turn 2 after st3, 1 step, max_steps 7", plan.Open)
	}
	// The whole first turn, then turn 2 up to c1's result: c2 is pending.
	if got := len(plan.Messages); got != 3 {
		t.Fatalf("%d whole-turn messages, want 3 (system, hello, hi)", got)
	}
	if got := plan.Open.Messages; len(got) != 3 || got[2].ToolCallID != "c1" || got[2].Content != "A" {
		t.Fatalf("open turn's messages %+v", got)
	}
	edit, err := plan.Edit(Edit{StepID: "st3", Content: "not A", By: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if edit.Message != 5 || edit.Role != llm.RoleTool || edit.CallID != "c1" || edit.From != "A" || edit.To != "not A" || edit.By != "ann" {
		t.Fatalf("edit %+v", edit)
	}
	st, evs2 := forkOf(t, plan, &edit)
	if st.Status != StatusRunning || st.Turn != 2 || st.TurnLLMCalls != 1 || st.TurnMaxSteps != 7 || st.Edits != 1 {
		t.Fatalf("fork: %s turn %d, %d LLM calls, max_steps %d, %d edits", st.Status, st.Turn, st.TurnLLMCalls, st.TurnMaxSteps, st.Edits)
	}
	if st.Messages[5].Content != "not A" {
		t.Fatalf("message 5 %q, want the edit's", st.Messages[5].Content)
	}
	if len(st.ToolCalls) != 1 || st.ToolCalls[0].CallID != "c2" || st.ToolCalls[0].Status != StepPending {
		t.Fatalf("calls %+v, want c2 pending", st.ToolCalls)
	}
	// The request the model gets next holds the edited result.
	next, err := NextRequest(&st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := next.Request.Messages[5]; m.Content != "not A" {
		t.Fatalf("next request's message 5 %+v", m)
	}
	// The turn runs on: c2's result, then the answer; then a new turn.
	b := &logBuilder{t: t, sid: "s_fork", events: evs2, seq: uint64(len(evs2))}
	b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n", Config: event.Config{SystemPrompt: "be brief", MaxSteps: 20}})
	for i := range b.events[len(evs2):] {
		b.events[len(evs2)+i].Epoch = 1
	}
	tail := []event.Event{}
	add := func(typ event.Type, p any) {
		e, err := event.New("s_fork", typ, p)
		if err != nil {
			t.Fatal(err)
		}
		e.Seq, e.Epoch = uint64(len(b.events)+len(tail)+1), 1
		tail = append(tail, e)
	}
	add(event.ToolStarted, event.ToolStartedData{StepID: "f1", Call: call("c2", "read", `{"path":"b"}`)})
	add(event.ToolFinished, event.ToolFinishedData{StepID: "f1", CallID: "c2", Name: "read", Output: "B"})
	add(event.AgentFinished, event.AgentFinishedData{Turn: 2, Content: "done", Steps: 1})
	add(event.TurnStarted, event.TurnStartedData{Turn: 3, Message: llm.User("more")})
	all := append(b.events, tail...)
	if st := mustFold(t, all); st.Turn != 3 || st.Status != StatusRunning {
		t.Fatalf("after the fork's turn: turn %d %s", st.Turn, st.Status)
	}
	if r := Audit(all); len(r.Problems) > 0 {
		t.Fatalf("audit:\n%s", r.Problems)
	}
}

func TestPlanForkAtLLMStep(t *testing.T) {
	evs := sourceLog(t)
	plan, err := PlanFork(evs, ForkSpec{AtStep: "st2", SystemPrompt: "be brief"})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := forkOf(t, plan, nil)
	if st.Status != StatusRunning || len(st.ToolCalls) != 2 {
		t.Fatalf("fork after the calls' answer: %s, calls %+v, want both pending", st.Status, st.ToolCalls)
	}
	// At the turn's answer, the turn has ended: the copy is whole turns.
	plan, err = PlanFork(evs, ForkSpec{AtStep: "st5", SystemPrompt: "other", EditStep: "st5"})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Open != nil || len(plan.Messages) != 8 || plan.Messages[0].Content != "other" {
		t.Fatalf("fork at the answer: open %v, %d messages (first %+v)", plan.Open, len(plan.Messages), plan.Messages[0])
	}
	edit, err := plan.Edit(Edit{StepID: "st5", Content: "b and a"})
	if err != nil || edit.Message != 7 || edit.Role != llm.RoleAssistant || edit.From != "a and b" {
		t.Fatalf("edit of the answer: %+v %v", edit, err)
	}
	if st, _ := forkOf(t, plan, &edit); st.Status != StatusIdle || st.Turn != 2 || st.Messages[7].Content != "b and a" {
		t.Fatalf("fork: %s turn %d, answer %q", st.Status, st.Turn, st.Messages[7].Content)
	}
}

func TestPlanForkEdits(t *testing.T) {
	evs := sourceLog(t)
	plan, err := PlanFork(evs, ForkSpec{Turns: -1, SystemPrompt: "be brief", EditStep: "st1"})
	if err != nil {
		t.Fatal(err)
	}
	zero, two := 0, 2
	yes := true
	for _, c := range []struct {
		name string
		edit Edit
		at   int   // want the message
		want error // or the error
		role string
	}{
		{"the first answer, by its step", Edit{StepID: "st1", Content: "hey"}, 2, nil, "assistant"},
		{"turn 2's message", Edit{Turn: 2, Content: "read c"}, 3, nil, "user"},
		{"a result by its call, made an error", Edit{CallID: "c2", Content: "no such file", IsError: &yes}, 6, nil, "tool"},
		{"by index", Edit{Message: &two, Content: "hey"}, 2, nil, "assistant"},
		{"the system message", Edit{Message: &zero, Content: "x"}, 0, ErrBadFork, ""},
		{"nothing changed", Edit{CallID: "c1", Content: "A"}, 0, ErrBadFork, ""},
		{"is_error of a user message", Edit{Turn: 1, Content: "x", IsError: &yes}, 0, ErrBadFork, ""},
		{"two names", Edit{Turn: 1, CallID: "c1", Content: "x"}, 0, ErrBadFork, ""},
		{"no such turn", Edit{Turn: 3, Content: "x"}, 0, ErrBadFork, ""},
		{"no such call", Edit{CallID: "c9", Content: "x"}, 0, ErrBadFork, ""},
		{"no such step", Edit{StepID: "st9", Content: "x"}, 0, ErrUnknownStep, ""},
	} {
		d, err := plan.Edit(c.edit)
		switch {
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		case c.want == nil && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want == nil && (d.Message != c.at || string(d.Role) != c.role):
			t.Errorf("%s: message %d (%s), want %d (%s)", c.name, d.Message, d.Role, c.at, c.role)
		case c.want == nil:
			if st, _ := forkOf(t, plan, &d); st.Messages[c.at].Content != c.edit.Content {
				t.Errorf("%s: the fold has %q", c.name, st.Messages[c.at].Content)
			}
		}
	}
	// An edit must say what it changes: one of another message is refused.
	bad := event.SessionEditedData{Message: 2, Role: llm.RoleAssistant, From: "not what it says", To: "x"}
	b := &logBuilder{t: t, sid: "s_fork"}
	b.add(event.SessionCreated, event.SessionCreatedData{ForkedFrom: "s_src"})
	b.add(event.SessionForked, event.SessionForkedData{From: "s_src", Turns: -1, Messages: plan.Messages})
	b.add(event.SessionEdited, bad)
	if _, err := Fold(b.events); !errors.Is(err, ErrInconsistent) {
		t.Fatalf("an edit whose from is not the message's: %v", err)
	}
}

func TestPlanForkRefuses(t *testing.T) {
	evs := sourceLog(t)
	if _, err := PlanFork(evs, ForkSpec{AtStep: "st9"}); !errors.Is(err, ErrUnknownStep) {
		t.Errorf("unknown step: %v", err)
	}
	// A step that has not ended (the source runs it now).
	open := evs[:len(evs)-4] // up to st4's tool.started: without its result and what follows
	if _, err := PlanFork(open, ForkSpec{AtStep: "st4"}); !errors.Is(err, ErrBadFork) {
		t.Errorf("a running step: %v", err)
	}
}
