package bench

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/wire"
)

// The helpers' tests are cheap; the benchmarks themselves run with make bench.

func TestSamplePercentiles(t *testing.T) {
	var s sample
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i))
	}
	if s.p50() != 50 || s.p99() != 99 || s.pct(100) != 100 || s.pct(0) != 1 {
		t.Fatalf("p50 %v p99 %v max %v min %v", s.p50(), s.p99(), s.pct(100), s.pct(0))
	}
	if (sample{}).p50() != 0 || medianDur([]time.Duration{3, 1, 2}) != 2 || median([]float64{1, 2, 3, 4}) != 2.5 {
		t.Fatal("empty or median")
	}
}

func TestStepGroupsAndIntervals(t *testing.T) {
	// Two steps as the loop writes them: a record per line.
	types := [][]event.Type{
		{event.TurnStarted, event.LLMStarted},
		{event.LLMCompleted, event.ToolStarted},
		{event.ToolFinished, event.LLMStarted},
		{event.LLMCompleted, event.AgentFinished},
		{event.CheckpointCreated},
	}
	recs := records(eventsOf(types))
	if len(recs) != 5 || len(recs[2]) != 2 || recordName(recs[1]) != "llm.completed+tool.started" {
		t.Fatalf("records %v", recs)
	}
	g := stepGroups(recs)
	if len(g) != 2 || g[0] != (span{0, 2}) || g[1] != (span{2, 5}) {
		t.Fatalf("groups %v", g)
	}
	if fullToolStep(flatten(recs[g[0].from:g[0].to])) || !has(flatten(recs[g[1].from:g[1].to]), event.ToolFinished) {
		t.Fatal("only a step with the previous tool's result and its own tool's start is a full tool step")
	}
	mid := flatten(recs[1:3])
	if len(mid) != 4 || !fullToolStep(mid) {
		t.Fatalf("a full tool step: %v", mid)
	}
	// A quick step in one record, then one whose tool's start was written
	// alone: two spans, the first a full step of four events.
	mixed := records(eventsOf([][]event.Type{
		{event.TurnStarted, event.LLMStarted},
		{event.LLMCompleted, event.ToolStarted, event.ToolFinished, event.LLMStarted},
		{event.LLMCompleted, event.ToolStarted},
		{event.ToolFinished, event.LLMStarted},
		{event.LLMCompleted, event.ToolStarted},
		{event.ToolFinished, event.LLMStarted},
		{event.LLMCompleted, event.AgentFinished},
	}))
	if g := stepGroups(mixed); !slices.Equal(g, []span{{0, 1}, {1, 2}, {2, 3}, {3, 5}, {5, 7}}) {
		t.Fatalf("mixed groups %v", g)
	}
	iv := intervals(recs)
	// After call 0 began: the record of its answer and the tool's start,
	// then the one of the tool's result and the next llm.started; after call
	// 1: the rest.
	if len(iv) != 2 || len(iv[0]) != 2 || iv[0][1] != 2 || len(iv[1]) != 2 {
		t.Fatalf("intervals %v", iv)
	}
}

// eventsOf makes the events of records of the types given, a record per
// line.
func eventsOf(types [][]event.Type) []event.Event {
	var evs []event.Event
	for seq, rec := range types {
		for i, ty := range rec {
			evs = append(evs, event.Event{Type: ty, Seq: uint64(seq + 1), Index: i})
		}
	}
	return evs
}

func TestFormat(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{fnum(1234567.4), "1,234,567"}, {fnum(999), "999"},
		{fdur(1500 * time.Nanosecond), "1.5 µs"}, {fdur(2345 * time.Microsecond), "2.35 ms"}, {fdur(3 * time.Second), "3 s"},
		{fbytes(3470), "3.47 KB"}, {fbytes(512), "512 B"}, {fratio(1.234), "1.23×"}, {fratio(117.4), "117×"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestTurnOf(t *testing.T) {
	c := llm.ToolCall{ID: "c1", Name: "noop"}
	msgs := []llm.Message{llm.User("s_a 9"), llm.Assistant("done"), llm.User(input("s_b", 4)),
		llm.Assistant("", c), {Role: llm.RoleTool, ToolCallID: "c1", Content: "ok"}}
	if sid, n, done := turnOf(msgs); sid != "s_b" || n != 4 || done != 1 {
		t.Fatalf("%s %d %d", sid, n, done)
	}
	if sid, n, done := turnOf(nil); sid != "" || n != 0 || done != 0 {
		t.Fatal("no messages")
	}
}

func TestFailoverReport(t *testing.T) {
	// A report written before row 7 was measured has a string there.
	var old Report
	if err := json.Unmarshal([]byte(`{"failover": "not measured: needs [cluster]"}`), &old); err != nil {
		t.Fatal(err)
	}
	if old.Failover == nil || old.Failover.NotMeasured == "" {
		t.Fatalf("old failover: %+v", old.Failover)
	}
	if rows := old.failoverRows(); len(rows) != 1 || !strings.Contains(rows[0].tah, "not measured") {
		t.Fatalf("old rows %+v", rows)
	}
	if rows := (&Report{}).failoverRows(); len(rows) != 1 || !strings.Contains(rows[0].tah, "not run") {
		t.Fatalf("rows without row 7: %+v", rows)
	}

	f := &FailoverResult{Kill: KillProcess, Durability: "fsync always", NodeTTL: 5 * time.Second, InputPinnedTTL: 5 * time.Second, InputAckWait: 8 * time.Second,
		Running: 2, Idle: 2, RunningP50: 7 * time.Second, RunningMax: 12 * time.Second, IdleP50: 5 * time.Second, IdleMax: 6 * time.Second,
		SurvivorFences: []FenceAt{{Node: "node0", After: 4 * time.Second}}, TakenBy: map[string]int{"node0": 4}}
	b, err := json.Marshal(&Report{Failover: f})
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Failover.RunningMax != f.RunningMax || back.Failover.SurvivorFences[0].Node != "node0" {
		t.Fatalf("round trip: %+v", back.Failover)
	}
	rows := back.failoverRows()
	if len(rows) != 2 || rows[0].tah != "7 s / 12 s" || !strings.HasPrefix(rows[0].verdict, "missed: p50 7 s, max 12 s") || !strings.Contains(rows[0].verdict, "fenced") {
		t.Fatalf("rows %+v", rows)
	}
	if f.boundRunning() != 8*time.Second || f.boundIdle() != 6*time.Second {
		t.Fatalf("bounds %v %v", f.boundRunning(), f.boundIdle())
	}
	md := back.markdown(back.Table())
	for _, want := range []string{"Row 7, a dead node's sessions", "missed: p50 7 s, max 12 s", "fenced themselves"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}

	// The cut-off case goes beside the kill, with its signal and whether the
	// continued victim was fenced.
	cut := *f
	cut.Kill, cut.SurvivorFences, cut.Signal, cut.ReadTimeouts = KillStop, nil, signalSilence, 3
	cut.Signals = []FoSignal{{Node: "node0", What: "partitions changed: added [1]", After: 5 * time.Second}}
	cut.Stopped, cut.VictimFenced, cut.VictimRefused = 40*time.Second, 30*time.Millisecond, 2
	back.FailoverCut = &cut
	rows = back.failoverRows()
	if len(rows) != 4 || !strings.Contains(rows[2].measure, "cut off (SIGSTOP") || !strings.Contains(rows[2].verdict, "signal: silence (NodeTTL)") ||
		!strings.Contains(rows[2].verdict, "fenced itself 30 ms later, 0 writes (2 appends refused)") {
		t.Fatalf("rows with the cut-off case %+v", rows)
	}
	md = back.markdown(back.Table())
	for _, want := range []string{"Row 7, an owner cut off (no FIN)", "timed out 3 times", "node0 at 5 s: partitions changed"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

// The presence tracker sees when the survivors share the partitions, each
// once, and when both list the same ones.
func TestPresenceTracker(t *testing.T) {
	pr := &presenceTracker{parts: 4, killed: "n2", last: map[string]wire.NodeRecord{}, heard: map[string]time.Time{}}
	hear := func(r wire.NodeRecord) {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		pr.heardMsg(&nats.Msg{Data: b})
	}
	hear(wire.NodeRecord{Node: "n0", Partitions: []int{0}})
	hear(wire.NodeRecord{Node: "n1", Partitions: []int{1}})
	hear(wire.NodeRecord{Node: "n2", Partitions: []int{2, 3}})
	if age := pr.killedAt(time.Now()); age <= 0 {
		t.Fatalf("heartbeat age %v", age)
	}
	if pr.settled(0) {
		t.Fatal("settled while partitions 2 and 3 have no survivor")
	}
	hear(wire.NodeRecord{Node: "n0", Partitions: []int{0, 2, 3}})
	hear(wire.NodeRecord{Node: "n1", Partitions: []int{1, 2}}) // both list 2
	if p := pr.result(); p.doubleMax != 1 || p.rebalanced != 0 {
		t.Fatalf("double: %+v", p)
	}
	hear(wire.NodeRecord{Node: "n1", Partitions: []int{1}})
	if p := pr.result(); p.rebalanced <= 0 || !pr.settled(0) || pr.settled(time.Hour) {
		t.Fatalf("rebalanced: %+v", p)
	}
	hear(wire.NodeRecord{Node: "n2", Partitions: []int{2}}) // the killed node, heard late: ignored
	if !pr.settled(0) {
		t.Fatal("the killed node's late presence counted")
	}
}
