package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// variants are the store settings the equivalence tests run under: the
// default, and a cache of one session with a snapshot after every batch, so
// that states are loaded from snapshots and tails all the time.
var variants = []struct {
	name string
	opts Options
}{
	{"default", Options{}},
	{"cold", Options{CacheSize: 1, SnapshotEvery: 1}},
}

// TestFoldEquivalence applies each recorded log in batches of every size, and
// the rich log in batches of many sizes, and checks that the rows read back as
// projection.Fold. To keep it fast, each batch size applies its own copy of the
// log (sessions renamed, sequences shifted) in one store.
func TestFoldEquivalence(t *testing.T) {
	t.Parallel()
	logs := recordedLogs(t)
	logs["rich"] = richLog(t, "s_rich")
	for name, evs := range logs {
		sizes := make([]int, 0, len(evs))
		for n := 1; n <= len(evs); n++ {
			sizes = append(sizes, n)
		}
		if name == "rich" {
			sizes = []int{1, 2, 3, 4, 5, 8, 13, 21, 34, 55, len(evs) - 1, len(evs)}
		}
		for _, v := range variants {
			t.Run(name+"/"+v.name, func(t *testing.T) {
				t.Parallel()
				s := openTest(t, v.opts)
				var copies [][]event.Event
				for i, n := range sizes {
					c := copyLog(evs, fmt.Sprintf("n%d", n), uint64(i*10000))
					apply(t, s, c, n)
					copies = append(copies, c)
				}
				for _, c := range copies {
					checkEquivalent(t, s, c)
				}
			})
		}
	}
}

// TestFoldEquivalenceInterleaved merges every log into one stream, as TAH_EVT
// interleaves sessions, and applies it in batches of many sizes, reopening the
// store between batches in one run.
func TestFoldEquivalenceInterleaved(t *testing.T) {
	t.Parallel()
	logs := recordedLogs(t)
	names := make([]string, 0, len(logs))
	for name := range logs {
		names = append(names, name)
	}
	sort.Strings(names)
	var all [][]event.Event
	for _, name := range names {
		all = append(all, logs[name])
	}
	all = append(all, richLog(t, "s_rich"), richLog(t, "s_rich2"))
	evs := merge(all...)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			s := openTest(t, v.opts)
			var copies [][]event.Event
			for i, n := range []int{1, 3, 8, 21, 55, len(evs)} {
				c := copyLog(evs, fmt.Sprintf("n%d", n), uint64(i*10000))
				apply(t, s, c, n)
				copies = append(copies, c)
			}
			for _, c := range copies {
				checkEquivalent(t, s, c)
			}
		})
	}
	t.Run("reopen", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "data.db")
		for i := 0; i < len(evs); i += 7 {
			s := openAt(t, path, Options{})
			apply(t, s, evs[i:min(i+7, len(evs))], 7)
			s.Close()
		}
		s := openAt(t, path, Options{})
		checkEquivalent(t, s, evs)
	})
}

// TestRedeliveryChangesNothing applies a stream, then delivers it again in
// other batches, overlapping and whole: nothing changes and all is skipped.
func TestRedeliveryChangesNothing(t *testing.T) {
	ctx := context.Background()
	evs := merge(richLog(t, "s_a"), richLog(t, "s_b"), recordedLogs(t)["spec_example"])
	s := openTest(t, Options{})
	apply(t, s, evs, 10)
	before := dump(t, s.Path())
	stats := s.Stats()

	for _, n := range []int{1, 7, len(evs)} {
		for i := 0; i < len(evs); i += n {
			batch := evs[i:min(i+n, len(evs))]
			res, err := s.Apply(ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			if res.Skipped != len(batch) || res.Applied != 0 || len(res.Problems) != 0 || res.MessageRows != 0 {
				t.Fatalf("redelivered batch at %d: %+v", i, res)
			}
			if res.Position != uint64(len(evs)) {
				t.Fatalf("position %d, want %d", res.Position, len(evs))
			}
		}
	}
	// A batch whose first half is old and second half new applies only the new.
	if got := dump(t, s.Path()); got != before {
		t.Fatalf("redelivery changed the rows:\n%s\nwas:\n%s", got, before)
	}
	after := s.Stats()
	if after.Applied != stats.Applied || after.MessageRows != stats.MessageRows || after.StepRows != stats.StepRows {
		t.Fatalf("redelivery applied or wrote something: %+v then %+v", stats, after)
	}

	// Redelivery after a restart: cold cache, same result.
	s.Close()
	s = openAt(t, s.Path(), Options{})
	apply(t, s, evs, 13)
	if got := dump(t, s.Path()); got != before {
		t.Fatal("redelivery after reopening changed the rows")
	}
	checkEquivalent(t, s, evs)
}

// TestPartlyRedeliveredBatch: a batch that overlaps what was applied applies
// only its new part.
func TestPartlyRedeliveredBatch(t *testing.T) {
	evs := richLog(t, "s_a")
	s := openTest(t, Options{})
	apply(t, s, evs[:20], 20)
	res, err := s.Apply(context.Background(), evs[10:30])
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != 10 || res.Applied+len(res.Problems) != 10 {
		t.Fatalf("%+v", res)
	}
	apply(t, s, evs[25:], 5)
	checkEquivalent(t, s, evs)
}

func TestBadEventsAreStoredAndReported(t *testing.T) {
	ctx := context.Background()
	good := newSession(t, "s_good", event.Config{SystemPrompt: "sys"}, nil)
	good.userTurn("hi")
	good.raw("agent.dreamed", `{"x":1}`)                                      // unknown type
	good.raw(event.LLMStarted, `{"step_id":""}`)                              // malformed: no step id
	good.raw(event.LLMStarted, `not json`)                                    // malformed JSON
	good.add(event.ToolFinished, event.ToolFinishedData{CallID: "c9"})        // inconsistent
	good.add(event.AgentFinished, event.AgentFinishedData{Content: "hello"})  // fine
	good.add(event.AgentFinished, event.AgentFinishedData{Content: "again!"}) // no turn running
	evs := good.events

	orphan := &sessionLog{t: t, id: "s_orphan", seq: 100}
	orphan.userTurn("before creation") // no session.created yet: rejected
	evs = append(evs, orphan.events...)
	invalid := &sessionLog{t: t, id: "bad.id", seq: 200}
	invalid.add(event.SessionCreated, event.SessionCreatedData{})
	evs = append(evs, invalid.events...)
	evs = append(evs, event.Event{Session: "s_good", Type: event.AgentFinished, Data: []byte(`{}`)}) // no sequence

	s := openTest(t, Options{})
	probs := apply(t, s, evs, 3)
	wantErrs := []error{event.ErrUnknownType, event.ErrMalformed, event.ErrMalformed, projection.ErrInconsistent,
		projection.ErrInconsistent, projection.ErrInconsistent, event.ErrInvalidSessionID, ErrNoSequence}
	if len(probs) != len(wantErrs) {
		t.Fatalf("%d problems, want %d: %v", len(probs), len(wantErrs), probs)
	}
	for i, p := range probs {
		if !errors.Is(p, wantErrs[i]) {
			t.Errorf("problem %d: %v, want %v", i, p, wantErrs[i])
		}
		if !strings.Contains(p.Error(), string(p.Type)) {
			t.Errorf("problem %d does not name its type: %v", i, p)
		}
	}
	if got := s.Stats().Rejected; got != int64(len(wantErrs)) {
		t.Errorf("stats count %d rejected, want %d", got, len(wantErrs))
	}

	row, err := s.GetSession(ctx, "s_good")
	if err != nil {
		t.Fatal(err)
	}
	if row.Rejected != 5 || row.Status != projection.StatusCompleted || row.LastOutput != "hello" {
		t.Fatalf("row: %+v", row)
	}
	stored, err := s.Events(ctx, "s_good", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(good.events) {
		t.Fatalf("%d events stored, want %d (every sequenced one)", len(stored), len(good.events))
	}
	for i, r := range stored {
		if r.Seq != good.events[i].Seq || r.Type != good.events[i].Type || string(r.Data) != string(good.events[i].Data) ||
			!r.Time.Equal(good.events[i].Time) {
			t.Fatalf("event %d read back as %+v, want %+v", i, r.Event, good.events[i])
		}
		if rejected := r.Error != ""; rejected != (i >= 2 && i <= 5 || i == 7) {
			t.Errorf("event %d (%s) error %q", i, r.Type, r.Error)
		}
	}
	if _, err := s.GetSession(ctx, "bad.id"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("invalid id: %v", err)
	}
	if ev, err := s.Events(ctx, "bad.id", 0, 0); err != nil || len(ev) != 1 || ev[0].Error == "" {
		t.Fatalf("invalid id's event: %v %v", ev, err)
	}

	// The orphan is created later: its row counts the event rejected before,
	// across a restart (the count was not in any row yet).
	s.Close()
	s = openAt(t, s.Path(), Options{})
	late := &sessionLog{t: t, id: "s_orphan", seq: 300}
	late.add(event.SessionCreated, event.SessionCreatedData{})
	apply(t, s, late.events, 1)
	row, err = s.GetSession(ctx, "s_orphan")
	if err != nil {
		t.Fatal(err)
	}
	if row.Rejected != 1 || row.Events != 1 {
		t.Fatalf("orphan row: %+v", row)
	}
	checkEquivalent(t, s, append(evs, late.events...))
}

func TestReusedSequenceIsReported(t *testing.T) {
	a := newSession(t, "s_a", event.Config{}, nil)
	b := newSession(t, "s_b", event.Config{}, nil) // also sequence 1
	s := openTest(t, Options{})
	apply(t, s, a.events, 1)
	res, err := s.Apply(context.Background(), b.events)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) != 1 || !errors.Is(res.Problems[0], ErrSequenceReused) {
		t.Fatalf("%+v", res)
	}
}

// TestPanicInFoldIsReported: a fold that panics half-way is a Problem, and the
// session's state is rebuilt without it.
func TestPanicInFoldIsReported(t *testing.T) {
	evs := richLog(t, "s_rich")
	for _, boom := range []uint64{3, 10, 30} {
		s := openTest(t, Options{})
		s.applyFn = func(st *projection.State, e event.Event) error {
			if e.Seq == boom {
				st.Messages = append(st.Messages[:1], llm.User("garbage"))
				st.Steps = nil
				panic("boom")
			}
			return projection.Apply(st, e)
		}
		probs := apply(t, s, evs, 8)
		var panics int
		for _, p := range probs {
			if errors.Is(p, ErrPanic) {
				panics++
			}
		}
		if panics != 1 {
			t.Fatalf("%d panics reported: %v", panics, probs)
		}
		var without []event.Event
		for _, e := range evs {
			if e.Seq != boom {
				without = append(without, e)
			}
		}
		// The panicking event is stored, rejected; the rows are the fold without it.
		st, err := s.State(context.Background(), "s_rich")
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "state", st, mustFold(t, without))
		msgs, _ := s.Messages(context.Background(), "s_rich")
		sameJSON(t, "messages", msgs, mustFold(t, without).Messages)
		steps, _ := s.Steps(context.Background(), "s_rich")
		sameJSON(t, "steps", steps, mustFold(t, without).Steps)
	}
}

func TestPosition(t *testing.T) {
	ctx := context.Background()
	evs := richLog(t, "s_a")
	s := openTest(t, Options{Consumer: "p1"})
	if p, err := s.Position(ctx, "p1"); err != nil || p != 0 {
		t.Fatalf("fresh position %d %v", p, err)
	}
	res, err := s.Apply(ctx, evs[:10])
	if err != nil || res.Position != 10 {
		t.Fatalf("%+v %v", res, err)
	}
	// An older batch does not move the position back.
	if res, err = s.Apply(ctx, evs[:3]); err != nil || res.Position != 10 {
		t.Fatalf("%+v %v", res, err)
	}
	if p, err := s.Position(ctx, "p1"); err != nil || p != 10 {
		t.Fatalf("position %d %v", p, err)
	}
	if p, err := s.Position(ctx, DefaultConsumer); err != nil || p != 0 {
		t.Fatalf("other consumer %d %v", p, err)
	}
}
