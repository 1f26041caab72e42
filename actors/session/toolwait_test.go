package session

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/remote"
	"github.com/tah-dev/tah/tools/toolservice"
	"github.com/tah-dev/tah/wire"
)

// startService offers ts as a tool service on b's NATS over a connection of
// its own (another process, in production); closed at the end of the test,
// if the test did not close it.
func startService(t *testing.T, b *bus.Bus, cfg toolservice.Config, ts ...tools.Tool) *toolservice.Service {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := nats.Connect(b.ClientURL(), nats.UserCredentials(localnode.NodeCredsPath(b.Config().DataDir)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cfg.Logger = quiet
	svc, err := toolservice.Start(ctx, nc, cfg, ts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := svc.Close(ctx); err != nil {
			t.Errorf("tool service close: %v", err)
		}
	})
	return svc
}

// waitingRegistry is a node's registry of b's tool services, driven by events
// only (no periodic refresh), whose calls wait up to wait for a service.
func waitingRegistry(t *testing.T, b *bus.Bus, wait time.Duration, names ...string) *remote.Registry {
	t.Helper()
	reg, err := remote.Open(b.Conn(), remote.Config{ProbeEvery: 50 * time.Millisecond, DiscoveryQuiet: 50 * time.Millisecond,
		MissingEvery: 50 * time.Millisecond, ServiceWait: wait, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range names {
		if err := reg.WaitFor(ctx, n); err != nil {
			t.Fatalf("discovering %s: %v", n, err)
		}
	}
	return reg
}

var shoutTool = tools.Func(tools.Spec{Name: "shout", Description: "Capitals.", Idempotent: true}, func(_ context.Context, in json.RawMessage) (tools.Result, error) {
	return tools.Text(strings.ToUpper(string(in))), nil
})

// goneService is a session s1 of a node that lists shout, whose service has
// just stopped: the registry still lists it, and calls wait up to wait.
func goneService(t *testing.T, p *mock.Provider, wait time.Duration) (*bus.Bus, *Manager) {
	t.Helper()
	b := openBus(t)
	svc := startService(t, b, toolservice.Config{}, shoutTool)
	reg := waitingRegistry(t, b, wait, "shout")
	m := startManager(t, b, p, Config{}, ToolConfig{Catalog: reg, Finder: reg, Options: tools.Options{Logger: quiet}})
	if _, err := Create(context.Background(), b, "s1", Config{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b, m
}

// deliver delivers cmd to sid and returns where its outcome arrives.
func deliver(t *testing.T, m *Manager, sid string, cmd Command) <-chan Outcome {
	t.Helper()
	ch := make(chan Outcome, 1)
	cmd.Done = func(o Outcome) { ch <- o }
	if err := m.Deliver(sid, &cmd); err != nil {
		t.Fatal(err)
	}
	return ch
}

// waitFor polls sid's log until it holds an event of type typ.
func waitFor(t *testing.T, b *bus.Bus, sid string, typ event.Type) {
	t.Helper()
	bustest.Eventually(t, 30*time.Second, string(typ)+" in "+sid, func() bool {
		evs, _, err := b.Replay(context.Background(), sid, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Type == typ {
				return true
			}
		}
		return false
	})
}

// audited checks sid's log with projection.Audit.
func audited(t *testing.T, b *bus.Bus, sid string) {
	t.Helper()
	evs, _, err := b.Replay(context.Background(), sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rep := projection.Audit(evs); len(rep.Problems) > 0 {
		t.Fatalf("audit of %s: %+v", sid, rep.Problems)
	}
}

// A call to an offered tool whose service restarted waits for it (shown as
// tool.waiting), and reaches it when it is back: discovery driven by the
// waiting call, with no periodic refresh.
func TestCallWaitsForARestartingService(t *testing.T) {
	b, m := goneService(t, mock.Scripted(mock.CallTool("shout", `{"a":1}`), mock.Say("done")), time.Minute)
	ch := deliver(t, m, "s1", run("go"))
	waitFor(t, b, "s1", event.ToolWaiting)
	startService(t, b, toolservice.Config{}, shoutTool)
	if o := <-ch; o.Status != projection.StatusCompleted || o.Content != "done" {
		t.Fatalf("%+v", o)
	}
	fin := events[event.ToolFinishedData](t, b, "s1", event.ToolFinished)
	if len(fin) != 1 || fin[0].Output != `{"A":1}` || fin[0].StepID == "" {
		t.Fatalf("tool.finished: %+v", fin)
	}
	waiting := events[event.ToolWaitingData](t, b, "s1", event.ToolWaiting)
	if len(waiting) != 1 || waiting[0].Name != "shout" || waiting[0].StepID != fin[0].StepID || waiting[0].WaitMS != 60000 {
		t.Fatalf("tool.waiting: %+v", waiting)
	}
	audited(t, b, "s1")
}

// A service that never comes back: after the configured wait the call ends
// with tool_unavailable, the model sees it, and the turn ends cleanly. A tool
// never offered is unknown at once.
func TestServiceThatNeverComesBack(t *testing.T) {
	p := mock.Scripted(mock.CallTools(llm.ToolCall{ID: "c1", Name: "shout", Arguments: json.RawMessage(`{}`)},
		llm.ToolCall{ID: "c2", Name: "nope", Arguments: json.RawMessage(`{}`)}), mock.Say("sorry"))
	b, m := goneService(t, p, 300*time.Millisecond)
	if o := do(t, m, "s1", run("go")); o.Status != projection.StatusCompleted || o.Content != "sorry" {
		t.Fatalf("%+v", o)
	}
	codes := map[string]string{}
	for _, d := range events[event.ToolFinishedData](t, b, "s1", event.ToolFinished) {
		codes[d.Name] = d.Code
	}
	if codes["shout"] != event.CodeToolUnavailable || codes["nope"] != event.CodeUnknownTool {
		t.Fatalf("codes: %v", codes)
	}
	if w := events[event.ToolWaitingData](t, b, "s1", event.ToolWaiting); len(w) != 1 || w[0].Name != "shout" {
		t.Fatalf("tool.waiting: %+v", w)
	}
	calls := p.Calls()
	if len(calls) != 2 || !strings.Contains(mustJSON(calls[1].Messages), "tool shout is unavailable") {
		t.Fatalf("the model did not see the failure: %s", mustJSON(calls))
	}
	audited(t, b, "s1")
}

// A cancel interrupts the wait for a service: the call is answered, in the
// cancelled turn, with its step.
func TestCancelInterruptsTheWait(t *testing.T) {
	b, m := goneService(t, mock.Scripted(mock.CallTool("shout", `{}`)), time.Hour)
	ch := deliver(t, m, "s1", run("go"))
	waitFor(t, b, "s1", event.ToolWaiting)
	do(t, m, "s1", Command{Kind: wire.CommandCancel})
	if o := <-ch; o.Status != projection.StatusCancelled {
		t.Fatalf("%+v", o)
	}
	fin := events[event.ToolFinishedData](t, b, "s1", event.ToolFinished)
	if len(fin) != 1 || fin[0].Code != event.CodeCancelled || fin[0].StepID == "" {
		t.Fatalf("tool.finished: %+v", fin)
	}
	audited(t, b, "s1")
}

// Cancelling during a remote call answers the call in the same turn, with
// its step, before agent.cancelled: never an unpaired tool.started.
func TestCancelDuringARemoteCall(t *testing.T) {
	b := openBus(t)
	held := make(chan struct{}, 1)
	hold := tools.Func(tools.Spec{Name: "hold"}, func(ctx context.Context, _ json.RawMessage) (tools.Result, error) {
		held <- struct{}{}
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	})
	startService(t, b, toolservice.Config{}, hold)
	reg := waitingRegistry(t, b, time.Minute, "hold")
	m := startManager(t, b, mock.Scripted(mock.CallTool("hold", `{}`), mock.Say("next")), Config{}, ToolConfig{Catalog: reg, Finder: reg, Options: tools.Options{Logger: quiet}})
	if _, err := Create(context.Background(), b, "s1", Config{}, nil); err != nil {
		t.Fatal(err)
	}
	ch := deliver(t, m, "s1", run("go"))
	select {
	case <-held:
	case <-time.After(hangBound):
		t.Fatal("the remote call never started")
	}
	do(t, m, "s1", Command{Kind: wire.CommandCancel})
	if o := <-ch; o.Status != projection.StatusCancelled {
		t.Fatalf("%+v", o)
	}
	evs, _, err := b.Replay(context.Background(), "s1", 1)
	if err != nil {
		t.Fatal(err)
	}
	var order []event.Type
	for _, e := range evs {
		if e.Type == event.ToolStarted || e.Type == event.ToolFinished || e.Type == event.AgentCancelled {
			order = append(order, e.Type)
		}
	}
	if len(order) != 3 || order[1] != event.ToolFinished || order[2] != event.AgentCancelled {
		t.Fatalf("events: %v", order)
	}
	fin := events[event.ToolFinishedData](t, b, "s1", event.ToolFinished)
	if fin[0].StepID == "" || fin[0].Code != event.CodeCancelled {
		t.Fatalf("tool.finished: %+v", fin)
	}
	audited(t, b, "s1")
	// The next turn repairs nothing.
	if o := do(t, m, "s1", run("again")); o.Status != projection.StatusCompleted {
		t.Fatalf("%+v", o)
	}
	if fin := events[event.ToolFinishedData](t, b, "s1", event.ToolFinished); len(fin) != 1 {
		t.Fatalf("tool.finished after the next turn: %+v", fin)
	}
}

// A resumed turn whose started call belongs to an absent tool service waits
// for it (tool.waiting) before it looks the call up, and goes on once the
// service is back: here the call, idempotent, runs again.
func TestResumeWaitsForTheService(t *testing.T) {
	b := openBus(t)
	held := make(chan struct{}, 1)
	released := make(chan struct{})
	slow := tools.Func(tools.Spec{Name: "slow", Idempotent: true}, func(ctx context.Context, _ json.RawMessage) (tools.Result, error) {
		select {
		case <-released:
			return tools.Text("ran again"), nil
		default:
		}
		held <- struct{}{}
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	})
	svc := startService(t, b, toolservice.Config{}, slow)
	reg := waitingRegistry(t, b, time.Minute, "slow")
	tc := ToolConfig{Catalog: reg, Finder: reg, Options: tools.Options{Logger: quiet}}
	if _, err := Create(context.Background(), b, "s1", Config{}, nil); err != nil {
		t.Fatal(err)
	}
	m1 := startManager(t, b, mock.Scripted(mock.CallTool("slow", `{}`)), Config{}, tc)
	deliver(t, m1, "s1", run("go"))
	select {
	case <-held:
	case <-time.After(hangBound):
		t.Fatal("the remote call never started")
	}
	if err := m1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	reg2 := waitingRegistry(t, b, time.Minute)
	m2 := startManager(t, b, mock.Scripted(mock.Say("done")), Config{}, ToolConfig{Catalog: reg2, Finder: reg2, Options: tools.Options{Logger: quiet}})
	ch := deliver(t, m2, "s1", Command{Kind: wire.CommandResume})
	waitFor(t, b, "s1", event.ToolWaiting)
	close(released)
	startService(t, b, toolservice.Config{}, slow)
	if o := <-ch; o.Status != projection.StatusCompleted || o.Content != "done" {
		t.Fatalf("%+v", o)
	}
	fin := events[event.ToolFinishedData](t, b, "s1", event.ToolFinished)
	if len(fin) != 1 || fin[0].Output != "ran again" || fin[0].StepID == "" {
		t.Fatalf("tool.finished: %+v", fin)
	}
	audited(t, b, "s1")
}

// observedWaiter is a registry whose waits say when they start.
type observedWaiter struct {
	*remote.Registry
	waits chan string
}

func (o observedWaiter) WaitFor(ctx context.Context, name string) error {
	select {
	case o.waits <- name:
	default:
	}
	return o.Registry.WaitFor(ctx, name)
}

// restartedBeforeService is session s1 of a node that restarted before its
// tool service reconnected: its last request offered shout, which a first
// node served, and the second node's registry, with the service gone, does
// not list it. Its manager runs p; the waiter tells when a wait starts.
func restartedBeforeService(t *testing.T, p llm.Provider) (*bus.Bus, *Manager, observedWaiter) {
	t.Helper()
	b := openBus(t)
	svc := startService(t, b, toolservice.Config{}, shoutTool)
	reg1 := waitingRegistry(t, b, time.Minute, "shout")
	if _, err := Create(context.Background(), b, "s1", Config{}, nil); err != nil {
		t.Fatal(err)
	}
	m1 := startManager(t, b, mock.Scripted(mock.CallTool("shout", `{"a":1}`), mock.Say("first")), Config{},
		ToolConfig{Catalog: reg1, Finder: reg1, Options: tools.Options{Logger: quiet}})
	if o := do(t, m1, "s1", run("go")); o.Status != projection.StatusCompleted || o.Content != "first" {
		t.Fatalf("%+v", o)
	}
	if err := m1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg2 := waitingRegistry(t, b, time.Minute)
	w := observedWaiter{Registry: reg2, waits: make(chan string, 1)}
	m2 := startManager(t, b, p, Config{}, ToolConfig{Catalog: reg2, Finder: reg2, Waiter: w, Options: tools.Options{Logger: quiet}})
	return b, m2, w
}

// waitStarted returns once w's wait for shout started; a turn that ends
// first (ch) fails the test.
func waitStarted(t *testing.T, b *bus.Bus, w observedWaiter, ch <-chan Outcome) {
	t.Helper()
	select {
	case name := <-w.waits:
		if name != "shout" {
			t.Fatalf("the step waits for %q", name)
		}
	case o := <-ch:
		t.Fatalf("the turn ended without waiting for shout: %+v\n%s", o, mustJSON(events[event.ToolFinishedData](t, b, "s1", event.ToolFinished)))
	case <-time.After(hangBound):
		t.Fatal("the step never waited for shout")
	}
}

// A node that restarted before a tool service reconnected (a registry that
// has not listed it yet): the next step of a session whose last request
// offered the tool waits for the service before it asks the model, offers
// the tool again, and the model's call of it runs, never unknown_tool; the
// discovery is driven by the wait (no periodic refresh).
func TestStepWaitsForAToolTheLastRequestOffered(t *testing.T) {
	p := mock.Scripted(mock.CallTool("shout", `{"a":2}`), mock.Say("second"))
	b, m, w := restartedBeforeService(t, p)
	ch := deliver(t, m, "s1", run("again"))
	waitStarted(t, b, w, ch)
	if calls := p.Calls(); len(calls) != 0 {
		t.Fatalf("the model was asked before the service was back: %s", mustJSON(calls))
	}
	startService(t, b, toolservice.Config{}, shoutTool)
	var o Outcome
	select {
	case o = <-ch:
	case <-time.After(hangBound):
		t.Fatal("no outcome")
	}
	if o.Status != projection.StatusCompleted || o.Content != "second" {
		t.Fatalf("%+v", o)
	}
	if calls := p.Calls(); len(calls) == 0 || len(calls[0].Tools) != 1 || calls[0].Tools[0].Name != "shout" {
		t.Fatalf("the request after the restart does not offer shout: %s", mustJSON(calls))
	}
	fin := events[event.ToolFinishedData](t, b, "s1", event.ToolFinished)
	if len(fin) != 2 || fin[1].Code != "" || fin[1].Output != `{"A":2}` {
		t.Fatalf("tool.finished: %+v", fin)
	}
	audited(t, b, "s1")
}

// A cancel ends a step's wait for a tool service at once: the turn is
// cancelled, and the model was never asked.
func TestCancelInterruptsTheStepsWait(t *testing.T) {
	p := mock.Scripted()
	b, m, w := restartedBeforeService(t, p)
	ch := deliver(t, m, "s1", run("again"))
	waitStarted(t, b, w, ch)
	do(t, m, "s1", Command{Kind: wire.CommandCancel})
	select {
	case o := <-ch:
		if o.Status != projection.StatusCancelled {
			t.Fatalf("%+v", o)
		}
	case <-time.After(hangBound):
		t.Fatal("no outcome")
	}
	if calls := p.Calls(); len(calls) != 0 {
		t.Fatalf("the model was asked: %s", mustJSON(calls))
	}
	audited(t, b, "s1")
}
