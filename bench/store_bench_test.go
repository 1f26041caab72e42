package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/store"
)

// BenchmarkStoreCache applies one LLM step of one session per operation
// (four events in one transaction), taking 1,000 sessions in turn, as the
// projector does when 1,000 sessions are active, with the store's default
// state cache (256 sessions) and with one that holds them all. It shows the
// cost of the misses that row 3 profiles (store.loadState).
//
//	go test -run NONE -bench StoreCache ./bench
func BenchmarkStoreCache(b *testing.B) {
	const sessions = 1000
	for _, cache := range []int{256, 2 * sessions} {
		b.Run(fmt.Sprintf("cache=%d", cache), func(b *testing.B) {
			ctx := context.Background()
			s, err := store.OpenWith(ctx, filepath.Join(b.TempDir(), "cache.db"), store.Options{CacheSize: cache})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			g := &stepGen{msgs: make([][]llm.Message, sessions), steps: make([]int, sessions)}
			var pre []event.Event
			for i := range sessions {
				pre = append(pre, g.event(i, event.SessionCreated, event.SessionCreatedData{}),
					g.event(i, event.TurnStarted, event.TurnStartedData{Turn: 1, Message: llm.User("go")}))
				g.msgs[i] = []llm.Message{llm.User("go")}
			}
			if _, err := s.Apply(ctx, pre); err != nil {
				b.Fatal(err)
			}
			// Ten steps each first, so that a miss has a history to refold.
			for k := range 10 * sessions {
				if _, err := s.Apply(ctx, g.step(k%sessions)); err != nil {
					b.Fatal(err)
				}
			}
			before := s.Stats()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				evs := g.step(i % sessions)
				b.StartTimer()
				if _, err := s.Apply(ctx, evs); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			after := s.Stats()
			b.ReportMetric(float64(after.CacheMisses-before.CacheMisses)/float64(b.N), "misses/op")
			b.ReportMetric(float64(after.Refolded-before.Refolded)/float64(b.N), "refolded/op")
		})
	}
}

// stepGen writes the events of tool steps for numbered sessions.
type stepGen struct {
	seq   uint64
	msgs  [][]llm.Message
	steps []int
}

func (g *stepGen) event(i int, t event.Type, data any) event.Event {
	g.seq++
	e := event.MustNew(fmt.Sprintf("s_%05d", i), t, data)
	e.Seq, e.Time, e.Epoch = g.seq, time.Now(), 1
	return e
}

// step returns the next tool step of session i: llm.started with the
// session's messages as the request, llm.completed with a call, the call's
// tool.started and tool.finished.
func (g *stepGen) step(i int) []event.Event {
	g.steps[i]++
	id := fmt.Sprintf("llm1.%d", g.steps[i])
	c := llm.ToolCall{ID: fmt.Sprintf("call_%d", g.steps[i]), Name: "noop", Arguments: []byte(`{}`)}
	req := llm.Request{Messages: append([]llm.Message(nil), g.msgs[i]...)}
	g.msgs[i] = append(g.msgs[i], llm.Assistant("", c), llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Content: "ok"})
	return []event.Event{
		g.event(i, event.LLMStarted, event.LLMStartedData{StepID: id, Turn: 1, Request: req}),
		g.event(i, event.LLMCompleted, event.LLMCompletedData{StepID: id, Response: llm.Response{ToolCalls: []llm.ToolCall{c}}}),
		g.event(i, event.ToolStarted, event.ToolStartedData{StepID: "tool" + id, Call: c}),
		g.event(i, event.ToolFinished, event.ToolFinishedData{StepID: "tool" + id, CallID: c.ID, Name: "noop", Output: "ok"}),
	}
}
