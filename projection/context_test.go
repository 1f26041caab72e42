package projection

import (
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// history builds a conversation: a system message, then turns each made of a
// user message, one tool call with an output of outChars, and a final answer.
func history(sys string, turns int, outChars int) []llm.Message {
	var msgs []llm.Message
	if sys != "" {
		msgs = append(msgs, llm.System(sys))
	}
	for i := 0; i < turns; i++ {
		id := string(rune('a' + i))
		c := call(id, "read_file", `{"path":"f"}`)
		msgs = append(msgs, llm.User("question "+id), llm.Assistant("", c),
			llm.ToolResult(c, strings.Repeat("x", outChars), false), llm.Assistant("answer "+id))
	}
	return msgs
}

func TestProjectContextNoBudgetOrFits(t *testing.T) {
	msgs := history("sys", 3, 100)
	for _, budget := range []int{0, -1, llm.TotalChars(msgs), 1 << 30} {
		out, rep := ProjectContext(msgs, budget)
		if rep.Trimmed() || rep.OverBudget || len(out) != len(msgs) {
			t.Errorf("budget %d: %+v", budget, rep)
		}
	}
}

func TestProjectContextRule1OmitsOlderOutputsOldestFirst(t *testing.T) {
	msgs := history("sys", 3, 1000)
	total := llm.TotalChars(msgs)
	out, rep := ProjectContext(msgs, total-500) // one omission is enough
	if rep.OutputsOmitted != 1 || rep.TurnsDropped != 0 || rep.OverBudget {
		t.Fatalf("%+v", rep)
	}
	if out[3].Content != OmittedOutput(1000) {
		t.Fatalf("oldest output: %q", out[3].Content)
	}
	if out[7].Content == out[3].Content {
		t.Fatal("second turn's output should be kept")
	}
	if msgs[3].Content != strings.Repeat("x", 1000) {
		t.Fatal("input mutated")
	}
	// The current turn's output is never touched by rule 1.
	out, rep = ProjectContext(msgs, total-1900)
	if rep.OutputsOmitted != 2 || out[11].Content != msgs[11].Content {
		t.Fatalf("%+v", rep)
	}
}

func TestProjectContextRule2DropsWholeTurnsAndNotesThem(t *testing.T) {
	msgs := history("sys", 4, 1000)
	cur := llm.TotalChars(msgs[len(msgs)-4:])
	out, rep := ProjectContext(msgs, cur+200)
	if rep.TurnsDropped == 0 || rep.OverBudget {
		t.Fatalf("%+v", rep)
	}
	if !strings.HasPrefix(out[0].Content, "sys\n\n[") || !strings.Contains(out[0].Content, "earlier turns omitted") {
		t.Fatalf("system note: %q", out[0].Content)
	}
	if err := llm.CheckPairing(out); err != nil {
		t.Fatal(err)
	}
	if out[len(out)-4].Content != "question d" {
		t.Fatalf("current turn lost: %s", jsonOf(t, out))
	}
	if rep.AfterChars != llm.TotalChars(out) || rep.AfterChars > rep.Budget {
		t.Fatalf("report %+v, actual %d", rep, llm.TotalChars(out))
	}
}

func TestProjectContextRule2WithoutSystemMessageCreatesOne(t *testing.T) {
	msgs := history("", 3, 500)
	out, rep := ProjectContext(msgs, llm.TotalChars(msgs[8:])+60)
	if rep.TurnsDropped != 2 || out[0].Role != llm.RoleSystem || out[0].Content != droppedNote(2) {
		t.Fatalf("%+v %s", rep, jsonOf(t, out[:2]))
	}
}

func TestProjectContextRule3SeenOutputsOfCurrentTurn(t *testing.T) {
	c1, c2, c3 := call("1", "t", `{}`), call("2", "t", `{}`), call("3", "t", `{}`)
	big := strings.Repeat("y", 2000)
	msgs := []llm.Message{llm.System("s"), llm.User("go"),
		llm.Assistant("", c1), llm.ToolResult(c1, big, false),
		llm.Assistant("", c2), llm.ToolResult(c2, big, false),
		llm.Assistant("", c3), llm.ToolResult(c3, big, false)}
	out, rep := ProjectContext(msgs, 2500)
	if rep.CurrentOutputsOmitted != 2 || rep.OverBudget {
		t.Fatalf("%+v", rep)
	}
	if out[7].Content != big {
		t.Fatal("the newest batch of tool results must be kept")
	}
	// A turn whose newest tool results alone exceed the budget: over budget, kept.
	out, rep = ProjectContext(msgs, 100)
	if !rep.OverBudget || out[7].Content != big || len(out) != len(msgs) {
		t.Fatalf("%+v", rep)
	}
}

func TestProjectContextEdgeCases(t *testing.T) {
	cases := map[string][]llm.Message{
		"empty":          nil,
		"system only":    {llm.System(strings.Repeat("s", 50))},
		"no user":        {llm.System("s"), llm.Assistant(strings.Repeat("a", 50))},
		"one user":       {llm.User(strings.Repeat("u", 50))},
		"dangling calls": {llm.User("u"), llm.Assistant("", call("1", "t", `{}`)), llm.User(strings.Repeat("v", 50))},
	}
	for name, msgs := range cases {
		t.Run(name, func(t *testing.T) {
			out, rep := ProjectContext(msgs, 10)
			if len(out) > len(msgs)+1 {
				t.Fatalf("grew: %d → %d", len(msgs), len(out))
			}
			if rep.AfterChars != llm.TotalChars(out) {
				t.Fatalf("report %+v, actual %d", rep, llm.TotalChars(out))
			}
		})
	}
}

func TestProjectContextIsIdempotent(t *testing.T) {
	msgs := history("sys", 5, 700)
	for budget := 100; budget < llm.TotalChars(msgs)+100; budget += 97 {
		once, _ := ProjectContext(msgs, budget)
		twice, rep := ProjectContext(once, budget)
		if jsonOf(t, once) != jsonOf(t, twice) {
			t.Fatalf("budget %d: projecting again changed the copy (%+v)", budget, rep)
		}
	}
}

func TestApplySummary(t *testing.T) {
	sum1 := llm.System(SummaryPrefix + "\none")
	sum2 := llm.System(SummaryPrefix + "\ntwo")
	cases := []struct {
		name string
		in   []llm.Message
		want []llm.Message
	}{
		{"no summary", []llm.Message{llm.System("p"), llm.User("u")}, []llm.Message{llm.System("p"), llm.User("u")}},
		{"merged into system", []llm.Message{llm.System("p"), llm.User("a"), llm.Assistant("b"), sum1, llm.User("c")},
			[]llm.Message{llm.System("p\n\n" + sum1.Content), llm.User("c")}},
		{"newest of several", []llm.Message{llm.System("p"), llm.User("a"), sum1, llm.User("b"), sum2, llm.User("c")},
			[]llm.Message{llm.System("p\n\n" + sum2.Content), llm.User("c")}},
		{"no system message", []llm.Message{llm.User("a"), sum1, llm.User("c")}, []llm.Message{sum1, llm.User("c")}},
		{"summary last", []llm.Message{llm.System("p"), llm.User("a"), sum1}, []llm.Message{llm.System("p\n\n" + sum1.Content)}},
		{"summary in current turn", []llm.Message{llm.System("p"), llm.User("a"), llm.Assistant("b"), sum1, llm.Assistant("c")},
			[]llm.Message{llm.System("p\n\n" + sum1.Content), llm.Assistant("c")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := jsonOf(t, tc.in)
			got := ApplySummary(tc.in)
			if jsonOf(t, got) != jsonOf(t, tc.want) {
				t.Fatalf("got %s", jsonOf(t, got))
			}
			if jsonOf(t, tc.in) != before {
				t.Fatal("input mutated")
			}
		})
	}
}

func TestReplaceSystemPrompt(t *testing.T) {
	sum := llm.System(SummaryPrefix + " s")
	cases := []struct {
		name   string
		in     []llm.Message
		prompt string
		want   []llm.Message
	}{
		{"new session", nil, "p", []llm.Message{llm.System("p")}},
		{"no prompt", nil, "", nil},
		{"replaced", []llm.Message{llm.System("old"), llm.User("u")}, "new", []llm.Message{llm.System("new"), llm.User("u")}},
		{"removed", []llm.Message{llm.System("old"), llm.User("u")}, "", []llm.Message{llm.User("u")}},
		{"added", []llm.Message{llm.User("u")}, "p", []llm.Message{llm.System("p"), llm.User("u")}},
		{"summary is not a prompt", []llm.Message{sum, llm.User("u")}, "p", []llm.Message{llm.System("p"), sum, llm.User("u")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReplaceSystemPrompt(tc.in, tc.prompt); jsonOf(t, got) != jsonOf(t, tc.want) {
				t.Fatalf("got %s", jsonOf(t, got))
			}
		})
	}
}

func TestRepairAndDanglingCalls(t *testing.T) {
	c1, c2, c3 := call("1", "a", `{}`), call("2", "b", `{}`), call("3", "c", `{}`)
	msgs := []llm.Message{llm.User("u"), llm.Assistant("", c1, c2), llm.ToolResult(c1, "r1", false),
		llm.User("v"), llm.Assistant("", c3)}
	if d := DanglingCalls(msgs); len(d) != 2 || d[0].ID != "2" || d[1].ID != "3" {
		t.Fatalf("dangling %v", d)
	}
	before := jsonOf(t, msgs)
	got := Repair(msgs)
	if jsonOf(t, msgs) != before {
		t.Fatal("input mutated")
	}
	if err := llm.CheckPairing(got); err != nil {
		t.Fatal(err)
	}
	if got[3].ToolCallID != "2" || got[3].Content != NotExecutedOutput || !got[3].IsError {
		t.Fatalf("%s", jsonOf(t, got))
	}
	if len(Repair(got)) != len(got) || len(DanglingCalls(nil)) != 0 {
		t.Fatal("repair of a repaired history changed it")
	}
}

func TestForkMessages(t *testing.T) {
	msgs := history("sys", 3, 10)
	cases := map[int]int{-1: 13, 0: 1, 1: 5, 2: 9, 3: 13, 10: 13}
	for turns, want := range cases {
		got := ForkMessages(msgs, turns)
		if len(got) != want {
			t.Errorf("turns %d: %d messages, want %d", turns, len(got), want)
		}
		if len(Turns(got)) != min(max(turns, 0), 3) && turns >= 0 {
			t.Errorf("turns %d: got %d turns", turns, len(Turns(got)))
		}
	}
	// A source that ended mid-turn forks into a history providers accept.
	cut := append(history("sys", 1, 10), llm.User("q"), llm.Assistant("", call("z", "t", `{}`)))
	if err := llm.CheckPairing(ForkMessages(cut, -1)); err != nil {
		t.Fatal(err)
	}
}

func TestPlanCompaction(t *testing.T) {
	msgs := history("sys", 3, 50)
	if _, ok := PlanCompaction(history("sys", 0, 0), false); ok {
		t.Fatal("nothing to compact in a history without turns")
	}
	if _, ok := PlanCompaction(history("sys", 1, 10), true); ok {
		t.Fatal("auto compaction never covers the current turn")
	}
	plan, ok := PlanCompaction(msgs, true)
	if !ok || plan.Turns != 2 || plan.At != 9 {
		t.Fatalf("auto: %+v", plan)
	}
	if !strings.HasPrefix(plan.Request.Messages[0].Content, CompactionMarker) {
		t.Fatal("compaction prompt lacks the marker")
	}
	for _, want := range []string{"goals", "decisions", "files", "unfinished", "key facts", "language"} {
		if !strings.Contains(plan.Request.Messages[0].Content, want) {
			t.Errorf("prompt does not ask for %q", want)
		}
	}
	in := plan.Request.Messages[1].Content
	if !strings.Contains(in, "question a") || strings.Contains(in, "question c") || !strings.Contains(in, "Tool call read_file") {
		t.Fatalf("input: %s", in)
	}
	manual, ok := PlanCompaction(msgs, false)
	if !ok || manual.Turns != 3 || manual.At != len(msgs) {
		t.Fatalf("manual: %+v", manual)
	}
	// After a summary, only the turns since it are covered, and it is folded in.
	withSum := append(append([]llm.Message{}, msgs...), llm.System(SummaryContent("earlier facts")), llm.User("d"), llm.Assistant("e"))
	plan, ok = PlanCompaction(withSum, false)
	if !ok || plan.Turns != 1 || !strings.Contains(plan.Request.Messages[1].Content, "# Previous summary\nearlier facts") {
		t.Fatalf("%+v", plan)
	}
	if _, ok := PlanCompaction(withSum[:len(withSum)-2], false); ok {
		t.Fatal("nothing since the last summary")
	}
}

func TestCompactionInputLimits(t *testing.T) {
	msgs := []llm.Message{llm.System("s")}
	for i := 0; i < 100; i++ {
		msgs = append(msgs, llm.User(strings.Repeat("u", 10_000)), llm.Assistant(strings.Repeat("a", 10_000)))
	}
	plan, ok := PlanCompaction(msgs, false)
	if !ok {
		t.Fatal("no plan")
	}
	in := plan.Request.Messages[1].Content
	if n := len([]rune(in)); n > CompactionInputChars || n != plan.InputChars {
		t.Fatalf("input %d chars (plan says %d), limit %d", n, plan.InputChars, CompactionInputChars)
	}
	if !strings.Contains(in, "chars cut]") || !strings.Contains(in, "earlier items left out") {
		t.Fatal("truncation is not marked")
	}
	if !strings.Contains(in, "## Turn 100") {
		t.Fatal("the newest items must be kept")
	}
}

func TestSummaryContent(t *testing.T) {
	for _, in := range []string{"facts", SummaryPrefix + "\nfacts", "  " + SummaryPrefix + " facts "} {
		if got := SummaryContent(in); got != SummaryPrefix+"\nfacts" {
			t.Errorf("%q → %q", in, got)
		}
	}
	if !IsSummary(llm.System(SummaryContent("x"))) || IsSummary(llm.User(SummaryContent("x"))) {
		t.Fatal("IsSummary")
	}
}

func TestMarkersAreRecognised(t *testing.T) {
	if !isOmitted(OmittedOutput(12)) || isOmitted("x"+OmittedOutput(1)) {
		t.Fatal("omitted marker")
	}
	if !droppedRE.MatchString("x\n\n"+droppedNote(1)) || !droppedRE.MatchString(droppedNote(12)) {
		t.Fatal("dropped-turns note")
	}
	_ = event.TrimReport{}
}
