package client_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// steerable is a model whose first call asks for a tool (held until release
// is closed) and whose later calls answer with the steer they were given.
type steerable struct {
	started chan struct{}
	release chan struct{}
}

func (p *steerable) Name() string { return "steerable" }

func (p *steerable) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Steer {
		return llm.Response{Content: "steered: " + last.Content, FinishReason: llm.FinishStop}, nil
	}
	if last.Role == llm.RoleTool {
		return llm.Response{Content: "no steer came", FinishReason: llm.FinishStop}, nil
	}
	p.started <- struct{}{}
	select {
	case <-p.release:
	case <-ctx.Done():
		return llm.Response{}, ctx.Err()
	}
	return llm.Response{FinishReason: llm.FinishToolCalls,
		ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "no_such_tool", Arguments: json.RawMessage(`{}`)}}}, nil
}

// A run sent WhenBusy steer while a turn works joins it: its Turn follows
// the joined turn from the turn.steered that records it, and its outcome
// is that turn's.
func TestSteerFollowsTheTurnItJoined(t *testing.T) {
	p := &steerable{started: make(chan struct{}, 4), release: make(chan struct{})}
	c := connect(t, startNode(t, p))
	sid := newSession(t, c)
	first := startTurn(t, c, sid, "a long task")
	<-p.started
	steer, err := c.Run(ctxT(t), sid, wire.Input{Text: "go left", Options: &wire.RunOptions{WhenBusy: wire.WhenBusySteer}},
		client.WithEvents())
	if err != nil {
		t.Fatal(err)
	}
	defer steer.Close()
	if err := client.Barrier(ctxT(t), c, sid); err != nil {
		t.Fatal(err)
	}
	close(p.release)
	var types []event.Type
	for ev := range steer.Events() {
		types = append(types, ev.Type)
	}
	so, err := steer.Outcome(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	fo, err := first.Outcome(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if so.Status != projection.StatusCompleted || so.Turn != 1 || so.Content != "steered: go left" || fo.Content != so.Content {
		t.Fatalf("the steer's outcome %+v, the turn's %+v", so, fo)
	}
	if len(types) == 0 || types[0] != event.TurnSteered || types[len(types)-1] != event.AgentFinished {
		t.Fatalf("the steer's events: %v (want turn.steered first, agent.finished last)", types)
	}
}
