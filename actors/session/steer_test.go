package session

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// stepper is a model that asks for the echo tool at each of its first
// steps-1 calls and answers at the last, each call held until the test
// releases it: started tells the call's number (from 1) as it begins.
type stepper struct {
	steps int
	// tool, when set, names the tool call n asks for ("" to answer).
	tool    func(n int) string
	started chan int
	release chan struct{}

	mu    sync.Mutex
	calls []llm.Request
}

func newStepper(steps int) *stepper {
	return &stepper{steps: steps, started: make(chan int, 64), release: make(chan struct{}, 64)}
}

func (p *stepper) Name() string { return "stepper" }

func (p *stepper) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	p.mu.Lock()
	p.calls = append(p.calls, req)
	n := len(p.calls)
	p.mu.Unlock()
	p.started <- n
	select {
	case <-p.release:
	case <-ctx.Done():
		return llm.Response{}, ctx.Err()
	}
	tool := ""
	if n%p.steps != 0 {
		tool = "echo"
	}
	if p.tool != nil {
		tool = p.tool(n)
	}
	if tool != "" {
		return llm.Response{FinishReason: llm.FinishToolCalls,
			ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_%d", n), Name: tool, Arguments: json.RawMessage(`{}`)}}}, nil
	}
	return llm.Response{Content: fmt.Sprintf("answer after %d steps", n), FinishReason: llm.FinishStop}, nil
}

func (p *stepper) request(n int) llm.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[n-1]
}

// next waits for call n to begin.
func (p *stepper) next(t *testing.T, n int) {
	t.Helper()
	if got := <-p.started; got != n {
		t.Fatalf("call %d began, want %d", got, n)
	}
}

func steerOf(text string) Command {
	c := run(text)
	c.WhenBusy = wire.WhenBusySteer
	return c
}

func interruptOf(text string) Command {
	c := run(text)
	c.WhenBusy = wire.WhenBusyInterrupt
	return c
}

// barrier returns once sid's actor has taken every command delivered
// before it: a cancel naming no input is answered by the actor at once.
func barrier(t *testing.T, m *Manager, sid string) {
	t.Helper()
	do(t, m, sid, cancelOf("in_barrier"))
}

// A 10-step turn steered while its third LLM call runs: the steer joins the
// turn (turn.steered, before the fourth call), the fourth request holds it
// after the third step's tool result, every request rebuilds from the log
// and matches its hash, the turn finishes once, and the steer's outcome is
// the turn's. A steer delivered again after the turn ended writes nothing.
func TestSteerJoinsTheRunningTurn(t *testing.T) {
	b := openBus(t)
	p := newStepper(10)
	m := newManager(t, b, p, Config{})
	const sid = "s1"
	if _, err := Create(context.Background(), m.bus, sid, Config{}, nil); err != nil {
		t.Fatal(err)
	}
	first := run("do ten steps")
	firstOut := deliver(t, m, sid, first)
	for n := 1; n <= 2; n++ {
		p.next(t, n)
		p.release <- struct{}{}
	}
	p.next(t, 3)
	steer := steerOf("use the other file")
	steerOut := deliver(t, m, sid, steer)
	barrier(t, m, sid)
	for n := 3; n <= 10; n++ {
		if n > 3 {
			p.next(t, n)
		}
		p.release <- struct{}{}
	}
	f := outcomeOf(t, firstOut, "the turn")
	s := outcomeOf(t, steerOut, "the steer")
	if f.Err != nil || f.Status != projection.StatusCompleted || f.Turn != 1 || f.Content != "answer after 10 steps" {
		t.Fatalf("the turn: %+v", f)
	}
	if s.Err != nil || s.Status != projection.StatusCompleted || s.Turn != 1 || s.Content != f.Content {
		t.Fatalf("the steer's outcome is not the turn's: %+v", s)
	}

	// The fourth request: the third step's result, then the steer.
	msgs := p.request(4).Messages
	last, before := msgs[len(msgs)-1], msgs[len(msgs)-2]
	if last.Role != llm.RoleUser || !last.Steer || last.Content != "use the other file" || before.Role != llm.RoleTool || before.ToolCallID != "call_3" {
		t.Fatalf("the fourth request ends with %+v after %+v", last, before)
	}
	for n := 1; n <= 3; n++ {
		for _, msg := range p.request(n).Messages {
			if msg.Steer {
				t.Fatalf("request %d holds the steer", n)
			}
		}
	}
	evs, _, err := b.Replay(context.Background(), sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	steered := 0
	n := 0
	for _, e := range evs {
		switch e.Type {
		case event.TurnSteered:
			steered++
			if d, _ := event.DecodeAs[event.TurnSteeredData](e); d.Turn != 1 || d.InputID != steer.InputID || n != 3 {
				t.Fatalf("turn.steered %+v after %d LLM steps", d, n)
			}
		case event.LLMStarted:
			n++
			d, _ := event.DecodeAs[event.LLMStartedData](e)
			r, err := projection.RebuildRequest(evs, d.StepID)
			if err != nil {
				t.Fatalf("step %s: %v", d.StepID, err)
			}
			got, _ := json.Marshal(r.Request)
			want, _ := json.Marshal(p.request(n))
			if !r.Verified || string(got) != string(want) {
				t.Fatalf("step %d (verified %v): rebuilt\n%s\nsent\n%s", n, r.Verified, got, want)
			}
		}
	}
	if steered != 1 || n != 10 {
		t.Fatalf("%d turn.steered, %d LLM steps", steered, n)
	}
	st := pairedAndAudited(t, m, sid)
	if st.Turn != 1 || !st.SawInput(steer.InputID) || len(projection.Turns(st.Messages)) != 1 {
		t.Fatalf("turn %d, saw the steer %v, %d turns in the history", st.Turn, st.SawInput(steer.InputID), len(projection.Turns(st.Messages)))
	}
	// Delivered again (its ack was lost): answered from the log.
	if o := do(t, m, sid, steer); o.Err != nil || o.Turn != 1 || o.Status != projection.StatusCompleted {
		t.Fatalf("the steer again: %+v", o)
	}
	if got := len(fold(t, b, sid).Messages); got != len(st.Messages) {
		t.Fatalf("the steer again wrote to the history: %d messages, want %d", got, len(st.Messages))
	}
}

// A steer that the turn cannot take any more (its last LLM call runs and
// answers) runs as a turn of its own, before what was queued behind the
// turn; a steer of an idle session is a run.
func TestSteerAfterTheLastStepRunsAsItsOwnTurn(t *testing.T) {
	b := openBus(t)
	p := newStepper(1) // every call answers
	m := newManager(t, b, p, Config{})
	const sid = "s1"
	if _, err := Create(context.Background(), m.bus, sid, Config{}, nil); err != nil {
		t.Fatal(err)
	}
	firstOut := deliver(t, m, sid, run("one"))
	p.next(t, 1)
	queued := run("queued")
	queuedOut := deliver(t, m, sid, queued)
	steer := steerOf("too late")
	steerOut := deliver(t, m, sid, steer)
	barrier(t, m, sid)
	p.release <- struct{}{} // the first turn answers: the steer was not taken
	for n := 2; n <= 3; n++ {
		p.next(t, n)
		p.release <- struct{}{}
	}
	f, s, q := outcomeOf(t, firstOut, "first"), outcomeOf(t, steerOut, "steer"), outcomeOf(t, queuedOut, "queued")
	if f.Turn != 1 || s.Turn != 2 || q.Turn != 3 || s.Status != projection.StatusCompleted || q.Status != projection.StatusCompleted {
		t.Fatalf("turns: first %d, steer %d (%s), queued %d (%s)", f.Turn, s.Turn, s.Status, q.Turn, q.Status)
	}
	if got := p.request(2).Messages; got[len(got)-1].Content != "too late" || got[len(got)-1].Steer {
		t.Fatalf("the steer's own turn asked with %+v", got[len(got)-1])
	}
	idle := steerOf("idle")
	idleOut := deliver(t, m, sid, idle)
	p.next(t, 4)
	p.release <- struct{}{}
	if o := outcomeOf(t, idleOut, "idle steer"); o.Turn != 4 || o.Status != projection.StatusCompleted {
		t.Fatalf("a steer of an idle session: %+v", o)
	}
	pairedAndAudited(t, m, sid)
}

// An interrupt cancels the running turn (its tool call paired, agent.cancelled
// naming the interrupting input) and runs its own turn next, ahead of a run
// queued before it.
func TestInterruptCancelsTheTurnAndRunsNext(t *testing.T) {
	b := openBus(t)
	p := newStepper(1)
	p.tool = func(n int) string {
		if n == 1 {
			return "block"
		}
		return ""
	}
	tt := &testTools{started: make(chan string, 4)}
	m := startManager(t, b, p, Config{}, tt.config())
	const sid = "s1"
	if _, err := Create(context.Background(), m.bus, sid, Config{}, nil); err != nil {
		t.Fatal(err)
	}
	firstOut := deliver(t, m, sid, run("long"))
	p.next(t, 1)
	p.release <- struct{}{}
	<-tt.started // the call runs, and holds until cancelled
	queuedOut := deliver(t, m, sid, run("queued"))
	intr := interruptOf("stop, do this instead")
	intrOut := deliver(t, m, sid, intr)
	if f := outcomeOf(t, firstOut, "first"); f.Status != projection.StatusCancelled || f.Turn != 1 || f.Error != "interrupted by input "+intr.InputID {
		t.Fatalf("the interrupted turn: %+v", f)
	}
	for n := 2; n <= 3; n++ {
		p.next(t, n)
		p.release <- struct{}{}
	}
	if got := p.request(2).Messages; got[len(got)-1].Content != "stop, do this instead" {
		t.Fatalf("the turn after the interrupt asked with %+v", got[len(got)-1])
	}
	i, q := outcomeOf(t, intrOut, "interrupt"), outcomeOf(t, queuedOut, "queued")
	if i.Turn != 2 || i.Status != projection.StatusCompleted || q.Turn != 3 || q.Status != projection.StatusCompleted {
		t.Fatalf("the interrupt's turn %d (%s), the queued run's %d (%s)", i.Turn, i.Status, q.Turn, q.Status)
	}
	checkInterruptedBy(t, m, sid, intr.InputID)
}

// checkInterruptedBy checks that turn 1 of sid was cancelled by input id, its
// calls paired.
func checkInterruptedBy(t *testing.T, m *Manager, sid, id string) {
	t.Helper()
	pairedAndAudited(t, m, sid)
	evs, _, err := m.bus.Replay(context.Background(), sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == event.AgentCancelled {
			if d, _ := event.DecodeAs[event.AgentCancelledData](e); d.Turn == 1 && d.InterruptedBy == id {
				return
			}
		}
	}
	t.Fatalf("no agent.cancelled of turn 1 interrupted by %s", id)
}

// A turn waiting for approval: a steer joins it, and the model sees it
// after the approved call's result; an interrupt cancels it (the waiting
// call paired) and runs its own turn.
func TestSteerAndInterruptOfATurnWaitingForApproval(t *testing.T) {
	t.Run("steer", func(t *testing.T) {
		b := openBus(t)
		tt := &testTools{}
		p := mock.Scripted(mock.CallTool("echo", `{}`), mock.Say("done, with the other file"))
		m := startManager(t, b, p, Config{}, approvalTools(tt, 0))
		callID := waitForApproval(t, m, "s1")
		steer := steerOf("use the other file")
		steerOut := deliver(t, m, "s1", steer)
		barrier(t, m, "s1")
		if o := do(t, m, "s1", decision(wire.CommandApprove, wire.Decision{Calls: []string{callID}})); o.Status != projection.StatusCompleted {
			t.Fatalf("the approve: %+v", o)
		}
		if s := outcomeOf(t, steerOut, "steer"); s.Turn != 1 || s.Status != projection.StatusCompleted {
			t.Fatalf("the steer: %+v", s)
		}
		msgs := p.Calls()[1].Messages
		if last, before := msgs[len(msgs)-1], msgs[len(msgs)-2]; !last.Steer || last.Content != "use the other file" || before.Role != llm.RoleTool {
			t.Fatalf("the request after the approval ends with %+v after %+v", last, before)
		}
		pairedAndAudited(t, m, "s1")
	})
	t.Run("interrupt", func(t *testing.T) {
		b := openBus(t)
		tt := &testTools{}
		p := mock.Scripted(mock.CallTool("echo", `{}`), mock.Say("the new answer"), mock.Say("the parked run's answer"))
		m := startManager(t, b, p, Config{}, approvalTools(tt, 0))
		waitForApproval(t, m, "s1")
		queuedOut := deliver(t, m, "s1", run("parked"))
		intr := interruptOf("forget that")
		if o := do(t, m, "s1", intr); o.Turn != 2 || o.Content != "the new answer" {
			t.Fatalf("the interrupt: %+v", o)
		}
		if q := outcomeOf(t, queuedOut, "parked"); q.Turn != 3 || q.Status != projection.StatusCompleted {
			t.Fatalf("the run parked behind the approval: %+v", q)
		}
		if tt.ran() != 0 {
			t.Fatalf("%d calls ran", tt.ran())
		}
		checkInterruptedBy(t, m, "s1", intr.InputID)
	})
}

// A cancel that names a steer which joined the running turn cancels that
// turn (the steer's outcome is the turn's): what a client that sent the
// steer and gives up (tahctl send --steer, Ctrl-C) expects.
func TestCancelOfAJoinedSteerCancelsItsTurn(t *testing.T) {
	b := openBus(t)
	p := newStepper(5)
	m := newManager(t, b, p, Config{})
	const sid = "s1"
	if _, err := Create(context.Background(), m.bus, sid, Config{}, nil); err != nil {
		t.Fatal(err)
	}
	firstOut := deliver(t, m, sid, run("do five steps"))
	p.next(t, 1)
	steer := steerOf("stop after this")
	steerOut := deliver(t, m, sid, steer)
	barrier(t, m, sid)
	p.release <- struct{}{}
	p.next(t, 2) // the second call took the steer: it joined
	cancelOut := deliver(t, m, sid, cancelOf(steer.InputID))
	f := outcomeOf(t, firstOut, "the turn")
	s := outcomeOf(t, steerOut, "the steer")
	c := outcomeOf(t, cancelOut, "the cancel")
	if f.Status != projection.StatusCancelled || s.Status != projection.StatusCancelled || s.Turn != 1 {
		t.Fatalf("the turn %+v, the steer %+v: want both cancelled", f, s)
	}
	if c.Err != nil || !c.WasRunning {
		t.Fatalf("the cancel: %+v", c)
	}
	st := fold(t, b, sid)
	if st.Status != projection.StatusCancelled || len(st.TurnSteers) == 0 {
		t.Fatalf("state %s, steers %v", st.Status, st.TurnSteers)
	}
}
