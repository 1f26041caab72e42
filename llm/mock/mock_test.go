package mock_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
)

func user(s string) llm.Request { return llm.Request{Messages: []llm.Message{llm.User(s)}} }

func say(t *testing.T, p *mock.Provider, req llm.Request) string {
	t.Helper()
	r, err := p.Generate(context.Background(), req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return r.Content
}

func TestParseScript(t *testing.T) {
	s, err := mock.ParseScript([]byte(`{
		"pace": "20ms",
		"replies": [
			{"turn": 1, "tool_calls": [{"name": "list_files", "arguments": {"path": "."}}]},
			{"turn": 1, "text": "Done.", "delay": 5, "usage": {"input_tokens": 1, "output_tokens": 2}},
			{"prompt": "again", "error": {"status": 429, "message": "slow down"}},
			{"prompt_regexp": "(?i)hello", "text": "Hi!", "times": -1, "compaction": false}
		]}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Pace != mock.Duration(20*time.Millisecond) || s.Replies[1].Delay != mock.Duration(5*time.Millisecond) {
		t.Errorf("durations: pace %v, delay %v", time.Duration(s.Pace), time.Duration(s.Replies[1].Delay))
	}
	if string(s.Replies[0].ToolCalls[0].Arguments) != `{"path": "."}` {
		t.Errorf("arguments = %s", s.Replies[0].ToolCalls[0].Arguments)
	}
	// A script survives a round trip through JSON.
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := mock.ParseScript(b)
	b2, _ := json.Marshal(s2)
	if err != nil || string(b) != string(b2) || !reflect.DeepEqual(s.Replies[3], s2.Replies[3]) {
		t.Errorf("round trip: %v\n%s\n%s", err, b, b2)
	}

	for _, bad := range []struct{ script, want string }{
		{`{"replies": [{"txt": "typo"}]}`, `unknown field "txt"`},
		{`{"replies": [{"text": "a", "tokens": ["a"]}]}`, "reply 1: set text or tokens"},
		{`{"replies": [{}, {"prompt_regexp": "("}]}`, "reply 2: prompt_regexp"},
		{`{"replies": [{"tool_calls": [{"arguments": {}}]}]}`, "tool call 1 has no name"},
		{`{"replies": [{"error": {"status": 200, "message": "x"}}]}`, "error status 200"},
		{`{"replies": [{"error": {"status": 500}}]}`, "error has no message"},
		{`{"replies": [{"delay": "soon"}]}`, `duration "soon"`},
		{`{"replies": [{"times": -2}]}`, "times must be"},
		{`{"replies": []} {}`, "more than one JSON value"},
	} {
		if _, err := mock.ParseScript([]byte(bad.script)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseScript(%s) = %v, want an error containing %q", bad.script, err, bad.want)
		}
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, []byte(`{"replies": [{"text": "from a file"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := mock.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := mock.New(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := say(t, p, user("hi")); got != "from a file" {
		t.Errorf("answer = %q", got)
	}
	if _, err := mock.Load(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("a missing file loaded")
	}
}

func TestMatching(t *testing.T) {
	p := mock.Scripted(
		mock.Say("compacted").OnCompaction(true),
		mock.Say("third call").OnCall(3),
		mock.Say("hello back").OnPromptMatch(`(?i)^hello`).Always(),
		mock.Say("second turn").OnTurn(2),
		mock.Say("about files").OnPrompt("files").Repeat(2),
		mock.Say("first"),
		mock.Say("second"),
	)
	two := llm.Request{Messages: []llm.Message{llm.User("a"), llm.Assistant("b"), llm.User("c")}}
	compaction := llm.Request{Messages: []llm.Message{llm.System(mock.CompactionMarker + "\nSummarise."), llm.User("...")}}
	steps := []struct {
		req  llm.Request
		want string
	}{
		{user("anything"), "first"},         // call 1
		{user("HELLO there"), "hello back"}, // call 2
		{user("anything"), "third call"},    // call 3 beats the order
		{two, "second turn"},
		{user("list the files"), "about files"},
		{user("more files"), "about files"},
		{user("files again"), "second"}, // "about files" is used up
		{user("hello"), "hello back"},
		{compaction, "compacted"},
	}
	for i, s := range steps {
		if got := say(t, p, s.req); got != s.want {
			t.Errorf("call %d: %q, want %q", i+1, got, s.want)
		}
	}
	if err := p.Done(); err != nil {
		t.Errorf("Done: %v", err)
	}
}

func TestUnexpectedCall(t *testing.T) {
	p := mock.Scripted(mock.Say("once").OnPrompt("hi"))
	say(t, p, user("hi"))
	_, err := p.Generate(context.Background(), llm.Request{Messages: []llm.Message{llm.User("first"), llm.Assistant("x"), llm.User("hi there")}})
	if !errors.Is(err, mock.ErrUnexpectedCall) {
		t.Fatalf("err = %v, want ErrUnexpectedCall", err)
	}
	for _, want := range []string{"call 2", "turn 2", `"hi there"`, `reply 1 (prompt "hi", says "once") would, but was used 1 of 1 times`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
	if n := len(p.Calls()); n != 2 {
		t.Errorf("recorded %d calls, want 2 (the unexpected one too)", n)
	}
}

func TestDoneReportsUnusedReplies(t *testing.T) {
	p := mock.Scripted(mock.Say("a"), mock.Say("b").Repeat(2), mock.Say("c").Always())
	say(t, p, user("x"))
	say(t, p, user("x"))
	err := p.Done()
	if err == nil || !strings.Contains(err.Error(), `reply 2 (says "b") used 1 of 2 times`) || strings.Contains(err.Error(), "reply 3") {
		t.Errorf("Done = %v", err)
	}
}

func TestPairingRefused(t *testing.T) {
	p := mock.Scripted(mock.Say("never"))
	call := llm.ToolCall{ID: "c1", Name: "list_files"}
	req := llm.Request{Messages: []llm.Message{llm.User("x"), llm.Assistant("", call), llm.User("y")}}
	_, err := p.Generate(context.Background(), req)
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.Status != 400 || !errors.Is(err, llm.ErrUnpaired) || !errors.Is(err, llm.ErrBadRequest) {
		t.Fatalf("err = %v, want a 400 wrapping ErrUnpaired and ErrBadRequest", err)
	}
	if len(p.Calls()) != 1 {
		t.Error("the refused request was not recorded")
	}
	if err := p.Done(); err == nil {
		t.Error("the refused request used a reply")
	}
}

func TestCallsAreDeepCopies(t *testing.T) {
	p := mock.Scripted(mock.Say("ok"))
	temp := 0.5
	call := llm.ToolCall{ID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"a"}`)}
	req := llm.Request{
		Messages: []llm.Message{llm.User("x"), llm.Assistant("", call), llm.ToolResult(call, "A", false)},
		Tools:    []llm.ToolSchema{{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		Options:  llm.Options{Temperature: &temp, Stop: []string{"s"}},
	}
	say(t, p, req)
	req.Messages[0].Content = "changed"
	req.Messages[1].ToolCalls[0].Arguments[2] = 'X'
	req.Tools[0].InputSchema[2] = 'X'
	*req.Options.Temperature = 9
	req.Options.Stop[0] = "changed"
	got := p.Calls()[0]
	if got.Messages[0].Content != "x" || string(got.Messages[1].ToolCalls[0].Arguments) != `{"path":"a"}` ||
		string(got.Tools[0].InputSchema) != `{"type":"object"}` || *got.Options.Temperature != 0.5 || got.Options.Stop[0] != "s" {
		t.Errorf("the recorded request changed with the caller's: %+v", got)
	}
	got.Messages[0].Content = "mine"
	if p.Calls()[0].Messages[0].Content != "x" {
		t.Error("Calls hands out the mock's own copy")
	}
}

func TestAnswers(t *testing.T) {
	p := mock.Scripted(
		mock.Stream("a", "b", "c").WithReasoning("thinking it over").WithModel("m1"),
		mock.CallTool("list_files", `{"path":"."}`).AndCall("read_file", ""),
		mock.Say("Partial").ThenFail(503, "overloaded"),
		mock.Fail(429, "slow down"),
		mock.Fail(404, "no such model"),
		mock.Say("cut").WithFinish(llm.FinishLength).WithUsage(llm.Usage{InputTokens: 7, OutputTokens: 1}),
	)
	ctx := context.Background()

	var deltas []llm.Delta
	r, err := p.Stream(ctx, user("x"), func(d llm.Delta) { deltas = append(deltas, d) })
	if err != nil || r.Content != "abc" || r.Reasoning != "thinking it over" || r.Model != "m1" || r.FinishReason != llm.FinishStop {
		t.Fatalf("text reply = %+v, %v", r, err)
	}
	if len(deltas) != 6 || deltas[0].Reasoning != "thinking " || deltas[3].Text != "a" {
		t.Errorf("deltas = %+v", deltas)
	}
	if r.Usage.InputTokens == 0 || r.Usage.OutputTokens != 6 {
		t.Errorf("estimated usage = %+v", r.Usage)
	}

	r, err = p.Generate(ctx, llm.Request{Messages: []llm.Message{llm.User("a"), llm.Assistant("b"), llm.User("c")}})
	if err != nil || len(r.ToolCalls) != 2 || r.FinishReason != llm.FinishToolCalls {
		t.Fatalf("tool reply = %+v, %v", r, err)
	}
	if r.ToolCalls[0].ID != "call_2_1_1" || r.ToolCalls[1].ID != "call_2_1_2" || string(r.ToolCalls[1].Arguments) != "{}" {
		t.Errorf("tool calls = %+v: want ids made from turn, step and position, and {} for no arguments", r.ToolCalls)
	}

	var text string
	r, err = p.Stream(ctx, user("x"), func(d llm.Delta) { text += d.Text })
	if !errors.Is(err, llm.ErrUnavailable) || text != "Partial" || r.Content != "Partial" {
		t.Errorf("mid-stream failure: %v after %q", err, text)
	}
	for _, want := range []struct {
		status int
		err    error
	}{{429, llm.ErrRateLimited}, {404, llm.ErrBadRequest}} {
		_, err := p.Generate(ctx, user("x"))
		var pe *llm.ProviderError
		if !errors.As(err, &pe) || pe.Status != want.status || !errors.Is(err, want.err) || pe.Provider != "mock" {
			t.Errorf("scripted %d: %v", want.status, err)
		}
	}
	r, err = p.Generate(ctx, user("x"))
	if err != nil || r.FinishReason != llm.FinishLength || r.Usage != (llm.Usage{InputTokens: 7, OutputTokens: 1}) {
		t.Errorf("finish and usage = %+v, %v", r, err)
	}
}

func TestCancelDuringDelay(t *testing.T) {
	p := mock.Scripted(mock.Say("late").After(time.Hour).OnPrompt("delay"), mock.Stream("a", "b").Paced(time.Hour).OnPrompt("pace"))
	ctx, cancel := context.WithCancel(context.Background())
	go cancel() // before or during the delay: either way the call ends now
	if _, err := p.Generate(ctx, user("delay")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	var got []string
	r, err := p.Stream(ctx, user("pace"), func(d llm.Delta) { got = append(got, d.Text); cancel() })
	if !errors.Is(err, context.Canceled) || len(got) != 1 || r.Content != "a" {
		t.Fatalf("cancel between paced tokens: %v after %q (partial %q)", err, got, r.Content)
	}
}

func TestPace(t *testing.T) {
	p := mock.Scripted(mock.Say("one two three four"))
	p2, _ := mock.New(mock.NewScript(mock.Say("one two three four")), mock.WithPace(time.Millisecond))
	for _, p := range []*mock.Provider{p, p2} {
		var got []string
		r, err := p.Stream(context.Background(), user("x"), func(d llm.Delta) { got = append(got, d.Text) })
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"one ", "two ", "three ", "four"}; !reflect.DeepEqual(got, want) || r.Content != strings.Join(want, "") {
			t.Errorf("tokens = %q, want %q", got, want)
		}
	}
}

// A mock that keeps no copy of the requests still numbers its calls.
func TestWithoutRecordingCountsCalls(t *testing.T) {
	p, err := mock.New(mock.NewScript(mock.Say("first").OnCall(1), mock.Say("second").OnCall(2)), mock.WithoutRecording())
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{Messages: []llm.Message{llm.User("hi")}}
	for _, want := range []string{"first", "second"} {
		resp, err := p.Generate(context.Background(), req)
		if err != nil || resp.Content != want {
			t.Fatalf("got %q, %v; want %q", resp.Content, err, want)
		}
	}
	if len(p.Calls()) != 0 {
		t.Fatal("the mock kept the requests")
	}
}
