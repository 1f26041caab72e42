package session

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/artifacts"
)

// toolThenAnswer is a model that, in every turn, calls the tool "fetch" once
// and then answers: it keeps no copy of its requests, so that a long session
// measures TAH and not the model.
type toolThenAnswer struct{ calls atomic.Int64 }

func (m *toolThenAnswer) Name() string { return "tool-then-answer" }

func (m *toolThenAnswer) Generate(_ context.Context, req llm.Request) (llm.Response, error) {
	n := m.calls.Add(1)
	if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleUser {
		return llm.Response{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_%d", n), Name: "fetch", Arguments: json.RawMessage(`{}`)}},
			FinishReason: llm.FinishToolCalls}, nil
	}
	return llm.Response{Content: fmt.Sprintf("answer %d", n), FinishReason: llm.FinishStop}, nil
}

// fetchTool returns size bytes of text that differ from call to call.
func fetchTool(size int) tools.Tool {
	var n atomic.Int64
	return tools.Func(tools.Spec{Name: "fetch", Idempotent: true}, func(context.Context, json.RawMessage) (tools.Result, error) {
		head := fmt.Sprintf("page %d: ", n.Add(1))
		return tools.Text(head + strings.Repeat("lorem ipsum ", (size-len(head))/12+1)[:size-len(head)]), nil
	})
}

// openFastBus is openBus with fsync every two minutes, as a deployment that
// trades the last moments of a crash for speed would run (and the bus tests do).
func openFastBus(t *testing.T) *bus.Bus {
	return openBusWith(t, func(c *bus.Config) { c.SyncInterval = 2 * time.Minute })
}

// TestThousandTurnsWithLargeToolOutputs drives a session through 1,000
// turns, each with a tool call returning 50 KB, with a node's defaults: the
// output is cut to a preview and kept whole in the object store, and each
// request has a budget of 200,000 characters. Then a fresh Manager (a
// restarted node) loads the session from its checkpoint and log and runs one
// more turn.
func TestThousandTurnsWithLargeToolOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("a long session")
	}
	turns, output := 1000, 50<<10
	if raceDetector {
		// The same work with every access checked takes minutes: fewer turns
		// check the concurrency, the runs without -race (make unit) the length.
		turns = 100
	}
	b := openFastBus(t)
	tc := ToolConfig{Catalog: tools.MustRegistry(fetchTool(output)),
		Options: tools.Options{Artifacts: artifacts.New(b.Artifacts()), Logger: quiet}}
	cfg := Config{ContextChars: 200_000}
	if _, err := Create(context.Background(), b, "s1", cfg, nil); err != nil {
		t.Fatal(err)
	}
	m1 := startManager(t, b, &toolThenAnswer{}, cfg, tc)
	for i := 1; i <= turns; i++ {
		o := do(t, m1, "s1", run(fmt.Sprintf("question %d", i)))
		if o.Err != nil || o.Status != projection.StatusCompleted || o.Turn != i {
			t.Fatalf("turn %d: %+v", i, o)
		}
	}
	if err := m1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	m2 := startManager(t, b, &toolThenAnswer{}, cfg, tc)
	o := do(t, m2, "s1", run("one more"))
	if o.Err != nil || o.Status != projection.StatusCompleted || o.Turn != turns+1 {
		t.Fatalf("turn after the restart: %+v", o)
	}
	st := fold(t, b, "s1")
	if st.Turn != turns+1 || st.Epoch != 2 || st.Status != projection.StatusCompleted {
		t.Fatalf("turn %d epoch %d status %s", st.Turn, st.Epoch, st.Status)
	}
	if err := llm.CheckPairing(st.Messages); err != nil {
		t.Fatal(err)
	}
	// The last output is whole in the object store.
	finished := events[event.ToolFinishedData](t, b, "s1", event.ToolFinished)
	last := finished[len(finished)-1]
	if len(finished) != turns+1 || last.Artifact == nil {
		t.Fatalf("%d tool results, the last %+v", len(finished), last)
	}
	if whole, err := b.GetArtifact(context.Background(), *last.Artifact); err != nil || len(whole) != output {
		t.Fatalf("the whole output: %d bytes, %v", len(whole), err)
	}
}
