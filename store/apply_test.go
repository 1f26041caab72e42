package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// variants are the store settings the equivalence tests run under: the
// default, and a cache of one session with a snapshot after every batch, so
// that states are loaded from snapshots and tails all the time.
var variants = []struct {
	name string
	opts Options
}{
	{"default", Options{}},
	{"cold", Options{CacheSize: 1}},
}

// TestFoldEquivalence applies each recorded log in batches of every size, and
// the rich log in batches of many sizes, and checks that the rows read back as
// projection.Fold. To keep it fast, each batch size applies its own copy of the
// log (sessions renamed, sequences shifted) in one store.
func TestFoldEquivalence(t *testing.T) {
	t.Parallel()
	logs := recordedLogs(t)
	logs["rich"] = richLog(t, "s_rich")
	logs["budget"] = merge(budgetLog(t, "s_budget_failed", false), budgetLog(t, "s_budget_running", true))
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

// TestFoldEquivalenceInterleaved merges every log into one stream, as a shard of the log
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
	all = append(all, richLog(t, "s_rich"), richLog(t, "s_rich2"), budgetLog(t, "s_budget", true))
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
			if res.Positions[0] != uint64(len(evs)) {
				t.Fatalf("position %v, want %d", res.Positions, len(evs))
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

func TestBadEventsAreCountedAndReported(t *testing.T) {
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
	invalid := &sessionLog{t: t, id: "bad.id.x", seq: 200}
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
	// The read model folds what it can, and shows the session failed at the
	// first event its owner cannot fold.
	if row.Rejected != 5 || row.Status != projection.StatusFailed || row.LastOutput != "hello" ||
		row.Fault == nil || row.Fault.Code != projection.FaultCorruptLog || row.Fault.Seq != 3 || row.Fault.Type != "agent.dreamed" {
		t.Fatalf("row: %+v (fault %+v)", row, row.Fault)
	}
	if _, err := s.GetSession(ctx, "bad.id.x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("invalid id: %v", err)
	}
	// Why the last one was rejected is kept, for every session.
	for sid, want := range map[string]string{"s_good": "no turn", "bad.id.x": "not allowed"} {
		var why string
		if err := s.r.QueryRowContext(ctx, `SELECT last_error FROM rejections WHERE session_id = ?`, sid).Scan(&why); err != nil ||
			!strings.Contains(why, want) {
			t.Errorf("%s: last rejection %q (%v), want one saying %q", sid, why, err, want)
		}
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

// TestShardPositions: a log of several shards has a position per shard;
// sequences repeat across shards and the events of a record share one, and
// each is applied once; a store reopened for fewer shards than its positions
// name refuses to go on.
func TestShardPositions(t *testing.T) {
	ctx := context.Background()
	const shards = 4
	var logs [][]event.Event
	for _, sid := range []string{"s_shard_a", "s_shard_b", "s_shard_c"} {
		l := richLog(t, sid)
		// the session's records: two events each, sequences from 1 in its shard
		for i := range l {
			l[i].Seq, l[i].Index = uint64(i/2+1), i%2
		}
		logs = append(logs, l)
	}
	if wire.Shard("s_shard_a", shards) == wire.Shard("s_shard_b", shards) {
		t.Fatal("the test wants two sessions in different shards")
	}
	s := openTest(t, Options{Shards: shards})
	var all []event.Event
	for i := 0; ; i += 2 {
		added := false
		for _, l := range logs {
			if i < len(l) {
				all = append(all, l[i:min(i+2, len(l))]...)
				added = true
			}
		}
		if !added {
			break
		}
	}
	// The projector applies whole records: split at one.
	half := len(all) / 2
	for all[half].Index != 0 {
		half++
	}
	apply(t, s, all[:half], 6)
	res, err := s.Apply(ctx, all) // the first half again: skipped
	if err != nil || res.Skipped != half || res.Applied+len(res.Problems) != len(all)-half {
		t.Fatalf("%+v %v", res, err)
	}
	want := make([]uint64, shards)
	for _, l := range logs {
		k := wire.Shard(l[0].Session, shards)
		want[k] = max(want[k], l[len(l)-1].Seq)
	}
	pos, err := s.Positions(ctx, DefaultConsumer)
	if err != nil || !slices.Equal(pos, want) || !slices.Equal(res.Positions, want) {
		t.Fatalf("positions %v (%v), result %v, want %v", pos, err, res.Positions, want)
	}
	for _, l := range logs {
		checkEquivalent(t, s, l)
	}
	s.Close()
	few := openAt(t, s.Path(), Options{Shards: 1})
	if _, err := few.Positions(ctx, DefaultConsumer); !errors.Is(err, ErrShardCount) {
		t.Fatalf("a store of one shard with positions in four: %v", err)
	}
}

// TestApplyThroughCopies: the positions a batch's reader moved past (copies
// of a record the stream stored twice, which fold nothing) commit with the
// batch, also with no events at all, and only forward; a restart starts after
// them.
func TestApplyThroughCopies(t *testing.T) {
	ctx := context.Background()
	const shards = 2
	l := richLog(t, "s_through")
	k := wire.Shard("s_through", shards)
	s := openTest(t, Options{Shards: shards})
	apply(t, s, l[:2], 2)
	at := l[1].Seq
	through := make([]uint64, shards)
	through[k] = at + 5 // the copy of the record at l[1]
	res, err := s.ApplyThrough(ctx, nil, through)
	if err != nil || res.Positions[k] != at+5 || res.Applied != 0 {
		t.Fatalf("no events through %v: %+v %v", through, res, err)
	}
	// The session's next records come after the copy; one more copy before
	// them in the same batch moves nothing back.
	next := slices.Clone(l[2:4])
	for i := range next {
		next[i].Seq += 10
	}
	through[k] = at + 7
	if res, err = s.ApplyThrough(ctx, next, through); err != nil || res.Positions[k] != next[len(next)-1].Seq || res.Applied != len(next) {
		t.Fatalf("events and a copy before them: %+v %v", res, err)
	}
	if _, err := s.ApplyThrough(ctx, nil, []uint64{1}); err == nil {
		t.Fatal("positions of one shard in a store of two taken")
	}
	s.Close()
	again := openAt(t, s.Path(), Options{Shards: shards})
	if pos, err := again.Positions(ctx, DefaultConsumer); err != nil || pos[k] != next[len(next)-1].Seq {
		t.Fatalf("positions after a restart %v (%v), want %d in shard %d", pos, err, next[len(next)-1].Seq, k)
	}
}

// TestPanicInFoldIsReported: a fold that panics half-way is a Problem, and the
// session's state is rebuilt without it.
func TestPanicInFoldIsReported(t *testing.T) {
	evs := richLog(t, "s_rich")
	for _, boom := range []uint64{3, 10, 30} {
		s := openTest(t, Options{})
		s.applyFn = func(st *projection.State, e event.Event, payload any) error {
			if e.Seq == boom {
				st.Messages = append(st.Messages[:1], llm.User("garbage"))
				st.Steps = nil
				panic("boom")
			}
			return applyDecoded(st, e, payload)
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
		// The panicking event is rejected; the rows are the fold without it.
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

func TestPositions(t *testing.T) {
	ctx := context.Background()
	evs := richLog(t, "s_a")
	s := openTest(t, Options{Consumer: "p1"})
	if p, err := s.Positions(ctx, "p1"); err != nil || !slices.Equal(p, []uint64{0}) {
		t.Fatalf("fresh positions %v %v", p, err)
	}
	res, err := s.Apply(ctx, evs[:10])
	if err != nil || res.Positions[0] != 10 {
		t.Fatalf("%+v %v", res, err)
	}
	// An older batch does not move the position back.
	if res, err = s.Apply(ctx, evs[:3]); err != nil || res.Positions[0] != 10 {
		t.Fatalf("%+v %v", res, err)
	}
	if p, err := s.Positions(ctx, "p1"); err != nil || p[0] != 10 {
		t.Fatalf("positions %v %v", p, err)
	}
	if p, err := s.Positions(ctx, DefaultConsumer); err != nil || p[0] != 0 {
		t.Fatalf("other consumer %v %v", p, err)
	}
}

// TestRowsOf: the VALUES list of an upsert is repeated whole, parentheses
// of its own (coalesce) included, and the rest of the statement kept.
func TestRowsOf(t *testing.T) {
	for _, tc := range []struct{ sql, want string }{
		{`INSERT INTO t (a, b) VALUES (?, ?) ON CONFLICT (a) DO NOTHING`,
			`INSERT INTO t (a, b) VALUES (?, ?), (?, ?) ON CONFLICT (a) DO NOTHING`},
		{`INSERT INTO t (a, b) VALUES (?, coalesce(?, '')) ON CONFLICT (a) DO UPDATE SET b = excluded.b`,
			`INSERT INTO t (a, b) VALUES (?, coalesce(?, '')), (?, coalesce(?, '')) ON CONFLICT (a) DO UPDATE SET b = excluded.b`},
	} {
		if got := rowsOf(tc.sql, 2); got != tc.want {
			t.Errorf("rowsOf(%q, 2)\n got %q\nwant %q", tc.sql, got, tc.want)
		}
	}
	for _, sql := range []string{messageUpsert, stepUpsert, callUpsert} {
		one, three := strings.Count(rowsOf(sql, 1), "?"), strings.Count(rowsOf(sql, 3), "?")
		if one != strings.Count(sql, "?") || three != 3*one {
			t.Errorf("rowsOf of %.40q...: %d and %d parameters for 1 and 3 rows", sql, one, three)
		}
	}
}

// TestEmptyTextReadsBackEmpty: the columns an empty string is written to as
// NULL (orNull, coalesce) hold the empty string and read back as such, when
// a row is inserted and when its upsert updates it (an event a batch: a
// step's row is written pending, then again completed).
func TestEmptyTextReadsBackEmpty(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	sl := newSession(t, "s_empty", event.Config{}, nil).userTurn("hello")
	c := call("call_1", "noop", `{}`)
	id := sl.nextStep()
	sl.add(event.LLMStarted, event.LLMStartedData{StepID: id, Turn: 1, RequestRef: ref(len(sl.events), "noop")})
	sl.add(event.LLMCompleted, event.LLMCompletedData{StepID: id, Response: llm.Response{ToolCalls: []llm.ToolCall{c}}})
	sl.tool(c, "ok")
	apply(t, s, sl.events, 1)
	var nulls int
	for _, q := range []string{
		`SELECT count(*) FROM messages WHERE content IS NULL OR tool_call_id IS NULL OR name IS NULL`,
		`SELECT count(*) FROM steps WHERE tool IS NULL OR call_id IS NULL OR output IS NULL OR content IS NULL
			OR error IS NULL OR code IS NULL OR child IS NULL`,
		`SELECT count(*) FROM tool_calls WHERE name IS NULL OR step_id IS NULL OR code IS NULL`,
	} {
		if err := s.w.QueryRowContext(ctx, q).Scan(&nulls); err != nil || nulls != 0 {
			t.Fatalf("%s: %d, %v", q, nulls, err)
		}
	}
	steps, err := s.Steps(ctx, "s_empty")
	if err != nil || len(steps) != 2 || steps[0].Error != "" || steps[0].Tool != "" || steps[1].Tool != "noop" {
		t.Fatalf("steps %+v, %v", steps, err)
	}
	if st := s.Stats(); st.StepRows <= int64(len(steps)) {
		t.Fatalf("%d step rows written for %d steps: no row was updated", st.StepRows, len(steps))
	}
}
