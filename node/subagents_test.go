package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/wire"
)

// team is a model for a parent and its researchers: a researcher (its
// system prompt says so) answers "found: <task>", held while hold is set
// until release is closed; the parent first asks two researchers at once,
// then answers with what they found.
type team struct {
	hold    bool
	release chan struct{}
	started chan string // the tasks the researchers began

	mu    sync.Mutex
	tasks []string
}

func (m *team) Name() string { return "team" }

func (m *team) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if req.Messages[0].Content == "You research." {
		m.mu.Lock()
		m.tasks = append(m.tasks, last.Content)
		m.mu.Unlock()
		m.started <- last.Content
		if m.hold {
			select {
			case <-m.release:
			case <-ctx.Done():
				return llm.Response{}, ctx.Err()
			}
		}
		return llm.Response{Content: "found: " + last.Content, FinishReason: llm.FinishStop}, nil
	}
	if last.Role == llm.RoleTool {
		var found []string
		for _, msg := range req.Messages {
			if msg.Role == llm.RoleTool {
				found = append(found, msg.Content)
			}
		}
		slices.Sort(found)
		return llm.Response{Content: "summary: " + strings.Join(found, "; "), FinishReason: llm.FinishStop}, nil
	}
	return llm.Response{FinishReason: llm.FinishToolCalls, ToolCalls: []llm.ToolCall{
		{ID: "call_a", Name: "agent_researcher", Arguments: json.RawMessage(`{"task": "the weather"}`)},
		{ID: "call_b", Name: "agent_researcher", Arguments: json.RawMessage(`{"task": "the tides"}`)},
	}}, nil
}

func startTeam(t *testing.T, ctx context.Context, m *team) (*Node, *client.Client) {
	t.Helper()
	dir := t.TempDir()
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = dir, -1, 2
	n, err := Start(ctx, Options{Bus: cfg, Logger: slog.New(slog.DiscardHandler), Provider: m,
		Session: session.Config{SubAgents: []session.SubAgent{{Name: "researcher", Description: "Finds out about one thing.", SystemPrompt: "You research."}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	if err := n.StartAPI(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := client.Connect(ctx, client.Options{URL: n.bus.ClientURL(), CredsFile: auth.AdminCredsPath(dir)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return n, c
}

// A parent calls two sub-agents at once: each runs in a child session
// (linked to its call both ways), both answer, and the parent's answer
// uses both; every call is answered once.
func TestSubAgentsRunAsChildSessions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := &team{started: make(chan string, 8)}
	n, c := startTeam(t, ctx, m)
	r, err := c.Create(ctx, wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sid := r.Session
	turn, err := c.Run(ctx, sid, wire.Input{Text: "what about the sea?"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Follow(ctx, sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	o, err := turn.Outcome(ctx)
	turn.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The run's work ends with the turn waiting for its children (reply
	// awaiting_agents); the client follows the log to the turn's end.
	if o.Status != projection.StatusCompleted || o.Content != "summary: found: the tides; found: the weather" {
		t.Fatalf("the run's outcome: %+v", o)
	}
	for {
		var ev event.Event
		select {
		case ev = <-f.Events():
		case <-ctx.Done():
			t.Fatal("the parent's turn never finished")
		}
		if ev.Type == event.AgentFinished {
			break
		}
	}
	for _, call := range []string{"call_a", "call_b"} {
		child := session.ChildID(sid, call)
		evs, _, err := n.bus.Replay(ctx, child, 1)
		if err != nil {
			t.Fatal(err)
		}
		var st projection.State
		projection.FoldLog(&st, evs)
		if st.Parent == nil || st.Parent.Session != sid || st.Parent.CallID != call || st.Turn != 1 || st.Status != projection.StatusCompleted {
			t.Fatalf("child %s: parent %+v, turn %d %s", child, st.Parent, st.Turn, st.Status)
		}
	}
	evs, _, err := n.bus.Replay(ctx, sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rep := projection.Audit(evs); len(rep.Problems) > 0 {
		t.Fatalf("%v\n%s", rep.Problems, rep.Dump())
	}
	if got := len(m.tasks); got != 2 {
		t.Fatalf("the researchers ran %d times: %q", got, m.tasks)
	}
}

// A cancel of a parent whose children work cancels them: every call of the
// parent answered (cancelled), each child's turn cancelled.
func TestACancelledParentCancelsItsChildren(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := &team{hold: true, release: make(chan struct{}), started: make(chan string, 8)}
	n, c := startTeam(t, ctx, m)
	r, err := c.Create(ctx, wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sid := r.Session
	if _, err := c.Run(ctx, sid, wire.Input{Text: "what about the sea?"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-m.started:
		case <-ctx.Done():
			t.Fatal("the children never began")
		}
	}
	if _, err := c.Cancel(ctx, sid, "changed my mind"); err != nil {
		t.Fatal(err)
	}
	for _, call := range []string{"call_a", "call_b"} {
		child := session.ChildID(sid, call)
		err := pollState(ctx, n, child, func(st projection.State) error {
			if st.Status != projection.StatusCancelled {
				return fmt.Errorf("child %s is %s", child, st.Status)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	evs, _, err := n.bus.Replay(ctx, sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	rep := projection.Audit(evs)
	if len(rep.Problems) > 0 {
		t.Fatalf("%v\n%s", rep.Problems, rep.Dump())
	}
	var st projection.State
	projection.FoldLog(&st, evs)
	if st.Status != projection.StatusCancelled {
		t.Fatalf("the parent is %s", st.Status)
	}
}

// pollState folds sid's log until check passes, or ctx ends.
func pollState(ctx context.Context, n *Node, sid string, check func(projection.State) error) error {
	for {
		evs, _, err := n.bus.Replay(ctx, sid, 1)
		var last error = err
		if err == nil {
			var st projection.State
			projection.FoldLog(&st, evs)
			if last = check(st); last == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(50 * time.Millisecond):
		}
	}
}
