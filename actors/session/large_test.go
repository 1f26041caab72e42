package session

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/toolservice"
)

// openBusWith is openBus with its configuration changed by edit.
func openBusWith(t *testing.T, edit func(*bus.Config)) *bus.Bus {
	t.Helper()
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = t.TempDir(), -1, 2
	edit(&cfg)
	b, err := bus.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

// openBusOf is openBus with a max payload of maxPayload bytes, so that what
// is too large for a record is a few hundred kilobytes.
func openBusOf(t *testing.T, maxPayload int32) *bus.Bus {
	return openBusWith(t, func(c *bus.Config) { c.MaxPayload = maxPayload })
}

// checkUsable runs one more turn on a fresh Manager (a restarted node) and
// checks that it completes and that the log folds and pairs.
func checkUsable(t *testing.T, b *bus.Bus, sid string) {
	t.Helper()
	m := newManager(t, b, mock.Scripted(mock.Say("still here")), Config{Node: "n2"})
	if o := do(t, m, sid, run("are you there?")); o.Err != nil || o.Status != projection.StatusCompleted || o.Content != "still here" {
		t.Fatalf("the turn after: %+v", o)
	}
	if err := llm.CheckPairing(fold(t, b, sid).Messages); err != nil {
		t.Fatal(err)
	}
}

// A 50 MB answer is over what a node accepts of one answer: the step and the
// turn fail with answer_too_large, and the session goes on.
func TestFiftyMegabyteAnswerFailsTheTurnCleanly(t *testing.T) {
	b := openBus(t)
	piece := strings.Repeat("x", 1<<20)
	fifty := make([]string, 50)
	for i := range fifty {
		fifty[i] = piece
	}
	p := mock.Scripted(mock.Reply{Tokens: fifty}, mock.Say("short"))
	m := newManager(t, b, p, Config{Node: "n1"})
	Create(context.Background(), b, "s1", Config{}, nil)
	o := do(t, m, "s1", run("write me 50 MB"))
	if o.Err != nil || o.Status != projection.StatusFailed || o.Code != event.CodeAnswerTooLarge || !strings.Contains(o.Error, "max_tokens") {
		t.Fatalf("%+v", o)
	}
	failed := events[event.LLMFailedData](t, b, "s1", event.LLMFailed)
	if len(failed) != 1 || failed[0].Code != event.CodeAnswerTooLarge {
		t.Fatalf("%+v", failed)
	}
	if o := do(t, m, "s1", run("then say something short")); o.Status != projection.StatusCompleted || o.Content != "short" {
		t.Fatalf("%+v", o)
	}
	checkUsable(t, b, "s1")
}

// An answer too large for the log completes: the whole is in the object
// store, the log and the history hold a cut copy that names it.
func TestLargeAnswerIsKeptWholeInTheObjectStore(t *testing.T) {
	b := openBusOf(t, 1<<20)
	answer := strings.Repeat("a long answer ", 50_000) // 700 KB, over a quarter of 1 MiB
	p := mock.Scripted(mock.Say(answer).WithReasoning(strings.Repeat("hmm ", 100_000)), mock.Say("next"))
	m := newManager(t, b, p, Config{Node: "n1"})
	Create(context.Background(), b, "s1", Config{}, nil)
	o := do(t, m, "s1", run("tell me everything"))
	if o.Err != nil || o.Status != projection.StatusCompleted || !strings.Contains(o.Content, "[answer truncated: showing the first 16384 of 700000 characters") {
		t.Fatalf("%+v", o)
	}
	done := events[event.LLMCompletedData](t, b, "s1", event.LLMCompleted)
	ref := done[0].Artifact
	if len(done) != 1 || ref == nil || !strings.Contains(o.Content, ref.Object) || !strings.Contains(done[0].Response.Reasoning, "[reasoning truncated") {
		t.Fatalf("%+v", done)
	}
	raw, err := b.GetArtifact(context.Background(), *ref)
	if err != nil {
		t.Fatal(err)
	}
	var whole llm.Response
	if err := json.Unmarshal(raw, &whole); err != nil || whole.Content != answer {
		t.Fatalf("the stored answer: %d characters, %v", len(whole.Content), err)
	}
	// The model sees the cut copy in the next turn's request.
	if o := do(t, m, "s1", run("and?")); o.Status != projection.StatusCompleted {
		t.Fatalf("%+v", o)
	}
	calls := p.Calls()
	if seen := calls[1].Messages[len(calls[1].Messages)-2]; seen.Role != llm.RoleAssistant || seen.Content != done[0].Response.Content {
		t.Fatalf("the history holds %d characters", len(seen.Content))
	}
	checkUsable(t, b, "s1")
}

// Tool-call arguments cannot be cut: an answer whose calls are too large for
// the log fails its turn, which never runs them.
func TestToolCallsTooLargeForTheLogFailTheTurn(t *testing.T) {
	b := openBusOf(t, 1<<20)
	tt := &testTools{}
	args := fmt.Sprintf(`{"text":%q}`, strings.Repeat("y", 600_000))
	m := startManager(t, b, mock.Scripted(mock.CallTool("echo", args)), Config{}, tt.config())
	Create(context.Background(), b, "s1", Config{}, nil)
	o := do(t, m, "s1", run("echo all this"))
	if o.Status != projection.StatusFailed || o.Code != event.CodeAnswerTooLarge || !strings.Contains(o.Error, "smaller pieces") || tt.ran() != 0 {
		t.Fatalf("%+v, %d calls ran", o, tt.ran())
	}
	checkUsable(t, b, "s1")
}

// bigTool returns size bytes.
func bigTool(name string, size int) tools.Tool {
	return tools.Func(tools.Spec{Name: name, Idempotent: true}, func(context.Context, json.RawMessage) (tools.Result, error) {
		return tools.Text(strings.Repeat("z", size)), nil
	})
}

// Tool outputs never make an append fail: one too large for a record is cut
// with the whole in the object store, whether a local tool or a tool service
// returned it; several that fit alone but not together are written in more
// than one record.
func TestToolOutputsTooLargeForARecord(t *testing.T) {
	b := openBusOf(t, 1<<20)
	reg := serveTools(t, b, toolservice.Config{Executor: tools.Options{MaxOutput: -1}}, bigTool("remote_big", 900_000))
	cat := tools.Merge(tools.MustRegistry(bigTool("big", 1_000_000), bigTool("medium", 250_000)), reg)
	// MaxOutput -1: the executor never cuts, so the session must.
	tc := ToolConfig{Catalog: cat, Options: tools.Options{MaxOutput: -1, Logger: quiet}}
	p := mock.Scripted(
		mock.CallTool("big", `{}`).AndCall("remote_big", `{}`),
		mock.CallTool("medium", `{}`).AndCall("medium", `{}`).AndCall("medium", `{}`).AndCall("medium", `{}`).AndCall("medium", `{}`),
		mock.Say("done"))
	m := startManager(t, b, p, Config{Node: "n1"}, tc)
	Create(context.Background(), b, "s1", Config{}, nil)
	if o := do(t, m, "s1", run("fetch")); o.Err != nil || o.Status != projection.StatusCompleted || o.Content != "done" {
		t.Fatalf("%+v", o)
	}
	finished := events[event.ToolFinishedData](t, b, "s1", event.ToolFinished)
	if len(finished) != 7 {
		t.Fatalf("%d results", len(finished))
	}
	for i, f := range finished[:2] {
		if f.Artifact == nil || !strings.Contains(f.Output, "[output truncated") {
			t.Fatalf("result %d: %d bytes, artifact %v", i, len(f.Output), f.Artifact)
		}
		whole, err := b.GetArtifact(context.Background(), *f.Artifact)
		if err != nil || len(whole) < 900_000 {
			t.Fatalf("result %d's whole output: %d bytes, %v", i, len(whole), err)
		}
	}
	records := map[uint64]int{}
	for i, f := range finished[2:] {
		if f.Artifact != nil || len(f.Output) != 250_000 {
			t.Fatalf("medium result %d was cut", i)
		}
	}
	evs, _, err := b.Replay(context.Background(), "s1", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == event.ToolFinished {
			records[e.Seq]++
		}
	}
	if len(records) < 3 {
		t.Fatalf("the five medium results should take more than one record: %v", records)
	}
	checkUsable(t, b, "s1")
}
