package node

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/wire"
)

// An agent given schedule_wakeup schedules its own session's next turn:
// the tool answers when, the turn ends, and JetStream sends the message
// then, which runs as turn 2; a bad duration is the model's to fix.
func TestAnAgentWakesItselfUp(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = dir, -1, 2
	n, err := Start(ctx, Options{Bus: cfg, WakeupTool: true, Logger: slog.New(slog.DiscardHandler),
		Provider: mock.Scripted(
			mock.CallTool(WakeupTool, `{"in": "forever", "message": "x"}`).OnPrompt("deploy"),
			mock.CallTool(WakeupTool, `{"in": "1s", "message": "check the deployment again"}`).OnPrompt("deploy"),
			mock.Say("I will look again in a second.").OnPrompt("deploy"),
			mock.Say("Checked: all green.").OnPrompt("check the deployment again"))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	if err := n.StartAPI(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := client.Connect(ctx, client.Options{URL: n.bus.ClientURL(), CredsFile: auth.AdminCredsPath(dir)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Create(ctx, wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Follow(ctx, r.Session, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	turn, err := c.Run(ctx, r.Session, wire.Input{Text: "deploy it"})
	if err != nil {
		t.Fatal(err)
	}
	o, err := turn.Outcome(ctx)
	turn.Close()
	if err != nil || o.Content != "I will look again in a second." {
		t.Fatalf("%+v %v", o, err)
	}
	var outputs []string
	for {
		select {
		case ev := <-f.Events():
			switch ev.Type {
			case event.ToolFinished:
				d, _ := event.DecodeAs[event.ToolFinishedData](ev)
				outputs = append(outputs, d.Output)
			case event.AgentFinished:
				d, _ := event.DecodeAs[event.AgentFinishedData](ev)
				if d.Turn != 2 {
					continue
				}
				if d.Content != "Checked: all green." || len(outputs) != 2 ||
					!strings.Contains(outputs[0], `"in" is "forever"`) || !strings.Contains(outputs[1], "Wake-up scheduled for") {
					t.Fatalf("turn 2 %q; the tool said %q", d.Content, outputs)
				}
				return
			}
		case <-ctx.Done():
			t.Fatalf("the session never woke up; the tool said %q", outputs)
		}
	}
}
