package node

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/actors/session"
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

// A node with local tools and remote tools on: the session actors call both
// through their own tool runner, the log names each call's runner, and the
// node's metrics count both calls.
func TestNodeRunsLocalAndRemoteTools(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = t.TempDir(), -1, 2
	echo := tools.Func(tools.Spec{Name: "echo"}, func(_ context.Context, in json.RawMessage) (tools.Result, error) {
		return tools.Text("echo:" + string(in)), nil
	})
	p := mock.Scripted(mock.CallTool("echo", `{"a":1}`).AndCall("shout", `{"b":2}`), mock.Say("done"))
	n, err := Start(ctx, Options{Bus: cfg, Provider: p, Tools: tools.MustRegistry(echo), Logger: quiet,
		RemoteTools: &remote.Config{DiscoveryQuiet: 50 * time.Millisecond, Logger: quiet},
		Session:     session.Config{Node: "n1", Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })

	nc, err := nats.Connect(n.bus.ClientURL(), nats.UserCredentials(localnode.NodeCredsPath(cfg.DataDir)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	shout := tools.Func(tools.Spec{Name: "shout"}, func(_ context.Context, in json.RawMessage) (tools.Result, error) {
		return tools.Text(strings.ToUpper(string(in))), nil
	})
	svc, err := toolservice.Start(ctx, nc, toolservice.Config{Logger: quiet}, shout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	bustest.Eventually(t, 30*time.Second, "shout discovered", func() bool {
		_ = n.remote.Refresh(ctx)
		_, ok := n.tools.Tool("shout")
		return ok
	})

	if _, err := session.Create(ctx, n.bus, "s1", session.Config{}, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan session.Outcome, 1)
	if err := n.sessions.Deliver("s1", &session.Command{Kind: wire.CommandRun, InputID: "in_1", Message: llm.User("go"),
		Done: func(o session.Outcome) { done <- o }}); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		if o.Status != projection.StatusCompleted {
			t.Fatalf("%+v", o)
		}
	case <-ctx.Done():
		t.Fatal("the turn did not end")
	}

	evs, _, err := n.bus.Replay(ctx, "s1", 1)
	if err != nil {
		t.Fatal(err)
	}
	runners := map[string]string{}
	for _, e := range evs {
		if e.Type == event.ToolStarted {
			var d event.ToolStartedData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			runners[d.Call.Name] = d.Runner
		}
	}
	if runners["echo"] != "local" || runners["shout"] != "remote:tah-tool-shout" {
		t.Fatalf("runners in the log: %v", runners)
	}
	rec := httptest.NewRecorder()
	n.Metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`tah_steps_total{kind="tool"} 2`,
		`tah_tool_duration_seconds_count{outcome="ok",tool="echo"} 1`,
		`tah_tool_duration_seconds_count{outcome="ok",tool="shout"} 1`,
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
