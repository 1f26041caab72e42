package projection

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// typedEvent is an event with the payload its writer made it of.
type typedEvent struct {
	e event.Event
	p any
}

// foldBoth folds evs with Apply into one state and with ApplyTyped into
// another, and fails at the first event where they part: another error, or
// another state (reflect.DeepEqual), or another request for the next step.
func foldBoth(t *testing.T, name string, evs []typedEvent) {
	t.Helper()
	var decoded, typed State
	for i, te := range evs {
		derr := Apply(&decoded, te.e)
		terr := ApplyTyped(&typed, te.e, te.p)
		if (derr == nil) != (terr == nil) || derr != nil && derr.Error() != terr.Error() {
			t.Fatalf("%s: event %d (%s): Apply: %v, ApplyTyped: %v", name, i, te.e.Type, derr, terr)
		}
		if !reflect.DeepEqual(decoded, typed) {
			t.Fatalf("%s: event %d (%s) %s: the states part:\nApply      %s\nApplyTyped %s",
				name, i, te.e.Type, te.e.Data, jsonOf(t, decoded), jsonOf(t, typed))
		}
		if decoded.ID == "" || !decoded.Status.Active() || decoded.Elided.Messages > 0 {
			continue
		}
		dr, derr := NextRequest(&decoded, nil, nil)
		tr, terr := NextRequest(&typed, nil, nil)
		if derr != nil || terr != nil || dr.Ref.RequestSHA256 != tr.Ref.RequestSHA256 {
			t.Fatalf("%s: after event %d (%s), the next requests differ: %v %v %s %s", name, i, te.e.Type, derr, terr, dr.Ref.RequestSHA256, tr.Ref.RequestSHA256)
		}
	}
}

// TestApplyTypedAsApply: folding each event with the payload it was made
// of gives the state of folding it from its encoding, event after event, on
// logs that hold every event type: the recorded logs of testdata (their
// payloads made into events again, as a writer makes them), and a log
// written here whose payloads the encoding changes (invalid UTF-8, tool
// arguments with spaces or < > &, empty lists and maps it leaves out, a
// deadline with a zone), where ApplyTyped must decode.
func TestApplyTypedAsApply(t *testing.T) {
	seen := map[event.Type]bool{}
	files, _ := filepath.Glob("testdata/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no recorded logs in testdata")
	}
	for _, file := range files {
		var evs []typedEvent
		for _, e := range readLog(t, file) {
			p, err := e.Decode()
			if err == nil {
				re, err := event.New(e.Session, e.Type, p)
				if err != nil {
					t.Fatal(err)
				}
				re.Seq, re.Index, re.Time, re.Epoch = e.Seq, e.Index, e.Time, e.Epoch
				e = re
			}
			seen[e.Type] = true
			evs = append(evs, typedEvent{e, p})
		}
		foldBoth(t, filepath.Base(file), evs)
	}

	w := &typedLog{t: t, sid: "s_typed"}
	bad := "bin \xff\xfe ary"
	args := json.RawMessage(`{"path": "a.txt", "q": "<b> & c"}`)
	calls := []llm.ToolCall{{ID: "c1", Name: "read", Arguments: args}, {ID: "c2", Name: "read", Arguments: json.RawMessage(`{"path":"b.txt"}`)},
		{ID: "c3", Name: "write", Arguments: json.RawMessage(`{}`)}}
	w.add(event.SessionCreated, event.SessionCreatedData{Config: event.Config{SystemPrompt: "sys " + bad, ContextChars: 300}, Labels: map[string]string{}})
	w.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n1", Config: event.Config{SystemPrompt: "sys", ContextChars: 300}})
	w.add(event.TurnStarted, event.TurnStartedData{Turn: 1, Message: llm.User("hi " + bad), InputID: "in1"})
	tools := []llm.ToolSchema{{Name: "read", InputSchema: json.RawMessage(`{"type": "object"}`)}}
	digest, _ := event.ToolsDigest(tools)
	w.add(event.ToolsOffered, event.ToolsOfferedData{Digest: digest, Tools: tools})
	w.add(event.LLMStarted, event.LLMStartedData{StepID: "l1", Turn: 1, RequestRef: event.RequestRef{History: 2, RequestSHA256: "x", Tools: []string{}}})
	w.add(event.LLMStreaming, event.LLMStreamingData{StepID: "l1"})
	w.add(event.LLMCompleted, event.LLMCompletedData{StepID: "l1", Response: llm.Response{Content: "ok " + bad, Reasoning: "r", ToolCalls: calls}})
	w.add(event.Thinking, event.ThinkingData{StepID: "th1", Content: bad})
	w.add(event.ToolStarted, event.ToolStartedData{StepID: "t1", Call: calls[0], Idempotent: true})
	w.add(event.ToolWaiting, event.ToolWaitingData{StepID: "t1", CallID: "c1", Name: "read", WaitMS: 10})
	w.add(event.ToolFinished, event.ToolFinishedData{StepID: "t1", CallID: "c1", Name: "read", Output: bad + strings.Repeat(" long output", 40)})
	w.add(event.ToolApprovalRequested, event.ToolApprovalRequestedData{Turn: 1, Calls: calls[1:],
		Deadline: time.Date(2026, 12, 2, 12, 0, 0, 7, time.FixedZone("CET", 3600))})
	w.add(event.ToolApproved, event.ToolApprovedData{CallID: "c2", By: "ann", Arguments: json.RawMessage(`{"path": "c.txt"}`)})
	w.add(event.ToolDenied, event.ToolDeniedData{CallID: "c3", Note: bad})
	w.add(event.ToolFinished, event.ToolFinishedData{CallID: "c3", Name: "write", Output: "denied", IsError: true, Code: event.CodeDenied})
	w.add(event.ToolStarted, event.ToolStartedData{StepID: "t2", Call: llm.ToolCall{ID: "c2", Name: "read", Arguments: json.RawMessage(`{"path":"c.txt"}`)}})
	w.add(event.ToolFinished, event.ToolFinishedData{StepID: "t2", CallID: "c2", Name: "read", Output: "fine"})
	w.add(event.ContextTrimmed, event.ContextTrimmedData{StepID: "l2", Report: event.TrimReport{Budget: 300, BeforeChars: 900, AfterChars: 290, OutputsOmitted: 1}})
	w.add(event.LLMStarted, event.LLMStartedData{StepID: "l2", Turn: 1, RequestRef: event.RequestRef{History: 8, RequestSHA256: "y"},
		Trim: &event.TrimReport{Budget: 300, BeforeChars: 900, AfterChars: 290, OutputsOmitted: 1}})
	w.add(event.LLMFailed, event.LLMFailedData{StepID: "l2", Error: "provider " + bad, Code: event.CodeProvider})
	w.add(event.AgentFailed, event.AgentFailedData{Turn: 1, Error: bad, Code: event.CodeProvider})
	w.add(event.TurnStarted, event.TurnStartedData{Turn: 2, Message: llm.User("again")})
	w.add(event.ContextCompacted, event.ContextCompactedData{SessionID: "s_typed", Turns: 1, Chars: 10, Auto: true,
		CompactionCall: event.CompactionCall{StepID: "l3", Usage: llm.Usage{InputTokens: 5}}})
	w.add(event.SummaryAdded, event.SummaryAddedData{Content: "[summary] " + bad, At: 1, Turns: 1})
	w.add(event.ContextCompactFailed, event.ContextCompactFailedData{SessionID: "s_typed", Error: bad, CompactionCall: event.CompactionCall{StepID: "l4"}})
	w.add(event.TurnSteered, event.TurnSteeredData{Turn: 2, Message: llm.Message{Role: llm.RoleUser, Content: bad, Steer: true}, InputID: "in-s"})
	w.add(event.AgentCancelled, event.AgentCancelledData{Turn: 2, Reason: bad, InterruptedBy: "in-i"})
	w.add(event.TurnStarted, event.TurnStartedData{Turn: 3, Message: llm.User("last")})
	w.add(event.ArtifactCreated, event.ArtifactCreatedData{ID: "a1", Name: bad, Ref: event.ArtifactRef{Bucket: "b", Object: "o", Size: 3}})
	w.add(event.AgentFinished, event.AgentFinishedData{Turn: 3, Content: bad, SessionUsage: &llm.Usage{}})
	w.add(event.CheckpointCreated, event.CheckpointCreatedData{ID: "ck", UpToSeq: 30, Key: "s_typed"})
	w.add(event.TurnStarted, event.TurnStartedData{Turn: 4, Message: llm.User("over"), Budget: &event.Limits{Tokens: 1}})
	w.add(event.AgentFailed, event.AgentFailedData{Turn: 4, Error: bad, Code: event.CodeBudgetExceeded,
		Budget: &event.BudgetReached{Scope: event.ScopeTurn, Kind: event.LimitTokens, From: event.FromInput, Limit: 1, Spent: 5}})
	w.add(event.BudgetSet, event.BudgetSetData{Budget: event.Budget{Turn: event.Limits{Tokens: 100}}, By: bad})
	w.add(event.TurnReopened, event.TurnReopenedData{Turn: 4, After: event.CodeBudgetExceeded})
	w.add(event.AgentFinished, event.AgentFinishedData{Turn: 4, Content: "ok"})
	w.add(event.LLMCompleted, event.LLMCompletedData{StepID: "nope"}) // refused by both
	foldBoth(t, "written", w.evs)

	f := &typedLog{t: t, sid: "s_fork"}
	f.add(event.SessionCreated, event.SessionCreatedData{Config: event.Config{}, ForkedFrom: "s_typed"})
	f.add(event.SessionForked, event.SessionForkedData{From: "s_typed", Turns: -1, Messages: []llm.Message{llm.User(bad),
		{Role: llm.RoleAssistant, ToolCalls: calls[:1]}, {Role: llm.RoleTool, ToolCallID: "c1", Name: "read", Content: bad}}})
	foldBoth(t, "fork", f.evs)

	o := &typedLog{t: t, sid: "s_fork_at"}
	o.add(event.SessionCreated, event.SessionCreatedData{Config: event.Config{}, ForkedFrom: "s_typed"})
	o.add(event.SessionForked, event.SessionForkedData{From: "s_typed", Turns: -1, Messages: []llm.Message{llm.User("one"), llm.Assistant("done")}})
	o.add(event.TurnForked, event.TurnForkedData{Turn: 2, Messages: []llm.Message{llm.User(bad), {Role: llm.RoleAssistant, ToolCalls: calls[:2]},
		{Role: llm.RoleTool, ToolCallID: "c1", Name: "read", Content: bad}}, AtStep: "t1", Steps: 1})
	o.add(event.SessionEdited, event.SessionEditedData{Message: 4, Role: llm.RoleTool, CallID: "c1", From: bad, To: "edited " + bad, By: "ann"})
	o.add(event.SessionEdited, event.SessionEditedData{Message: 0, Role: llm.RoleUser, From: "nope", To: "x"}) // refused by both
	foldBoth(t, "fork at a step", o.evs)
	f.evs = append(f.evs, o.evs...)

	for _, e := range append(w.evs, f.evs...) {
		seen[e.e.Type] = true
	}
	for _, typ := range event.Types() {
		if !seen[typ] {
			t.Errorf("no event %s folded both ways", typ)
		}
	}
}

// typedLog writes a session's log with the payload of each event.
type typedLog struct {
	t   *testing.T
	sid string
	evs []typedEvent
}

func (l *typedLog) add(typ event.Type, p any) {
	l.t.Helper()
	e, err := event.New(l.sid, typ, p)
	if err != nil {
		l.t.Fatal(err)
	}
	e.Seq, e.Time, e.Epoch = uint64(len(l.evs)+1), t0.Add(time.Duration(len(l.evs))*time.Second), 1
	l.evs = append(l.evs, typedEvent{e, p})
}
