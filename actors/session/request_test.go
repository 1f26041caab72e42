package session

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
)

// TestRequestsRebuildFromTheLog: every request the loop sent (trimmed,
// after an automatic compaction, by a new owner with another system prompt,
// model and tools, loaded from a checkpoint) is rebuilt from the log byte for
// byte, and matches the hash its llm.started recorded; the tools' schemas
// are in the log once per change.
func TestRequestsRebuildFromTheLog(t *testing.T) {
	b := openBus(t)
	ctx := context.Background()
	if _, err := Create(ctx, b, "s1", Config{}, nil); err != nil {
		t.Fatal(err)
	}
	// Answers over the budget: the second turn's compaction fails and trimming
	// takes over; the third's compaction succeeds.
	long := strings.Repeat("a long answer ", 30)
	replies := []mock.Reply{mock.Fail(500, "boom").OnCompaction(true), mock.Say("- facts").OnCompaction(true).Always()}
	for _, turn := range []string{"one", "two", "three", "four"} {
		replies = append(replies, mock.CallTool("echo", `{"x": "<a> & b", "n": 1}`).OnPrompt(turn).OnCompaction(false),
			mock.Say(long).OnPrompt(turn).OnCompaction(false))
	}
	p := mock.Scripted(replies...)

	tt := &testTools{}
	m1 := startManager(t, b, p, Config{SystemPrompt: "be <brief>", ContextChars: 400, Model: "m1", Node: "n1", CheckpointEvery: 4}, tt.config())
	for _, text := range []string{"one", "two"} {
		if o := do(t, m1, "s1", run(text)); o.Status != projection.StatusCompleted {
			t.Fatalf("%s: %+v", text, o)
		}
	}
	if err := m1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A new owner, with another prompt, model and tools, from the checkpoint.
	echoOnly := ToolConfig{Catalog: tools.MustRegistry(tools.Func(tools.Spec{Name: "echo", Idempotent: true}, tt.run("echo"))),
		Options: tools.Options{Logger: quiet}}
	m2 := startManager(t, b, p, Config{SystemPrompt: "a new prompt", ContextChars: 400, Model: "m2", Node: "n2"}, echoOnly)
	for _, text := range []string{"three", "four"} {
		if o := do(t, m2, "s1", run(text)); o.Status != projection.StatusCompleted {
			t.Fatalf("%s: %+v", text, o)
		}
	}

	var sent []llm.Request
	for _, r := range p.Calls() {
		if !strings.HasPrefix(r.Messages[0].Content, projection.CompactionMarker) {
			sent = append(sent, r)
		}
	}
	evs, _, err := b.Replay(ctx, "s1", 1)
	if err != nil {
		t.Fatal(err)
	}
	var started []event.LLMStartedData
	offers, trimmed, checkpoints := 0, 0, 0
	for _, e := range evs {
		switch e.Type {
		case event.LLMStarted:
			d, err := event.DecodeAs[event.LLMStartedData](e)
			if err != nil {
				t.Fatal(err)
			}
			started = append(started, d)
			if d.Trim != nil {
				trimmed++
			}
		case event.ToolsOffered:
			offers++
		case event.CheckpointCreated:
			checkpoints++
		}
	}
	if len(started) != len(sent) || len(sent) != 8 {
		t.Fatalf("%d llm.started, %d requests sent", len(started), len(sent))
	}
	if offers != 2 || trimmed == 0 || checkpoints == 0 || !contains(types(t, b, "s1"), event.ContextCompacted) {
		t.Fatalf("%d tools.offered (want 2), %d trimmed steps, %d checkpoints, types %v", offers, trimmed, checkpoints, types(t, b, "s1"))
	}
	for i, d := range started {
		r, err := projection.RebuildRequest(evs, d.StepID)
		if err != nil {
			t.Fatalf("step %s: %v", d.StepID, err)
		}
		got, _ := json.Marshal(r.Request)
		want, _ := json.Marshal(sent[i])
		if !r.Verified || string(got) != string(want) {
			t.Fatalf("step %s (verified %v): rebuilt\n%s\nsent\n%s", d.StepID, r.Verified, got, want)
		}
	}
}
