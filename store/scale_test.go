package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
)

// longSession is one session of about n events: turns of one tool call and an
// answer, with an automatic summary inserted before the current user message
// every 50 turns (an insertion near the end, as compaction does).
func longSession(t testing.TB, id string, n int) []event.Event {
	b := newSession(t, id, event.Config{SystemPrompt: "sys"}, nil)
	b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n1", Config: event.Config{SystemPrompt: "sys"}})
	msgs := 1
	for len(b.events) < n {
		b.userTurn(fmt.Sprintf("question %d", b.turn+1))
		msgs++
		if b.turn%50 == 0 {
			b.add(event.SummaryAdded, event.SummaryAddedData{Content: projection.SummaryPrefix + " up to " + fmt.Sprint(b.turn),
				At: msgs - 1, Turns: 49, Auto: true})
			msgs++
		}
		c := call(fmt.Sprintf("call_%d", b.turn), "read_file", `{"path":"README.md"}`)
		b.llm("", c).tool(c, "# README\nsome content of the file").llm("answer").finish("answer")
		msgs += 4
	}
	return b.events[:n]
}

// TestLongSessionCostStaysFlat applies a 10,000-event session in batches of
// 100 and checks that what a batch writes depends on the batch, not on the
// history: the message rows are those the batch added (plus the one a summary
// shifts), snapshots are few, and loading the state after a restart folds a
// bounded tail. Counts, not times, so that it holds on any machine.
func TestLongSessionCostStaysFlat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n, batch = 10000, 100
	evs := longSession(t, "s_long", n)
	s := openTest(t, Options{})
	s.verify = false // the full comparisons it adds are what this test rules out
	prevMsgs := 0
	for i := 0; i < n; i += batch {
		res, err := s.Apply(ctx, evs[i:i+batch])
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Problems) != 0 {
			t.Fatalf("problems: %v", res.Problems)
		}
		row, err := s.GetSession(ctx, "s_long")
		if err != nil {
			t.Fatal(err)
		}
		added := row.Messages - prevMsgs
		if res.MessageRows > added+2 {
			t.Fatalf("batch %d wrote %d message rows for %d new messages (history %d)", i/batch, res.MessageRows, added, row.Messages)
		}
		prevMsgs = row.Messages
	}
	st := s.Stats()
	if st.StepRows > int64(n) {
		t.Fatalf("%d step rows written for %d events", st.StepRows, n)
	}
	// Geometric snapshots: about log(n/128)/log(5/4) of them, not n/128.
	if st.Snapshots > 25 {
		t.Fatalf("%d snapshots for %d events", st.Snapshots, n)
	}
	t.Logf("%d events: %+v", n, st)

	// After a restart the state is the snapshot and a bounded tail.
	s.Close()
	s = openAt(t, s.Path(), Options{})
	more := longSession(t, "s_long", n+batch)[n:]
	if _, err := s.Apply(ctx, more); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Refolded; got > n/4+128 {
		t.Fatalf("reloading folded %d events again", got)
	}
	checkEquivalent(t, s, append(evs, more...))
}

// TestTailRowsOnlyWhereNoSnapshotHoldsThem: a batch writes a tail row for
// each event it folds, but none for the events of a session whose snapshot
// it writes (the snapshot holds them and prunes the tail at once), and a
// restarted store folds the tail after the last snapshot into the same
// state.
func TestTailRowsOnlyWhereNoSnapshotHoldsThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n, batch = 2000, 50
	evs := longSession(t, "s_tail", n)
	s := openTest(t, Options{})
	snapshots := 0
	for i := 0; i < n; i += batch {
		before := s.Stats()
		res, err := s.Apply(ctx, evs[i:i+batch])
		if err != nil || len(res.Problems) != 0 || res.Applied != batch {
			t.Fatalf("batch at %d: %+v, %v", i, res, err)
		}
		after := s.Stats()
		rows, snaps := after.TailRows-before.TailRows, after.Snapshots-before.Snapshots
		want := int64(batch)
		if snaps > 0 {
			want = 0
			snapshots++
		}
		if rows != want {
			t.Fatalf("batch at %d (%d snapshots) wrote %d tail rows, want %d", i, snaps, rows, want)
		}
	}
	if snapshots == 0 {
		t.Fatal("no snapshot written")
	}
	s.Close()
	s = openAt(t, s.Path(), Options{})
	more := longSession(t, "s_tail", n+batch)[n:]
	if _, err := s.Apply(ctx, more); err != nil {
		t.Fatal(err)
	}
	checkEquivalent(t, s, append(evs, more...))
}

// TestReadersBesideTheWriter runs readers of every kind while batches are
// applied (run it with -race): reads never fail, and each sees a consistent,
// committed history.
func TestReadersBesideTheWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	evs := merge(richLog(t, "s_a"), richLog(t, "s_b"), longSession(t, "s_long", 400))
	s := openTest(t, Options{Readers: 3})
	var done atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				if err := readAll(ctx, s); err != nil {
					errs <- err
					return
				}
				reads.Add(1)
			}
		}()
	}
	for i := 0; i < len(evs); i += 5 {
		if _, err := s.Apply(ctx, evs[i:min(i+5, len(evs))]); err != nil {
			t.Fatal(err)
		}
	}
	// Make sure the readers saw the final state too.
	for n := reads.Load(); reads.Load() < n+3 && len(errs) == 0; {
		if err := readAll(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkEquivalent(t, s, evs)
}

func readAll(ctx context.Context, s *Store) error {
	page, err := s.ListSessions(ctx, ListOptions{Limit: 10})
	if err != nil {
		return err
	}
	for _, id := range []string{"s_a", "s_b", "s_long"} {
		row, err := s.GetSession(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		st, err := s.State(ctx, id)
		if err != nil {
			return err
		}
		// The state was read in one transaction: it is a fold, whole, and never
		// older than a row read before it. (The message count is no measure: a
		// claim with an empty system prompt removes a message.)
		if st.LastSeq < row.LastSeq || (st.LastSeq == row.LastSeq && len(st.Messages) != row.Messages) {
			return fmt.Errorf("%s: state at %d is behind the row read before it at %d", id, st.LastSeq, row.LastSeq)
		}
		if err := llm.CheckPairing(projection.Repair(st.Messages)); err != nil {
			return fmt.Errorf("%s state: %w", id, err)
		}
		msgs, err := s.Messages(ctx, id)
		if err != nil {
			return err
		}
		if err := llm.CheckPairing(projection.Repair(msgs)); err != nil {
			return fmt.Errorf("%s messages: %w", id, err)
		}
		if _, err := s.Steps(ctx, id); err != nil {
			return err
		}
		if _, err := s.ToolCalls(ctx, id); err != nil {
			return err
		}
	}
	_ = page
	return nil
}

// BenchmarkApplyStep applies one step's events (llm.started, llm.completed
// with a tool call, tool.started, tool.finished) per operation, in one
// transaction, to a session whose history grows with every operation, after a
// head start of the given number of steps.
func BenchmarkApplyStep(b *testing.B) {
	for _, head := range []int{0, 1000, 5000} {
		b.Run(fmt.Sprintf("history=%d", head), func(b *testing.B) {
			ctx := context.Background()
			s := openTest(b, Options{})
			s.verify = false
			sl := newSession(b, "s_bench", event.Config{SystemPrompt: "sys"}, nil)
			sl.userTurn("go on forever")
			step := func() {
				c := call(fmt.Sprintf("call_%d", sl.step), "read_file", `{"path":"a.go"}`)
				id := sl.nextStep()
				sl.add(event.LLMStarted, event.LLMStartedData{StepID: id, Turn: 1, RequestRef: ref(len(sl.events), "read_file")})
				sl.add(event.LLMCompleted, event.LLMCompletedData{StepID: id, Response: llm.Response{
					ToolCalls: []llm.ToolCall{c}, Usage: llm.Usage{InputTokens: 1200, OutputTokens: 40}}})
				sl.tool(c, "package a\n\nfunc A() {}\n")
			}
			for i := 0; i < head; i++ {
				step()
			}
			apply(b, s, sl.events, 400)
			for i := 0; i < b.N; i++ { // built before the timer: this measures the store only
				step()
			}
			evs := sl.events[len(sl.events)-4*b.N:]
			before := s.Stats()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Apply(ctx, evs[4*i:4*i+4]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			after := s.Stats()
			b.ReportMetric(float64(after.MessageRows-before.MessageRows)/float64(b.N), "msgrows/op")
			b.ReportMetric(float64(after.StepRows-before.StepRows)/float64(b.N), "steprows/op")
		})
	}
}

// BenchmarkApplyTurn applies turns of 200 tool steps, each turn a new
// session's, in transactions of 7 steps (28 events), as the projector's
// batches take them from a turn whose steps come every 0.7 ms: row 2 of the
// bench, the store's part of a step. The figures are per step.
//
//	go test -run NONE -bench ApplyTurn -benchmem ./store
func BenchmarkApplyTurn(b *testing.B) {
	const steps, perBatch = 200, 7
	// A context that can be done, as the projector's.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := openTest(b, Options{})
	s.verify = false
	var turns [][]event.Event
	for i := 0; i < b.N; i++ {
		sl := newSession(b, fmt.Sprintf("s_turn%05d", i), event.Config{SystemPrompt: "sys"}, nil)
		sl.userTurn(fmt.Sprintf("s_turn%05d %d", i, steps))
		for range steps {
			c := call(fmt.Sprintf("call_%d", sl.step), "noop", `{}`)
			id := sl.nextStep()
			sl.add(event.LLMStarted, event.LLMStartedData{StepID: id, Turn: 1, RequestRef: ref(len(sl.events), "noop")})
			sl.add(event.LLMCompleted, event.LLMCompletedData{StepID: id, Response: llm.Response{
				ToolCalls: []llm.ToolCall{c}, Usage: llm.Usage{InputTokens: 1200, OutputTokens: 40}}})
			sl.tool(c, "ok")
		}
		turns = append(turns, sl.events)
	}
	// Sequences of one stream (an event a record): each session's after
	// the previous one's.
	var seq uint64
	for _, evs := range turns {
		for j := range evs {
			seq++
			evs[j].Seq = seq
		}
	}
	b.ResetTimer()
	cpu0 := processCPU()
	for _, evs := range turns {
		for i := 0; i < len(evs); i += 4 * perBatch {
			if _, err := s.Apply(ctx, evs[i:min(i+4*perBatch, len(evs))]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*steps), "cpu-ns/step")
	st := s.Stats()
	rows := st.MessageRows + st.StepRows + st.ToolCallRows + st.TailRows
	b.ReportMetric(float64(rows)/float64(b.N*steps), "rows/step")
}

// processCPU is the CPU time (user + system) of the process so far: on a
// machine shared with other work, what a benchmark costs, where its wall
// time is what it waited for.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
