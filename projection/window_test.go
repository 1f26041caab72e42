package projection

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// elideTurns elides the first n turns of st's history when no tool call
// crosses their end; ok is false otherwise.
func elideTurns(t *testing.T, st *State, n int) (elided []llm.Message, ok bool) {
	t.Helper()
	pre := preambleEnd(st.Messages)
	turns := Turns(st.Messages)
	if n <= 0 || n >= len(turns) || llm.CheckPairing(st.Messages[pre:turns[n].Start]) != nil {
		return nil, false
	}
	out, err := st.Elide(pre, turns[n].Start-pre)
	if err != nil {
		t.Fatalf("elide %d turns: %v", n, err)
	}
	return out, true
}

// FuzzWindow checks the window's promise: a state that left out old turns
// makes the request of its whole history, byte for byte, or says
// ErrHistoryNeeded; whatever turns were left out, under any budget.
func FuzzWindow(f *testing.F) {
	f.Add([]byte{0, 10, 0, 5, 2, 1, 0, 200, 200, 1, 3, 0, 9, 3, 4, 50, 50, 0, 1}, 100, 1)
	f.Add([]byte("a much longer seed with many different bytes to walk the generator"), 50, 2)
	f.Add([]byte{1, 0, 0, 30, 2, 9, 90, 90, 0, 40, 3, 200, 200, 200, 0, 20, 1, 1}, 400, 1)
	f.Fuzz(func(t *testing.T, data []byte, budget, n int) {
		msgs := genHistory(data)
		budget = abs(budget) % 20000
		whole := State{Messages: msgs, Config: event.Config{ContextChars: budget}}
		want, err := NextRequest(&whole, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		win := whole.Clone()
		elided, ok := elideTurns(t, &win, abs(n)%8)
		if !ok {
			return
		}
		got, err := NextRequest(&win, nil, nil)
		switch {
		case errors.Is(err, ErrHistoryNeeded):
		case err != nil:
			t.Fatal(err)
		case !reflect.DeepEqual(got, want):
			t.Fatalf("the window's request differs from the whole history's:\n got %+v\nwant %+v", got, want)
		}
		if win.HistoryChars() != whole.HistoryChars() {
			t.Fatalf("HistoryChars %d, want %d", win.HistoryChars(), whole.HistoryChars())
		}
		if err := win.Restore(elided); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(win.Messages, whole.Messages) || win.Elided.Messages != 0 {
			t.Fatal("restore does not give the history back")
		}
	})
}

// TestWindowRequestsAreExact runs FuzzWindow's check on generated histories
// and makes sure that most windows do make the request themselves.
func TestWindowRequestsAreExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	made := 0
	for i := 0; i < 800; i++ {
		data := make([]byte, 40+rng.IntN(300))
		for k := range data {
			data[k] = byte(rng.IntN(256))
		}
		whole := State{Messages: genHistory(data), Config: event.Config{ContextChars: 200 + rng.IntN(3000)}}
		want, err := NextRequest(&whole, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		win := whole.Clone()
		if _, ok := elideTurns(t, &win, 1+rng.IntN(4)); !ok {
			continue
		}
		got, err := NextRequest(&win, nil, nil)
		if errors.Is(err, ErrHistoryNeeded) {
			continue
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("history %d: the window's request differs (%v):\n got %+v\nwant %+v", i, err, got, want)
		}
		made++
	}
	t.Logf("%d windows made their request", made)
	if made < 50 {
		t.Fatalf("only %d windows made their request: the check is too strict to be of use", made)
	}
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func TestElisionKeepsWhatRequestsNeed(t *testing.T) {
	const budget = 2000
	st := State{ID: "s1", Messages: history("be brief", 200, 500), Config: event.Config{ContextChars: budget}}
	want, err := NextRequest(&st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	at, n := st.ElisionCut(budget)
	if at != 1 || n == 0 {
		t.Fatalf("ElisionCut = %d, %d: want old turns after the system prompt", at, n)
	}
	elided, err := st.Elide(at, n)
	if err != nil {
		t.Fatal(err)
	}
	if kept := llm.TotalChars(st.Messages); kept > 20*budget {
		t.Errorf("the window holds %d characters for a budget of %d", kept, budget)
	}
	got, err := NextRequest(&st, nil, nil)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("NextRequest of the window = %+v, %v; want %+v", got.Ref, err, want.Ref)
	}

	// A claim with another system prompt moves the gap with the preamble.
	claim := mustEvent(t, event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Config: event.Config{ContextChars: budget}})
	if err := Apply(&st, claim); err != nil {
		t.Fatal(err)
	}
	if st.Elided.At != 0 || st.Messages[0].Role != llm.RoleUser {
		t.Fatalf("without a system prompt the gap is at %d", st.Elided.At)
	}
	// A summary in the gap needs the history; after it, it lands where it
	// would in the whole history.
	sum := mustEvent(t, event.SummaryAdded, event.SummaryAddedData{Content: SummaryContent("s"), At: 3})
	if err := Apply(&st, sum); !errors.Is(err, ErrHistoryNeeded) {
		t.Fatalf("a summary in the gap: %v, want ErrHistoryNeeded", err)
	}
	end := mustEvent(t, event.SummaryAdded, event.SummaryAddedData{Content: SummaryContent("s"), At: st.HistoryLen()})
	if err := Apply(&st, end); err != nil {
		t.Fatal(err)
	}
	if !IsSummary(st.Messages[len(st.Messages)-1]) {
		t.Fatal("summary at the history's end is not the window's last message")
	}
	if err := st.Restore(elided); err != nil {
		t.Fatal(err)
	}
	if st.HistoryLen() != len(history("be brief", 200, 500)) {
		t.Fatalf("restored history has %d messages", st.HistoryLen())
	}
}

func TestElisionBeforeTheNewestSummary(t *testing.T) {
	msgs := history("be brief", 10, 100)
	msgs = append(msgs, llm.System(SummaryContent("all of it")))
	msgs = append(msgs, history("be brief", 2, 100)[1:]...)
	st := State{Messages: msgs}
	want, err := NextRequest(&st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	at, n := st.ElisionCut(0)
	if at != 1 || n != 40 {
		t.Fatalf("ElisionCut = %d, %d: want the 10 turns before the summary", at, n)
	}
	if _, err := st.Elide(at, n); err != nil {
		t.Fatal(err)
	}
	got, err := NextRequest(&st, nil, nil)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("NextRequest of the window = %+v, %v", got.Ref, err)
	}
}

func TestNoElisionWithoutBudget(t *testing.T) {
	st := State{Messages: history("be brief", 50, 100)}
	if _, n := st.ElisionCut(0); n != 0 {
		t.Fatalf("ElisionCut without a budget left out %d messages: every request sends them", n)
	}
	if _, n := st.ElisionCut(1_000_000); n != 0 {
		t.Fatalf("ElisionCut under a budget the history fits left out %d messages", n)
	}
}

func TestSlimKeepsTheCurrentTurn(t *testing.T) {
	st := State{Turn: 2, Status: StatusRunning,
		Steps:     []Step{{ID: "a", Turn: 1, Status: StepCompleted}, {ID: "b", Turn: 1, Status: StepRunning}, {ID: "c", Turn: 2, Status: StepCompleted}},
		ToolCalls: []ToolCallRecord{{CallID: "x", Turn: 1, HasResult: true}, {CallID: "y", Turn: 1}, {CallID: "z", Turn: 2, HasResult: true}},
		Artifacts: []Artifact{{Seq: 3}}, Checkpoints: []Checkpoint{{Seq: 4}}}
	st.Slim()
	if len(st.Steps) != 2 || st.Step("b") == nil || st.Step("c") == nil || st.Step("a") != nil {
		t.Fatalf("steps after Slim: %+v", st.Steps)
	}
	if len(st.ToolCalls) != 2 || st.ToolCall("y") == nil || st.ToolCall("z") == nil {
		t.Fatalf("tool calls after Slim: %+v", st.ToolCalls)
	}
	if len(st.Artifacts)+len(st.Checkpoints) != 0 {
		t.Fatal("artifacts or checkpoints left")
	}
}

// Once the turn has ended, Slim keeps of it only what the writer still
// reads: its steps and calls still open, and its last LLM step (whose
// request's tools the next turn's first step waits for after a restart).
func TestSlimDropsAnEndedTurn(t *testing.T) {
	for _, status := range []Status{StatusCompleted, StatusFailed, StatusCancelled} {
		st := State{Turn: 2, Status: status,
			Steps: []Step{{ID: "a", Turn: 1, Type: StepLLM, Status: StepCompleted}, {ID: "b", Turn: 2, Type: StepLLM, Status: StepCompleted},
				{ID: "c", Turn: 2, Type: StepTool, Status: StepCompleted}, {ID: "d", Turn: 2, Type: StepLLM, Status: StepCompleted},
				{ID: "e", Turn: 2, Type: StepLLM, Status: StepCompleted, Compaction: true}, {ID: "f", Turn: 2, Type: StepTool, Status: StepRunning}},
			ToolCalls: []ToolCallRecord{{CallID: "x", Turn: 2, HasResult: true}, {CallID: "y", Turn: 2}}}
		st.Slim()
		var ids []string
		for _, s := range st.Steps {
			ids = append(ids, s.ID)
		}
		if strings.Join(ids, ",") != "d,f" {
			t.Errorf("%s: steps after Slim: %v, want the last LLM step and the open one (d,f)", status, ids)
		}
		if len(st.ToolCalls) != 1 || st.ToolCall("y") == nil {
			t.Errorf("%s: tool calls after Slim: %+v", status, st.ToolCalls)
		}
	}
}

func mustEvent(t *testing.T, typ event.Type, data any) event.Event {
	t.Helper()
	e, err := event.New("s1", typ, data)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A window that holds the newest summary holds what a compaction covers:
// the plan made on it places the summary where the whole history's does.
func TestCompactionViewOfAWindow(t *testing.T) {
	msgs := history("be brief", 10, 100)
	msgs = append(msgs, llm.System(SummaryContent("all of it")))
	msgs = append(msgs, history("", 6, 100)...)
	whole := State{Messages: msgs}
	want, _ := PlanCompaction(whole.Messages, true)
	st := whole.Clone()
	if _, err := st.Elide(st.ElisionCut(0)); err != nil {
		t.Fatal(err)
	}
	view, offset, ok := st.CompactionView()
	if !ok || offset != 40 {
		t.Fatalf("CompactionView: ok %v, offset %d", ok, offset)
	}
	got, _ := PlanCompaction(view, true)
	got.At += offset
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the window's plan differs:\n got %+v\nwant %+v", got, want)
	}
	noSummary := State{Messages: history("be brief", 200, 500)}
	if _, err := noSummary.Elide(noSummary.ElisionCut(2000)); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := noSummary.CompactionView(); ok {
		t.Fatal("a window without a summary cannot plan a compaction of the turns it left out")
	}
}
