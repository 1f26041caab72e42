package projection

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/pricing"
)

// logBuilder writes a session's log the way the loop does, with sequences and
// times that increase by one per event.
type logBuilder struct {
	t      testing.TB
	sid    string
	seq    uint64
	events []event.Event
	step   int
	// st is the fold of events, as the loop's state is; tools are the tools
	// the next LLM step offers; sent are the requests the LLM steps sent, by
	// step id.
	st    State
	tools []llm.ToolSchema
	sent  map[string]llm.Request
	// hasher hashes the requests step after step, as the loop's does.
	hasher event.RequestHasher
	// cost is what the next LLM steps record as their cost; nil: none, as
	// a log written before costs were recorded.
	cost *pricing.Cost
}

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func newLog(t testing.TB, sid string, cfg event.Config) *logBuilder {
	b := &logBuilder{t: t, sid: sid}
	b.add(event.SessionCreated, event.SessionCreatedData{Config: cfg})
	return b
}

func (b *logBuilder) add(typ event.Type, data any) *logBuilder {
	b.t.Helper()
	e, err := event.New(b.sid, typ, data)
	if err != nil {
		b.t.Fatal(err)
	}
	b.seq++
	e.Seq = b.seq
	e.Time = t0.Add(time.Duration(b.seq) * time.Second)
	b.events = append(b.events, e)
	_ = Apply(&b.st, e) // some tests write what the fold refuses, on purpose
	return b
}

func (b *logBuilder) nextStep() string { b.step++; return fmt.Sprintf("st%d", b.step) }

func (b *logBuilder) turn(n int, text string) *logBuilder {
	return b.add(event.TurnStarted, event.TurnStartedData{Turn: n, Message: llm.User(text)})
}

// llm appends what the loop writes for an LLM step that answers with content
// and calls: tools.offered when the tools changed, llm.started (with the
// request by reference) and llm.completed.
func (b *logBuilder) llm(content string, calls ...llm.ToolCall) *logBuilder {
	b.t.Helper()
	id := b.nextStep()
	next, err := NextRequest(&b.st, b.tools, &b.hasher)
	if err != nil {
		b.t.Fatal(err)
	}
	if sum, err := event.RequestSHA256(next.Request); err != nil || sum != next.Ref.RequestSHA256 {
		b.t.Fatalf("step %s: the hasher gives %s, RequestSHA256 %s %v", id, next.Ref.RequestSHA256, sum, err)
	}
	if next.Offer != nil {
		b.add(event.ToolsOffered, *next.Offer)
	}
	b.add(event.LLMStarted, next.Started(id))
	if b.sent == nil {
		b.sent = map[string]llm.Request{}
	}
	b.sent[id] = next.Request
	finish := llm.FinishStop
	if len(calls) > 0 {
		finish = llm.FinishToolCalls
	}
	return b.add(event.LLMCompleted, event.LLMCompletedData{StepID: id, Response: llm.Response{
		Content: content, ToolCalls: calls, FinishReason: finish, Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}}, Cost: b.cost})
}

// tool appends tool.started and tool.finished for call.
func (b *logBuilder) tool(call llm.ToolCall, output string) *logBuilder {
	id := b.nextStep()
	b.add(event.ToolStarted, event.ToolStartedData{StepID: id, Call: call})
	return b.add(event.ToolFinished, event.ToolFinishedData{StepID: id, CallID: call.ID, Name: call.Name, Output: output})
}

func (b *logBuilder) finish(turn int, content string) *logBuilder {
	return b.add(event.AgentFinished, event.AgentFinishedData{Turn: turn, Content: content, Steps: 1})
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

func mustFold(t testing.TB, events []event.Event) State {
	t.Helper()
	st, err := Fold(events)
	if err != nil {
		t.Fatalf("fold: %v", err)
	}
	return st
}

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
