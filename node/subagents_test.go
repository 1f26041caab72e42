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
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
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
	return startSubAgentNode(t, ctx, m, session.SubAgent{Name: "researcher", Description: "Finds out about one thing.", SystemPrompt: "You research."})
}

// startSubAgentNode starts a node whose model is m and whose sessions may
// call defs, with a client of its admin.
func startSubAgentNode(t *testing.T, ctx context.Context, m llm.Provider, defs ...session.SubAgent) (*Node, *client.Client) {
	t.Helper()
	dir := t.TempDir()
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = dir, -1, 2
	n, err := Start(ctx, Options{Bus: cfg, Logger: slog.New(slog.DiscardHandler), Provider: m,
		Session: session.Config{SubAgents: defs}})
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
	t.Parallel()
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
	auditFamily(t, ctx, n, sid)
}

// auditFamily checks the links of sid's family (projection.AuditFamily):
// sid, its children, theirs.
func auditFamily(t *testing.T, ctx context.Context, n *Node, sid string) {
	t.Helper()
	logs := map[string][]event.Event{}
	for todo := []string{sid}; len(todo) > 0; {
		id := todo[0]
		todo = todo[1:]
		evs, _, err := n.bus.Replay(ctx, id, 1)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		logs[id] = evs
		var st projection.State
		projection.FoldLog(&st, evs)
		for _, s := range st.Steps {
			if s.Child != "" {
				todo = append(todo, s.Child)
			}
		}
	}
	if ps := projection.AuditFamily(logs); len(ps) > 0 {
		t.Fatalf("the family of %s (%d sessions):\n%s", sid, len(logs), ps)
	}
}

// A cancel of a parent whose children work cancels them: every call of the
// parent answered (cancelled), each child's turn cancelled.
func TestACancelledParentCancelsItsChildren(t *testing.T) {
	t.Parallel()
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
	auditFamily(t, ctx, n, sid)
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

// deep is a model whose every agent, given a task, hands a task on to a
// researcher, and answers with what came back; a parent's first answer
// calls researchers fan at once.
type deep struct {
	fan int

	mu       sync.Mutex
	requests []llm.Request
}

func (m *deep) Name() string { return "deep" }

func (m *deep) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	m.mu.Lock()
	m.requests = append(m.requests, req)
	m.mu.Unlock()
	last := req.Messages[len(req.Messages)-1]
	if last.Role == llm.RoleTool {
		return llm.Response{Content: "done: " + last.Content, FinishReason: llm.FinishStop}, nil
	}
	n := 1
	if req.Messages[0].Content != "You research." {
		n = m.fan
	}
	var calls []llm.ToolCall
	for i := range n {
		calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: "agent_researcher", Arguments: json.RawMessage(`{"task": "go deeper"}`)})
	}
	return llm.Response{FinishReason: llm.FinishToolCalls, ToolCalls: calls}, nil
}

// Sub-agents nest 3 deep and fan out 8 at once: a parent's 9 calls make 8
// children (the ninth gets an error result), each child's call makes a
// grandchild, and so on to depth 3, where the model is offered no
// sub-agent and its call gets an error result that says why; every turn
// ends, every log is sound.
func TestSubAgentLimits(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := &deep{fan: session.MaxAgentFanOut + 1}
	n, c := startSubAgentNode(t, ctx, m, session.SubAgent{Name: "researcher", Description: "Finds out about one thing.", SystemPrompt: "You research."})
	r, err := c.Create(ctx, wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sid := r.Session
	turn, err := c.Run(ctx, sid, wire.Input{Text: "dig"})
	if err != nil {
		t.Fatal(err)
	}
	o, err := turn.Outcome(ctx)
	turn.Close()
	if err != nil || o.Status != projection.StatusCompleted {
		t.Fatalf("the parent's outcome: %+v, %v", o, err)
	}

	st := foldOf(t, ctx, n, sid)
	var refused []projection.Step
	for _, s := range st.Steps {
		if s.Type == projection.StepTool && s.Child == "" {
			refused = append(refused, s)
		}
	}
	// The refused call has no tool.started (no step): its result is a
	// tool-call record.
	var ninth *projection.ToolCallRecord
	for i := range st.ToolCalls {
		if st.ToolCalls[i].CallID == fmt.Sprintf("call_%d", session.MaxAgentFanOut) {
			ninth = &st.ToolCalls[i]
		}
	}
	if ninth == nil || ninth.Code != event.CodeInvalidInput || len(refused) != 0 {
		t.Fatalf("the call past the fan-out: %+v (steps without a child: %+v)", ninth, refused)
	}

	// Down one line of descent: depth 1, 2, 3; the last one's request
	// offered no sub-agent, and its call was refused.
	at := sid
	for depth := 1; depth <= session.MaxAgentDepth; depth++ {
		child := session.ChildID(at, "call_0")
		cst := foldOf(t, ctx, n, child)
		if cst.Parent == nil || cst.Parent.Depth != depth || cst.Status != projection.StatusCompleted {
			t.Fatalf("depth %d, %s: parent %+v, %s", depth, child, cst.Parent, cst.Status)
		}
		at = child
	}
	last := foldOf(t, ctx, n, at)
	if len(last.ToolCalls) != 1 || last.ToolCalls[0].Code != event.CodeInvalidInput || !strings.Contains(last.LastOutput, "nest 3 deep") {
		t.Fatalf("the deepest child's call: %+v, its answer %q", last.ToolCalls, last.LastOutput)
	}
	if evs, _, _ := n.bus.Replay(ctx, session.ChildID(at, "call_0"), 1); len(evs) > 0 {
		t.Fatalf("a session at depth %d was made", session.MaxAgentDepth+1)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	offeredNone := 0
	for _, req := range m.requests {
		has := false
		for _, tool := range req.Tools {
			has = has || tool.Name == "agent_researcher"
		}
		if !has {
			offeredNone++
		}
	}
	// The 8 sessions at depth 3 (one under each child) ask twice each (the
	// call, then the answer), offered no sub-agent; every other request
	// offers it.
	if want := 2 * session.MaxAgentFanOut; offeredNone != want {
		t.Fatalf("%d requests offered no sub-agent, want %d (those at depth %d)", offeredNone, want, session.MaxAgentDepth)
	}
	auditFamily(t, ctx, n, sid)
}

// foldOf is sid's state folded from its log.
func foldOf(t *testing.T, ctx context.Context, n *Node, sid string) projection.State {
	t.Helper()
	evs, _, err := n.bus.Replay(ctx, sid, 1)
	if err != nil {
		t.Fatalf("%s: %v", sid, err)
	}
	if rep := projection.Audit(evs); len(rep.Problems) > 0 {
		t.Fatalf("%s: %v\n%s", sid, rep.Problems, rep.Dump())
	}
	var st projection.State
	projection.FoldLog(&st, evs)
	return st
}

// A child that fails gives its parent's call an error result that says
// why, which the parent's model sees and answers from.
func TestAFailedSubAgentIsTheCallsError(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := mock.Scripted(
		mock.CallTool("agent_researcher", `{"task":"the tides"}`).OnPrompt("research"),
		mock.Say("").OnPrompt("the tides").ThenFail(400, "the tide table is closed"),
		mock.Say("the researcher could not find out").OnPrompt("research"),
	)
	_, c := startSubAgentNode(t, ctx, p, session.SubAgent{Name: "researcher", Description: "Finds out about one thing.", SystemPrompt: "You research."})
	r, err := c.Create(ctx, wire.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	turn, err := c.Run(ctx, r.Session, wire.Input{Text: "research the sea"})
	if err != nil {
		t.Fatal(err)
	}
	o, err := turn.Outcome(ctx)
	turn.Close()
	if err != nil || o.Status != projection.StatusCompleted || o.Content != "the researcher could not find out" {
		t.Fatalf("the parent's outcome: %+v, %v", o, err)
	}
	calls := p.Calls()
	last := calls[len(calls)-1].Messages
	result := last[len(last)-1]
	if result.Role != llm.RoleTool || !result.IsError || !strings.Contains(result.Content, "the sub-agent agent_researcher") ||
		!strings.Contains(result.Content, "the tide table is closed") {
		t.Fatalf("the parent's model was told %+v", result)
	}
}

// A sub-agent's definition limits its child: the child is offered only
// the tools it names (globs too, and no sub-agent it does not name), a call
// of another gets an error result that says which it may call, and each
// of its turns runs within the definition's budget (its session's own).
func TestASubAgentHasItsToolsAndBudget(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	text := func(name string) tools.Tool {
		return tools.Func(tools.Spec{Name: name}, func(context.Context, json.RawMessage) (tools.Result, error) { return tools.Text(name + "ed"), nil })
	}
	p := mock.Scripted(
		mock.CallTool("agent_researcher", `{"task":"the tides"}`).OnPrompt("research"),
		mock.CallTool("shout", `{}`).AndCall("echo_a", `{}`).OnPrompt("the tides"),
		mock.Say("echo_aed, no shouting").OnPrompt("the tides"),
		mock.Say("done").OnPrompt("research"),
	)
	dir := t.TempDir()
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = dir, -1, 2
	n, err := Start(ctx, Options{Bus: cfg, Logger: slog.New(slog.DiscardHandler), Provider: p,
		Tools: tools.MustRegistry(text("echo_a"), text("shout")),
		Session: session.Config{SubAgents: []session.SubAgent{{Name: "researcher", Description: "Finds out.", SystemPrompt: "You research.",
			Tools: []string{"echo_*"}, Budget: event.Limits{Tokens: 50_000}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	sid := "s_toolsandbudget01"
	if _, err := session.Create(ctx, n.bus, sid, session.Config{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := n.bus.PublishInput(ctx, sid, wire.Input{ID: "in_1", Command: wire.CommandRun, Text: "research the sea"}); err != nil {
		t.Fatal(err)
	}
	if err := pollState(ctx, n, sid, func(st projection.State) error {
		if st.Status != projection.StatusCompleted {
			return fmt.Errorf("the parent is %s", st.Status)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var kid string
	for _, s := range foldOf(t, ctx, n, sid).Steps {
		if s.Child != "" {
			kid = s.Child
		}
	}
	cst := foldOf(t, ctx, n, kid)
	if cst.Budget.Turn.Tokens != 50_000 || cst.LastOutput != "echo_aed, no shouting" {
		t.Fatalf("the child: budget %+v, answer %q", cst.Budget, cst.LastOutput)
	}
	codes := map[string]string{}
	for _, c := range cst.ToolCalls {
		codes[c.Name] = c.Code
	}
	if codes["shout"] != event.CodeUnknownTool || codes["echo_a"] != "" || len(codes) != 2 {
		t.Fatalf("the child's calls: %v", codes)
	}
	for _, m := range cst.Messages {
		if m.Role == llm.RoleTool && m.Name == "shout" && !strings.Contains(m.Content, "may call only echo_*") {
			t.Fatalf("the child's model was told %q", m.Content)
		}
	}
	for _, req := range p.Calls() {
		var names []string
		for _, tool := range req.Tools {
			names = append(names, tool.Name)
		}
		slices.Sort(names)
		want := []string{"agent_researcher", "echo_a", "shout"}
		if req.Messages[0].Content == "You research." {
			want = []string{"echo_a"}
		}
		if !slices.Equal(names, want) {
			t.Fatalf("a request of %q offered %v, want %v", req.Messages[0].Content, names, want)
		}
	}
}
