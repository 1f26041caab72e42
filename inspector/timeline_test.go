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
)

// recorded folds one of projection's recorded logs into a timeline.
func recorded(t *testing.T, name string) *timeline {
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
