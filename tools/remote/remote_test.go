package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/remote"
	"github.com/tah-dev/tah/tools/toolservice"
	"github.com/tah-dev/tah/wire"
)

var quiet = slog.New(slog.DiscardHandler)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// openRegistry returns a registry on its own connection (a node), closed at the end.
func openRegistry(t *testing.T, srv *server.Server) *remote.Registry {
	t.Helper()
	reg, err := remote.Open(bustest.Connect(t, srv), remote.Config{ProbeEvery: 50 * time.Millisecond, DiscoveryQuiet: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close(context.Background()) })
	return reg
}

// discover refreshes reg until it lists every tool of names.
func discover(t *testing.T, reg *remote.Registry, names ...string) {
	t.Helper()
	bustest.Eventually(t, 30*time.Second, "discovering "+strings.Join(names, ", "), func() bool {
		if err := reg.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if _, ok := reg.Tool(n); !ok {
				return false
			}
		}
		return true
	})
}

// stateOf polls the stored call until it is in state.
func stateOf(t *testing.T, reg *remote.Registry, session, callID, state string) wire.StoredCall {
	t.Helper()
	var s wire.StoredCall
	bustest.Eventually(t, 30*time.Second, "call "+callID+" stored as "+state, func() bool {
		var err error
		s, err = reg.Lookup(context.Background(), session, callID)
		return err == nil && s.State == state
	})
	return s
}

var shoutSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`)

func goTools(release <-chan struct{}) []tools.Tool {
	return []tools.Tool{
		tools.Func(tools.Spec{Name: "shout", Description: "Capitals.", Schema: shoutSchema, Idempotent: true},
			func(_ context.Context, in json.RawMessage) (tools.Result, error) {
				var a struct{ Text string }
				_ = json.Unmarshal(in, &a)
				return tools.Text(strings.ToUpper(a.Text) + "!"), nil
			}),
		tools.Func(tools.Spec{Name: "hold", Description: "Waits to be released or cancelled.", Exclusive: true, Timeout: time.Minute},
			func(ctx context.Context, _ json.RawMessage) (tools.Result, error) {
				select {
				case <-release:
					return tools.Text("released"), nil
				case <-ctx.Done():
					return tools.Result{}, ctx.Err()
				}
			}),
		tools.Func(tools.Spec{Name: "fail"}, func(context.Context, json.RawMessage) (tools.Result, error) {
			return tools.Result{}, errors.New("the printer is on fire")
		}),
		tools.Func(tools.Spec{Name: "boom"}, func(context.Context, json.RawMessage) (tools.Result, error) {
			panic("kaboom")
		}),
	}
}

func TestGoRoundTrip(t *testing.T) {
	ctx := testCtx(t)
	srv := bustest.Server(t)
	release := make(chan struct{})
	svc, err := toolservice.Start(ctx, bustest.Connect(t, srv), toolservice.Config{Logger: quiet}, goTools(release)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(release); _ = svc.Close(context.Background()) })
	reg := openRegistry(t, srv)
	discover(t, reg, "shout", "hold", "fail", "boom")

	// Discovery: description, schema and abilities from the metadata.
	shout, _ := reg.Tool("shout")
	if shout.Description() != "Capitals." || string(shout.Schema()) != string(shoutSchema) ||
		!tools.IsIdempotent(shout) || tools.IsExclusive(shout) || tools.RunnerOf(shout) != "remote:tah-tool-shout" {
		t.Errorf("shout = %q %s idem=%v", shout.Description(), shout.Schema(), tools.IsIdempotent(shout))
	}
	hold, _ := reg.Tool("hold")
	if !tools.IsExclusive(hold) || tools.TimeoutOf(hold, 0) != time.Minute {
		t.Errorf("hold: exclusive %v timeout %v", tools.IsExclusive(hold), tools.TimeoutOf(hold, 0))
	}

	// Listed beside local tools; local tools win a name clash.
	local := tools.MustRegistry(tools.Func(tools.Spec{Name: "fail", Description: "local"}, func(context.Context, json.RawMessage) (tools.Result, error) {
		return tools.Text("local fail"), nil
	}))
	cat := tools.Merge(local, reg)
	var names []string
	for _, s := range cat.Schemas() {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "boom,fail,hold,shout" {
		t.Errorf("merged schemas: %v", names)
	}
	exec := tools.NewExecutor(cat, tools.Options{Logger: quiet})
	sctx := tools.WithCall(ctx, tools.CallInfo{Session: "s_go"})
	run := func(id, name, args string) tools.Result {
		return exec.Execute(sctx, llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)})
	}

	res := run("call_1", "shout", `{"text":"hello"}`)
	if res.IsError || res.Output != "HELLO!" {
		t.Fatalf("shout: %+v", res)
	}
	// The result was stored under the call id before the reply.
	st, err := reg.Lookup(ctx, "s_go", "call_1")
	if err != nil || st.State != wire.CallDone || st.Result == nil || st.Result.Output != "HELLO!" ||
		st.Service != "tah-tool-shout" || st.Instance == "" || st.Tool != "shout" || st.Started.IsZero() || st.Finished.IsZero() {
		t.Fatalf("stored: %+v, %v", st, err)
	}
	if res := run("call_2", "fail", `{}`); res.Output != "local fail" {
		t.Errorf("local tool shadowed: %+v", res)
	}

	// Failures come back as failed results with their codes.
	direct := func(name, args string) tools.Result {
		t.Helper()
		tool, _ := reg.Tool(name)
		r := tools.NewExecutor(tools.MustRegistry(tool), tools.Options{Logger: quiet})
		return r.Execute(sctx, llm.ToolCall{ID: "call_" + name, Name: name, Arguments: json.RawMessage(args)})
	}
	if res := direct("fail", `{}`); res.Code != event.CodeToolError || res.Output != "Error: the printer is on fire" {
		t.Errorf("remote error: %+v", res)
	}
	if res := direct("boom", `{}`); res.Code != event.CodeInternal || !strings.Contains(res.Output, "kaboom") {
		t.Errorf("remote panic: %+v", res)
	}
	// Input validated by the service itself (bypassing the caller's check).
	out, err := shout.Run(tools.WithCall(ctx, tools.CallInfo{ID: "call_bad", Session: "s_go"}), json.RawMessage(`{"text":5}`))
	if err != nil || out.Code != event.CodeInvalidInput || !strings.Contains(out.Output, "/text") {
		t.Errorf("service-side validation: %+v %v", out, err)
	}

	// Cancel mid-call: the cancel reaches the remote tool's context.
	cctx, cancel := context.WithCancel(sctx)
	done := make(chan tools.Result, 1)
	go func() { done <- exec.Execute(cctx, llm.ToolCall{ID: "call_hold", Name: "hold"}) }()
	stateOf(t, reg, "s_go", "call_hold", wire.CallRunning)
	cancel()
	if res := <-done; res.Code != event.CodeCancelled {
		t.Fatalf("cancelled call: %+v", res)
	}
	if st := stateOf(t, reg, "s_go", "call_hold", wire.CallDone); st.Result.Code != event.CodeCancelled {
		t.Fatalf("the service did not see the cancel: %+v", st.Result)
	}

	// A deadline reaches the service too.
	dctx, dcancel := context.WithTimeout(sctx, 300*time.Millisecond)
	defer dcancel()
	if res := exec.Execute(dctx, llm.ToolCall{ID: "call_late", Name: "hold"}); res.Code != event.CodeTimeout {
		t.Fatalf("deadline: %+v", res)
	}
	if st := stateOf(t, reg, "s_go", "call_late", wire.CallDone); st.Result.Code != event.CodeTimeout {
		t.Fatalf("the service did not see the deadline: %+v", st.Result)
	}

	// Nothing stored for a call that never ran.
	if _, err := reg.Lookup(ctx, "s_go", "call_never"); !errors.Is(err, remote.ErrNoResult) {
		t.Errorf("lookup of an unknown call: %v", err)
	}

	// A tool whose service is gone: a clear failure, not a hang.
	cctx2, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	if err := svc.Close(cctx2); err != nil {
		t.Fatal(err)
	}
	// (Until the server has processed the unsubscribe, a draining service may
	// still answer that it is stopping.)
	bustest.Eventually(t, 30*time.Second, "no runner for shout", func() bool {
		res := run("call_3", "shout", `{"text":"anyone?"}`)
		if strings.Contains(res.Output, "no runner serves tool shout") {
			if res.Code != event.CodeToolUnavailable {
				t.Fatalf("no runner, code %q: %+v", res.Code, res)
			}
			return true
		}
		if res.Code != event.CodeToolUnavailable || !strings.Contains(res.Output, "stopping") {
			t.Fatalf("after close: %+v", res)
		}
		return false
	})
	discover(t, reg) // refresh: the tools disappear
	if _, ok := reg.Tool("shout"); ok {
		t.Error("a closed service's tool is still listed")
	}
}

// dyingService is a hand-written tool service (no toolservice package) that
// stores a record for each call and then dies without replying, as a runner
// killed at the worst moment does.
func dyingService(t *testing.T, srv *server.Server, name string, storeDone bool) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	results := remote.NewResults(js, remote.ResultsConfig{Create: true})
	var once sync.Once
	svc, err := micro.AddService(nc, micro.Config{Name: wire.ToolServicePrefix + name, Version: "0.0.1", QueueGroup: wire.ToolQueueGroup})
	if err != nil {
		t.Fatal(err)
	}
	err = svc.AddEndpoint(name, micro.HandlerFunc(func(req micro.Request) {
		var in wire.ToolRequest
		_ = json.Unmarshal(req.Data(), &in)
		st := wire.StoredCall{CallID: in.CallID, Session: in.Session, Tool: name, Attempt: in.Attempt,
			State: wire.CallRunning, Service: svc.Info().Name, Instance: svc.Info().ID, Started: time.Now()}
		if storeDone {
			res := tools.Text("finished just before dying")
			st.State, st.Result, st.Finished = wire.CallDone, &res, time.Now()
		}
		if err := results.Put(context.Background(), st); err != nil {
			t.Errorf("store: %v", err)
		}
		once.Do(func() { go nc.Close() }) // die without replying
	}), micro.WithEndpointSubject(wire.ToolSubject(name)), micro.WithEndpointMetadata(map[string]string{wire.MetaToolDesc: "dies"}))
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

func TestRunnerDiesMidCall(t *testing.T) {
	ctx := testCtx(t)
	srv := bustest.Server(t)
	dyingService(t, srv, "doomed", false)
	dyingService(t, srv, "stored", true)
	reg := openRegistry(t, srv)
	discover(t, reg, "doomed", "stored")
	exec := tools.NewExecutor(reg, tools.Options{Logger: quiet, Timeout: time.Minute})
	sctx := tools.WithCall(ctx, tools.CallInfo{Session: "s_die"})

	// The runner claimed the call and died: the call fails at once, clearly.
	res := exec.Execute(sctx, llm.ToolCall{ID: "call_a", Name: "doomed"})
	if res.Code != event.CodeInterrupted || !strings.Contains(res.Output, "went away during the call; its outcome is unknown") {
		t.Fatalf("runner died: %+v", res)
	}
	// The runner stored its result and died before replying: the result is found.
	res = exec.Execute(sctx, llm.ToolCall{ID: "call_b", Name: "stored"})
	if res.IsError || res.Output != "finished just before dying" {
		t.Fatalf("stored before death: %+v", res)
	}
	// A node that takes over the session finds both by call id.
	other := openRegistry(t, srv)
	if st, err := other.Lookup(ctx, "s_die", "call_b"); err != nil || st.State != wire.CallDone || st.Result.Output != "finished just before dying" {
		t.Fatalf("lookup: %+v %v", st, err)
	}
	if got, err := other.Await(ctx, "s_die", "call_b"); err != nil || got.Output != "finished just before dying" {
		t.Fatalf("await stored: %+v %v", got, err)
	}
	if got, err := other.Await(ctx, "s_die", "call_a"); err != nil || got.Code != event.CodeInterrupted {
		t.Fatalf("await interrupted: %+v %v", got, err)
	}
	if _, err := other.Await(ctx, "s_die", "call_zzz"); !errors.Is(err, remote.ErrNoResult) {
		t.Fatalf("await unknown: %v", err)
	}
}

// TestFollowsRestart: with the periodic refresh off, a tool service that
// restarts is found again because a call waits for it: the next call reaches
// it.
func TestFollowsRestart(t *testing.T) {
	ctx := testCtx(t)
	srv := bustest.Server(t)
	start := func() *toolservice.Service {
		svc, err := toolservice.Start(ctx, bustest.Connect(t, srv), toolservice.Config{Logger: quiet}, goTools(nil)[0])
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	svc := start()
	reg := openRegistry(t, srv) // RefreshEvery 0: driven by events only
	if err := reg.WaitFor(ctx, "shout"); err != nil {
		t.Fatal(err)
	}
	exec := tools.NewExecutor(reg, tools.Options{Logger: quiet})
	sctx := tools.WithCall(ctx, tools.CallInfo{Session: "s_restart"})
	call := func(id string) tools.Result {
		return exec.Execute(sctx, llm.ToolCall{ID: id, Name: "shout", Arguments: json.RawMessage(`{"text":"again"}`)})
	}
	if res := call("call_1"); res.Output != "AGAIN!" {
		t.Fatalf("before the restart: %+v", res)
	}
	if err := svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	svc = start()
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	for i := 0; ; i++ {
		res := call(fmt.Sprintf("call_%d", i+2))
		if res.Output == "AGAIN!" {
			break
		}
		if res.Code != event.CodeToolUnavailable && res.Code != event.CodeUnknownTool {
			t.Fatalf("after the restart: %+v", res)
		}
		if err := reg.WaitFor(ctx, "shout"); err != nil {
			t.Fatalf("waiting for the restarted service: %v", err)
		}
	}

	// A service that never comes back: the wait ends with its context.
	if err := svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The call that finds no service makes the registry look again.
	bustest.Eventually(t, 30*time.Second, "shout gone", func() bool {
		if res := call("call_gone"); res.Code != event.CodeToolUnavailable && res.Code != event.CodeUnknownTool {
			t.Fatalf("a call of a closed service: %+v", res)
		}
		_, ok := reg.Tool("shout")
		return !ok
	})
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := reg.WaitFor(wctx, "shout"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait for a service that is gone: %v", err)
	}
}

// TestExpectedAfterStart: a registry that just opened expects the tools it
// has not listed yet (their services may still be reconnecting to a node
// that restarted), until ServiceWait after it opened; a tool it listed is
// no longer expected, even once its service is gone.
func TestExpectedAfterStart(t *testing.T) {
	ctx := testCtx(t)
	srv := bustest.Server(t)
	before := time.Now()
	reg := openRegistry(t, srv) // ServiceWait: the default
	after := time.Now()
	until, ok := reg.Expected("shout")
	if !ok || until.Before(before.Add(remote.DefaultServiceWait)) || until.After(after.Add(remote.DefaultServiceWait)) {
		t.Fatalf("a tool not listed yet: expected %v until %v (opened between %v and %v)", ok, until, before, after)
	}
	svc, err := toolservice.Start(ctx, bustest.Connect(t, srv), toolservice.Config{Logger: quiet}, goTools(nil)[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.WaitFor(ctx, "shout"); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Expected("shout"); ok {
		t.Fatal("a listed tool is expected")
	}
	if err := svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	bustest.Eventually(t, 30*time.Second, "shout gone", func() bool {
		if err := reg.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		_, ok := reg.Tool("shout")
		return !ok
	})
	if _, ok := reg.Expected("shout"); ok {
		t.Fatal("a tool that was listed and went away is expected: it is missing, and its calls wait as any call does")
	}

	// After ServiceWait, nothing is expected any more.
	short, err := remote.Open(bustest.Connect(t, srv), remote.Config{ServiceWait: time.Nanosecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = short.Close(context.Background()) })
	if _, ok := short.Expected("shout"); ok {
		t.Fatal("a tool is expected after ServiceWait")
	}
}
