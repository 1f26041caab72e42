package node

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/actors/toolrunner"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
)

func TestMeasuredProviderKeepsStreamingAndCounts(t *testing.T) {
	t.Parallel()
	m := newMetrics(&Node{})
	p := measured(mock.Scripted(mock.Say("hello there"), mock.Fail(500, "down")), m)
	s, ok := p.(llm.Streamer)
	if !ok {
		t.Fatal("the measured mock is no longer a Streamer")
	}
	var streamed strings.Builder
	resp, err := s.Stream(context.Background(), llm.Request{Messages: []llm.Message{llm.User("hi")}}, func(d llm.Delta) { streamed.WriteString(d.Text) })
	if err != nil || resp.Content != "hello there" || streamed.String() != "hello there" {
		t.Fatalf("stream: %q %q %v", resp.Content, streamed.String(), err)
	}
	if _, err := p.Generate(context.Background(), llm.Request{Messages: []llm.Message{llm.User("hi")}}); err == nil {
		t.Fatal("the scripted failure did not fail")
	}
	m.toolCall(toolrunner.CallResult{Call: llm.ToolCall{Name: "list_files"}, Result: tools.Text("a\nb"), Duration: 3 * time.Millisecond})
	m.toolCall(toolrunner.CallResult{Call: llm.ToolCall{Name: "read_file"}, Result: tools.Failed(event.CodeToolError, "no such file"), Duration: time.Millisecond})
	m.turnEnded(projection.StatusCompleted, time.Second)
	m.turnEnded(projection.StatusRunning, time.Second) // not an end: not counted

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`tah_steps_total{kind="llm"} 2`,
		`tah_steps_total{kind="tool"} 2`,
		`tah_llm_request_duration_seconds_count{outcome="ok",provider="mock"} 1`,
		`tah_llm_request_duration_seconds_count{outcome="error",provider="mock"} 1`,
		`tah_errors_total{kind="llm"} 1`,
		`tah_errors_total{kind="tool"} 1`,
		`tah_turns_total{status="completed"} 1`,
		`tah_turns_total{status="failed"} 0`,
		`tah_tool_duration_seconds_count{outcome="error",tool="read_file"} 1`,
		`tah_sessions_active 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if !strings.Contains(body, `tah_llm_tokens_total{kind="output",provider="mock"}`) {
		t.Errorf("no output tokens:\n%s", body)
	}
}
