package projection

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// checkRebuilds rebuilds every LLM step of evs and checks that each is
// verified and, byte for byte, the request sent (when sent has it). It
// returns how many steps it checked.
func checkRebuilds(t testing.TB, evs []event.Event, sent map[string]llm.Request) int {
	t.Helper()
	n := 0
	for _, e := range evs {
		if e.Type != event.LLMStarted {
			continue
		}
		d, err := event.DecodeAs[event.LLMStartedData](e)
		if err != nil {
			t.Fatal(err)
		}
		r, err := RebuildRequest(evs, d.StepID)
		if err != nil {
			t.Fatalf("step %s: %v", d.StepID, err)
		}
		if !r.Verified || r.Recorded || r.SHA256 != d.RequestSHA256 {
			t.Fatalf("step %s: verified %v, recorded %v, sha256 %s (recorded %s)", d.StepID, r.Verified, r.Recorded, r.SHA256, d.RequestSHA256)
		}
		if want, ok := sent[d.StepID]; ok {
			got, wantJSON := jsonBytes(t, r.Request), jsonBytes(t, want)
			if got != wantJSON {
				t.Fatalf("step %s rebuilt\n%s\nsent\n%s", d.StepID, got, wantJSON)
			}
		}
		n++
	}
	return n
}

func jsonBytes(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRebuildRecordedLogs: every llm.started of the recorded logs rebuilds
// its request, which matches the recorded hash.
func TestRebuildRecordedLogs(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.jsonl")
	total := 0
	for _, f := range files {
		total += checkRebuilds(t, readLog(t, f), nil)
	}
	if total < 15 {
		t.Fatalf("%d LLM steps in the recorded logs; the test reads too little", total)
	}
}

var (
	toolA = llm.ToolSchema{Name: "a", Description: "Tool <a> & co.", InputSchema: json.RawMessage(`{ "type": "object",
		"properties": {"x": {"type": "string", "description": "<x>"}} }`)}
	toolB = llm.ToolSchema{Name: "b", InputSchema: json.RawMessage(`{"type":"object"}`)}
)

// TestRebuildScenarios builds sessions as the loop writes them and rebuilds
// each of their requests.
func TestRebuildScenarios(t *testing.T) {
	big := strings.Repeat("data ", 60)
	for name, write := range map[string]func(b *logBuilder){
		"trimming by all three rules": func(b *logBuilder) {
			b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n", Config: event.Config{SystemPrompt: "sys", ContextChars: 500}})
			for i := 1; i <= 3; i++ {
				c := call(fmt.Sprintf("c%d", i), "a", `{"x": "1"}`)
				b.turn(i, "again").llm("", c).tool(c, big).llm("done").finish(i, "done")
			}
			b.turn(4, "a long one")
			for i := 0; i < 4; i++ {
				c := call(fmt.Sprintf("d%d", i), "a", `{}`)
				b.llm("", c).tool(c, big)
			}
			b.llm("over")
		},
		"summaries, automatic and manual": func(b *logBuilder) {
			b.turn(1, "one").llm("1").finish(1, "1")
			b.turn(2, "two").llm("2").finish(2, "2")
			b.add(event.SummaryAdded, event.SummaryAddedData{Content: SummaryContent("- turns one and two"), At: -1, Turns: 2})
			b.turn(3, "three").llm("3").finish(3, "3")
			b.turn(4, "four")
			b.add(event.SummaryAdded, event.SummaryAddedData{Content: SummaryContent("- three turns"), At: len(b.st.Messages) - 1, Turns: 3, Auto: true})
			c := call("c1", "a", `{}`)
			b.llm("", c).tool(c, "out").llm("4").finish(4, "4")
		},
		"a changed system prompt, model and budget between turns": func(b *logBuilder) {
			b.turn(1, "one").llm("1").finish(1, "1")
			b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n", Config: event.Config{SystemPrompt: "new <prompt>", Model: "m2", ContextChars: 40}})
			b.turn(2, "two").llm("2").finish(2, "2")
			b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 2, Node: "n", Config: event.Config{}})
			b.turn(3, "three").llm("3").finish(3, "3")
		},
		"tools that change between steps": func(b *logBuilder) {
			b.turn(1, "go")
			c := call("c1", "a", `{}`)
			b.llm("", c).tool(c, "x")
			b.tools = []llm.ToolSchema{toolB}
			c = call("c2", "b", `{}`)
			b.llm("", c).tool(c, "y")
			b.tools = []llm.ToolSchema{toolA, toolB}
			b.llm("z").finish(1, "z")
			b.tools = nil
			b.turn(2, "no tools").llm("none").finish(2, "none")
			b.tools = []llm.ToolSchema{toolA, toolB}
			b.turn(3, "tools again").llm("same").finish(3, "same")
		},
		"a fork": func(b *logBuilder) {
			c := call("c1", "a", `{}`)
			b.add(event.SessionForked, event.SessionForkedData{From: "s_src", Turns: 1, Messages: []llm.Message{
				llm.System("sys"), llm.User("before"), llm.Assistant("", c), llm.ToolResult(c, "out", false), llm.Assistant("after")}})
			b.turn(2, "and now").llm("now").finish(2, "now")
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := newLog(t, "s_req", event.Config{SystemPrompt: "sys", MaxSteps: 20})
			b.tools = []llm.ToolSchema{toolA}
			write(b)
			if n := checkRebuilds(t, b.events, b.sent); n != len(b.sent) || n == 0 {
				t.Fatalf("%d steps rebuilt, %d sent", n, len(b.sent))
			}
		})
	}
}

// TestToolsOfferedOncePerChange: the schemas are in the log once for each
// change of the tools offered, never per step.
func TestToolsOfferedOncePerChange(t *testing.T) {
	b := newLog(t, "s_tools", event.Config{})
	b.tools = []llm.ToolSchema{toolA}
	b.turn(1, "go").llm("1").llm("2").finish(1, "2")
	b.tools = []llm.ToolSchema{toolB}
	b.turn(2, "go").llm("3").finish(2, "3")
	b.tools = []llm.ToolSchema{toolA}
	b.turn(3, "go").llm("4").llm("5").finish(3, "5")
	var digests []string
	for _, e := range b.events {
		if e.Type == event.ToolsOffered {
			d, err := event.DecodeAs[event.ToolsOfferedData](e)
			if err != nil {
				t.Fatal(err)
			}
			digests = append(digests, d.Digest)
		}
	}
	a, _ := event.ToolsDigest([]llm.ToolSchema{toolA})
	bd, _ := event.ToolsDigest([]llm.ToolSchema{toolB})
	if fmt.Sprint(digests) != fmt.Sprint([]string{a, bd, a}) {
		t.Fatalf("tools.offered digests %v, want A, B, A", digests)
	}
	if b.st.ToolsOffered != a {
		t.Fatalf("state's tools offered %q, want %q", b.st.ToolsOffered, a)
	}
	checkRebuilds(t, b.events, b.sent)
}

// TestRebuildErrors: each way a rebuild cannot be made says so, and a log
// that differs from the one the request was made from is not verified.
func TestRebuildErrors(t *testing.T) {
	b := newLog(t, "s_err", event.Config{SystemPrompt: "sys"})
	b.tools = []llm.ToolSchema{toolA}
	c := call("c1", "a", `{}`)
	b.turn(1, "go").llm("", c).tool(c, "out")
	b.add(event.Thinking, event.ThinkingData{StepID: "th1", Content: "hm"})
	b.llm("done").finish(1, "done")
	evs := b.events

	for step, want := range map[string]error{"st9": ErrUnknownStep, "st2": ErrNotLLMStep, "th1": ErrNotLLMStep} {
		if _, err := RebuildRequest(evs, step); !errors.Is(err, want) || !strings.Contains(err.Error(), step) {
			t.Errorf("step %s: %v, want %v", step, err, want)
		}
	}

	without := func(typ event.Type) []event.Event {
		var out []event.Event
		for _, e := range evs {
			if e.Type != typ {
				out = append(out, e)
			}
		}
		return out
	}
	if _, err := RebuildRequest(without(event.ToolsOffered), "st1"); !errors.Is(err, ErrNotRebuildable) || !strings.Contains(err.Error(), "tools.offered") {
		t.Errorf("without tools.offered: %v", err)
	}

	// A tool output changed in the log: the second request differs from
	// what was sent, and says so.
	changed := append([]event.Event(nil), evs...)
	for i, e := range changed {
		if e.Type == event.ToolFinished {
			changed[i] = withData(t, e, func(d *event.ToolFinishedData) { d.Output = "other" })
		}
	}
	if r, err := RebuildRequest(changed, "st3"); err != nil || r.Verified {
		t.Errorf("changed output: %+v %v, want unverified", r, err)
	}

	// llm.started that names more history than there is, or records nothing.
	for name, edit := range map[string]func(*event.LLMStartedData){
		"too much history": func(d *event.LLMStartedData) { d.History = 99 },
		"no hash":          func(d *event.LLMStartedData) { d.RequestSHA256 = "" },
	} {
		bad := append([]event.Event(nil), evs...)
		for i, e := range bad {
			if e.Type == event.LLMStarted {
				bad[i] = withData(t, e, edit)
			}
		}
		if _, err := RebuildRequest(bad, "st1"); !errors.Is(err, ErrNotRebuildable) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// withData returns e with its payload, a T, changed by edit.
func withData[T any](t testing.TB, e event.Event, edit func(*T)) event.Event {
	t.Helper()
	d, err := event.DecodeAs[T](e)
	if err != nil {
		t.Fatal(err)
	}
	edit(&d)
	e.Data = json.RawMessage(jsonBytes(t, d))
	return e
}

// TestRebuildRequestRecordedWhole: an llm.started of a log written before
// requests were recorded by reference holds the whole request; it is read as
// it is, and its step has no reference.
func TestRebuildRequestRecordedWhole(t *testing.T) {
	b := newLog(t, "s_old", event.Config{})
	b.turn(1, "hi")
	old := llm.Request{Model: "m", Messages: []llm.Message{llm.User("hi")}, Tools: []llm.ToolSchema{toolB}}
	b.seq++
	b.events = append(b.events, event.Event{Seq: b.seq, Session: "s_old", Type: event.LLMStarted, Time: t0,
		Data: json.RawMessage(`{"step_id":"st1","turn":1,"request":` + jsonBytes(t, old) + `}`)})
	evs := b.add(event.LLMCompleted, event.LLMCompletedData{StepID: "st1", Response: llm.Response{Content: "yo"}}).events
	r, err := RebuildRequest(evs, "st1")
	if err != nil || !r.Recorded || !r.Verified || jsonBytes(t, r.Request) != jsonBytes(t, old) {
		t.Fatalf("%+v %v", r, err)
	}
	st := mustFold(t, evs)
	if s := st.Step("st1"); s == nil || s.RequestRef != nil || s.Status != StepCompleted {
		t.Fatalf("step %+v", s)
	}
}

// TestRebuildRandomHistories: for random sessions, the request of every LLM
// step, as the loop made it from its state, and the rebuild from the log agree
// byte for byte (FuzzRebuildRequest explores further).
func TestRebuildRandomHistories(t *testing.T) {
	for seed := range 100 {
		data := make([]byte, 200)
		x := uint32(seed*2654435761 + 1)
		for i := range data {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			data[i] = byte(x)
		}
		b := genSession(t, data)
		checkRebuilds(t, b.events, b.sent)
	}
}

func FuzzRebuildRequest(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte(strings.Repeat("\x00\x03\x07\x02\x09", 30)))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := genSession(t, data)
		checkRebuilds(t, b.events, b.sent)
	})
}

// genSession writes, from fuzz input, the log of a session as its loop would:
// turns of LLM steps with tool calls and their results, cancels and repairs,
// summaries (automatic and manual), new owners with other prompts, budgets
// and models, tool lists that change. The builder's state is the loop's: the
// fold of every event appended, sometimes reloaded from a checkpoint (a JSON
// round trip) or from the log, as a new owner loads it.
func genSession(t testing.TB, data []byte) *logBuilder {
	r := &byteReader{b: data}
	prompts := []string{"", "sys", "You are <helpful> & brief.", "другой промпт\nзаметка"}
	budgets := []int{0, 120, 300, 900}
	toolsets := [][]llm.ToolSchema{nil, {toolA}, {toolA, toolB}, {toolB}}
	texts := []string{"", "<b>&amp;</b>", "日本語のテキスト", "line\nline\tend", `quote " and \ backslash`}
	text := func() string { return strings.Repeat(texts[r.next()%len(texts)]+"x", r.next()%40) }
	config := func() event.Config {
		return event.Config{SystemPrompt: prompts[r.next()%len(prompts)], ContextChars: budgets[r.next()%len(budgets)],
			Model: []string{"", "m", "m2"}[r.next()%3]}
	}
	b := newLog(t, "s_rnd", config())
	epoch, calls := uint64(0), 0
	for turn := 1; r.more() && len(b.events) < 400; turn++ {
		if r.next()%4 == 0 {
			epoch++
			b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: epoch, Node: "n", Config: config()})
		}
		if turn > 1 && r.next()%5 == 0 {
			b.add(event.SummaryAdded, event.SummaryAddedData{Content: SummaryContent(text()), At: -1, Turns: turn - 1})
		}
		for _, c := range DanglingCalls(b.st.Messages) {
			b.add(event.ToolFinished, event.ToolFinishedData{CallID: c.ID, Name: c.Name, Output: NotExecutedOutput, IsError: true, Code: event.CodeNotExecuted})
		}
		b.turn(turn, text())
		if turn > 1 && r.next()%5 == 0 {
			b.add(event.SummaryAdded, event.SummaryAddedData{Content: SummaryContent(text()), At: len(b.st.Messages) - 1, Turns: turn - 1, Auto: true})
		}
		for step := r.next() % 4; ; step-- {
			switch r.next() % 6 {
			case 0:
				b.tools = toolsets[r.next()%len(toolsets)]
			case 1:
				b.st = b.st.Clone() // a checkpoint
			case 2:
				b.st, _ = Fold(b.events) // a new owner's load
			}
			if step <= 0 {
				b.llm(text()).finish(turn, "")
				break
			}
			var cs []llm.ToolCall
			for k := 1 + r.next()%3; k > 0; k-- {
				calls++
				cs = append(cs, call(fmt.Sprintf("c%d", calls), "a", fmt.Sprintf(`{ "x": %q, "n": %d }`, text(), r.next())))
			}
			b.llm(text(), cs...)
			if r.next()%7 == 0 { // cancelled with its calls pending: the next turn repairs them
				b.add(event.AgentCancelled, event.AgentCancelledData{Turn: turn})
				break
			}
			for _, c := range cs {
				b.tool(c, strings.Repeat(text(), 1+r.next()%8))
			}
		}
	}
	return b
}

// TestNextRequestLongTurn: in a turn of many tool steps, whose history is
// sent whole (the hasher takes up the last step's hash without comparing
// the history: event.RequestHasher.SumGrown) or trimmed to a budget, each
// step's recorded hash is RequestSHA256 of the request it sent (the
// builder checks it) and the last steps' requests rebuild from the log.
func TestNextRequestLongTurn(t *testing.T) {
	for _, budget := range []int{0, 2000} {
		b := newLog(t, "s_long", event.Config{SystemPrompt: "sys", ContextChars: budget})
		b.tools = []llm.ToolSchema{toolA}
		b.turn(1, "go")
		for i := range 300 {
			c := call(fmt.Sprintf("c%d", i), "a", fmt.Sprintf(`{"n":%d}`, i))
			b.llm("", c).tool(c, strings.Repeat("out ", i%7))
			if i%50 == 0 {
				b.st = b.st.Clone() // a checkpoint: a new array
			}
		}
		b.llm("done").finish(1, "done")
		if n := checkRebuildsFrom(t, b.events, max(0, len(b.events)-12), b.sent); n == 0 {
			t.Fatal("no step rebuilt")
		}
	}
}

// checkRebuildsFrom is checkRebuilds of the LLM steps from evs[from] on.
func checkRebuildsFrom(t testing.TB, evs []event.Event, from int, sent map[string]llm.Request) int {
	t.Helper()
	n := 0
	for _, e := range evs[from:] {
		if e.Type != event.LLMStarted {
			continue
		}
		d, err := event.DecodeAs[event.LLMStartedData](e)
		if err != nil {
			t.Fatal(err)
		}
		r, err := RebuildRequest(evs, d.StepID)
		if err != nil || !r.Verified || r.SHA256 != d.RequestSHA256 || jsonBytes(t, r.Request) != jsonBytes(t, sent[d.StepID]) {
			t.Fatalf("step %s: verified %v, %v", d.StepID, r.Verified, err)
		}
		n++
	}
	return n
}
