package session

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

func outcomeOf(t *testing.T, ch <-chan Outcome, what string) Outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(hangBound):
		t.Fatalf("%s: no outcome", what)
		return Outcome{}
	}
}

func cancelOf(input string) Command {
	return Command{Kind: wire.CommandCancel, Reason: "cancel of " + input, Target: input}
}

// TestACancelNamingAQueuedInputWithdrawsOnlyIt: a run queued behind a turn
// that waits for approval, cancelled by a cancel that names it, is withdrawn
// (it never runs) and the waiting turn still waits; a cancel that names the
// waiting turn's input cancels that turn.
func TestACancelNamingAQueuedInputWithdrawsOnlyIt(t *testing.T) {
	b := openBus(t)
	tt := &testTools{}
	p := mock.Scripted(mock.CallTool("echo", `{}`), mock.Say("never asked").Always())
	m := startManager(t, b, p, Config{}, approvalTools(tt, 0))
	const sid = "s1"
	if _, err := Create(context.Background(), m.bus, sid, Config{}, nil); err != nil {
		t.Fatal(err)
	}
	first := run("write it")
	if o := do(t, m, sid, first); o.Err != nil || !o.Wire().AwaitsApproval() {
		t.Fatalf("first turn: %+v", o)
	}
	queued := run("and then this")
	queuedOut := deliver(t, m, sid, queued)

	// The reply carries the session's state as the actor knows it: running
	// while the first turn's work still winds up after its outcome (its
	// checkpoint), waiting_tool after; the log says which, below.
	o := do(t, m, sid, cancelOf(queued.InputID))
	if o.Err != nil || o.WasRunning || (o.Status != projection.StatusWaitingTool && o.Status != projection.StatusRunning) {
		t.Fatalf("the cancel of the queued input: %+v", o)
	}
	waitWoundUp(t, m, sid)
	w := outcomeOf(t, queuedOut, "the queued input")
	if !errors.Is(w.Err, ErrWithdrawn) || w.Wire().FailureCode != wire.FailureWithdrawn {
		t.Fatalf("the queued input: %+v", w)
	}
	st := fold(t, b, sid)
	if !st.AwaitingApproval || st.Turn != 1 || st.SawInput(queued.InputID) || len(p.Calls()) != 1 {
		t.Fatalf("after the withdrawal: turn %d, awaiting approval %v, saw the queued input %v, %d model calls",
			st.Turn, st.AwaitingApproval, st.SawInput(queued.InputID), len(p.Calls()))
	}
	// A cancel naming an input that is not there (ended, or never sent)
	// touches nothing.
	if o := do(t, m, sid, cancelOf("in_unknown")); o.Err != nil || o.WasRunning || o.Status != projection.StatusWaitingTool {
		t.Fatalf("the cancel of an unknown input: %+v", o)
	}
	// The waiting turn's own input: the turn is cancelled.
	o = do(t, m, sid, cancelOf(first.InputID))
	if o.Err != nil || !o.WasRunning || o.Status != projection.StatusCancelled || o.Turn != 1 {
		t.Fatalf("the cancel of the waiting turn: %+v", o)
	}
	if st := fold(t, b, sid); st.Turn != 1 || st.Status != projection.StatusCancelled || tt.ran() != 0 {
		t.Fatalf("turn %d %s, %d calls ran", st.Turn, st.Status, tt.ran())
	}
	audited(t, b, sid)
}

// TestACancelNamingAnotherInputLeavesTheRunningTurn: a cancel naming an
// input other than the running turn's does not cancel that turn; one that
// names it does.
func TestACancelNamingAnotherInputLeavesTheRunningTurn(t *testing.T) {
	b := openBus(t)
	release := make(chan struct{})
	p := &held{release: release, started: make(chan struct{}, 4)}
	m := startManager(t, b, p, Config{}, ToolConfig{})
	const sid = "s1"
	if _, err := Create(context.Background(), m.bus, sid, Config{}, nil); err != nil {
		t.Fatal(err)
	}
	first := run("hold")
	firstOut := deliver(t, m, sid, first)
	<-p.started
	queued := run("behind")
	queuedOut := deliver(t, m, sid, queued)
	if o := do(t, m, sid, cancelOf(queued.InputID)); o.Err != nil || o.WasRunning || o.Status != projection.StatusRunning {
		t.Fatalf("the cancel of the queued input: %+v", o)
	}
	if w := outcomeOf(t, queuedOut, "the queued input"); !errors.Is(w.Err, ErrWithdrawn) {
		t.Fatalf("the queued input: %+v", w)
	}
	// The running turn is the first's: a cancel naming it ends it.
	o := do(t, m, sid, cancelOf(first.InputID))
	if o.Err != nil || !o.WasRunning || o.Status != projection.StatusCancelled {
		t.Fatalf("the cancel of the running turn: %+v", o)
	}
	// Its reason is the second cancel's: the first left it alone.
	if f := outcomeOf(t, firstOut, "the first turn"); f.Status != projection.StatusCancelled || f.Error != "cancel of "+first.InputID {
		t.Fatalf("the first turn: %+v", f)
	}
	if st := fold(t, b, sid); st.Turn != 1 || st.SawInput(queued.InputID) {
		t.Fatalf("turn %d; the withdrawn input ran: %v", st.Turn, st.SawInput(queued.InputID))
	}
	audited(t, b, sid)
}

// held is a model that holds every call until its context ends or release
// is closed, telling started when a call begins.
type held struct {
	release chan struct{}
	started chan struct{}
}

func (h *held) Name() string { return "held" }

func (h *held) Generate(ctx context.Context, _ llm.Request) (llm.Response, error) {
	h.started <- struct{}{}
	select {
	case <-h.release:
		return llm.Response{Content: "done", FinishReason: llm.FinishStop}, nil
	case <-ctx.Done():
		return llm.Response{}, ctx.Err()
	}
}

// waitWoundUp waits until the work of sid's turn that waits for approval has
// wound up after its outcome (its checkpoint): a cancel naming no input is
// answered with the session's own state, waiting_tool, once nothing runs.
func waitWoundUp(t *testing.T, m *Manager, sid string) {
	t.Helper()
	for range 3000 {
		if o := do(t, m, sid, cancelOf("in_none")); o.Status == projection.StatusWaitingTool {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: the work of the turn that waits for approval never wound up", sid)
}
