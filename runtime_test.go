package tah_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tah-dev/tah"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

type env struct {
	dir      string
	provider llm.Provider
	tools    []tools.Tool
	agent    tah.AgentOptions
}

// start brings up a runtime on e's data directory (a real embedded NATS server
// and a real SQLite file), stopped at the end of the test.
func (e env) start(t *testing.T) *tah.Runtime {
	t.Helper()
	nats := bus.Default()
	nats.DataDir, nats.Port, nats.Partitions = e.dir, -1, 2
	rt := tah.New().WithLogger(slog.New(slog.DiscardHandler))
	rt.Use(tah.NATS(nats))
	rt.Use(tah.Storage(tah.StorageOptions{Path: filepath.Join(e.dir, "data.db")}))
	rt.Use(tah.LLM(tah.LLMOptions{Instance: e.provider}))
	if len(e.tools) > 0 {
		rt.Use(tah.Tools(e.tools...))
	}
	rt.Use(tah.Agent(e.agent))
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

// ctxT is a test's context: its deadline only catches a hang (a test that
// restarts runtimes several times takes minutes on a machine busy with
// other work, so it is long).
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// counter is a real tool that counts its runs and can block at a given run.
type counter struct {
	name  string
	idem  bool
	runs  atomic.Int64
	block func(n int64) bool // block this run until cancelled
	hit   chan struct{}
}

func (c *counter) Name() string            { return c.name }
func (c *counter) Description() string     { return "counts" }
func (c *counter) Schema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (c *counter) Idempotent() bool        { return c.idem }
func (c *counter) Run(ctx context.Context, in json.RawMessage) (tools.Result, error) {
	n := c.runs.Add(1)
	if c.block != nil && c.block(n) {
		c.hit <- struct{}{}
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	}
	return tools.Text(fmt.Sprintf("%s run with %s", c.name, in)), nil
}

func TestRuntimeToolLoopStepsAndEvents(t *testing.T) {
	ctx := ctxT(t)
	tool := &counter{name: "count"}
	p := mock.Scripted(mock.CallTool("count", `{"n":1}`), mock.Say("counted"))
	rt := env{dir: t.TempDir(), provider: p, tools: []tools.Tool{tool}}.start(t)
	sessions := tah.Get(rt, tah.SessionKey)
	s, err := sessions.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx, "count once")
	if err != nil || res.State != tah.StateCompleted || res.Content != "counted" || res.Steps != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	st, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, step := range st.Steps {
		kinds = append(kinds, string(step.Type)+":"+string(step.Status))
	}
	if got := strings.Join(kinds, " "); got != "llm:completed tool:completed llm:completed" {
		t.Fatalf("steps %s", got)
	}
	if tool.runs.Load() != 1 {
		t.Fatalf("tool ran %d times", tool.runs.Load())
	}
	// The read model catches up with the log and lists the session.
	n := rt.Node()
	if err := n.WaitReadModel(ctx, s.ID(), st.LastSeq); err != nil {
		t.Fatal(err)
	}
	var list []tah.SessionSummary
	for row, err := range sessions.List(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, row)
	}
	if len(list) != 1 || list[0].ID != s.ID() || list[0].Title != "count once" {
		t.Fatalf("%+v", list)
	}
	got, err := sessions.Get(ctx, s.ID())
	if err != nil || got.ID() != s.ID() {
		t.Fatal(err)
	}
	if _, err := sessions.Get(ctx, "s_nope"); !errors.Is(err, tah.ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	if _, err := sessions.Get(ctx, "bad.id.x"); !errors.Is(err, event.ErrInvalidSessionID) {
		t.Fatalf("get invalid: %v", err)
	}
}

func TestRuntimeMaxStepsAndUnlimited(t *testing.T) {
	ctx := ctxT(t)
	tool := &counter{name: "count"}
	p := mock.Scripted(mock.CallTool("count", `{}`).Repeat(25), mock.Say("finally"))
	e := env{dir: t.TempDir(), provider: p, tools: []tools.Tool{tool}, agent: tah.AgentOptions{MaxSteps: 3}}
	rt := e.start(t)
	s := create(t, ctx, rt)
	res, err := s.Run(ctx, "go")
	if err != nil || res.State != tah.StateFailed || res.Code != event.CodeMaxSteps {
		t.Fatalf("%+v %v", res, err)
	}
	rt.Close(ctx)
	// Reopened with unlimited steps, the next turn runs until the model stops.
	e.agent.MaxSteps = tah.Unlimited
	rt = e.start(t)
	s = get(t, ctx, rt, s.ID())
	res, err = s.Run(ctx, "go on")
	if err != nil || res.State != tah.StateCompleted || res.Steps != 23 {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestRuntimeCancelThenRunAgain(t *testing.T) {
	ctx := ctxT(t)
	tool := &counter{name: "slow", hit: make(chan struct{}, 1), block: func(n int64) bool { return n == 1 }}
	p := mock.Scripted(
		mock.Say("never").Holding(time.Hour), // the first call hangs until cancelled
		mock.CallTool("slow", `{}`),
		mock.Say("done"),
	)
	rt := env{dir: t.TempDir(), provider: p, tools: []tools.Tool{tool}}.start(t)
	s := create(t, ctx, rt)

	// Cancel during the LLM call.
	done := make(chan tah.RunResult, 1)
	go func() { r, _ := s.Run(ctx, "one"); done <- r }()
	waitFor(t, "llm call", func() bool { return len(p.Calls()) == 1 })
	if err := s.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.State != tah.StateCancelled {
		t.Fatalf("%+v", r)
	}
	// Cancel during a tool.
	go func() { r, _ := s.Run(ctx, "two"); done <- r }()
	<-tool.hit
	s.Cancel(ctx)
	if r := <-done; r.State != tah.StateCancelled {
		t.Fatalf("%+v", r)
	}
	// The strict mock rejects unpaired histories: this run works only if the
	// dangling call was repaired.
	r, err := s.Run(ctx, "three")
	if err != nil || r.State != tah.StateCompleted || r.Content != "done" {
		t.Fatalf("%+v %v", r, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stepper is a deterministic model: it calls tool "count" until the history holds
// three results, then answers. It can hang at its n-th call.
type stepper struct {
	calls atomic.Int64
	hang  int64
	hit   chan struct{}
}

func (s *stepper) Name() string { return "stepper" }
func (s *stepper) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	n := s.calls.Add(1)
	if n == s.hang {
		s.hit <- struct{}{}
		<-ctx.Done()
		return llm.Response{}, ctx.Err()
	}
	results := 0
	for _, m := range req.Messages {
		if m.Role == llm.RoleTool {
			results++
		}
	}
	if results >= 3 {
		return llm.Response{Content: fmt.Sprintf("done after %d results", results), FinishReason: llm.FinishStop}, nil
	}
	return llm.Response{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("c%d", results+1), Name: "count",
		Arguments: json.RawMessage(fmt.Sprintf(`{"i":%d}`, results+1))}}, FinishReason: llm.FinishToolCalls}, nil
}

// A crash at every step boundary of a turn: the runtime stops abruptly while a
// step runs, a new runtime opens the same data directory and resumes. The
// transcript equals the uncrashed one, and no completed tool call runs twice.
func TestRuntimeCrashAtEveryStepAndResume(t *testing.T) {
	ctx := ctxT(t)
	// The uncrashed run: 4 LLM calls and 3 tool calls.
	ref := env{dir: t.TempDir(), provider: &stepper{}, tools: []tools.Tool{&counter{name: "count", idem: true}}}
	rt := ref.start(t)
	s := create(t, ctx, rt)
	want, err := s.Run(ctx, "count to three")
	if err != nil || want.State != tah.StateCompleted {
		t.Fatalf("%+v %v", want, err)
	}
	wantSnap, _ := s.Snapshot(ctx)
	rt.Close(ctx)

	// Boundaries: during LLM call k (k = 1..4) and during tool run k (k = 1..3).
	type boundary struct {
		llm, tool int64
	}
	var bs []boundary
	for k := int64(1); k <= 4; k++ {
		bs = append(bs, boundary{llm: k})
	}
	for k := int64(1); k <= 3; k++ {
		bs = append(bs, boundary{tool: k})
	}
	for _, b := range bs {
		t.Run(fmt.Sprintf("llm%d_tool%d", b.llm, b.tool), func(t *testing.T) {
			ctx := ctxT(t) // each restart its own deadline
			dir := t.TempDir()
			hit := make(chan struct{}, 1)
			model := &stepper{hang: b.llm, hit: hit}
			tool := &counter{name: "count", idem: true, hit: hit, block: func(n int64) bool { return n == b.tool }}
			e := env{dir: dir, provider: model, tools: []tools.Tool{tool}}
			rt := e.start(t)
			s := create(t, ctx, rt)
			go s.Run(ctx, "count to three")
			<-hit
			rt.Close(ctx) // abrupt: nothing more is recorded
			before := tool.runs.Load()

			e.provider = &stepper{}
			tool2 := &counter{name: "count", idem: true}
			e.tools = []tools.Tool{tool2}
			rt = e.start(t)
			s, err := tah.Get(rt, tah.SessionKey).Get(ctx, s.ID())
			if err != nil {
				t.Fatal(err)
			}
			// The unacknowledged input comes back to the new owner, which may have
			// resumed the turn already: then there is nothing left to resume.
			if got, err := s.Resume(ctx); err != nil && !errors.Is(err, tah.ErrNothingToResume) {
				t.Fatalf("%+v %v", got, err)
			}
			waitFor(t, "the turn to complete", func() bool { st, _ := s.State(ctx); return st == tah.StateCompleted })
			snap, _ := s.Snapshot(ctx)
			if snap.LastOutput != want.Content {
				t.Fatalf("answer %q, want %q", snap.LastOutput, want.Content)
			}
			if transcript(snap.Messages) != transcript(wantSnap.Messages) {
				t.Fatalf("transcript differs:\n%s\nwant\n%s", transcript(snap.Messages), transcript(wantSnap.Messages))
			}
			// Calls that finished before the crash never run again: the first owner
			// finished before-1 calls when it hung in a tool, or before when it hung
			// in the model; the second owner runs only the rest.
			finished := before
			if b.tool != 0 {
				finished = before - 1
			}
			if total := finished + tool2.runs.Load(); total != 3 {
				t.Fatalf("completed tool calls ran %d times in all, want 3 (first owner %d, second %d)", total, before, tool2.runs.Load())
			}
		})
	}
}

func transcript(msgs []llm.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "%s %q", m.Role, m.Content)
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, " call(%s %s %s)", c.ID, c.Name, c.Arguments)
		}
		if m.ToolCallID != "" {
			fmt.Fprintf(&b, " result(%s)", m.ToolCallID)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func TestRuntimeResumeWithNothingToResume(t *testing.T) {
	ctx := ctxT(t)
	rt := env{dir: t.TempDir(), provider: mock.Scripted(mock.Say("hi"))}.start(t)
	s := create(t, ctx, rt)
	s.Run(ctx, "hello")
	if _, err := s.Resume(ctx); !errors.Is(err, tah.ErrNothingToResume) {
		t.Fatalf("resume: %v", err)
	}
}

func TestRuntimeCompaction(t *testing.T) {
	ctx := ctxT(t)
	p := mock.Scripted(
		mock.Say(strings.Repeat("a long answer ", 30)).OnCompaction(false).Repeat(3),
		mock.Fail(500, "summariser down").OnCompaction(true),                 // auto compaction fails once
		mock.Say("- the user asked three times").OnCompaction(true).Always(), // then works
		mock.Say("never").Holding(time.Hour).OnCompaction(false),
		mock.Say("short").OnCompaction(false).Always(),
	)
	e := env{dir: t.TempDir(), provider: p, agent: tah.AgentOptions{ContextChars: 200}}
	rt := e.start(t)
	s := create(t, ctx, rt)
	s.Run(ctx, "one")
	s.Run(ctx, "two") // over budget: auto compaction fails, trimming takes over
	snap, _ := s.Snapshot(ctx)
	if snap.Trims == 0 || snap.Summaries != 0 {
		t.Fatalf("fallback to trimming: trims %d summaries %d", snap.Trims, snap.Summaries)
	}
	s.Run(ctx, "three") // auto compaction works now
	snap, _ = s.Snapshot(ctx)
	if snap.Summaries != 1 {
		t.Fatalf("no auto summary: %d", snap.Summaries)
	}
	// Manual compaction while running is refused.
	done := make(chan tah.RunResult, 1)
	go func() { r, _ := s.Run(ctx, "four"); done <- r }()
	waitFor(t, "running", func() bool { st, _ := s.State(ctx); return st == tah.StateRunning && len(p.Calls()) >= 7 })
	if _, err := s.Compact(ctx); !errors.Is(err, tah.ErrBusy) {
		t.Fatalf("compact while running: %v", err)
	}
	s.Cancel(ctx)
	<-done
	// Manual compaction while idle.
	res, err := s.Compact(ctx)
	if err != nil || res == nil || res.Turns == 0 {
		t.Fatalf("%+v %v", res, err)
	}
	// The full history stays.
	snap, _ = s.Snapshot(ctx)
	if got := countRole(snap.Messages, llm.RoleUser); got != 4 {
		t.Fatalf("history lost user messages: %d", got)
	}
}

func countRole(msgs []llm.Message, r llm.Role) int {
	n := 0
	for _, m := range msgs {
		if m.Role == r {
			n++
		}
	}
	return n
}

func TestRuntimeFork(t *testing.T) {
	ctx := ctxT(t)
	rt := env{dir: t.TempDir(), provider: mock.Scripted(mock.Say("ok").Always()), agent: tah.AgentOptions{SystemPrompt: "sys"}}.start(t)
	sessions := tah.Get(rt, tah.SessionKey)
	src, _ := sessions.Create(ctx)
	for _, q := range []string{"a", "b", "c"} {
		src.Run(ctx, q)
	}
	before, _ := src.Snapshot(ctx)
	for _, turns := range []int{0, 1, 3} {
		n := turns
		f, err := sessions.Fork(ctx, src.ID(), tah.ForkOptions{Turns: &n})
		if err != nil {
			t.Fatal(err)
		}
		snap, _ := f.Snapshot(ctx)
		if got := countRole(snap.Messages, llm.RoleUser); got != turns || snap.ForkedFrom != src.ID() || len(snap.Steps) != 0 || snap.Messages[0].Content != "sys" {
			t.Fatalf("fork %d: %d user messages, %+v", turns, got, snap)
		}
		if r, err := f.Run(ctx, "again"); err != nil || r.Turn != turns+1 {
			t.Fatalf("%+v %v", r, err)
		}
	}
	after, _ := src.Snapshot(ctx)
	if transcript(after.Messages) != transcript(before.Messages) {
		t.Fatal("the source changed")
	}
	if _, err := sessions.Fork(ctx, "s_unknown", tah.ForkOptions{}); !errors.Is(err, tah.ErrNotFound) {
		t.Fatalf("fork unknown: %v", err)
	}
}

func TestRuntimeReopenWithNewConfig(t *testing.T) {
	ctx := ctxT(t)
	p := mock.Scripted(mock.Say("ok").Always())
	e := env{dir: t.TempDir(), provider: p, agent: tah.AgentOptions{SystemPrompt: "old", MaxSteps: 5}}
	rt := e.start(t)
	s := create(t, ctx, rt)
	s.Run(ctx, "hi")
	rt.Close(ctx)
	e.agent = tah.AgentOptions{SystemPrompt: "new", MaxSteps: 7}
	rt = e.start(t)
	s = get(t, ctx, rt, s.ID())
	s.Run(ctx, "again")
	snap, _ := s.Snapshot(ctx)
	if snap.Messages[0].Content != "new" || snap.Config.MaxSteps != 7 {
		t.Fatalf("%+v", snap.Config)
	}
	calls := p.Calls()
	if last := calls[len(calls)-1]; last.Messages[0].Content != "new" {
		t.Fatalf("the model saw %q", last.Messages[0].Content)
	}
}

func TestRuntimeReadModelRebuild(t *testing.T) {
	ctx := ctxT(t)
	tool := &counter{name: "count"}
	p := mock.Scripted(mock.CallTool("count", `{}`).OnCall(1), mock.Say("ok").Always())
	e := env{dir: t.TempDir(), provider: p, tools: []tools.Tool{tool}}
	rt := e.start(t)
	sessions := tah.Get(rt, tah.SessionKey)
	var ids []string
	for i := 0; i < 3; i++ {
		s, _ := sessions.Create(ctx)
		s.Run(ctx, fmt.Sprintf("q%d", i))
		ids = append(ids, s.ID())
	}
	dump := func(rt *tah.Runtime) string {
		n := rt.Node()
		for _, id := range ids {
			last, _ := n.Bus().LastSeq(ctx, id)
			n.WaitReadModel(ctx, id, last)
		}
		cl, err := client.Connect(ctx, client.Options{URL: n.Bus().ClientURL(), CredsFile: localnode.AdminCredsPath(e.dir)})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var b strings.Builder
		for _, id := range ids {
			row, err := cl.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			msgs, _ := cl.Messages(ctx, id)
			steps, _ := cl.Steps(ctx, wire.StepsRequest{Session: id})
			j, _ := json.Marshal([]any{row, msgs, steps})
			b.Write(j)
		}
		return b.String()
	}
	original := dump(rt)
	rt.Close(ctx)
	for _, f := range []string{"data.db", "data.db-wal", "data.db-shm"} {
		os.Remove(filepath.Join(e.dir, f))
	}
	rt = e.start(t)
	if rebuilt := dump(rt); rebuilt != original {
		t.Fatalf("rebuilt read model differs:\n%s\n%s", rebuilt, original)
	}
}

func TestRuntimePassivationLosesNothing(t *testing.T) {
	ctx := ctxT(t)
	p := mock.Scripted(mock.Say("one"), mock.Say("two"))
	rt := env{dir: t.TempDir(), provider: p, agent: tah.AgentOptions{IdleTimeout: 20 * time.Millisecond}}.start(t)
	s := create(t, ctx, rt)
	s.Run(ctx, "first")
	waitFor(t, "passivation", func() bool { return rt.Node().ActiveSessions() == 0 })
	r, err := s.Run(ctx, "second")
	if err != nil || r.Turn != 2 || r.Content != "two" {
		t.Fatalf("%+v %v", r, err)
	}
	snap, _ := s.Snapshot(ctx)
	if countRole(snap.Messages, llm.RoleUser) != 2 || snap.Epoch != 2 {
		t.Fatalf("epoch %d, %s", snap.Epoch, transcript(snap.Messages))
	}
}

// TestConnectToARemoteNode: a Runtime connected to a node that runs
// elsewhere (here another node in this process, reached over TCP with its
// admin credential) has the same sessions API as a started one.
func TestConnectToARemoteNode(t *testing.T) {
	ctx := ctxT(t)
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = t.TempDir(), -1, 2
	n, err := node.Start(ctx, node.Options{Bus: cfg, Provider: mock.Scripted(mock.Say("from afar").Always()), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	if err := n.StartAPI(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tah.Connect(ctx, n.Bus().ClientURL()); !errors.Is(err, tah.ErrAuth) {
		t.Fatalf("no credential: %v", err)
	}
	if _, err := tah.Connect(ctx, "nats://127.0.0.1:1"); !errors.Is(err, tah.ErrNoServer) {
		t.Fatalf("nothing there: %v", err)
	}
	rt, err := tah.Connect(ctx, n.Bus().ClientURL(), tah.CredsFile(filepath.Join(cfg.DataDir, "admin.creds")))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	if rt.Node() != nil || rt.Start(ctx) != tah.ErrStarted {
		t.Fatal("a connected runtime has no node of its own")
	}
	sessions := tah.Get(rt, tah.SessionKey)
	s, err := sessions.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx, "hello")
	if err != nil || res.State != tah.StateCompleted || res.Content != "from afar" || res.Session != s.ID() {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := s.Resume(ctx); !errors.Is(err, tah.ErrNothingToResume) {
		t.Fatalf("resume: %v", err)
	}
	if st, err := s.State(ctx); err != nil || st != tah.StateCompleted {
		t.Fatalf("state %s %v", st, err)
	}
	got, err := sessions.Get(ctx, s.ID())
	if err != nil || got.ID() != s.ID() {
		t.Fatalf("get: %v", err)
	}
	if _, err := sessions.Get(ctx, "s_nope"); !errors.Is(err, tah.ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	f, err := sessions.Fork(ctx, s.ID(), tah.ForkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if snap, err := f.Snapshot(ctx); err != nil || snap.ForkedFrom != s.ID() || countRole(snap.Messages, llm.RoleUser) != 1 {
		t.Fatalf("fork: %+v %v", snap, err)
	}
	if _, err := tah.Get(rt, tah.SessionKey).Get(ctx, "bad.id.x"); !errors.Is(err, event.ErrInvalidSessionID) {
		t.Fatalf("get invalid: %v", err)
	}
	waitFor(t, "the read model lists both", func() bool {
		p, err := sessions.ListPage(ctx, wire.ListRequest{Limit: 1})
		return err == nil && len(p.Sessions) == 1 && p.Next != ""
	})
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sessions.Create(ctx); !errors.Is(err, tah.ErrNotStarted) {
		t.Fatalf("after close: %v", err)
	}
	if n.Bus().Conn().IsClosed() {
		t.Fatal("closing the connected runtime stopped the node")
	}
}

// TestEmbeddedServerIsProtectedAndFound: the Go API's embedded server is
// tah-node's: it refuses a connection without a credential, and the data
// directory's node.json and admin.creds are what tahctl needs to reach it;
// Close removes node.json.
func TestEmbeddedServerIsProtectedAndFound(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	rt := env{dir: dir, provider: mock.Scripted(mock.Say("found").Always())}.start(t)
	b, err := os.ReadFile(filepath.Join(dir, "node.json"))
	if err != nil {
		t.Fatal(err)
	}
	var info struct{ URL string }
	if err := json.Unmarshal(b, &info); err != nil || info.URL != rt.Node().Bus().ClientURL() {
		t.Fatalf("node.json %s: %v", b, err)
	}
	if _, err := tah.Connect(ctx, info.URL); !errors.Is(err, tah.ErrAuth) {
		t.Fatalf("no credential: %v", err)
	}
	remote, err := tah.Connect(ctx, info.URL, tah.CredsFile(filepath.Join(dir, "admin.creds")))
	if err != nil {
		t.Fatal(err)
	}
	s, err := tah.Get(remote, tah.SessionKey).Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Run(ctx, "hi"); err != nil || r.Content != "found" {
		t.Fatalf("%+v %v", r, err)
	}
	remote.Close(ctx)
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("node.json after Close: %v", err)
	}
}

// create makes a session, failing t with the reason when it cannot.
func create(t *testing.T, ctx context.Context, rt *tah.Runtime) *tah.Session {
	t.Helper()
	s, err := tah.Get(rt, tah.SessionKey).Create(ctx)
	if err != nil {
		t.Fatalf("create a session: %v", err)
	}
	return s
}

// get opens session sid, failing t with the reason when it cannot.
func get(t *testing.T, ctx context.Context, rt *tah.Runtime, sid string) *tah.Session {
	t.Helper()
	s, err := tah.Get(rt, tah.SessionKey).Get(ctx, sid)
	if err != nil {
		t.Fatalf("open session %s: %v", sid, err)
	}
	return s
}
