package toolrunner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/tah-dev/tah/actors/toolrunner"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools"
)

var quiet = slog.New(slog.DiscardHandler)

func system(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	return sys
}

func spawn(t *testing.T, sys *actor.ActorSystem, cfg toolrunner.Config) *toolrunner.Runner {
	t.Helper()
	cfg.Logger = quiet
	r, err := toolrunner.Spawn(sys.Root, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return r
}

func executor(ts ...tools.Tool) *tools.Executor {
	return tools.NewExecutor(tools.MustRegistry(ts...), tools.Options{Logger: quiet})
}

func calls(name string, ids ...string) []llm.ToolCall {
	var cs []llm.ToolCall
	for _, id := range ids {
		cs = append(cs, llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(fmt.Sprintf(`{"id":%q}`, id))})
	}
	return cs
}

func callID(in json.RawMessage) string {
	var a struct{ ID string }
	_ = json.Unmarshal(in, &a)
	return a.ID
}

// gate is a tool whose calls report their start and wait to be released (or
// for their context), one channel per call id.
type gate struct {
	mu       sync.Mutex
	started  map[string]chan struct{}
	release  map[string]chan struct{}
	stopped  map[string]chan struct{}
	running  atomic.Int32
	maxSeen  atomic.Int32
	name     string
	excl     bool
	log      *[]string
	logMu    *sync.Mutex
	timeout  time.Duration
	shareRel chan struct{} // when set, every call waits on it instead
}

func newGate(name string) *gate {
	return &gate{name: name, started: map[string]chan struct{}{}, release: map[string]chan struct{}{}, stopped: map[string]chan struct{}{}}
}

func (g *gate) chans(id string) (started, release, stopped chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started[id] == nil {
		g.started[id], g.release[id], g.stopped[id] = make(chan struct{}), make(chan struct{}), make(chan struct{})
	}
	return g.started[id], g.release[id], g.stopped[id]
}

func (g *gate) note(s string) {
	if g.log != nil {
		g.logMu.Lock()
		*g.log = append(*g.log, s)
		g.logMu.Unlock()
	}
}

func (g *gate) tool() tools.Tool {
	return tools.Func(tools.Spec{Name: g.name, Exclusive: g.excl, Timeout: g.timeout}, func(ctx context.Context, in json.RawMessage) (tools.Result, error) {
		id := callID(in)
		started, release, stopped := g.chans(id)
		n := g.running.Add(1)
		defer g.running.Add(-1)
		for {
			m := g.maxSeen.Load()
			if n <= m || g.maxSeen.CompareAndSwap(m, n) {
				break
			}
		}
		g.note("start " + id)
		defer g.note("end " + id)
		close(started)
		if g.shareRel != nil {
			release = g.shareRel
		}
		select {
		case <-release:
			return tools.Text("done " + id), nil
		case <-ctx.Done():
			close(stopped)
			return tools.Result{}, ctx.Err()
		}
	})
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: not within 20s", what)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type answer struct {
	res *toolrunner.BatchResult
	err error
}

func execute(r *toolrunner.Runner, ctx context.Context, b toolrunner.ExecuteBatch) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		res, err := r.Execute(ctx, b)
		ch <- answer{res, err}
	}()
	return ch
}

func await(t *testing.T, ch <-chan answer) *toolrunner.BatchResult {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatal(a.err)
		}
		return a.res
	case <-time.After(20 * time.Second):
		t.Fatal("no batch result within 20s")
	}
	return nil
}

func outputs(res *toolrunner.BatchResult) []string {
	var out []string
	for _, r := range res.Results {
		s := r.Call.ID + ":" + r.Result.Output
		if r.Result.IsError {
			s = r.Call.ID + ":" + r.Result.Code
		}
		out = append(out, s)
	}
	return out
}

func TestParallelCallsKeepCallOrder(t *testing.T) {
	g := newGate("g")
	r := spawn(t, system(t), toolrunner.Config{Executor: executor(g.tool())})
	ids := []string{"c1", "c2", "c3", "c4"}
	ch := execute(r, context.Background(), toolrunner.ExecuteBatch{ID: "b1", Session: "s_1", Calls: calls("g", ids...)})
	// All four run at once: each waits for its release, and all have started.
	for _, id := range ids {
		started, _, _ := g.chans(id)
		waitFor(t, started, "start of "+id)
	}
	// They finish in reverse order.
	for k, id := range slices.Backward(ids) {
		_, release, _ := g.chans(id)
		close(release)
		eventually(t, id+" finished", func() bool { return g.running.Load() == int32(k) })
	}
	res := await(t, ch)
	if got := strings.Join(outputs(res), " "); got != "c1:done c1 c2:done c2 c3:done c3 c4:done c4" {
		t.Fatalf("results = %s", got)
	}
	if res.ID != "b1" || res.Session != "s_1" {
		t.Errorf("batch = %s %s", res.ID, res.Session)
	}
	for _, cr := range res.Results {
		if cr.Runner != "local" || cr.Started.IsZero() {
			t.Errorf("%s: runner %q started %v", cr.Call.ID, cr.Runner, cr.Started)
		}
	}
}

func TestBoundedConcurrency(t *testing.T) {
	g := newGate("g")
	g.shareRel = make(chan struct{})
	r := spawn(t, system(t), toolrunner.Config{Executor: executor(g.tool()), MaxConcurrent: 2})
	ids := []string{"c1", "c2", "c3", "c4", "c5", "c6"}
	ch := execute(r, context.Background(), toolrunner.ExecuteBatch{Calls: calls("g", ids...)})
	for k := range ids {
		want := int32(min(2, len(ids)-k))
		eventually(t, fmt.Sprintf("%d calls running", want), func() bool { return g.running.Load() == want })
		g.shareRel <- struct{}{}
	}
	res := await(t, ch)
	if len(res.Results) != 6 || g.maxSeen.Load() != 2 {
		t.Fatalf("%d results, at most %d at once; want 6 and 2", len(res.Results), g.maxSeen.Load())
	}

	// A limiter shared by two runners bounds both together.
	g2 := newGate("g")
	g2.shareRel = make(chan struct{})
	shared := toolrunner.NewLimiter(1)
	sys := system(t)
	r1 := spawn(t, sys, toolrunner.Config{Executor: executor(g2.tool()), Limiter: shared})
	r2 := spawn(t, sys, toolrunner.Config{Executor: executor(g2.tool()), Limiter: shared})
	ch1 := execute(r1, context.Background(), toolrunner.ExecuteBatch{Calls: calls("g", "a1", "a2")})
	ch2 := execute(r2, context.Background(), toolrunner.ExecuteBatch{Calls: calls("g", "b1", "b2")})
	for range 4 {
		eventually(t, "one call running", func() bool { return g2.running.Load() == 1 })
		g2.shareRel <- struct{}{}
	}
	await(t, ch1)
	await(t, ch2)
	if g2.maxSeen.Load() != 1 {
		t.Fatalf("shared limiter: %d at once", g2.maxSeen.Load())
	}
}

func TestCancel(t *testing.T) {
	g := newGate("g")
	r := spawn(t, system(t), toolrunner.Config{Executor: executor(g.tool())})
	ch := execute(r, context.Background(), toolrunner.ExecuteBatch{Calls: calls("g", "c1", "c2", "c3")})
	for _, id := range []string{"c1", "c2", "c3"} {
		started, _, _ := g.chans(id)
		waitFor(t, started, "start of "+id)
	}
	r.Cancel("c2")
	_, _, stopped := g.chans("c2")
	waitFor(t, stopped, "the cancel reaching c2's context")
	_, rel1, _ := g.chans("c1")
	_, rel3, _ := g.chans("c3")
	close(rel1)
	close(rel3)
	res := await(t, ch)
	if got := strings.Join(outputs(res), " "); got != "c1:done c1 c2:cancelled c3:done c3" {
		t.Fatalf("results = %s", got)
	}

	// CancelAll, and cancelling through Execute's context.
	ch = execute(r, context.Background(), toolrunner.ExecuteBatch{Calls: calls("g", "d1", "d2")})
	for _, id := range []string{"d1", "d2"} {
		started, _, _ := g.chans(id)
		waitFor(t, started, "start of "+id)
	}
	r.CancelAll()
	if got := strings.Join(outputs(await(t, ch)), " "); got != "d1:cancelled d2:cancelled" {
		t.Fatalf("cancel all: %s", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch = execute(r, ctx, toolrunner.ExecuteBatch{Calls: calls("g", "e1")})
	started, _, _ := g.chans("e1")
	waitFor(t, started, "start of e1")
	cancel()
	if got := strings.Join(outputs(await(t, ch)), " "); got != "e1:cancelled" {
		t.Fatalf("context cancel: %s", got)
	}
}

func TestTimeouts(t *testing.T) {
	g := newGate("g")
	g.timeout = 30 * time.Millisecond
	slow := newGate("slow")
	r := spawn(t, system(t), toolrunner.Config{Executor: executor(g.tool(), slow.tool()), MaxConcurrent: 1})
	// The tool's own timeout.
	res := await(t, execute(r, context.Background(), toolrunner.ExecuteBatch{Calls: calls("g", "c1")}))
	if got := res.Results[0].Result; got.Code != event.CodeTimeout || !strings.Contains(got.Output, "timed out after 30ms") {
		t.Fatalf("tool timeout: %+v", got)
	}
	// The batch's deadline, for a running call and for one still waiting for a slot.
	res = await(t, execute(r, context.Background(), toolrunner.ExecuteBatch{
		Calls: calls("slow", "s1", "s2"), Deadline: time.Now().Add(30 * time.Millisecond),
	}))
	if got := strings.Join(outputs(res), " "); got != "s1:timeout s2:timeout" {
		t.Fatalf("batch deadline: %s", got)
	}
	// One ran (in whichever order they took the slot) and one never started.
	waited := 0
	for _, cr := range res.Results {
		if strings.Contains(cr.Result.Output, "before it started") && cr.Started.IsZero() {
			waited++
		}
	}
	if waited != 1 {
		t.Errorf("calls that never started: %d, want 1: %+v", waited, res.Results)
	}
}

func TestPanicIsolation(t *testing.T) {
	boom := tools.Func(tools.Spec{Name: "boom"}, func(context.Context, json.RawMessage) (tools.Result, error) {
		panic("kaboom")
	})
	echo := tools.Func(tools.Spec{Name: "echo"}, func(_ context.Context, in json.RawMessage) (tools.Result, error) {
		return tools.Text(callID(in)), nil
	})
	r := spawn(t, system(t), toolrunner.Config{Executor: executor(boom, echo)})
	b := toolrunner.ExecuteBatch{Calls: append(append(calls("boom", "c1"), calls("echo", "c2")...), llm.ToolCall{ID: "c3", Name: "nope"})}
	res := await(t, execute(r, context.Background(), b))
	if got := strings.Join(outputs(res), " "); got != "c1:internal c2:c2 c3:unknown_tool" {
		t.Fatalf("results = %s", got)
	}
	if !strings.Contains(res.Results[0].Result.Output, "kaboom") {
		t.Errorf("panic output: %q", res.Results[0].Result.Output)
	}
	// The runner is still there.
	res = await(t, execute(r, context.Background(), toolrunner.ExecuteBatch{Calls: calls("echo", "c4")}))
	if got := strings.Join(outputs(res), " "); got != "c4:c4" {
		t.Fatalf("after the panic: %s", got)
	}
}

func TestExclusiveToolRunsAlone(t *testing.T) {
	var log []string
	var mu sync.Mutex
	rd, wr := newGate("rd"), newGate("wr")
	rd.log, rd.logMu, wr.log, wr.logMu = &log, &mu, &log, &mu
	wr.excl = true
	r := spawn(t, system(t), toolrunner.Config{Executor: executor(rd.tool(), wr.tool())})
	b := toolrunner.ExecuteBatch{Calls: slices.Concat(calls("rd", "r1", "r2"), calls("wr", "w1"), calls("rd", "r3", "r4"))}
	ch := execute(r, context.Background(), b)
	// r1 and r2 run together; w1 waits for both.
	for _, id := range []string{"r1", "r2"} {
		started, _, _ := rd.chans(id)
		waitFor(t, started, "start of "+id)
	}
	for _, id := range []string{"r2", "r1"} {
		_, release, _ := rd.chans(id)
		close(release)
	}
	started, release, _ := wr.chans("w1")
	waitFor(t, started, "start of w1")
	close(release)
	for _, id := range []string{"r3", "r4"} {
		started, release, _ := rd.chans(id)
		waitFor(t, started, "start of "+id)
		close(release)
	}
	res := await(t, ch)
	if got := strings.Join(outputs(res), " "); got != "r1:done r1 r2:done r2 w1:done w1 r3:done r3 r4:done r4" {
		t.Fatalf("results = %s", got)
	}
	mu.Lock()
	defer mu.Unlock()
	at := func(s string) int { return slices.Index(log, s) }
	if !(at("start w1") > at("end r1") && at("start w1") > at("end r2") && at("start r3") > at("end w1") && at("start r4") > at("end w1")) {
		t.Fatalf("order: %v", log)
	}
}

// session is a stand-in for the session actor: it asks for a batch with
// ctx.Request and keeps receiving while the batch runs.
type session struct {
	runner  *actor.PID
	batch   *toolrunner.ExecuteBatch
	results chan *toolrunner.BatchResult
	pongs   chan string
}

type ping struct{ s string }

func (s *session) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		c.Request(s.runner, s.batch)
	case *ping:
		s.pongs <- m.s
	case *toolrunner.BatchResult:
		s.results <- m
	}
}

func TestResultsComeBackAsMessages(t *testing.T) {
	g := newGate("g")
	sys := system(t)
	r := spawn(t, sys, toolrunner.Config{Executor: executor(g.tool())})
	s := &session{
		runner:  r.PID(),
		batch:   &toolrunner.ExecuteBatch{ID: "step_1", Session: "s_9", Calls: calls("g", "c1")},
		results: make(chan *toolrunner.BatchResult, 1),
		pongs:   make(chan string, 1),
	}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return s }))
	started, release, _ := g.chans("c1")
	waitFor(t, started, "start of c1")
	// The session is not blocked while its tool runs.
	sys.Root.Send(pid, &ping{"hello"})
	select {
	case p := <-s.pongs:
		if p != "hello" {
			t.Fatal(p)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the session did not answer while its tool ran")
	}
	close(release)
	select {
	case res := <-s.results:
		if res.ID != "step_1" || res.Session != "s_9" || strings.Join(outputs(res), " ") != "c1:done c1" {
			t.Fatalf("result = %+v", res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no result message")
	}
}

func TestStopCancelsCalls(t *testing.T) {
	g := newGate("g")
	sys := system(t)
	r, err := toolrunner.Spawn(sys.Root, toolrunner.Config{Executor: executor(g.tool()), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ch := execute(r, context.Background(), toolrunner.ExecuteBatch{Calls: calls("g", "c1", "c2")})
	for _, id := range []string{"c1", "c2"} {
		started, _, _ := g.chans(id)
		waitFor(t, started, "start of "+id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(outputs(await(t, ch)), " "); got != "c1:cancelled c2:cancelled" {
		t.Fatalf("results after stop: %s", got)
	}
	if _, err := toolrunner.Spawn(sys.Root, toolrunner.Config{}); err == nil {
		t.Error("a config without an executor was accepted")
	}
}

// A batch sent after the runner stopped fails with ErrStopped, at once:
// nothing would ever answer it.
func TestExecuteAfterStop(t *testing.T) {
	sys := system(t)
	r, err := toolrunner.Spawn(sys.Root, toolrunner.Config{Executor: executor(newGate("g").tool()), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := r.Execute(ctx, toolrunner.ExecuteBatch{Calls: calls("g", "c1")})
	if !errors.Is(err, toolrunner.ErrStopped) || res != nil {
		t.Fatalf("execute after stop: %v, %v; want ErrStopped", res, err)
	}
}

// Observe hears of every call, the failed and cancelled ones too, with the
// result its batch returns, before the batch's result comes back.
func TestObserveSeesEveryCall(t *testing.T) {
	g := newGate("g")
	var mu sync.Mutex
	seen := map[string]toolrunner.CallResult{}
	r := spawn(t, system(t), toolrunner.Config{Executor: executor(g.tool()), Observe: func(cr toolrunner.CallResult) {
		mu.Lock()
		seen[cr.Call.ID] = cr
		mu.Unlock()
	}})
	batch := append(calls("g", "c1", "c2"), calls("nope", "c3")...)
	ch := execute(r, context.Background(), toolrunner.ExecuteBatch{Calls: batch})
	for _, id := range []string{"c1", "c2"} {
		started, _, _ := g.chans(id)
		waitFor(t, started, "start of "+id)
	}
	_, rel1, _ := g.chans("c1")
	close(rel1)
	r.Cancel("c2")
	res := await(t, ch)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(batch) {
		t.Fatalf("observed %d calls, want %d: %v", len(seen), len(batch), seen)
	}
	for _, cr := range res.Results {
		got := seen[cr.Call.ID]
		if got.Result != cr.Result || got.Runner != "local" || got.Duration != cr.Duration {
			t.Errorf("%s: observed %+v, batch has %+v", cr.Call.ID, got, cr)
		}
	}
	if seen["c2"].Result.Code != event.CodeCancelled || seen["c3"].Result.Code != event.CodeUnknownTool {
		t.Errorf("codes: c2 %q c3 %q", seen["c2"].Result.Code, seen["c3"].Result.Code)
	}
}

// ExecuteNoting calls slow on the caller's goroutine while a batch still
// runs after its delay (here none: the call waits for slow to release it),
// once, and not at all for a batch that ends first.
func TestExecuteNotingSlowBatch(t *testing.T) {
	g := newGate("g")
	r := spawn(t, system(t), toolrunner.Config{Executor: executor(g.tool())})
	_, release, _ := g.chans("c1")
	slows := 0
	res, err := r.ExecuteNoting(context.Background(), toolrunner.ExecuteBatch{Session: "s_1", Calls: calls("g", "c1")}, 0, func() {
		slows++
		close(release) // the call can end only once slow has run
	})
	if err != nil || slows != 1 || strings.Join(outputs(res), " ") != "c1:done c1" {
		t.Fatalf("slow called %d times; %v %v", slows, outputs(res), err)
	}
	_, release2, _ := g.chans("c2")
	close(release2)
	res, err = r.ExecuteNoting(context.Background(), toolrunner.ExecuteBatch{Session: "s_1", Calls: calls("g", "c2")}, time.Hour, func() {
		t.Error("slow called for a batch that ended first")
	})
	if err != nil || strings.Join(outputs(res), " ") != "c2:done c2" {
		t.Fatalf("%v %v", outputs(res), err)
	}
}
