package session

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/httpx"
	"github.com/tah-dev/tah/llm/llmtest"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/llm/openai"
	"github.com/tah-dev/tah/projection"
)

// compactionEvents returns the payloads of the session's compaction events.
func compactionEvents(t *testing.T, b *bus.Bus) (ok []event.ContextCompactedData, failed []event.ContextCompactFailedData) {
	t.Helper()
	return events[event.ContextCompactedData](t, b, "s1", event.ContextCompacted),
		events[event.ContextCompactFailedData](t, b, "s1", event.ContextCompactFailed)
}

// A compaction whose answer is empty (a reasoning model out of output
// tokens) fails: the turns it would have dropped stay, and trimming keeps the
// request to the budget.
func TestEmptySummaryFailsTheCompactionAndTrimmingTakesOver(t *testing.T) {
	for _, answer := range []string{"", "  \n", projection.SummaryPrefix + "\n…"} {
		b := openBus(t)
		Create(context.Background(), b, "s1", Config{}, nil)
		p := mock.Scripted(mock.Say(strings.Repeat("long answer ", 40)).OnCompaction(false).Always(),
			mock.Say(answer).WithFinish(llm.FinishLength).WithUsage(llm.Usage{InputTokens: 900, OutputTokens: 4096}).OnCompaction(true).Always())
		m := newManager(t, b, p, Config{ContextChars: 300})
		do(t, m, "s1", run("first"))
		if o := do(t, m, "s1", run("second")); o.Status != projection.StatusCompleted {
			t.Fatalf("answer %q: %+v", answer, o)
		}
		done, failed := compactionEvents(t, b)
		if len(done) != 0 || len(failed) != 1 || failed[0].Code != event.CodeEmptySummary || failed[0].StepID == "" {
			t.Fatalf("answer %q: compacted %+v, failed %+v", answer, done, failed)
		}
		tys := types(t, b, "s1")
		if contains(tys, event.SummaryAdded) || !contains(tys, event.ContextTrimmed) {
			t.Fatalf("answer %q: the turns were dropped or not trimmed: %v", answer, tys)
		}
		st := fold(t, b, "s1")
		if st.Summaries != 0 || !strings.Contains(mustJSON(st.Messages), "first") {
			t.Fatalf("answer %q: the first turn left the history: %s", answer, mustJSON(st.Messages))
		}
		// The failed call is a step all the same, and its tokens count.
		step := st.Step(failed[0].StepID)
		if step == nil || !step.Compaction || step.Status != projection.StepFailed || step.Code != event.CodeEmptySummary ||
			step.Response == nil || step.Response.Usage.OutputTokens != 4096 {
			t.Fatalf("answer %q: step %+v", answer, step)
		}
		m.Close(context.Background())
	}
}

// Compaction calls are LLM steps marked as compaction, with their usage in
// the session's; they are not among the turn's maxSteps.
func TestCompactionCallsAreStepsWithUsage(t *testing.T) {
	b := openBus(t)
	Create(context.Background(), b, "s1", Config{}, nil)
	compactUsage := llm.Usage{InputTokens: 2185, OutputTokens: 120}
	p := mock.Scripted(mock.Say(strings.Repeat("long answer ", 40)).WithUsage(llm.Usage{InputTokens: 10, OutputTokens: 1}).OnCompaction(false).Always(),
		mock.Say("- facts").WithModel("summariser").WithUsage(compactUsage).OnCompaction(true).Always())
	m := newManager(t, b, p, Config{ContextChars: 600})
	do(t, m, "s1", run("first"))
	do(t, m, "s1", run("second"))
	if o := do(t, m, "s1", run("third")); o.Status != projection.StatusCompleted {
		t.Fatalf("%+v", o)
	}
	st := fold(t, b, "s1")
	var compactions, calls int
	for _, s := range st.Steps {
		if s.Type != projection.StepLLM {
			continue
		}
		if !s.Compaction {
			calls++
			continue
		}
		compactions++
		if s.Status != projection.StepCompleted || s.Response == nil || s.Response.Usage != compactUsage || s.Response.Model != "summariser" {
			t.Fatalf("compaction step %+v", s)
		}
	}
	if compactions == 0 {
		t.Fatalf("no compaction step: %s", mustJSON(st.Steps))
	}
	want := llm.Usage{InputTokens: 10 * calls, OutputTokens: calls}
	for range compactions {
		want = want.Add(compactUsage)
	}
	if st.Usage != want {
		t.Fatalf("session usage %+v, want %+v (%d calls, %d compactions)", st.Usage, want, calls, compactions)
	}
	if st.TurnLLMCalls != 1 {
		t.Fatalf("the compaction counts among the turn's calls: %d", st.TurnLLMCalls)
	}
}

// streamOnly serves a provider that answers only streamed requests: a
// non-streamed one gets 400, as some gateways do.
func streamOnly(t *testing.T, srv *llmtest.Server) *httptest.Server {
	target, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !(llmtest.OpenAI{}).Streaming(body) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write(llmtest.OpenAI{}.ErrorBody(http.StatusBadRequest, "this server only streams: set stream to true"))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front
}

// A compaction request streams as any other, so that a provider that only
// streams does not fail every compaction.
func TestCompactionStreamsAgainstAStreamingOnlyProvider(t *testing.T) {
	long := llmtest.Answer{Text: []string{strings.Repeat("long answer ", 40)}, Usage: llmtest.Usage{Input: 10, Output: 5}}
	srv := llmtest.NewServer(t, llmtest.OpenAI{}, long, long,
		llmtest.Answer{Text: []string{"- the user said first, then second"}, Usage: llmtest.Usage{Input: 300, Output: 12}},
		long)
	front := streamOnly(t, srv)
	p, err := openai.New(llmtest.Config(llm.ProviderOpenAI, front.URL), httpx.WithAPIKey("test-key"))
	if err != nil {
		t.Fatal(err)
	}
	b := openBus(t)
	Create(context.Background(), b, "s1", Config{}, nil)
	m := newManager(t, b, p, Config{ContextChars: 600})
	do(t, m, "s1", run("first"))
	do(t, m, "s1", run("second"))
	if o := do(t, m, "s1", run("third")); o.Status != projection.StatusCompleted {
		t.Fatalf("%+v", o)
	}
	done, failed := compactionEvents(t, b)
	if len(done) != 1 || len(failed) != 0 || done[0].Usage.InputTokens != 300 {
		t.Fatalf("compacted %+v, failed %+v", done, failed)
	}
}
