package store

import (
	"context"
	"encoding/json"
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
	// A snapshot a batch, which holds no list that has rows: its size does
	// not grow with the history.
	if st.Snapshots != n/batch {
		t.Fatalf("%d snapshots for %d batches", st.Snapshots, n/batch)
	}
	var size int
	if err := s.w.QueryRowContext(ctx, `SELECT length(state) FROM snapshots WHERE session_id = 's_long'`).Scan(&size); err != nil {
		t.Fatal(err)
	}
	if size > 4096 {
		t.Fatalf("the snapshot of a %d-event session is %d bytes", n, size)
	}
	t.Logf("%d events: %+v; snapshot %d B", n, st, size)

	// After a restart the state is the snapshot and its rows: nothing to fold again.
	s.Close()
	s = openAt(t, s.Path(), Options{})
	more := longSession(t, "s_long", n+batch)[n:]
	if _, err := s.Apply(ctx, more); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Refolded; got != 0 {
		t.Fatalf("reloading folded %d events again", got)
	}
	checkEquivalent(t, s, append(evs, more...))
}

// TestSnapshotOfAnOlderBuild: a read model written by a build whose
// snapshots held the whole state, lists included, at a geometric cadence,
// with the events after the snapshot in the table tail, is read on: the
// state is that snapshot and its tail folded, the next batch writes the new
// form and prunes the tail, and every read agrees with the fold.
func TestSnapshotOfAnOlderBuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n, applied, at = 600, 400, 250
	evs := longSession(t, "s_old", n)
	s := openTest(t, Options{})
	apply(t, s, evs[:applied], 50)

	// The older build's rows: a whole state at the record that ends at
	// event at-1, the events after it in the tail.
	var old projection.State
	for _, e := range evs[:at] {
		if err := projection.Apply(&old, e); err != nil {
			t.Fatal(err)
		}
	}
	if evs[at].Seq == evs[at-1].Seq {
		t.Fatal("the snapshot must end at a record's end")
	}
	whole, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `UPDATE snapshots SET seq = ?, state = ? WHERE session_id = 's_old'`, int64(old.LastSeq), string(whole)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs[at:applied] {
		if _, err := s.w.ExecContext(ctx, `INSERT INTO tail (session_id, seq, idx, type, time, epoch, data) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			e.Session, int64(e.Seq), e.Index, string(e.Type), formatTime(e.Time), int64(e.Epoch), string(e.Data)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	s = openAt(t, s.Path(), Options{})
	checkEquivalent(t, s, evs[:applied]) // read as the older build left it
	before := s.Stats()
	apply(t, s, evs[applied:], 50)
	if got := s.Stats().Refolded - before.Refolded; got != applied-at {
		t.Fatalf("loading folded %d events, want the tail's %d", got, applied-at)
	}
	var tail int
	if err := s.w.QueryRowContext(ctx, `SELECT count(*) FROM tail`).Scan(&tail); err != nil {
		t.Fatal(err)
	}
	if tail != 0 {
		t.Fatalf("%d rows left in the tail", tail)
	}
	checkEquivalent(t, s, evs)
	s.Close()
	s = openAt(t, s.Path(), Options{})
	checkEquivalent(t, s, evs)
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
