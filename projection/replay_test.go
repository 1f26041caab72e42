package projection

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

var (
	update = flag.Bool("update", false, "rewrite the golden files of the replay tests")
	record = flag.Bool("record", false, "rewrite testdata/*.jsonl from the scenarios in this file")
)

// replayResult is what a golden file pins for a recorded log.
type replayResult struct {
	State  State    `json:"state"`
	Errors []string `json:"errors,omitempty"`
	// Sent is what the next request would send: ApplySummary then ProjectContext
	// with the session's budget.
	Sent   []llm.Message    `json:"sent"`
	Report event.TrimReport `json:"report"`
}

// TestReplay folds each recorded log in testdata/*.jsonl and compares the state and
// the next request's context with testdata/*.golden.json (-update rewrites them).
func TestReplay(t *testing.T) {
	if *record {
		recordScenarios(t)
	}
	files, err := filepath.Glob("testdata/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded logs in testdata: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".jsonl")
		t.Run(name, func(t *testing.T) {
			evs := readLog(t, file)
			st, ferr := Fold(evs)
			res := replayResult{State: st}
			if ferr != nil {
				res.Errors = append(res.Errors, strings.Split(ferr.Error(), "\n")...)
			}
			res.Sent, res.Report = Prepare(st.Messages, st.Config.ContextChars)
			got := []byte(jsonOf(t, res) + "\n")
			golden := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./projection -run TestReplay -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("folded state differs from %s; if the change is intended, run with -update and review the diff", golden)
			}
			// Whatever the log, the history sent is one providers accept once repaired.
			if err := llm.CheckPairing(Repair(res.Sent)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func readLog(t *testing.T, file string) []event.Event {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []event.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var e event.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		evs = append(evs, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

// recordScenarios writes the logs the replay tests read. They are what the loop
// writes for the specification's situations; once written they are data.
func recordScenarios(t *testing.T) {
	write := func(name string, evs []event.Event) {
		var buf bytes.Buffer
		for _, e := range evs {
			b, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			buf.Write(b)
			buf.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join("testdata", name+".jsonl"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ls := call("call_1", "list_files", `{"path":"."}`)
	rd := call("call_2", "read_file", `{"path":"README.md"}`)

	listTool := llm.ToolSchema{Name: "list_files", Description: "List the files of a directory (<path>, & its children).",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {"path": {"type": "string", "description": "<dir>"}}}`)}
	readTool := llm.ToolSchema{Name: "read_file", Description: "Read a file.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}

	// The specification's example: one turn that lists files, reads the README, answers.
	b := newLog(t, "s_example", event.Config{SystemPrompt: "You are a helpful agent.", MaxSteps: 20})
	b.tools = []llm.ToolSchema{listTool, readTool}
	b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n1", Config: event.Config{SystemPrompt: "You are a helpful agent.", MaxSteps: 20}})
	b.turn(1, "分析这个项目的目录结构").llm("", ls).tool(ls, "README.md\ncmd/\ngo.mod").llm("", rd).tool(rd, "# TAH\nDurable agents.")
	b.add(event.Thinking, event.ThinkingData{StepID: "th1", Content: "The README explains the purpose."})
	b.llm("这是一个 Go 项目：cmd/ 放命令，README 说明用途。").finish(1, "这是一个 Go 项目：cmd/ 放命令，README 说明用途。")
	write("spec_example", b.events)

	// A cancelled turn with a call that started and one that never did, a manual
	// compaction, the repair, and the next turn.
	c1, c2 := call("call_a", "slow_tool", `{}`), call("call_b", "other", `{}`)
	b = newLog(t, "s_cancel", event.Config{SystemPrompt: "sys", MaxSteps: 20})
	b.tools = []llm.ToolSchema{{Name: "slow_tool"}, {Name: "other", Description: "Another tool."}}
	b.turn(1, "first").llm("done").finish(1, "done")
	b.turn(2, "second").llm("", c1, c2)
	b.add(event.ToolStarted, event.ToolStartedData{StepID: "t_a", Call: c1})
	b.add(event.AgentCancelled, event.AgentCancelledData{Turn: 2, Reason: "cancelled by the user"})
	b.add(event.SummaryAdded, event.SummaryAddedData{Content: SummaryContent("- the user asked twice"), At: -1, Turns: 2})
	b.add(event.ContextCompacted, event.ContextCompactedData{SessionID: "s_cancel", Turns: 2, Chars: 60})
	for _, c := range []llm.ToolCall{c1, c2} {
		b.add(event.ToolFinished, event.ToolFinishedData{CallID: c.ID, Name: c.Name, Output: NotExecutedOutput, IsError: true, Code: event.CodeNotExecuted})
	}
	b.turn(3, "third").llm("ok").finish(3, "ok")
	write("cancel_repair_compact", b.events)

	// A long session over its budget: auto-compaction fails, trimming takes over,
	// and later a summary succeeds; maxSteps ends one turn. A new owner changes
	// the system prompt after turn 2, and the tools change from turn 3 on.
	b = newLog(t, "s_budget", event.Config{SystemPrompt: "sys", MaxSteps: 2, ContextChars: 400})
	b.tools = []llm.ToolSchema{readTool}
	for i := 1; i <= 4; i++ {
		if i == 3 {
			b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 2, Node: "n2", Config: event.Config{SystemPrompt: "a new prompt", MaxSteps: 2, ContextChars: 400, Model: "m2"}})
			b.tools = []llm.ToolSchema{listTool, readTool}
		}
		c := call("call_"+string(rune('0'+i)), "read_file", `{"path":"big.txt"}`)
		b.turn(i, "read it again").llm("", c).tool(c, strings.Repeat("data ", 40)).llm("read").finish(i, "read")
	}
	b.add(event.TurnStarted, event.TurnStartedData{Turn: 5, Message: llm.User("and now?")})
	b.add(event.ContextCompactFailed, event.ContextCompactFailedData{SessionID: "s_budget", Error: "mock: HTTP 500: boom", Auto: true})
	b.add(event.ContextTrimmed, event.ContextTrimmedData{StepID: "st99", Report: event.TrimReport{Budget: 400, BeforeChars: 1000, AfterChars: 390, TurnsDropped: 3}})
	c := call("call_9", "list_files", `{}`)
	b.llm("", c).tool(c, "a\nb")
	b.add(event.AgentFailed, event.AgentFailedData{Turn: 5, Error: "reached maxSteps (2) without a final answer", Code: event.CodeMaxSteps, Steps: 2})
	b.turn(6, "summarise please")
	at := len(mustFold(t, b.events).Messages) - 1 // before the current user message
	b.add(event.SummaryAdded, event.SummaryAddedData{Content: SummaryContent("- big.txt was read four times"), At: at, Turns: 5, Auto: true})
	b.add(event.ContextCompacted, event.ContextCompactedData{SessionID: "s_budget", Turns: 5, Chars: 60, Auto: true})
	b.llm("summarised").finish(6, "summarised")
	write("budget_trim_maxsteps", b.events)

	// A fork of the example at turn 0, then a turn of its own; and a log with an
	// unknown event type and a malformed payload in it, which are reported and skipped.
	b = &logBuilder{t: t, sid: "s_fork"}
	b.add(event.SessionCreated, event.SessionCreatedData{ForkedFrom: "s_example", Config: event.Config{SystemPrompt: "You are a helpful agent.", MaxSteps: 20}})
	b.add(event.SessionForked, event.SessionForkedData{From: "s_example", FromSeq: 14, Turns: 0, Messages: []llm.Message{llm.System("You are a helpful agent.")}})
	b.seq++
	b.events = append(b.events, event.Event{Seq: b.seq, Session: "s_fork", Type: "agent.dreamed", Time: t0, Data: json.RawMessage(`{"x":1}`)})
	b.seq++
	b.events = append(b.events, event.Event{Seq: b.seq, Session: "s_fork", Type: event.TurnStarted, Time: t0, Data: json.RawMessage(`{"turn":"one"}`)})
	b.turn(1, "try another way").llm("another way").finish(1, "another way")
	write("fork_and_unknown", b.events)

	// A fork of the example right after its read_file step (the second
	// tool step), the result edited: the turn is open; a node claims it,
	// asks the model again (which sees the edit), and a new turn records
	// the definition of its agent.
	src := newLog(t, "s_example", event.Config{SystemPrompt: "You are a helpful agent.", MaxSteps: 20})
	src.tools = []llm.ToolSchema{listTool, readTool}
	src.turn(1, "分析这个项目的目录结构").llm("", ls).tool(ls, "README.md\ncmd/\ngo.mod").llm("", rd).tool(rd, "# TAH\nDurable agents.")
	plan, err := PlanFork(src.events, ForkSpec{AtStep: "st4", SystemPrompt: "You are a helpful agent.", EditStep: "st4"})
	if err != nil {
		t.Fatal(err)
	}
	edit, err := plan.Edit(Edit{StepID: "st4", Content: "# TAH\nAn edited README.", By: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	b = &logBuilder{t: t, sid: "s_fork_at"}
	b.tools = src.tools
	b.add(event.SessionCreated, event.SessionCreatedData{ForkedFrom: "s_example", Config: event.Config{SystemPrompt: "You are a helpful agent.", MaxSteps: 20}})
	b.add(event.SessionForked, event.SessionForkedData{From: "s_example", FromSeq: plan.FromSeq, Turns: -1, Messages: plan.Messages})
	b.add(event.TurnForked, *plan.Open)
	b.add(event.SessionEdited, edit)
	b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n1", Config: event.Config{SystemPrompt: "You are a helpful agent.", MaxSteps: 20}})
	b.llm("An edited README, says the tool.").finish(1, "An edited README, says the tool.")
	def, err := event.NewAgentDefinition(event.Config{SystemPrompt: "You are a helpful agent.", MaxSteps: 20}, b.tools, "mock", "session.DefaultLoop", "v0.3.0")
	if err != nil {
		t.Fatal(err)
	}
	b.add(event.TurnStarted, event.TurnStartedData{Turn: 2, Message: llm.User("and then?"), Definition: &def})
	b.llm("nothing more").finish(2, "nothing more")
	for i := range b.events[4:] {
		b.events[4+i].Epoch = 1
	}
	write("fork_at_step_edit", b.events)
}
