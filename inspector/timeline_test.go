package inspector

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
)

// recorded folds one of projection's recorded logs into a timeline.
func recorded(t *testing.T, name string) *timeline {
	t.Helper()
	return recordedWith(t, name, nil)
}

// recordedWith folds a recorded log, each event's data replaced by what
// edit returns for its sequence (nil: as recorded).
func recordedWith(t *testing.T, name string, edit map[uint64]string) *timeline {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "projection", "testdata", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tl := &timeline{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var e event.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if d, ok := edit[e.Seq]; ok {
			e.Data = json.RawMessage(d)
		}
		tl.add(e)
	}
	return tl
}

// The blocks of recorded logs: turns with their steps and outcomes, notes
// where compactions and a fork happened, the same steps as the fold's.
func TestTimeline(t *testing.T) {
	tl := recorded(t, "cancel_repair_compact")
	var turns, notes []string
	steps := 0
	for _, b := range tl.blocks {
		if b.Turn > 0 {
			turns = append(turns, string(b.Status))
		}
		for _, it := range b.Items {
			if it.Note != "" {
				notes = append(notes, it.Note)
			} else {
				steps++
			}
		}
	}
	if strings.Join(turns, ",") != "completed,cancelled,completed" || steps != len(tl.state.Steps) {
		t.Errorf("turns %v, %d steps placed of %d", turns, steps, len(tl.state.Steps))
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "context compacted") {
		t.Errorf("notes %q", notes)
	}
	fork := recorded(t, "fork_and_unknown")
	if b := fork.blocks[0]; b.Turn != 0 || !strings.Contains(b.Items[0].Note, "forked from") {
		t.Errorf("a fork's first block: %+v", b)
	}
	if fork.foldErr == nil || !strings.Contains(fork.foldErr.Error(), "agent.dreamed") {
		t.Errorf("an unknown event: %v", fork.foldErr)
	}
}

// Every recorded log renders as a page, its steps and notes in it.
func TestSessionPageRenders(t *testing.T) {
	if _, err := New(Options{}); !errors.Is(err, ErrNoClient) {
		t.Fatalf("New without a client: %v", err)
	}
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"spec_example", "budget_trim_maxsteps", "cancel_repair_compact", "fork_and_unknown"} {
		tl := recorded(t, name)
		var b strings.Builder
		if err := pages.ExecuteTemplate(&b, "session.html", page{Title: "x", Data: tl.sessionView(tl.state.ID)}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, st := range tl.state.Steps {
			if !strings.Contains(b.String(), `id="step-`+st.ID+`"`) {
				t.Errorf("%s: step %s is not on the page", name, st.ID)
			}
		}
		if name == "budget_trim_maxsteps" && (!strings.Contains(b.String(), "History trimmed") || !strings.Contains(b.String(), "compaction failed")) {
			t.Errorf("%s: the trim or the failed compaction is not on the page", name)
		}
	}
}

// An automatic compaction's model call is a step of its turn, before its
// note; a turn's tokens are agent.finished's usage when it records the
// session's apart, and otherwise what the fold counted for the turn, the
// compaction's included.
func TestCompactionStepAndTurnTokens(t *testing.T) {
	compacted := `{"sessionId":"s_budget","turns":5,"chars":60,"auto":true,"step_id":"cmp6","model":"m","usage":{"input_tokens":100,"output_tokens":20}}`
	tl := recordedWith(t, "budget_trim_maxsteps", map[uint64]string{47: compacted})
	turn6 := tl.blocks[len(tl.blocks)-1]
	var order []string
	for _, it := range turn6.Items {
		order = append(order, it.StepID+it.Note)
	}
	if turn6.Turn != 6 || len(order) < 3 || order[len(order)-3] != "cmp6" || !strings.HasPrefix(order[len(order)-2], "context compacted") {
		t.Fatalf("turn 6's items: %q", order)
	}
	if st := tl.state.Step("cmp6"); st == nil || !st.Compaction {
		t.Fatalf("the compaction step: %+v", st)
	}
	var want llm.Usage // turn 6's model calls, the compaction's 100 in / 20 out included
	for _, st := range tl.state.Steps {
		if st.Turn == 6 && st.Response != nil {
			want = want.Add(st.Response.Usage)
		}
	}
	if u := turn6.Usage; u != want || u.InputTokens < 100 {
		t.Errorf("turn 6's tokens from an agent.finished without session_usage: %+v, want %+v", u, want)
	}
	finished := `{"turn":6,"content":"summarised","steps":1,"usage":{"input_tokens":7,"output_tokens":3},"session_usage":{"input_tokens":900,"output_tokens":90}}`
	tl = recordedWith(t, "budget_trim_maxsteps", map[uint64]string{47: compacted, 50: finished})
	if u := tl.blocks[len(tl.blocks)-1].Usage; u.InputTokens != 7 || u.OutputTokens != 3 {
		t.Errorf("turn 6's tokens from its agent.finished: %+v", u)
	}
	var b strings.Builder
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	if err := pages.ExecuteTemplate(&b, "session.html", page{Data: tl.sessionView(tl.state.ID)}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `<span class="kind">compaction</span>`) || !strings.Contains(b.String(), "100 in / 20 out</span>") || !strings.Contains(b.String(), "7 in / 3 out") {
		t.Errorf("the compaction step or the turn's tokens are not on the page:\n%s", b.String())
	}
}

// A fork at a step: its open turn is a turn of its own (the steps a resume
// added in it), the edit a note that says what changed, and the page
// renders.
func TestTimelineForkAtAStep(t *testing.T) {
	tl := recorded(t, "fork_at_step_edit")
	if tl.foldErr != nil {
		t.Fatal(tl.foldErr)
	}
	var turns, notes []string
	steps := 0
	for _, b := range tl.blocks {
		if b.Turn > 0 {
			turns = append(turns, string(b.Status))
		}
		for _, it := range b.Items {
			if it.Note != "" {
				notes = append(notes, it.Note)
			} else {
				steps++
			}
		}
	}
	if strings.Join(turns, ",") != "completed,completed" || steps != len(tl.state.Steps) {
		t.Errorf("turns %v, %d steps placed of %d", turns, steps, len(tl.state.Steps))
	}
	all := strings.Join(notes, "\n")
	for _, want := range []string{"forked from s_example", "copied up to the source's step st4", `edited the result of call call_2 (message 5): "# TAH\nDurable agents." → "# TAH\nAn edited README." by alice`} {
		if !strings.Contains(all, want) {
			t.Errorf("notes %q lack %q", all, want)
		}
	}
	if !strings.Contains(renderPage(t, tl), "An edited README") {
		t.Error("the edit is not on the page")
	}
}

// A turn's page says who sent its input and who cancelled it, as the log
// recorded them from the inputs' subjects (turn.started's and
// agent.cancelled's by); a log that names nobody shows nobody.
func TestTurnSaysWhoRanAndCancelled(t *testing.T) {
	tl := recordedWith(t, "cancel_repair_compact", map[uint64]string{
		7:  `{"turn":2,"message":{"role":"user","content":"second"},"by":"alice"}`,
		11: `{"turn":2,"reason":"cancelled by the user","by":"bob"}`,
	})
	page := renderPage(t, tl)
	for _, want := range []string{"second <span class=\"muted by\" title=\"the credential that sent this input\">from alice</span>", "Turn cancelled by bob: cancelled by the user"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Count(page, `class="muted by"`) != 1 {
		t.Errorf("turns whose input names no sender show one")
	}
}
