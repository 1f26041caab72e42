package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/httpx"
	"github.com/tah-dev/tah/llm/llmtest"
	"github.com/tah-dev/tah/llm/openai"
)

func TestRequestOnTheWire(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.OpenAI{}, llmtest.Answer{Text: []string{"ok"}})
	cfg := llmtest.Config(llm.ProviderOpenAI, srv.URL+"/v1/")
	cfg.MaxTokens = 512
	p, err := openai.New(cfg, httpx.WithHTTPClient(srv.Client()), httpx.WithAPIKey("sk-test"))
	if err != nil {
		t.Fatal(err)
	}
	req := llmtest.SuiteRequest()
	temp := 0.2
	req.Options = llm.Options{Temperature: &temp, Stop: []string{"END"}}
	if _, err := p.Stream(context.Background(), req, func(llm.Delta) {}); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0]
	if got.Method != http.MethodPost || got.Path != "/v1/chat/completions" {
		t.Errorf("request = %s %s, want POST /v1/chat/completions", got.Method, got.Path)
	}
	if h := got.Header.Get("Authorization"); h != "Bearer sk-test" {
		t.Errorf("Authorization = %q", h)
	}
	if h := got.Header.Get("Content-Type"); h != "application/json" {
		t.Errorf("Content-Type = %q", h)
	}
	want := `{
		"model": "test-model",
		"messages": [
			{"role": "system", "content": "You are a test."},
			{"role": "user", "content": "What is here?"},
			{"role": "assistant", "content": null, "tool_calls": [
				{"id": "call_0", "type": "function", "function": {"name": "list_files", "arguments": "{\"path\":\".\"}"}}]},
			{"role": "tool", "content": "README.md\ngo.mod\ncmd/", "tool_call_id": "call_0"},
			{"role": "assistant", "content": "Two files and a directory."},
			{"role": "user", "content": "Tell me more."}
		],
		"tools": [
			{"type": "function", "function": {"name": "list_files", "description": "List files.",
				"parameters": {"type":"object","properties":{"path":{"type":"string"}}}}},
			{"type": "function", "function": {"name": "read_file", "description": "Read a file.",
				"parameters": {"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}}
		],
		"stream": true,
		"stream_options": {"include_usage": true},
		"max_tokens": 512,
		"temperature": 0.2,
		"stop": ["END"]
	}`
	if !llmtest.JSONEqual(got.Body, []byte(want)) {
		t.Errorf("body =\n%s\nwant\n%s", got.Body, want)
	}
}

// redirect sends every request to srv, whatever its URL: a provider configured
// for the public endpoint talks to the test server.
type redirect struct{ srv *httptest.Server }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	u, _ := url.Parse(r.srv.URL)
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host = u.Scheme, u.Host
	return r.srv.Client().Transport.RoundTrip(req)
}

func TestOfficialEndpoint(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.OpenAI{}, llmtest.Answer{Text: []string{"ok"}})
	t.Setenv("MY_OPENAI_KEY", "sk-from-env")
	cfg := llmtest.Config(llm.ProviderOpenAI, "")
	cfg.APIKeyEnv, cfg.MaxTokens = "MY_OPENAI_KEY", 100
	p, err := openai.New(cfg, httpx.WithHTTPClient(&http.Client{Transport: redirect{srv.HTTPServer()}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Generate(context.Background(), llmtest.SuiteRequest()); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0]
	if got.Path != "/v1/chat/completions" || got.Header.Get("Authorization") != "Bearer sk-from-env" {
		t.Errorf("request to %s with Authorization %q", got.Path, got.Header.Get("Authorization"))
	}
	var body map[string]any
	_ = json.Unmarshal(got.Body, &body)
	if body["max_completion_tokens"] != 100.0 || body["max_tokens"] != nil || body["stream"] != nil {
		t.Errorf("body = %s: want max_completion_tokens and no stream", got.Body)
	}
}

func TestAPIKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	cfg := llmtest.Config(llm.ProviderOpenAI, "")
	if _, err := openai.New(cfg); !errors.Is(err, llm.ErrConfig) || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Errorf("no key for api.openai.com: err = %v, want ErrConfig naming OPENAI_API_KEY", err)
	}
	// A local server needs no key, and gets no Authorization header.
	srv := llmtest.NewServer(t, llmtest.OpenAI{}, llmtest.Answer{Text: []string{"ok"}})
	p, err := openai.New(llmtest.Config(llm.ProviderOpenAI, srv.URL), httpx.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Generate(context.Background(), llmtest.SuiteRequest()); err != nil {
		t.Fatal(err)
	}
	if h, ok := srv.Requests()[0].Header["Authorization"]; ok {
		t.Errorf("Authorization sent without a key: %q", h)
	}
	if _, err := openai.New(llm.Config{Provider: llm.ProviderAnthropic, Model: "m"}); !errors.Is(err, llm.ErrConfig) {
		t.Errorf("a configuration for another provider: err = %v", err)
	}
}

// rawServer answers every request with body, as text/event-stream when stream.
func rawServer(t *testing.T, status int, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasPrefix(body, "data:") {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func rawProvider(t *testing.T, srv *httptest.Server) *openai.Provider {
	cfg := llmtest.Config(llm.ProviderOpenAI, srv.URL)
	cfg.MaxRetries = 0
	p, err := openai.New(cfg, httpx.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Compatible servers differ from OpenAI in small ways; each must still work.
func TestCompatibleServers(t *testing.T) {
	tests := []struct {
		name, body string
		check      func(t *testing.T, r llm.Response, d []llm.Delta)
	}{
		{
			name: "tool calls without index, finish stop, no [DONE] (older Ollama)",
			body: `data: {"model":"llama3.2","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_a","function":{"name":"list_files","arguments":"{\"path\":\".\"}"}}]},"finish_reason":null}]}` + "\n\n" +
				`data: {"model":"llama3.2","choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_b","function":{"name":"read_file","arguments":"{\"path\":\"go.mod\"}"}}]},"finish_reason":null}]}` + "\n\n" +
				`data: {"model":"llama3.2","choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}]}` + "\n\n",
			check: func(t *testing.T, r llm.Response, d []llm.Delta) {
				if len(r.ToolCalls) != 2 || r.ToolCalls[0].ID != "call_a" || r.ToolCalls[1].Name != "read_file" ||
					string(r.ToolCalls[1].Arguments) != `{"path":"go.mod"}` {
					t.Errorf("tool calls = %+v", r.ToolCalls)
				}
				if r.FinishReason != llm.FinishToolCalls {
					t.Errorf("finish = %q, want tool_calls", r.FinishReason)
				}
			},
		},
		{
			name: "the same index for two calls, told apart by id",
			body: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"a","arguments":"{}"}}]}}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c2","type":"function","function":{"name":"b","arguments":"{}"}}]}}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n",
			check: func(t *testing.T, r llm.Response, d []llm.Delta) {
				if len(r.ToolCalls) != 2 || r.ToolCalls[0].ID != "c1" || r.ToolCalls[1].ID != "c2" {
					t.Errorf("tool calls = %+v", r.ToolCalls)
				}
			},
		},
		{
			name: "reasoning (Ollama's field) and a call without id",
			body: `data: {"choices":[{"index":0,"delta":{"reasoning":"hmm"}}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"a","arguments":"{\"x\":"}}]}}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n",
			check: func(t *testing.T, r llm.Response, d []llm.Delta) {
				if r.Reasoning != "hmm" || len(r.ToolCalls) != 1 || r.ToolCalls[0].ID != "call_0" || string(r.ToolCalls[0].Arguments) != `{"x":1}` {
					t.Errorf("response = %+v", r)
				}
			},
		},
		{
			name: "malformed arguments are kept as a JSON string",
			body: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"a","arguments":"{\"x\": 1"}}]}}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n",
			check: func(t *testing.T, r llm.Response, d []llm.Delta) {
				if len(r.ToolCalls) != 1 || string(r.ToolCalls[0].Arguments) != `"{\"x\": 1"` {
					t.Errorf("tool calls = %+v", r.ToolCalls)
				}
				if _, err := json.Marshal(r); err != nil {
					t.Errorf("the response does not serialise: %v", err)
				}
			},
		},
		{
			name: "finish reasons: length",
			body: `data: {"choices":[{"index":0,"delta":{"content":"cut"},"finish_reason":"length"}]}` + "\n\ndata: [DONE]\n\n",
			check: func(t *testing.T, r llm.Response, d []llm.Delta) {
				if r.FinishReason != llm.FinishLength || r.Content != "cut" {
					t.Errorf("response = %+v", r)
				}
			},
		},
		{
			name: "finish reasons: content_filter and unknown",
			body: `data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"content_filter"}]}` + "\n\ndata: [DONE]\n\n",
			check: func(t *testing.T, r llm.Response, d []llm.Delta) {
				if r.FinishReason != llm.FinishContentFilter {
					t.Errorf("finish = %q", r.FinishReason)
				}
			},
		},
		{
			name: "unknown finish reason",
			body: `data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"eos_token"}]}` + "\n\ndata: [DONE]\n\n",
			check: func(t *testing.T, r llm.Response, d []llm.Delta) {
				if r.FinishReason != llm.FinishOther {
					t.Errorf("finish = %q", r.FinishReason)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := rawProvider(t, rawServer(t, 200, tt.body))
			var d []llm.Delta
			r, err := p.Stream(context.Background(), llmtest.SuiteRequest(), func(x llm.Delta) { d = append(d, x) })
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, r, d)
		})
	}
}

func TestErrorBodies(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   error
		msg    string
	}{
		{"Ollama model not found", 404, `{"error":"model \"llama9\" not found, try pulling it first"}`, llm.ErrBadRequest, `model "llama9" not found, try pulling it first`},
		{"OpenAI invalid key", 401, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}`, llm.ErrBadRequest, "Incorrect API key provided."},
		{"error in a 200 body", 200, `{"error":{"message":"context length exceeded","type":"invalid_request_error"}}`, llm.ErrBadRequest, "context length exceeded"},
		{"proxy HTML", 502, "<html>Bad Gateway</html>", llm.ErrUnavailable, "<html>Bad Gateway</html>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := rawProvider(t, rawServer(t, tt.status, tt.body))
			_, err := p.Generate(context.Background(), llmtest.SuiteRequest())
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || !errors.Is(err, tt.want) || pe.Message != tt.msg || pe.Provider != "openai" {
				t.Fatalf("err = %#v, want %v with message %q", err, tt.want, tt.msg)
			}
		})
	}
}

func TestStreamRateLimitErrorChunk(t *testing.T) {
	p := rawProvider(t, rawServer(t, 200, `data: {"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`+"\n\n"))
	_, err := p.Stream(context.Background(), llmtest.SuiteRequest(), func(llm.Delta) {})
	if !errors.Is(err, llm.ErrRateLimited) || !strings.Contains(err.Error(), "Rate limit reached") {
		t.Fatalf("err = %v, want ErrRateLimited", err)
	}
}

func TestEmptyAnswer(t *testing.T) {
	srv := rawServer(t, 200, "{}")
	p := rawProvider(t, srv)
	req := llmtest.SuiteRequest()
	req.Model = "override"
	if _, err := p.Generate(context.Background(), req); err == nil || !strings.Contains(err.Error(), "no choices") {
		t.Fatalf("err = %v", err)
	}
}
