package tah_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// A Go user watches a turn's deltas and events through its Turn, and a
// session's events through a Watch, without reaching into the node.
func TestStartAndWatch(t *testing.T) {
	ctx := ctxT(t)
	rt := env{dir: t.TempDir(), provider: mock.Scripted(mock.Say("streamed answer").Always())}.start(t)
	s, err := tah.Get(rt, tah.SessionKey).Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	turn, err := s.Start(ctx, "hello", tah.WithDeltas(), tah.WithEvents())
	if err != nil {
		t.Fatal(err)
	}
	defer turn.Close()
	var text strings.Builder
	var types []event.Type
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ev := range turn.Events() {
			types = append(types, ev.Type)
		}
	}()
	for d := range turn.Deltas() {
		text.WriteString(d.Text)
	}
	wg.Wait()
	out, err := turn.Outcome(ctx)
	if err != nil || out.Status != tah.StateCompleted || text.String() != "streamed answer" {
		t.Fatalf("%+v %v, deltas %q", out, err, text.String())
	}
	if len(types) == 0 || types[len(types)-1] != event.AgentFinished {
		t.Fatalf("the turn's events: %v", types)
	}
	for {
		select {
		case ev := <-w.Events():
			if ev.Type == event.AgentFinished {
				return
			}
		case <-ctx.Done():
			t.Fatal("the watch did not see the turn end")
		}
	}
}

// List yields every session, over more than one page.
func TestListYieldsAllSessions(t *testing.T) {
	ctx := ctxT(t)
	rt := env{dir: t.TempDir(), provider: mock.Scripted(mock.Say("ok").Always())}.start(t)
	sessions := tah.Get(rt, tah.SessionKey)
	want := wire.ListMax + 3
	ids := map[string]bool{}
	for range want {
		s, err := sessions.Create(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids[s.ID()] = true
	}
	waitFor(t, "the read model to list them all", func() bool {
		n := 0
		for row, err := range sessions.List(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			if ids[row.ID] {
				n++
			}
		}
		return n == want
	})
}

// State and Snapshot read only what was appended since their last call.
func TestSnapshotReadsOnlyTheTail(t *testing.T) {
	ctx := ctxT(t)
	rt := env{dir: t.TempDir(), provider: mock.Scripted(mock.Say("ok").Always())}.start(t)
	s, err := tah.Get(rt, tah.SessionKey).Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var froms []uint64
	sub, err := rt.Node().Bus().Conn().Subscribe(wire.APISubject(wire.EndpointEvents), func(m *nats.Msg) {
		var req wire.EventsRequest
		_ = json.Unmarshal(m.Data, &req)
		mu.Lock()
		froms = append(froms, req.FromSeq)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := rt.Node().Bus().Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	first, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx, "two"); err != nil {
		t.Fatal(err)
	}
	if st, err := s.State(ctx); err != nil || st != tah.StateCompleted {
		t.Fatalf("state %s %v", st, err)
	}
	second, err := s.Snapshot(ctx)
	if err != nil || second.Turn != 2 || len(second.Messages) != len(first.Messages)+2 {
		t.Fatalf("turn %d, %d messages after %d: %v", second.Turn, len(second.Messages), len(first.Messages), err)
	}
	waitFor(t, "the requests seen", func() bool { mu.Lock(); defer mu.Unlock(); return len(froms) >= 3 })
	mu.Lock()
	defer mu.Unlock()
	if froms[0] != 0 || froms[1] != first.LastSeq+1 || froms[2] <= first.LastSeq {
		t.Fatalf("the events asked from %v; the first snapshot ended at %d", froms, first.LastSeq)
	}
}

// A session's artifacts are listed and fetched through the Go API.
func TestArtifactsThroughTheGoAPI(t *testing.T) {
	ctx := ctxT(t)
	big := strings.Repeat("x", 100_000) // over the executor's inline limit: kept whole as an artifact
	tool := tools.Func(tools.Spec{Name: "big"}, func(context.Context, json.RawMessage) (tools.Result, error) {
		return tools.Text(big), nil
	})
	rt := env{dir: t.TempDir(), provider: mock.Scripted(mock.CallTool("big", `{}`), mock.Say("done")), tools: []tools.Tool{tool}}.start(t)
	s, err := tah.Get(rt, tah.SessionKey).Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx, "go"); err != nil {
		t.Fatal(err)
	}
	arts, err := s.Artifacts(ctx)
	if err != nil || len(arts) != 1 || arts[0].Name != "output.txt" {
		t.Fatalf("%+v %v", arts, err)
	}
	var b strings.Builder
	if a, err := s.FetchArtifact(ctx, arts[0].ID, &b); err != nil || a.ID != arts[0].ID || b.String() != big {
		t.Fatalf("fetched %d bytes: %v", b.Len(), err)
	}
}
