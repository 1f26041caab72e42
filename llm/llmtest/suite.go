package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/httpx"
)

// The retry settings of a provider under the suite (Config sets them).
const (
	MaxRetries  = 2
	BackoffBase = 100 * time.Millisecond
	BackoffMax  = time.Second
)

// Config returns the configuration of an HTTP provider under the suite: the
// server's URL, a model, MaxRetries retries with BackoffBase (recorded by a
// Sleeper, never slept).
func Config(provider, baseURL string) llm.Config {
	cfg := llm.DefaultConfig()
	cfg.Provider, cfg.Model, cfg.BaseURL = provider, "test-model", baseURL
	cfg.MaxRetries, cfg.BackoffBase, cfg.BackoffMax = MaxRetries, BackoffBase, BackoffMax
	cfg.RequestTimeout = time.Minute
	return cfg
}

// Backend is a provider under test and what its backend observed.
type Backend struct {
	Provider llm.Provider
	// Requests returns how many requests (HTTP requests, or mock calls) were made.
	Requests func() int
	// Waits returns the backoffs asked for between retries; nil when the provider
	// does not retry.
	Waits func() []time.Duration
	// Gone is closed when the server saw the client go away; nil without a server.
	Gone <-chan struct{}
	// Key is the API key the provider sends; empty when it sends none.
	Key string
	// Log returns what the provider logged so far; nil when it logs nothing.
	Log func() string
}

// Key is the API key of an HTTPHarness's providers: of no known shape, so
// that only the provider's knowledge of its key can find it by itself.
const Key = "test-key-7f3a9c1e"

// Harness runs the suite over one provider.
type Harness struct {
	// Start returns a provider whose calls are answered, in order, by answers.
	Start func(t *testing.T, answers ...Answer) Backend
	// Skip names the cases that do not apply to the provider, with the reason.
	Skip map[string]string
}

// HTTPHarness is the Harness of an HTTP provider: each case starts a Server with
// enc, and newProvider builds the provider for the server's URL with opts (the
// server's client, a Sleeper, an API key).
func HTTPHarness(enc Encoder, newProvider func(t *testing.T, baseURL string, opts ...httpx.Option) llm.Provider) Harness {
	return Harness{Start: func(t *testing.T, answers ...Answer) Backend {
		srv := NewServer(t, enc, answers...)
		sl := &Sleeper{}
		logs := &lockedBuffer{}
		p := newProvider(t, srv.URL,
			httpx.WithHTTPClient(srv.Client()),
			httpx.WithSleep(sl.Sleep),
			httpx.WithAPIKey(Key),
			httpx.WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
			httpx.WithRand(func() float64 { return 0.5 }))
		return Backend{Provider: p, Requests: srv.Count, Waits: sl.Waits, Gone: srv.Gone(), Key: Key, Log: logs.String}
	}}
}

// Case is one behaviour of the suite.
type Case struct {
	Name string
	Run  func(t *testing.T, h Harness)
}

// Cases returns the suite.
func Cases() []Case {
	return []Case{
		{"PlainAnswer", plainAnswer},
		{"StreamedText", streamedText},
		{"ToolCallSplitArguments", toolCallSplitArguments},
		{"ParallelToolCalls", parallelToolCalls},
		{"ParallelToolCallsGenerate", parallelToolCallsGenerate},
		{"Reasoning", reasoning},
		{"Usage", usage},
		{"ErrorFrameMidStream", errorFrameMidStream},
		{"ErrorFrameBeforeOutputRetried", errorFrameBeforeOutputRetried},
		{"RateLimitedRetryAfterThenSuccess", rateLimitedThenSuccess},
		{"ServerErrorBackoffThenSuccess", serverErrorThenSuccess},
		{"RetriesExhausted", retriesExhausted},
		{"BadRequestNotRetried", badRequestNotRetried},
		{"DroppedMidStream", droppedMidStream},
		{"DroppedBeforeOutputRetried", droppedBeforeOutputRetried},
		{"DroppedGenerateRetried", droppedGenerateRetried},
		{"CancelMidStream", cancelMidStream},
		{"UnpairedRefused", unpairedRefused},
		{"KeyRedactedFromErrors", keyRedactedFromErrors},
	}
}

// lockedBuffer is a log's output, written by the provider and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Run runs every case of the suite that applies, each in parallel.
func Run(t *testing.T, h Harness) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if why, ok := h.Skip[c.Name]; ok {
				t.Skip(why)
			}
			t.Parallel()
			c.Run(t, h)
		})
	}
}

// SuiteRequest is the request the suite sends: a system prompt, a finished turn with a
// tool call and its result, and a new question, with two tools.
func SuiteRequest() llm.Request {
	call := llm.ToolCall{ID: "call_0", Name: "list_files", Arguments: json.RawMessage(`{"path":"."}`)}
	return llm.Request{
		Messages: []llm.Message{
			llm.System("You are a test."),
			llm.User("What is here?"),
			llm.Assistant("", call),
			llm.ToolResult(call, "README.md\ngo.mod\ncmd/", false),
			llm.Assistant("Two files and a directory."),
			llm.User("Tell me more."),
		},
		Tools: []llm.ToolSchema{
			{Name: "list_files", Description: "List files.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
			{Name: "read_file", Description: "Read a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		},
	}
}

// deltas collects what a stream delivered.
type deltas struct {
	texts     []string
	reasoning strings.Builder
	calls     map[int]*llm.ToolCallDelta
	order     []int
}

func (d *deltas) add(x llm.Delta) {
	if x.Text != "" {
		d.texts = append(d.texts, x.Text)
	}
	d.reasoning.WriteString(x.Reasoning)
	if tc := x.ToolCall; tc != nil {
		if d.calls == nil {
			d.calls = map[int]*llm.ToolCallDelta{}
		}
		c, ok := d.calls[tc.Index]
		if !ok {
			c = &llm.ToolCallDelta{Index: tc.Index}
			d.calls[tc.Index] = c
			d.order = append(d.order, tc.Index)
		}
		if tc.ID != "" {
			c.ID = tc.ID
		}
		if tc.Name != "" {
			c.Name = tc.Name
		}
		c.ArgumentsDelta += tc.ArgumentsDelta
	}
}

func (d *deltas) text() string { return strings.Join(d.texts, "") }

func stream(t *testing.T, ctx context.Context, p llm.Provider, req llm.Request) (llm.Response, *deltas, error) {
	t.Helper()
	s, ok := p.(llm.Streamer)
	if !ok {
		t.Fatalf("%s is not an llm.Streamer", p.Name())
	}
	d := &deltas{}
	resp, err := s.Stream(ctx, req, d.add)
	return resp, d, err
}

func providerError(t *testing.T, err error) *llm.ProviderError {
	t.Helper()
	var pe *llm.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *llm.ProviderError", err, err)
	}
	return pe
}

func wantRequests(t *testing.T, b Backend, n int) {
	t.Helper()
	if got := b.Requests(); got != n {
		t.Errorf("the backend saw %d requests, want %d", got, n)
	}
}

func wantWaits(t *testing.T, b Backend, n int) []time.Duration {
	t.Helper()
	if b.Waits == nil {
		return nil
	}
	w := b.Waits()
	if len(w) != n {
		t.Errorf("waits between retries = %v, want %d of them", w, n)
	}
	return w
}

func plainAnswer(t *testing.T, h Harness) {
	b := h.Start(t, Answer{Text: []string{"Hello", ", world."}, Usage: Usage{Input: 12, Output: 3}, Model: "test-model-1"})
	req := SuiteRequest()
	before := cloneRequest(req)
	resp, err := b.Provider.Generate(context.Background(), req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if resp.Content != "Hello, world." {
		t.Errorf("content = %q, want %q", resp.Content, "Hello, world.")
	}
	if resp.FinishReason != llm.FinishStop {
		t.Errorf("finish = %q, want stop", resp.FinishReason)
	}
	if len(resp.ToolCalls) != 0 {
		t.Errorf("tool calls = %v, want none", resp.ToolCalls)
	}
	if resp.Usage.InputTokens != 12 || resp.Usage.OutputTokens != 3 {
		t.Errorf("usage = %+v, want 12 in, 3 out", resp.Usage)
	}
	if resp.Model != "test-model-1" {
		t.Errorf("model = %q, want test-model-1", resp.Model)
	}
	if !reflect.DeepEqual(req, before) {
		t.Errorf("the provider changed the request")
	}
	wantRequests(t, b, 1)
}

func streamedText(t *testing.T, h Harness) {
	pieces := []string{"The ", "quick ", "brown ", "fox ", "jumps."}
	b := h.Start(t, Answer{Text: pieces})
	resp, d, err := stream(t, context.Background(), b.Provider, SuiteRequest())
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if !reflect.DeepEqual(d.texts, pieces) {
		t.Errorf("text deltas = %q, want %q", d.texts, pieces)
	}
	if resp.Content != d.text() {
		t.Errorf("content = %q, but the deltas make %q", resp.Content, d.text())
	}
	if resp.FinishReason != llm.FinishStop {
		t.Errorf("finish = %q, want stop", resp.FinishReason)
	}
	wantRequests(t, b, 1)
}

func toolCallSplitArguments(t *testing.T, h Harness) {
	args := []string{`{"pa`, `th":`, ` "RE`, `ADM`, `E.`, `md"`, `}`}
	b := h.Start(t, Answer{Calls: []Call{{ID: "call_abc", Name: "read_file", Args: args}}})
	resp, d, err := stream(t, context.Background(), b.Provider, SuiteRequest())
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := strings.Join(args, "")
	if len(resp.ToolCalls) != 1 {
		t.Fatalf("tool calls = %v, want 1", resp.ToolCalls)
	}
	c := resp.ToolCalls[0]
	if c.ID != "call_abc" || c.Name != "read_file" || string(c.Arguments) != want {
		t.Errorf("tool call = {%s %s %s}, want {call_abc read_file %s}", c.ID, c.Name, c.Arguments, want)
	}
	if resp.FinishReason != llm.FinishToolCalls {
		t.Errorf("finish = %q, want tool_calls", resp.FinishReason)
	}
	dc, ok := d.calls[0]
	if !ok || len(d.calls) != 1 {
		t.Fatalf("tool call deltas = %v, want one call at index 0", d.calls)
	}
	if dc.ID != "call_abc" || dc.Name != "read_file" || dc.ArgumentsDelta != want {
		t.Errorf("tool call deltas make {%s %s %s}, want {call_abc read_file %s}", dc.ID, dc.Name, dc.ArgumentsDelta, want)
	}
	if resp.Content != "" {
		t.Errorf("content = %q, want none", resp.Content)
	}
}

var twoCalls = []Call{
	{ID: "call_1", Name: "list_files", Args: []string{`{"path"`, `: "."}`}},
	{ID: "call_2", Name: "read_file", Args: []string{`{"path": `, `"go.mod"}`}},
}

func checkTwoCalls(t *testing.T, resp llm.Response) {
	t.Helper()
	if len(resp.ToolCalls) != 2 {
		t.Fatalf("tool calls = %v, want 2", resp.ToolCalls)
	}
	for i, want := range twoCalls {
		c := resp.ToolCalls[i]
		if c.ID != want.ID || c.Name != want.Name || !JSONEqual(c.Arguments, []byte(strings.Join(want.Args, ""))) {
			t.Errorf("tool call %d = {%s %s %s}, want {%s %s %s}", i, c.ID, c.Name, c.Arguments, want.ID, want.Name, strings.Join(want.Args, ""))
		}
	}
	if resp.Content != "Let me look." {
		t.Errorf("content = %q, want %q", resp.Content, "Let me look.")
	}
	if resp.FinishReason != llm.FinishToolCalls {
		t.Errorf("finish = %q, want tool_calls", resp.FinishReason)
	}
}

func parallelToolCalls(t *testing.T, h Harness) {
	b := h.Start(t, Answer{Text: []string{"Let me ", "look."}, Calls: twoCalls})
	resp, d, err := stream(t, context.Background(), b.Provider, SuiteRequest())
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	checkTwoCalls(t, resp)
	if !reflect.DeepEqual(d.order, []int{0, 1}) {
		t.Errorf("tool call delta indexes = %v, want [0 1]", d.order)
	}
	for i, want := range twoCalls {
		if dc := d.calls[i]; dc == nil || dc.ID != want.ID || dc.Name != want.Name || dc.ArgumentsDelta != strings.Join(want.Args, "") {
			t.Errorf("deltas of call %d = %+v, want %+v", i, dc, want)
		}
	}
}

func parallelToolCallsGenerate(t *testing.T, h Harness) {
	b := h.Start(t, Answer{Text: []string{"Let me ", "look."}, Calls: twoCalls})
	resp, err := b.Provider.Generate(context.Background(), SuiteRequest())
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	checkTwoCalls(t, resp)
}

func reasoning(t *testing.T, h Harness) {
	b := h.Start(t, Answer{Reasoning: []string{"The user ", "wants more."}, Text: []string{"Sure."}})
	resp, d, err := stream(t, context.Background(), b.Provider, SuiteRequest())
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.Reasoning != "The user wants more." || d.reasoning.String() != resp.Reasoning {
		t.Errorf("reasoning = %q, deltas %q, want %q", resp.Reasoning, d.reasoning.String(), "The user wants more.")
	}
	if resp.Content != "Sure." {
		t.Errorf("content = %q, want Sure.", resp.Content)
	}
}

func usage(t *testing.T, h Harness) {
	b := h.Start(t, Answer{Text: []string{"ok"}, Usage: Usage{Input: 100, Output: 20, CacheRead: 40}})
	resp, _, err := stream(t, context.Background(), b.Provider, SuiteRequest())
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := llm.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 40}
	if resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
}

func errorFrameMidStream(t *testing.T, h Harness) {
	b := h.Start(t, Answer{Text: []string{"Partial ", "answer"}, Fault: FaultError, Message: "Overloaded"})
	_, d, err := stream(t, context.Background(), b.Provider, SuiteRequest())
	if err == nil {
		t.Fatal("Stream succeeded, want the error frame's error")
	}
	pe := providerError(t, err)
	if !strings.Contains(pe.Message, "Overloaded") {
		t.Errorf("message = %q, want the server's %q", pe.Message, "Overloaded")
	}
	if !errors.Is(err, llm.ErrUnavailable) {
		t.Errorf("error %v does not wrap llm.ErrUnavailable", err)
	}
	if d.text() != "Partial answer" {
		t.Errorf("deltas before the error = %q, want %q", d.text(), "Partial answer")
	}
	wantRequests(t, b, 1) // output was delivered: no silent retry
	wantWaits(t, b, 0)
}

func errorFrameBeforeOutputRetried(t *testing.T, h Harness) {
	b := h.Start(t, Answer{Fault: FaultError, Message: "Overloaded"}, Answer{Text: []string{"ok"}})
	resp, d, err := stream(t, context.Background(), b.Provider, SuiteRequest())
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.Content != "ok" || d.text() != "ok" {
		t.Errorf("content = %q, deltas %q, want ok", resp.Content, d.text())
	}
	wantRequests(t, b, 2)
	wantWaits(t, b, 1)
}

func rateLimitedThenSuccess(t *testing.T, h Harness) {
	b := h.Start(t, Answer{Status: 429, RetryAfter: "2", Message: "Rate limit reached"}, Answer{Text: []string{"ok"}})
	resp, d, err := stream(t, context.Background(), b.Provider, SuiteRequest())
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.Content != "ok" || d.text() != "ok" {
		t.Errorf("content = %q, deltas %q, want ok", resp.Content, d.text())
	}
	wantRequests(t, b, 2)
	if w := wantWaits(t, b, 1); len(w) == 1 && w[0] != 2*time.Second {
		t.Errorf("waited %v before the retry, want the Retry-After of 2s", w[0])
	}
}

func serverErrorThenSuccess(t *testing.T, h Harness) {
	b := h.Start(t, Answer{Status: 503, Message: "Service Unavailable"}, Answer{Text: []string{"ok"}})
	resp, err := b.Provider.Generate(context.Background(), SuiteRequest())
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if resp.Content != "ok" {
		t.Errorf("content = %q, want ok", resp.Content)
	}
	wantRequests(t, b, 2)
	if w := wantWaits(t, b, 1); len(w) == 1 && (w[0] < BackoffBase/2 || w[0] > BackoffBase) {
		t.Errorf("backoff = %v, want within [%v, %v] (base with jitter)", w[0], BackoffBase/2, BackoffBase)
	}
}

func retriesExhausted(t *testing.T, h Harness) {
	var answers []Answer
	for range MaxRetries + 1 {
		answers = append(answers, Answer{Status: 429, Message: "Rate limit reached"})
	}
	b := h.Start(t, answers...)
	_, err := b.Provider.Generate(context.Background(), SuiteRequest())
	if !errors.Is(err, llm.ErrRateLimited) {
		t.Fatalf("error = %v, want llm.ErrRateLimited", err)
	}
	pe := providerError(t, err)
	if pe.Status != 429 || pe.Message != "Rate limit reached" || pe.Provider != b.Provider.Name() {
		t.Errorf("error = %+v, want provider %s, status 429, the server's message", pe, b.Provider.Name())
	}
	wantRequests(t, b, MaxRetries+1)
	if w := wantWaits(t, b, MaxRetries); len(w) == MaxRetries && w[1] <= w[0] {
		t.Errorf("backoffs %v do not grow", w)
	}
}

func badRequestNotRetried(t *testing.T, h Harness) {
	b := h.Start(t, Answer{Status: 400, Message: "messages: at least one message is required"})
	_, err := b.Provider.Generate(context.Background(), SuiteRequest())
	if !errors.Is(err, llm.ErrBadRequest) {
		t.Fatalf("error = %v, want llm.ErrBadRequest", err)
	}
	pe := providerError(t, err)
	if pe.Status != 400 || pe.Message != "messages: at least one message is required" {
		t.Errorf("error = %+v, want status 400 and the server's message", pe)
	}
	if !strings.Contains(err.Error(), b.Provider.Name()) {
		t.Errorf("error %q does not name the provider", err)
	}
	wantRequests(t, b, 1)
	wantWaits(t, b, 0)
}

func droppedMidStream(t *testing.T, h Harness) {
	b := h.Start(t, Answer{Text: []string{"Hello ", "wor"}, Fault: FaultDrop})
	resp, d, err := stream(t, context.Background(), b.Provider, SuiteRequest())
	if !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("error = %v, want llm.ErrUnavailable", err)
	}
	providerError(t, err)
	if d.text() != "Hello wor" {
		t.Errorf("deltas = %q, want %q", d.text(), "Hello wor")
	}
	if resp.Content != "Hello wor" {
		t.Errorf("partial content = %q, want %q", resp.Content, "Hello wor")
	}
	wantRequests(t, b, 1)
}

func droppedBeforeOutputRetried(t *testing.T, h Harness) {
	b := h.Start(t, Answer{Fault: FaultDrop}, Answer{Text: []string{"ok"}})
	resp, d, err := stream(t, context.Background(), b.Provider, SuiteRequest())
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if resp.Content != "ok" || d.text() != "ok" {
		t.Errorf("content = %q, deltas %q, want ok once", resp.Content, d.text())
	}
	wantRequests(t, b, 2)
	wantWaits(t, b, 1)
}

func droppedGenerateRetried(t *testing.T, h Harness) {
	b := h.Start(t, Answer{Text: []string{"a long answer that is cut in the middle"}, Fault: FaultDrop}, Answer{Text: []string{"ok"}})
	resp, err := b.Provider.Generate(context.Background(), SuiteRequest())
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if resp.Content != "ok" {
		t.Errorf("content = %q, want ok", resp.Content)
	}
	wantRequests(t, b, 2)
}

func cancelMidStream(t *testing.T, h Harness) {
	b := h.Start(t, Answer{Text: []string{"Hello ", "there"}, Fault: FaultHang})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := b.Provider.(llm.Streamer)
	var got []string
	_, err := s.Stream(ctx, SuiteRequest(), func(d llm.Delta) {
		got = append(got, d.Text)
		cancel()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want one wrapping context.Canceled", err)
	}
	if len(got) == 0 || got[0] != "Hello " {
		t.Errorf("deltas before the cancel = %q, want \"Hello \" first", got)
	}
	if b.Gone != nil {
		select {
		case <-b.Gone:
		case <-time.After(30 * time.Second):
			t.Fatal("the server never saw the client go away")
		}
	}
	wantRequests(t, b, 1)
}

func unpairedRefused(t *testing.T, h Harness) {
	b := h.Start(t)
	req := SuiteRequest()
	req.Messages = req.Messages[:3] // the tool call, without its result
	_, err := b.Provider.Generate(context.Background(), req)
	if !errors.Is(err, llm.ErrUnpaired) || !errors.Is(err, llm.ErrBadRequest) {
		t.Fatalf("error = %v, want llm.ErrUnpaired and llm.ErrBadRequest", err)
	}
	if b.Waits != nil {
		wantRequests(t, b, 0) // refused before it was sent
	}
}

func cloneRequest(r llm.Request) llm.Request {
	b, _ := json.Marshal(r)
	var out llm.Request
	_ = json.Unmarshal(b, &out)
	return out
}

// JSONEqual reports whether a and b hold the same JSON value.
func JSONEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// keyRedactedFromErrors: a server that repeats the request's key in its errors
// (a 401 body, a 503 body that is retried and logged, an error event in the
// middle of a stream) has it redacted from every error the provider returns
// and every line it logs, and the errors keep their class.
func keyRedactedFromErrors(t *testing.T, h Harness) {
	b := h.Start(t,
		Answer{Status: 401, Message: "Incorrect API key provided", EchoKey: true},
		Answer{Status: 401, Message: "Incorrect API key provided", EchoKey: true},
		Answer{Status: 503, Message: "Service Unavailable", EchoKey: true},
		Answer{Text: []string{"Partial"}, Fault: FaultError, Message: "Overloaded", EchoKey: true})
	if b.Key == "" {
		t.Fatal("the harness names no key")
	}
	check := func(what string, err error, sentinel error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s succeeded, want the server's error", what)
		}
		if strings.Contains(err.Error(), b.Key) {
			t.Errorf("%s: the key is in the error: %v", what, err)
		}
		if !strings.Contains(err.Error(), llm.Redacted) {
			t.Errorf("%s: the server's echo is not in the error: %v", what, err)
		}
		if !errors.Is(err, sentinel) {
			t.Errorf("%s: error %v does not wrap %v", what, err, sentinel)
		}
	}
	_, err := b.Provider.Generate(context.Background(), SuiteRequest())
	check("Generate", err, llm.ErrBadRequest)
	if pe := providerError(t, err); pe.Status != 401 {
		t.Errorf("status %d, want 401", pe.Status)
	}
	_, _, err = stream(t, context.Background(), b.Provider, SuiteRequest())
	check("Stream", err, llm.ErrBadRequest)
	_, _, err = stream(t, context.Background(), b.Provider, SuiteRequest())
	check("Stream after a retry", err, llm.ErrUnavailable)
	wantRequests(t, b, 4)
	if b.Log != nil {
		logs := b.Log()
		if !strings.Contains(logs, "llm: retrying") || !strings.Contains(logs, llm.Redacted) {
			t.Errorf("the retry is not logged with the server's echo:\n%s", logs)
		}
		if strings.Contains(logs, b.Key) {
			t.Errorf("the key is in the provider's log:\n%s", logs)
		}
	}
}
