package session

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
)

// syncBuffer is a log sink that the work goroutines and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// records are the log's records, decoded.
func (s *syncBuffer) records(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// find is the first record with msg whose attributes include want.
func find(recs []map[string]any, msg string, want map[string]any) map[string]any {
	for _, r := range recs {
		if r["msg"] != msg {
			continue
		}
		ok := true
		for k, v := range want {
			if r[k] != v {
				ok = false
			}
		}
		if ok {
			return r
		}
	}
	return nil
}

// The node's log says when each turn starts and how it ends, and every
// failure of a model or a tool call, at warn.
func TestTurnsAndFailuresAreLogged(t *testing.T) {
	b := openBus(t)
	var sink syncBuffer
	log := slog.New(slog.NewJSONHandler(&sink, &slog.HandlerOptions{Level: slog.LevelInfo}))
	failing := tools.Func(tools.Spec{Name: "broken"}, func(context.Context, json.RawMessage) (tools.Result, error) {
		return tools.Result{}, context.DeadlineExceeded
	})
	p := mock.Scripted(mock.CallTool("broken", `{}`), mock.Say("done"), mock.Fail(500, "the model is down"))
	m, err := NewManager(Config{Logger: log}, b, p, ToolConfig{Catalog: tools.MustRegistry(failing), Options: tools.Options{Logger: quiet}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	Create(context.Background(), b, "s1", Config{}, nil)
	if o := do(t, m, "s1", run("one")); o.Status != projection.StatusCompleted {
		t.Fatalf("%+v", o)
	}
	if o := do(t, m, "s1", run("two")); o.Status != projection.StatusFailed {
		t.Fatalf("%+v", o)
	}
	recs := sink.records(t)
	for _, c := range []struct {
		msg   string
		attrs map[string]any
	}{
		{"turn started", map[string]any{"level": "INFO", "session": "s1", "turn": 1.0}},
		{"turn ended", map[string]any{"level": "INFO", "session": "s1", "turn": 1.0, "outcome": "completed"}},
		{"tool call failed", map[string]any{"level": "WARN", "session": "s1", "tool": "broken", "code": "tool_error"}},
		{"turn started", map[string]any{"level": "INFO", "session": "s1", "turn": 2.0}},
		{"model call failed", map[string]any{"level": "WARN", "session": "s1", "turn": 2.0, "code": "provider"}},
		{"turn ended", map[string]any{"level": "INFO", "session": "s1", "turn": 2.0, "outcome": "failed", "code": "provider"}},
	} {
		r := find(recs, c.msg, c.attrs)
		if r == nil {
			t.Fatalf("no %q with %v in the log:\n%s", c.msg, c.attrs, mustJSON(recs))
		}
		if c.msg == "turn ended" && r["duration"] == nil {
			t.Fatalf("%q has no duration: %v", c.msg, r)
		}
	}
}
