package session

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/actors/toolrunner"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/remote"
	"github.com/tah-dev/tah/tools/toolservice"
	"github.com/tah-dev/tah/wire"
)

// serveTools offers ts as tool services on b's NATS, over a connection of
// their own (another process, in production), and returns a registry of the
// node that lists them.
func serveTools(t *testing.T, b *bus.Bus, cfg toolservice.Config, ts ...tools.Tool) *remote.Registry {
	t.Helper()
	startService(t, b, cfg, ts...)
	reg, err := remote.Open(b.Conn(), remote.Config{ProbeEvery: 50 * time.Millisecond, DiscoveryQuiet: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close(context.Background()) })
	bustest.Eventually(t, 30*time.Second, "the tool services discovered", func() bool {
		if err := reg.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, tool := range ts {
			if _, ok := reg.Tool(tool.Name()); !ok {
				return false
			}
		}
		return true
	})
	return reg
}

// events returns the payloads of the events of type typ in sid's log.
func events[T any](t *testing.T, b *bus.Bus, sid string, typ event.Type) []T {
	t.Helper()
	evs, _, err := b.Replay(context.Background(), sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	for _, e := range evs {
		if e.Type != typ {
			continue
		}
		var d T
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// The log names where each call ran: "local" for the node's own tools,
// remote:tah-tool-<name> for a tool service's; the observer hears of both.
func TestToolStartedNamesTheRunner(t *testing.T) {
	b := openBus(t)
	shout := tools.Func(tools.Spec{Name: "shout", Description: "Capitals."}, func(_ context.Context, in json.RawMessage) (tools.Result, error) {
		return tools.Text(strings.ToUpper(string(in))), nil
	})
	reg := serveTools(t, b, toolservice.Config{}, shout)
	var mu sync.Mutex
	var observed []toolrunner.CallResult
	tc := ToolConfig{Catalog: tools.Merge((&testTools{}).catalog(), reg), Finder: reg, Options: tools.Options{Logger: quiet},
		Observe: func(r toolrunner.CallResult) { mu.Lock(); observed = append(observed, r); mu.Unlock() }}
	p := mock.Scripted(mock.CallTool("echo", `{"a":1}`).AndCall("shout", `{"b":2}`), mock.Say("done"))
	m := startManager(t, b, p, Config{}, tc)
	if _, err := Create(context.Background(), b, "s1", Config{}, nil); err != nil {
		t.Fatal(err)
	}
	if o := do(t, m, "s1", run("go")); o.Status != projection.StatusCompleted {
		t.Fatalf("%+v", o)
	}
	runners := map[string]string{}
	for _, d := range events[event.ToolStartedData](t, b, "s1", event.ToolStarted) {
		runners[d.Call.Name] = d.Runner
	}
	if runners["echo"] != "local" || runners["shout"] != "remote:tah-tool-shout" {
		t.Fatalf("runners in the log: %v", runners)
	}
	outputs := map[string]string{}
	for _, d := range events[event.ToolFinishedData](t, b, "s1", event.ToolFinished) {
		outputs[d.Name] = d.Output
	}
	if outputs["echo"] != `echo:{"a":1}` || outputs["shout"] != `{"B":2}` {
		t.Fatalf("outputs in the log: %v", outputs)
	}
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]string{}
	for _, r := range observed {
		seen[r.Call.Name] = r.Runner
	}
	if len(observed) != 2 || seen["echo"] != "local" || seen["shout"] != "remote:tah-tool-shout" {
		t.Fatalf("observed: %+v", observed)
	}
}

// On resume, a call to a tool service that its previous owner left running
// gets the result the service stored, when the call finished there; a call
// that the owner's stop cancelled has no outcome to take: it is interrupted.
func TestResumeTakesStoredRemoteResults(t *testing.T) {
	b := openBus(t)
	started := make(chan string, 2)
	release := make(chan struct{})
	// "finish" ignores its context and finishes anyway; "hold" ends when cancelled.
	finish := tools.Func(tools.Spec{Name: "finish"}, func(context.Context, json.RawMessage) (tools.Result, error) {
		started <- "finish"
		<-release
		return tools.Text("finished after all"), nil
	})
	hold := tools.Func(tools.Spec{Name: "hold"}, func(ctx context.Context, _ json.RawMessage) (tools.Result, error) {
		started <- "hold"
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	})
	// The service waits for a tool that ignores its cancel, as a real one would
	// wait for a process it started.
	reg := serveTools(t, b, toolservice.Config{Executor: tools.Options{Grace: time.Minute}}, finish, hold)
	tc := ToolConfig{Catalog: reg, Finder: reg, Options: tools.Options{Logger: quiet}}
	for _, sid := range []string{"s_finish", "s_hold"} {
		if _, err := Create(context.Background(), b, sid, Config{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	m1 := startManager(t, b, mock.Scripted(mock.CallTool("finish", `{}`), mock.CallTool("hold", `{}`)), Config{}, tc)
	for _, sid := range []string{"s_finish", "s_hold"} {
		cmd := run("go")
		cmd.Done = func(Outcome) {}
		if err := m1.Deliver(sid, &cmd); err != nil {
			t.Fatal(err)
		}
		select {
		case <-started:
		case <-time.After(hangBound):
			t.Fatalf("%s: the remote call never started", sid)
		}
	}
	if err := m1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(release)

	m2 := startManager(t, b, mock.Scripted(mock.Say("after").Always()), Config{}, tc)
	for sid, want := range map[string]event.ToolFinishedData{
		"s_finish": {Output: "finished after all"},
		"s_hold":   {Output: projection.InterruptedOutput, IsError: true, Code: event.CodeInterrupted},
	} {
		if o := do(t, m2, sid, Command{Kind: wire.CommandResume}); o.Status != projection.StatusCompleted {
			t.Fatalf("%s: %+v", sid, o)
		}
		fin := events[event.ToolFinishedData](t, b, sid, event.ToolFinished)
		if len(fin) != 1 || fin[0].Output != want.Output || fin[0].IsError != want.IsError || fin[0].Code != want.Code {
			t.Fatalf("%s: tool.finished %+v, want %+v", sid, fin, want)
		}
	}
}

// A Manager without tools offers none to the model, and a call the model
// makes anyway fails as an unknown tool; the turn goes on.
func TestSessionWithoutTools(t *testing.T) {
	b := openBus(t)
	p := mock.Scripted(mock.CallTool("echo", `{}`), mock.Say("fine"))
	m := startManager(t, b, p, Config{}, ToolConfig{})
	if _, err := Create(context.Background(), b, "s1", Config{}, nil); err != nil {
		t.Fatal(err)
	}
	if o := do(t, m, "s1", run("go")); o.Status != projection.StatusCompleted || o.Content != "fine" {
		t.Fatalf("%+v", o)
	}
	if calls := p.Calls(); len(calls) != 2 || calls[0].Tools != nil {
		t.Fatalf("requests: %s", mustJSON(calls))
	}
	fin := events[event.ToolFinishedData](t, b, "s1", event.ToolFinished)
	if len(fin) != 1 || fin[0].Code != event.CodeUnknownTool || !strings.Contains(fin[0].Output, "unknown tool") {
		t.Fatalf("tool.finished: %+v", fin)
	}
}

// A Manager refuses a tool configuration the runner cannot take.
func TestNewManagerRefusesABadToolConfig(t *testing.T) {
	if _, err := NewManager(Config{Logger: quiet}, openBus(t), mock.Scripted(), ToolConfig{MaxConcurrent: -1}, nil); err == nil ||
		!strings.Contains(err.Error(), "MaxConcurrent") {
		t.Fatalf("err = %v", err)
	}
}
