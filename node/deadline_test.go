package node

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// An approval deadline that passes while no node holds the session (its
// node stopped while the turn waited, and the node that starts again does
// not load it: nothing sends it an input) is still enforced: the node left
// a schedule at the deadline, and JetStream sends the expired deny, which
// denies the call (tool.denied expired) and lets the turn go on.
func TestAnApprovalDeadlineHoldsWithNoNodeHoldingTheSession(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ran := 0
	echo := tools.Func(tools.Spec{Name: "echo"}, func(_ context.Context, in json.RawMessage) (tools.Result, error) {
		ran++
		return tools.Text("echo"), nil
	})
	start := func() *Node {
		cfg := bus.Default()
		cfg.DataDir, cfg.Port, cfg.Partitions = dir, -1, 2
		n, err := Start(ctx, Options{Bus: cfg, Tools: tools.MustRegistry(echo), Logger: slog.New(slog.DiscardHandler),
			Provider: mock.Scripted(mock.CallTool("echo", `{}`), mock.Say("went on without it")),
			Approval: session.ApprovalPolicy{Rules: map[string]string{"echo": session.ApprovalAlways}, Timeout: 2 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.StartAPI(ctx); err != nil {
			t.Fatal(err)
		}
		return n
	}
	connect := func(n *Node) *client.Client {
		c, err := client.Connect(ctx, client.Options{URL: n.bus.ClientURL(), CredsFile: auth.AdminCredsPath(dir)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	n := start()
	c := connect(n)
	r, err := c.Create(ctx, wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sid := r.Session
	turn, err := c.Run(ctx, sid, wire.Input{Text: "echo, once approved"})
	if err != nil {
		t.Fatal(err)
	}
	o, err := turn.Outcome(ctx)
	turn.Close()
	if err != nil || !o.AwaitsApproval() || o.ApprovalDeadline.IsZero() {
		t.Fatalf("%+v %v", o, err)
	}
	list, err := c.Schedules(ctx, sid)
	if err != nil || len(list) != 1 || list[0].Name != wire.ApprovalDeadlineSchedule {
		t.Fatalf("schedules %+v %v", list, err)
	}
	c.Close()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}

	n = start()
	defer n.Close(context.Background())
	c = connect(n)
	defer c.Close()
	f, err := c.Follow(ctx, sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	denied := false
	for !denied {
		select {
		case ev := <-f.Events():
			if ev.Type == event.ToolDenied {
				d, _ := event.DecodeAs[event.ToolDeniedData](ev)
				denied = d.Expired
			}
		case <-ctx.Done():
			t.Fatal("the deadline passed and nothing denied the call")
		}
	}
	for {
		select {
		case ev := <-f.Events():
			if ev.Type != event.AgentFinished {
				continue
			}
			if d, _ := event.DecodeAs[event.AgentFinishedData](ev); d.Content != "went on without it" || ran != 0 {
				t.Fatalf("the turn ended with %q, the tool ran %d times", d.Content, ran)
			}
			return
		case <-ctx.Done():
			t.Fatal("the turn did not go on after the denial")
		}
	}
}
