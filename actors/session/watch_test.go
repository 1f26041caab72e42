package session

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// watches records what a node's Watch saw: the watchers opened (restarted
// or not) and how their work ended.
type watches struct {
	mu     sync.Mutex
	opened []bool
	ended  []projection.Status
	text   string
}

func (w *watches) watch(_ string, c *event.Caller, restarted bool, _ *projection.State) Watcher {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.opened = append(w.opened, restarted)
	return (*recording)(w)
}

type recording watches

func (r *recording) Event(*projection.State, event.Event) {}
func (r *recording) Delta(_ string, d llm.Delta) {
	r.mu.Lock()
	r.text += d.Text
	r.mu.Unlock()
}
func (r *recording) End(st *projection.State, _ error) {
	r.mu.Lock()
	r.ended = append(r.ended, st.Status)
	r.mu.Unlock()
}

// TestTakenOverTurnStreamsOnce: a turn whose caller waits as a stream,
// interrupted by its node's stop, is resumed by the next owner before its
// input comes back (a node that takes partitions over resumes open turns
// at once). The input, an if_idle run, is then neither refused as busy nor
// answered a second time: the caller's stream restarts once and ends once.
func TestTakenOverTurnStreamsOnce(t *testing.T) {
	b := openBus(t)
	Create(context.Background(), b, "s1", Config{}, nil)
	m1 := newManager(t, b, mock.Scripted(mock.Say("never").After(time.Hour)), Config{Node: "n1"})
	cmd := run("question")
	cmd.InputID, cmd.IfIdle = "in-1", true
	cmd.Caller = &event.Caller{Protocol: wire.ReplyAgents, ReplyTo: "_INBOX.x"}
	cmd.Done = func(Outcome) {}
	if err := m1.Deliver("s1", &cmd); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(fold(t, b, "s1").Steps) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("llm step never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := m1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	w := &watches{}
	m2 := newManager(t, b, mock.Scripted(mock.Stream("the ", "answer").After(200*time.Millisecond)), Config{Node: "n2", Watch: w.watch})
	resumed := make(chan Outcome, 1)
	if err := m2.Deliver("s1", &Command{Kind: wire.CommandResume, Done: func(o Outcome) { resumed <- o }}); err != nil {
		t.Fatal(err)
	}
	again := cmd
	o := do(t, m2, "s1", again) // arrives while the resume loads or runs
	if o.Err != nil || o.Status != projection.StatusCompleted || o.Content != "the answer" {
		t.Fatalf("the redelivered input: %+v", o)
	}
	if r := <-resumed; r.Err != nil || r.Status != projection.StatusCompleted {
		t.Fatalf("the resume: %+v", r)
	}
	// Once more, later: still nothing streamed again.
	if o := do(t, m2, "s1", again); o.Err != nil || o.Turn != 1 {
		t.Fatalf("%+v", o)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.opened) != 1 || !w.opened[0] || len(w.ended) != 1 || w.ended[0] != projection.StatusCompleted || w.text != "the answer" {
		t.Fatalf("opened %v, ended %v, text %q: want one restarted stream ended once", w.opened, w.ended, w.text)
	}
}
