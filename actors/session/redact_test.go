package session

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// A provider that does not redact its errors (the mock repeats its script's
// message as it is) still leaves no credential in what a failed call
// records: llm.failed, agent.failed and context.compact_failed, the turn's
// outcome, the compaction's error and the node's log all hold it redacted.
func TestProviderErrorsAreRedactedWhereRecorded(t *testing.T) {
	const key = "sk-live-0123456789abcdefXYZ"
	echo := "Incorrect API key: request headers {\"authorization\":\"Bearer " + key + "\"}; x-api-key: " + key
	b := openBus(t)
	var sink syncBuffer
	log := slog.New(slog.NewJSONHandler(&sink, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := mock.Scripted(mock.Say("hello"), mock.Fail(401, echo), mock.Fail(401, echo).OnCompaction(true))
	m, err := NewManager(Config{Logger: log}, b, p, (&testTools{}).config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	ctx := context.Background()
	Create(ctx, b, "s1", Config{}, nil)
	if o := do(t, m, "s1", run("one")); o.Status != projection.StatusCompleted {
		t.Fatalf("%+v", o)
	}

	o := do(t, m, "s1", run("two"))
	if o.Status != projection.StatusFailed || o.Code != event.CodeProvider {
		t.Fatalf("%+v", o)
	}
	if strings.Contains(o.Error, key) || !strings.Contains(o.Error, llm.Redacted) || !strings.Contains(o.Error, "HTTP 401") {
		t.Errorf("the outcome's error: %q", o.Error)
	}

	c := do(t, m, "s1", Command{Kind: wire.CommandCompact})
	if c.Err == nil {
		t.Fatalf("the compaction did not fail: %+v", c)
	}
	if strings.Contains(c.Err.Error(), key) || !strings.Contains(c.Err.Error(), llm.Redacted) {
		t.Errorf("the compaction's error: %v", c.Err)
	}

	evs, _, err := b.Replay(ctx, "s1", 1)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[event.Type]bool{}
	for _, e := range evs {
		raw, _ := json.Marshal(e)
		if strings.Contains(string(raw), key) {
			t.Errorf("the key is in %s: %s", e.Type, raw)
		}
		if strings.Contains(string(raw), llm.Redacted) {
			seen[e.Type] = true
		}
	}
	for _, typ := range []event.Type{event.LLMFailed, event.AgentFailed, event.ContextCompactFailed} {
		if !seen[typ] {
			t.Errorf("no %s holds the redacted error", typ)
		}
	}

	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	logs := sink.b.String()
	sink.mu.Unlock()
	if strings.Contains(logs, key) {
		t.Errorf("the key is in the node's log:\n%s", logs)
	}
	if !strings.Contains(logs, "model call failed") || !strings.Contains(logs, llm.Redacted) {
		t.Errorf("the failure is not logged:\n%s", logs)
	}
}
