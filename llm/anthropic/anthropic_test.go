package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/anthropic"
	"github.com/tah-dev/tah/llm/httpx"
	"github.com/tah-dev/tah/llm/llmtest"
)

func TestRequestOnTheWire(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Anthropic{}, llmtest.Answer{Text: []string{"ok"}})
	p, err := anthropic.New(llmtest.Config(llm.ProviderAnthropic, srv.URL), httpx.WithHTTPClient(srv.Client()), httpx.WithAPIKey("sk-ant-test"))
	if err != nil {
		t.Fatal(err)
	}
	a := llm.ToolCall{ID: "toolu_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"a"}`)}
	b := llm.ToolCall{ID: "toolu_2", Name: "read_file", Arguments: json.RawMessage(`{"path":"b"}`)}
	top := 0.9
	req := llm.Request{
		Messages: []llm.Message{
			llm.System("You are a test."),
			llm.System("[Summary of the earlier conversation]\n- nothing yet"),
			llm.User("Read a and b."),
			llm.Assistant("Reading both.", a, b),
			llm.ToolResult(a, "contents of a", false),
			llm.ToolResult(b, "no such file", true),
			llm.User("And then?"),
		},
		Tools:   llmtest.SuiteRequest().Tools[1:],
		Options: llm.Options{TopP: &top, Stop: []string{"END"}},
	}
	if _, err := p.Stream(context.Background(), req, func(llm.Delta) {}); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0]
	if got.Method != http.MethodPost || got.Path != "/v1/messages" {
		t.Errorf("request = %s %s, want POST /v1/messages", got.Method, got.Path)
	}
	for h, want := range map[string]string{"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01", "Content-Type": "application/json"} {
		if v := got.Header.Get(h); v != want {
			t.Errorf("%s = %q, want %q", h, v, want)
		}
	}
	if got.Header.Get("Authorization") != "" {
		t.Error("an Authorization header was sent")
	}
	want := `{
		"model": "test-model",
		"max_tokens": 4096,
		"system": "You are a test.\n\n[Summary of the earlier conversation]\n- nothing yet",
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "Read a and b."}]},
			{"role": "assistant", "content": [
				{"type": "text", "text": "Reading both."},
				{"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
				{"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "b"}}]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_1", "content": "contents of a"},
				{"type": "tool_result", "tool_use_id": "toolu_2", "content": "no such file", "is_error": true},
				{"type": "text", "text": "And then?"}]}
		],
		"tools": [{"name": "read_file", "description": "Read a file.",
			"input_schema": {"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}],
		"stream": true,
		"top_p": 0.9,
		"stop_sequences": ["END"]
	}`
	if !llmtest.JSONEqual(got.Body, []byte(want)) {
		t.Errorf("body =\n%s\nwant\n%s", got.Body, want)
	}
}

func TestBaseURLWithV1AndMaxTokens(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Anthropic{}, llmtest.Answer{Text: []string{"ok"}}, llmtest.Answer{Text: []string{"ok"}})
	cfg := llmtest.Config(llm.ProviderAnthropic, srv.URL+"/v1")
	cfg.MaxTokens = 1000
	p, err := anthropic.New(cfg, httpx.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	req := llmtest.SuiteRequest()
	if _, err := p.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	req.Options.MaxTokens = 7
	if _, err := p.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	rs := srv.Requests()
	if rs[0].Path != "/v1/messages" {
		t.Errorf("path = %s", rs[0].Path)
	}
	for i, want := range []float64{1000, 7} {
		var body map[string]any
		_ = json.Unmarshal(rs[i].Body, &body)
		if body["max_tokens"] != want {
			t.Errorf("request %d: max_tokens = %v, want %v", i, body["max_tokens"], want)
		}
	}
}

func TestAPIKey(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	if _, err := anthropic.New(llmtest.Config(llm.ProviderAnthropic, "")); !errors.Is(err, llm.ErrConfig) || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Errorf("err = %v, want ErrConfig naming ANTHROPIC_API_KEY", err)
	}
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-env")
	if _, err := anthropic.New(llmtest.Config(llm.ProviderAnthropic, "")); err != nil {
		t.Errorf("with the key in the environment: %v", err)
	}
}

func rawProvider(t *testing.T, status int, body string) *anthropic.Provider {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	cfg := llmtest.Config(llm.ProviderAnthropic, srv.URL)
	cfg.MaxRetries = 0
	p, err := anthropic.New(cfg, httpx.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func ev(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

func TestStreamEvents(t *testing.T) {
	body := ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":20,"output_tokens":1}}}`) +
		ev("ping", `{"type":"ping"}`) +
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me see."}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"list_files","input":{}}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":1}`) +
		ev("some_future_event", `{"type":"some_future_event"}`) +
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}`) +
		ev("message_stop", `{"type":"message_stop"}`)
	p := rawProvider(t, 200, body)
	var d []llm.Delta
	r, err := p.Stream(context.Background(), llmtest.SuiteRequest(), func(x llm.Delta) { d = append(d, x) })
	if err != nil {
		t.Fatal(err)
	}
	if r.Reasoning != "Let me see." || r.Model != "claude-test" || r.FinishReason != llm.FinishToolCalls {
		t.Errorf("response = %+v", r)
	}
	if len(r.ToolCalls) != 1 || string(r.ToolCalls[0].Arguments) != "{}" {
		t.Errorf("a tool call without input deltas = %+v, want arguments {}", r.ToolCalls)
	}
	if want := (llm.Usage{InputTokens: 35, OutputTokens: 42, CacheReadTokens: 20}); r.Usage != want {
		t.Errorf("usage = %+v, want %+v", r.Usage, want)
	}
	if len(d) != 2 || d[0].Reasoning != "Let me see." || d[1].ToolCall == nil || d[1].ToolCall.Name != "list_files" {
		t.Errorf("deltas = %+v", d)
	}
}

func TestStopReasons(t *testing.T) {
	for stop, want := range map[string]llm.FinishReason{
		"end_turn": llm.FinishStop, "stop_sequence": llm.FinishStop, "tool_use": llm.FinishToolCalls,
		"max_tokens": llm.FinishLength, "refusal": llm.FinishContentFilter, "pause_turn": llm.FinishOther,
	} {
		body := `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"x"}],"stop_reason":"` + stop + `","usage":{"input_tokens":1,"output_tokens":1}}`
		r, err := rawProvider(t, 200, body).Generate(context.Background(), llmtest.SuiteRequest())
		if err != nil || r.FinishReason != want {
			t.Errorf("stop_reason %s: %q, %v; want %q", stop, r.FinishReason, err, want)
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   error
		msg    string
	}{
		{"overloaded", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, llm.ErrUnavailable, "Overloaded"},
		{"invalid key", 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, llm.ErrBadRequest, "invalid x-api-key"},
		{"rate limit event", 200, ev("error", `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}`), llm.ErrRateLimited, "Number of requests has exceeded your rate limit"},
		{"invalid request event", 200, ev("message_start", `{"type":"message_start","message":{"model":"m","usage":{"input_tokens":1}}}`) + ev("error", `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}`), llm.ErrBadRequest, "prompt is too long"},
		{"ends without message_stop", 200, ev("message_start", `{"type":"message_start","message":{"model":"m","usage":{"input_tokens":1}}}`), llm.ErrUnavailable, "the connection closed before the answer was complete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := rawProvider(t, tt.status, tt.body)
			_, err := p.Stream(context.Background(), llmtest.SuiteRequest(), func(llm.Delta) {})
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || !errors.Is(err, tt.want) || pe.Message != tt.msg || pe.Provider != "anthropic" {
				t.Fatalf("err = %#v, want %v with message %q", err, tt.want, tt.msg)
			}
			if tt.status != 200 && pe.Status != tt.status {
				t.Errorf("status = %d, want %d", pe.Status, tt.status)
			}
		})
	}
}

func TestMalformedToolArgumentsSent(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Anthropic{}, llmtest.Answer{Text: []string{"ok"}})
	p, err := anthropic.New(llmtest.Config(llm.ProviderAnthropic, srv.URL), httpx.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	bad := llm.ToolCall{ID: "t1", Name: "read_file", Arguments: httpx.Arguments(`{"path":`)}
	req := llm.Request{Messages: []llm.Message{llm.User("x"), llm.Assistant("", bad), llm.ToolResult(bad, "invalid arguments", true)}}
	if _, err := p.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(srv.Requests()[0].Body, &body)
	input, _ := json.Marshal(body.Messages[1].Content[0]["input"])
	if string(input) != "{}" {
		t.Errorf("tool_use input = %s, want {} (the API takes only an object)", input)
	}
}
