package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// TestTurnCancelWithdrawsOnlyItsOwnQueuedInput: a Turn queued behind
// another client's turn that waits for approval, cancelled, is withdrawn:
// its Outcome fails with ErrWithdrawn and it never runs, and the other turn
// still waits for its approval, which then completes it.
func TestTurnCancelWithdrawsOnlyItsOwnQueuedInput(t *testing.T) {
	ctx := ctxT(t)
	var ran atomic.Int64
	reg, err := tools.NewRegistry(tools.Func(tools.Spec{Name: "write"}, func(context.Context, json.RawMessage) (tools.Result, error) {
		ran.Add(1)
		return tools.Result{Output: "written"}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = t.TempDir(), -1, 2
	p := mock.Scripted(mock.CallTool("write", `{}`).OnPrompt("write the plan"), mock.Say("done").Always())
	n, err := node.Start(ctx, node.Options{Bus: cfg, Provider: p, Tools: reg, Logger: slog.New(slog.DiscardHandler),
		Approval: session.ApprovalPolicy{Rules: map[string]string{"write": session.ApprovalAlways}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	if err := n.StartAPI(ctx); err != nil {
		t.Fatal(err)
	}
	alice, bob := connect(t, n), connect(t, n)
	sid := newSession(t, alice)
	if o := run(t, alice, sid, "write the plan"); !o.AwaitsApproval() {
		t.Fatalf("alice's turn: %+v", o)
	}
	queued := startTurn(t, bob, sid, "and a summary", client.WithEvents(), client.WithDeltas())
	if err := queued.Cancel(ctx, "bob changed his mind"); err != nil {
		t.Fatal(err)
	}
	o, err := queued.Outcome(ctx)
	var ce *client.CommandError
	if !errors.Is(err, client.ErrWithdrawn) || !errors.As(err, &ce) || ce.Code != wire.FailureWithdrawn {
		t.Fatalf("bob's queued turn: %+v %v", o, err)
	}
	// Alice's turn still waits; approved, it completes, and bob's input
	// never ran.
	turn, err := alice.Approve(ctx, sid, wire.Decision{By: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer turn.Close()
	if o, err := turn.Outcome(ctx); err != nil || o.Status != projection.StatusCompleted || o.Turn != 1 || ran.Load() != 1 {
		t.Fatalf("alice's approval: %+v %v (the tool ran %d times)", o, err, ran.Load())
	}
	var evs []event.Event
	for ev, err := range alice.Log(ctx, sid, 0) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	st, err := projection.Fold(evs)
	if err != nil {
		t.Fatal(err)
	}
	if st.Turn != 1 || st.SawInput(queued.InputID()) {
		t.Fatalf("turn %d; bob's withdrawn input ran: %v", st.Turn, st.SawInput(queued.InputID()))
	}
}
