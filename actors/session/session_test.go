package session

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

var quiet = slog.New(slog.DiscardHandler)

// testTools is a real, in-process tool catalog: "echo" (idempotent) returns
// its input, "block" waits for its context. With started set, every call
// reports its start there and waits for its context.
type testTools struct {
	mu      sync.Mutex
	calls   []string
	started chan string
}

func (tt *testTools) run(name string) func(context.Context, json.RawMessage) (tools.Result, error) {
	return func(ctx context.Context, in json.RawMessage) (tools.Result, error) {
		tt.mu.Lock()
		tt.calls = append(tt.calls, name)
		tt.mu.Unlock()
		if tt.started != nil {
			tt.started <- name
		}
		if name == "block" || tt.started != nil {
			<-ctx.Done()
			return tools.Result{}, ctx.Err()
		}
		return tools.Text("echo:" + string(in)), nil
	}
}

// ran is the number of calls that ran.
func (tt *testTools) ran() int {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return len(tt.calls)
}

func (tt *testTools) catalog() tools.Catalog {
	return tools.MustRegistry(tools.Func(tools.Spec{Name: "echo", Idempotent: true}, tt.run("echo")),
		tools.Func(tools.Spec{Name: "block"}, tt.run("block")))
}

func (tt *testTools) config() ToolConfig {
	return ToolConfig{Catalog: tt.catalog(), Options: tools.Options{Logger: quiet}}
}

func openBus(t *testing.T) *bus.Bus {
	t.Helper()
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = t.TempDir(), -1, 2
	b, err := bus.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

func newManager(t *testing.T, b *bus.Bus, p llm.Provider, cfg Config) *Manager {
	t.Helper()
	return startManager(t, b, p, cfg, (&testTools{}).config())
}

// startManager starts a Manager with tools tc, closed at the end of the test.
func startManager(t *testing.T, b *bus.Bus, p llm.Provider, cfg Config, tc ToolConfig) *Manager {
	t.Helper()
	cfg.Logger = quiet
	m, err := NewManager(cfg, b, p, tc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return m
}

// do delivers a command and waits for its outcome.
// hangBound is how long a test waits for an outcome before it calls the
// session hung. It catches a hang and judges no speed: a turn of a large
// answer under -race on a loaded machine took over 30 s, the bound before.
const hangBound = 3 * time.Minute

func do(t *testing.T, m *Manager, sid string, cmd Command) Outcome {
	t.Helper()
	ch := make(chan Outcome, 1)
	cmd.Done = func(o Outcome) { ch <- o }
	cmd.settle = &workSettle{ended: make(chan struct{})}
	if err := m.Deliver(sid, &cmd); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-ch:
		// The outcome comes before the checkpoint its work writes: the
		// caller reads the log once that is written too.
		if cmd.settle.started.Load() {
			select {
			case <-cmd.settle.ended:
			case <-time.After(hangBound):
				t.Fatalf("%s on %s: its work did not end after its outcome", cmd.Kind, sid)
			}
		}
		return o
	case <-time.After(hangBound):
		t.Fatalf("%s on %s: no outcome", cmd.Kind, sid)
		return Outcome{}
	}
}

func run(text string) Command {
	return Command{Kind: wire.CommandRun, Message: llm.User(text), InputID: event.NewID("in")}
}

func fold(t *testing.T, b *bus.Bus, sid string) projection.State {
	t.Helper()
	evs, _, err := b.Replay(context.Background(), sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	st, err := projection.Fold(evs)
	if err != nil {
		t.Fatalf("the log does not fold cleanly: %v", err)
	}
	return st
}

func types(t *testing.T, b *bus.Bus, sid string) []event.Type {
	evs, _, err := b.Replay(context.Background(), sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out []event.Type
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// waitType waits until the log of sid holds an event of type ty.
func waitType(t *testing.T, b *bus.Bus, sid string, ty event.Type) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang's bound only
	for !slices.Contains(types(t, b, sid), ty) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the log of %s: %v", ty, sid, types(t, b, sid))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A step whose calls are all to the node's own idempotent tools and end
// within quietStart is one record: the answer, the calls' start and end,
// and the next llm.started; a non-idempotent tool's start is written before
// it runs, as a record of its own.
func TestQuickIdempotentStepIsOneRecord(t *testing.T) {
	was := quietStart
	quietStart = time.Hour // the call ends first, however busy the machine
	t.Cleanup(func() { quietStart = was })
	b := openBus(t)
	Create(context.Background(), b, "s1", Config{}, nil)
	tt := &testTools{}
	m := startManager(t, b, mock.Scripted(mock.CallTool("echo", `{}`), mock.Say("done")), Config{}, tt.config())
	if o := do(t, m, "s1", run("go")); o.Status != projection.StatusCompleted {
		t.Fatalf("%+v", o)
	}
	evs, _, err := b.Replay(context.Background(), "s1", 1)
	if err != nil {
		t.Fatal(err)
	}
	records := map[uint64][]event.Type{}
	var step uint64
	for _, e := range evs {
		records[e.Seq] = append(records[e.Seq], e.Type)
		if e.Type == event.ToolStarted {
			step = e.Seq
		}
	}
	if got := records[step]; !slices.Equal(got, []event.Type{event.LLMCompleted, event.ToolStarted, event.ToolFinished, event.LLMStarted}) {
		t.Fatalf("the tool step's record: %v (all: %v)", got, records)
	}
}

func TestRunTurnWithToolsAndDeltas(t *testing.T) {
	b := openBus(t)
	p := mock.Scripted(mock.CallTool("echo", `{"x":1}`), mock.Stream("It ", "is ", "done."))
	m := newManager(t, b, p, Config{SystemPrompt: "be brief", Node: "n1"})
	if _, err := Create(context.Background(), b, "s1", Config{SystemPrompt: "be brief"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(context.Background(), b, "s1", Config{}, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	var mu sync.Mutex
	var text strings.Builder
	sub, err := b.SubscribeDeltas(context.Background(), "s1", func(d bus.DeltaMsg) { mu.Lock(); text.WriteString(d.Text); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()

	o := do(t, m, "s1", run("go"))
	if o.Err != nil || o.Status != projection.StatusCompleted || o.Content != "It is done." || o.Steps != 2 {
		t.Fatalf("%+v", o)
	}
	st := fold(t, b, "s1")
	if st.Epoch != 1 || st.Node != "n1" || len(st.Steps) != 3 || st.Steps[1].Output != `echo:{"x":1}` {
		t.Fatalf("%s", mustJSON(st))
	}
	if err := llm.CheckPairing(st.Messages); err != nil {
		t.Fatal(err)
	}
	// The model saw the tool result in its second request, with the tool schemas.
	calls := p.Calls()
	if len(calls) != 2 || len(calls[1].Tools) != 2 || calls[1].Messages[len(calls[1].Messages)-1].Role != llm.RoleTool {
		t.Fatalf("requests: %s", mustJSON(calls))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := text.String()
		mu.Unlock()
		if got == "It is done." {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deltas: %q", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMaxSteps(t *testing.T) {
	b := openBus(t)
	p := mock.Scripted(mock.CallTool("echo", `{}`).Always())
	m := newManager(t, b, p, Config{MaxSteps: 2})
	Create(context.Background(), b, "s1", Config{}, nil)
	o := do(t, m, "s1", run("loop forever"))
	if o.Status != projection.StatusFailed || o.Code != event.CodeMaxSteps || o.Steps != 2 || !strings.Contains(o.Error, "maxSteps") {
		t.Fatalf("%+v", o)
	}
}

func TestProviderErrorFailsTurnAndNextRunWorks(t *testing.T) {
	b := openBus(t)
	p := mock.Scripted(mock.Fail(400, "bad request"), mock.Say("fine"))
	m := newManager(t, b, p, Config{})
	Create(context.Background(), b, "s1", Config{}, nil)
	o := do(t, m, "s1", run("one"))
	if o.Status != projection.StatusFailed || o.Code != event.CodeProvider || !strings.Contains(o.Error, "bad request") {
		t.Fatalf("%+v", o)
	}
	if o := do(t, m, "s1", run("two")); o.Status != projection.StatusCompleted || o.Content != "fine" {
		t.Fatalf("%+v", o)
	}
}

func TestCancelDuringToolThenRepair(t *testing.T) {
	b := openBus(t)
	p := mock.Scripted(mock.CallTool("block", `{}`).AndCall("echo", `{}`), mock.Say("after"))
	m := newManager(t, b, p, Config{})
	Create(context.Background(), b, "s1", Config{}, nil)
	ch := make(chan Outcome, 1)
	cmd := run("start")
	cmd.Done = func(o Outcome) { ch <- o }
	m.Deliver("s1", &cmd)
	// Wait for the blocking tool to run, then cancel.
	deadline := time.Now().Add(10 * time.Second)
	for fold(t, b, "s1").Status != projection.StatusWaitingTool {
		if time.Now().After(deadline) {
			t.Fatal("tool never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	do(t, m, "s1", Command{Kind: wire.CommandCancel})
	o := <-ch
	if o.Status != projection.StatusCancelled {
		t.Fatalf("%+v", o)
	}
	// Every started call is answered in the cancelled turn, with its step.
	st := fold(t, b, "s1")
	if err := llm.CheckPairing(st.Messages); err != nil {
		t.Fatalf("after the cancel: %v", err)
	}
	for _, s := range st.Steps {
		if s.Type == projection.StepTool && (!s.Status.Done() || s.Tool == "block" && s.Code != event.CodeCancelled) {
			t.Fatalf("tool step after the cancel: %+v", s)
		}
	}
	evs, _, err := b.Replay(context.Background(), "s1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if rep := projection.Audit(evs); len(rep.Problems) > 0 {
		t.Fatalf("audit: %+v", rep.Problems)
	}
	o = do(t, m, "s1", run("again"))
	if o.Status != projection.StatusCompleted {
		t.Fatalf("%+v", o)
	}
	st = fold(t, b, "s1")
	if err := llm.CheckPairing(st.Messages); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(mustJSON(st.Messages), projection.NotExecutedOutput) {
		t.Fatal("a not-executed repair of a call the cancel answered")
	}
}

func TestResumeAfterShutdownMidTurn(t *testing.T) {
	b := openBus(t)
	Create(context.Background(), b, "s1", Config{}, nil)
	slow := mock.Scripted(mock.Say("never").After(time.Hour))
	m1 := newManager(t, b, slow, Config{Node: "n1"})
	cmd := run("long question")
	cmd.Done = func(Outcome) {}
	m1.Deliver("s1", &cmd)
	deadline := time.Now().Add(10 * time.Second)
	for len(fold(t, b, "s1").Steps) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("llm step never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := m1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := fold(t, b, "s1")
	if st.Status != projection.StatusRunning {
		t.Fatalf("shutdown recorded an outcome: %s", st.Status)
	}
	// The next owner resumes: the open LLM step is closed and asked again.
	m2 := newManager(t, b, mock.Scripted(mock.Say("answer")), Config{Node: "n2", SystemPrompt: "new prompt"})
	o := do(t, m2, "s1", Command{Kind: wire.CommandResume})
	if o.Status != projection.StatusCompleted || o.Content != "answer" {
		t.Fatalf("%+v", o)
	}
	st = fold(t, b, "s1")
	if st.Epoch != 2 || st.Steps[0].Code != event.CodeInterrupted || st.Messages[0].Content != "new prompt" {
		t.Fatalf("%s", mustJSON(st))
	}
	// A redelivery of the same input does not start the turn twice.
	again := cmd
	if o := do(t, m2, "s1", again); o.Turn != 1 || o.Status != projection.StatusCompleted {
		t.Fatalf("%+v", o)
	}
}

func TestFencedOwnerStops(t *testing.T) {
	b := openBus(t)
	Create(context.Background(), b, "s1", Config{}, nil)
	m1 := newManager(t, b, mock.Scripted(mock.Say("one"), mock.Say("late")), Config{Node: "n1"})
	if o := do(t, m1, "s1", run("a")); o.Status != projection.StatusCompleted {
		t.Fatalf("%+v", o)
	}
	m2 := newManager(t, b, mock.Scripted(mock.Say("two")), Config{Node: "n2"})
	if o := do(t, m2, "s1", run("b")); o.Content != "two" {
		t.Fatalf("%+v", o)
	}
	o := do(t, m1, "s1", run("c"))
	if !o.Fenced {
		t.Fatalf("stale owner was not fenced: %+v", o)
	}
	st := fold(t, b, "s1")
	if st.Turn != 2 || st.Epoch != 2 {
		t.Fatalf("turn %d epoch %d", st.Turn, st.Epoch)
	}
}

func TestCompactManualAndAuto(t *testing.T) {
	b := openBus(t)
	Create(context.Background(), b, "s1", Config{}, nil)
	p := mock.Scripted(mock.Say(strings.Repeat("long answer ", 20)).OnCompaction(false).Always(),
		mock.Say("- facts").OnCompaction(true).Always())
	m := newManager(t, b, p, Config{})
	if o := do(t, m, "s1", Command{Kind: wire.CommandCompact}); o.Compact != nil || o.Err != nil {
		t.Fatalf("nothing to compact: %+v", o)
	}
	do(t, m, "s1", run("first"))
	do(t, m, "s1", run("second"))
	o := do(t, m, "s1", Command{Kind: wire.CommandCompact})
	if o.Err != nil || o.Compact == nil || o.Compact.Turns != 2 {
		t.Fatalf("%+v", o)
	}
	st := fold(t, b, "s1")
	if !projection.IsSummary(st.Messages[len(st.Messages)-1]) || len(st.Messages) != 5 {
		t.Fatalf("%s", mustJSON(st.Messages))
	}
	// Auto: a small budget makes the next turn compact first.
	m2 := newManager(t, b, p, Config{ContextChars: 300})
	m.Close(context.Background())
	do(t, m2, "s1", run("third"))
	if o := do(t, m2, "s1", run("fourth")); o.Status != projection.StatusCompleted {
		t.Fatalf("%+v", o)
	}
	tys := types(t, b, "s1")
	if !contains(tys, event.ContextCompacted) {
		t.Fatalf("no auto compaction: %v", tys)
	}
}

func contains(ts []event.Type, t event.Type) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

func mustJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", " ")
	return string(b)
}

func TestCheckpointAtEndOfTurnAndLoadFromIt(t *testing.T) {
	b := openBus(t)
	Create(context.Background(), b, "s1", Config{}, nil)
	m := newManager(t, b, mock.Scripted(mock.Say("a"), mock.Say("b"), mock.Say("c")), Config{CheckpointEvery: 1})
	do(t, m, "s1", run("one"))
	do(t, m, "s1", run("two"))
	tys := types(t, b, "s1")
	n := 0
	for _, ty := range tys {
		if ty == event.CheckpointCreated {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d checkpoints, want one per turn: %v", n, tys)
	}
	entry, err := b.Checkpoints().Get(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	var snap projection.State
	if err := json.Unmarshal(entry.Value(), &snap); err != nil || snap.Turn != 2 {
		t.Fatalf("snapshot: %v turn %d", err, snap.Turn)
	}
	m.Close(context.Background())
	// A new owner loads the snapshot and the tail, and its state is the full fold.
	m2 := newManager(t, b, mock.Scripted(mock.Say("c")), Config{})
	if o := do(t, m2, "s1", run("three")); o.Turn != 3 || o.Content != "c" {
		t.Fatalf("%+v", o)
	}
	full := fold(t, b, "s1")
	if full.Turn != 3 || len(full.Messages) != 6 {
		t.Fatalf("%s", mustJSON(full.Messages))
	}
}

// A non-idempotent tool that was running when its owner stopped is not run again:
// it gets an "interrupted, outcome unknown" result; an idempotent one runs again.
func TestResumeInterruptedTools(t *testing.T) {
	for _, tc := range []struct {
		tool      string
		wantCode  string
		wantReran bool
	}{{"block", event.CodeInterrupted, false}, {"echo", "", true}} {
		t.Run(tc.tool, func(t *testing.T) {
			b := openBus(t)
			Create(context.Background(), b, "s1", Config{}, nil)
			tools1 := &testTools{started: make(chan string, 1)}
			m1 := startManager(t, b, mock.Scripted(mock.CallTool(tc.tool, `{}`)), Config{}, tools1.config())
			cmd := run("go")
			cmd.Done = func(Outcome) {}
			m1.Deliver("s1", &cmd)
			<-tools1.started
			// An idempotent tool's start is written once it has run for
			// quietStart (runTools): the owner stops after that.
			waitType(t, b, "s1", event.ToolStarted)
			m1.Close(context.Background())

			tools2 := &testTools{}
			m2 := startManager(t, b, mock.Scripted(mock.Say("after")), Config{}, tools2.config())
			o := do(t, m2, "s1", Command{Kind: wire.CommandResume})
			if o.Status != projection.StatusCompleted {
				t.Fatalf("%+v", o)
			}
			st := fold(t, b, "s1")
			rec := st.ToolCalls[0]
			if rec.Code != tc.wantCode || (tools2.ran() == 1) != tc.wantReran {
				t.Fatalf("record %+v, reran %d calls", rec, tools2.ran())
			}
			if tc.wantCode == event.CodeInterrupted && !strings.Contains(mustJSON(st.Messages), "outcome is unknown") {
				t.Fatal("the model is not told the outcome is unknown")
			}
		})
	}
}

func TestCompactCancelled(t *testing.T) {
	b := openBus(t)
	Create(context.Background(), b, "s1", Config{}, nil)
	p := mock.Scripted(mock.Say("a").OnCompaction(false).Always(), mock.Say("- x").OnCompaction(true).Holding(time.Hour))
	m := newManager(t, b, p, Config{})
	do(t, m, "s1", run("one"))
	ch := make(chan Outcome, 1)
	m.Deliver("s1", &Command{Kind: wire.CommandCompact, Done: func(o Outcome) { ch <- o }})
	waitCalls := time.Now().Add(10 * time.Second)
	for len(p.Calls()) < 2 {
		if time.Now().After(waitCalls) {
			t.Fatal("compaction never called the model")
		}
		time.Sleep(5 * time.Millisecond)
	}
	do(t, m, "s1", Command{Kind: wire.CommandCancel})
	o := <-ch
	if o.Err == nil || o.Compact != nil {
		t.Fatalf("%+v", o)
	}
	if st := fold(t, b, "s1"); st.Summaries != 0 {
		t.Fatal("a cancelled compaction wrote a summary")
	}
	// The session still works.
	if o := do(t, m, "s1", run("two")); o.Status != projection.StatusCompleted {
		t.Fatalf("%+v", o)
	}
}

// Short turns are not checkpointed one by one: a resume replays their few
// events instead (at most CheckpointEvery and a turn).
func TestShortTurnsShareACheckpoint(t *testing.T) {
	b := openBus(t)
	Create(context.Background(), b, "s1", Config{}, nil)
	m := newManager(t, b, mock.Scripted(mock.Say("a").Always()), Config{CheckpointEvery: 12})
	for range 4 {
		do(t, m, "s1", run("again"))
	}
	var seqs []int
	for i, ty := range types(t, b, "s1") {
		if ty == event.CheckpointCreated {
			seqs = append(seqs, i)
		}
	}
	// A turn here is 5 events (turn.started, llm.started, llm.streaming,
	// llm.completed, agent.finished) after the created and claimed events.
	if len(seqs) != 1 {
		t.Fatalf("checkpoints at %v, want one, once 12 events piled up", seqs)
	}
}

// A run's own maxSteps (an input's options.max_steps) limits that turn only,
// and is recorded so that a resume keeps it.
func TestRunMaxStepsOverridesTheSessionsForOneTurn(t *testing.T) {
	b := openBus(t)
	Create(context.Background(), b, "s1", Config{}, nil)
	m := newManager(t, b, mock.Scripted(mock.CallTool("nope", `{}`).Always()), Config{MaxSteps: 5})
	cmd := run("go")
	cmd.MaxSteps = 2
	o := do(t, m, "s1", cmd)
	if o.Status != projection.StatusFailed || o.Code != event.CodeMaxSteps || o.Steps != 2 {
		t.Fatalf("%+v", o)
	}
	st := fold(t, b, "s1")
	if st.TurnMaxSteps != 2 {
		t.Fatalf("turn max steps %d not recorded", st.TurnMaxSteps)
	}
	if o := do(t, m, "s1", run("again")); o.Steps != 5 {
		t.Fatalf("the next turn: %+v", o)
	}
}

// TestCommandDuringAFailedLoad: a command delivered while the actor reports
// that its session could not be loaded (here from the outcome of the first:
// a client that sends again at once) is answered too, never dropped with the
// actor.
func TestCommandDuringAFailedLoad(t *testing.T) {
	b := openBus(t)
	m := newManager(t, b, mock.Scripted(), Config{})
	second := make(chan Outcome, 1)
	first := run("hello")
	first.Done = func(Outcome) {
		again := Command{Kind: wire.CommandCompact, Done: func(o Outcome) { second <- o }}
		if err := m.Deliver("s_nobody", &again); err != nil {
			t.Error(err)
		}
	}
	if err := m.Deliver("s_nobody", &first); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-second:
		if !errors.Is(o.Err, ErrUnknownSession) {
			t.Fatalf("the second command: %v", o.Err)
		}
	case <-time.After(hangBound):
		t.Fatal("the command delivered during the failed load was dropped")
	}
}
