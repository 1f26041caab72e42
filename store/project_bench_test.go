package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/wire"
)

// clusterLog is the log of a cluster under load, as a read model's projector
// tails it: sessions in shards shards, each running turns of one tool step
// (list_files) and a final answer, as the loop writes them (records of two
// events: turn.started + llm.started, llm.completed + tool.started,
// tool.finished + llm.started, llm.completed + agent.finished), the
// sessions' records interleaved at random (seeded: the same log every
// time). Records carry their shard's sequence, their events an index, as
// the tail delivers them.
func clusterLog(t testing.TB, sessions, turns, shards int) [][]event.Event {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, uint64(sessions)))
	type sess struct {
		b    *sessionLog
		recs [][]event.Event
	}
	all := make([]*sess, sessions)
	for i := range all {
		id := fmt.Sprintf("s_%016x", rng.Uint64())
		cfg := event.Config{SystemPrompt: "You are a helpful agent. Use the tools.", Model: "m"}
		b := newSession(t, id, cfg, map[string]string{"bench": "scale"})
		b.add(event.SessionClaimed, event.SessionClaimedData{Epoch: 1, Node: "n1", Config: cfg})
		s := &sess{b: b}
		s.recs = append(s.recs, b.events[0:1], b.events[1:2])
		for turn := range turns {
			n := len(b.events)
			b.userTurn(fmt.Sprintf("list the files of the project, please (%d)", turn))
			c := call(fmt.Sprintf("call_%d", turn), "list_files", `{"path":"."}`)
			st := b.nextStep()
			b.add(event.LLMStarted, event.LLMStartedData{StepID: st, Turn: b.turn, RequestRef: ref(len(b.events), "list_files")})
			b.add(event.LLMCompleted, event.LLMCompletedData{StepID: st, Response: llm.Response{
				ToolCalls: []llm.ToolCall{c}, Usage: llm.Usage{InputTokens: 310, OutputTokens: 12}}})
			ts := b.nextStep()
			b.add(event.ToolStarted, event.ToolStartedData{StepID: ts, Call: c})
			b.add(event.ToolFinished, event.ToolFinishedData{StepID: ts, CallID: c.ID, Name: c.Name,
				Output: "README.md\ngo.mod\ngo.sum\nmain.go\nmain_test.go\ninternal/\ndocs/\n", DurationMS: 1})
			st = b.nextStep()
			b.add(event.LLMStarted, event.LLMStartedData{StepID: st, Turn: b.turn, RequestRef: ref(len(b.events), "list_files")})
			b.add(event.LLMCompleted, event.LLMCompletedData{StepID: st, Response: llm.Response{
				Content: "The project holds README.md, go.mod, main.go and its test, internal/ and docs/.",
				Usage:   llm.Usage{InputTokens: 380, OutputTokens: 25}}})
			b.finish("The project holds README.md, go.mod, main.go and its test, internal/ and docs/.")
			for j := n; j < len(b.events); j += 2 {
				s.recs = append(s.recs, b.events[j:j+2])
			}
		}
		all[i] = s
	}
	// Interleave, numbering each record in its shard as the stream would.
	seq := make([]uint64, shards)
	next := make([]int, sessions)
	live := make([]int, sessions)
	for i := range live {
		live[i] = i
	}
	var out [][]event.Event
	for len(live) > 0 {
		j := rng.IntN(len(live))
		i := live[j]
		s := all[i]
		rec := s.recs[next[i]]
		next[i]++
		if next[i] == len(s.recs) {
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
		}
		k := wire.Shard(s.b.id, shards)
		seq[k]++
		r := make([]event.Event, len(rec))
		for x, e := range rec {
			e.Seq, e.Index = seq[k], x
			r[x] = e
		}
		out = append(out, r)
	}
	return out
}

// projectorBatches groups records as the node's projector does when it is
// behind the log: whole records, until a batch holds at least maxEvents.
func projectorBatches(recs [][]event.Event, maxEvents int) [][]event.Event {
	var out [][]event.Event
	var cur []event.Event
	for _, r := range recs {
		cur = append(cur, r...)
		if len(cur) >= maxEvents {
			out = append(out, cur)
			cur = nil
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// BenchmarkProject replays the log of a cluster's sessions (300, each
// running turns of a tool step and an answer, their records interleaved in
// 8 shards: bench row 9's load) into a read model in the projector's
// batches: of 512 events (the projector's bound, what it takes when it is
// behind) and of 32 (about what its linger of 5 ms gathers when it keeps
// up). An operation is a record; records/s is what one core of the
// projector applies.
//
//	go test -run NONE -bench Project -benchtime 20000x ./store
func BenchmarkProject(b *testing.B) {
	const sessions, shards = 300, 8
	for _, batch := range []int{4096, 512, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			// Enough turns for a warm-up and b.N records after it: 4
			// records a turn.
			turns := b.N/(4*sessions) + 2
			recs := clusterLog(b, sessions, turns, shards)
			// Warm up on the first part of the log (the sessions exist, the
			// cache holds them); time b.N records after it.
			warm := min(len(recs)/4, 4*sessions)
			recs = recs[:warm+b.N]
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := openTest(b, Options{Shards: shards})
			s.verify = false
			for _, evs := range projectorBatches(recs[:warm], batch) {
				if _, err := s.Apply(ctx, evs); err != nil {
					b.Fatal(err)
				}
			}
			batches := projectorBatches(recs[warm:], batch)
			n := len(recs) - warm
			b.ResetTimer()
			cpu0 := processCPU()
			for _, evs := range batches {
				res, err := s.Apply(ctx, evs)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Problems) > 0 {
					b.Fatal(res.Problems[0])
				}
			}
			b.StopTimer()
			cpu := processCPU() - cpu0
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/record")
		})
	}
}

// BenchmarkProjectLongSession applies one long session (longSession: turns
// of a tool step and an answer, a summary every 50 turns) in batches of 128
// events, as the projector follows one busy session (row 2 of make bench): what
// a batch costs must not grow with the history.
func BenchmarkProjectLongSession(b *testing.B) {
	const batch, warm = 128, 1024
	evs := longSession(b, "s_long", warm+max(b.N, batch))
	ctx := context.Background()
	s := openTest(b, Options{})
	s.verify = false
	for i := 0; i < warm; i += batch {
		if _, err := s.Apply(ctx, evs[i:i+batch]); err != nil {
			b.Fatal(err)
		}
	}
	evs = evs[warm:]
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < len(evs); i += batch {
		if _, err := s.Apply(ctx, evs[i:min(i+batch, len(evs))]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(len(evs)), "cpu-ns/event")
}
