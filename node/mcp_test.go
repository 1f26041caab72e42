package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/mcp"
	"github.com/tah-dev/tah/tools/remote"
	"github.com/tah-dev/tah/wire"
)

// fakeServerEnv, set to KIND:DIR, makes the test binary an MCP server on
// stdio (runFakeServer); it leaves marks in DIR and reads its cues there.
const fakeServerEnv = "TAH_NODE_MCP_SERVER"

func TestMain(m *testing.M) {
	if v := os.Getenv(fakeServerEnv); v != "" {
		kind, dir, _ := strings.Cut(v, ":")
		runFakeServer(kind, dir)
		return
	}
	// Four tests at a time: most wait on their cluster (an election, a
	// redelivery, a node taken for dead). Measured on two cores beside
	// internal/clustertest, the package took 309 s one test at a time, 229 s
	// two at a time and 163 s four at a time, for the same CPU (about 190 s).
	bustest.WaitingTestsAtOnce(4)
	os.Exit(m.Run())
}

// flakyFailures is how many starts of the flaky server fail.
const flakyFailures = 3

// runFakeServer serves, by kind: good (the tool hello), many (100 tools),
// grow (its tools change while it runs and across a restart), slow (the tool
// echo, once the file DIR/go exists: a server slow to start, as npx on a
// cold cache), flaky (the tool hello, after its first flakyFailures starts
// exited with an error).
func runFakeServer(kind, dir string) {
	s := sdk.NewServer(&sdk.Implementation{Name: kind, Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	add := func(name string) {
		s.AddTool(&sdk.Tool{Name: name, Description: "answers " + name, InputSchema: obj, Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: kind + " " + name}}}, nil
			})
	}
	switch kind {
	case "good":
		add("hello")
	case "many":
		for i := range 100 {
			add(fmt.Sprintf("tool_%03d", i))
		}
	case "slow":
		// The bridge's initialize waits in the pipe meanwhile.
		for {
			if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		add("echo")
	case "flaky":
		starts, _ := filepath.Glob(filepath.Join(dir, "start-*"))
		_ = os.WriteFile(filepath.Join(dir, "start-"+strconv.Itoa(os.Getpid())), nil, 0o600)
		if len(starts) < flakyFailures {
			fmt.Fprintln(os.Stderr, "flaky: not this time")
			os.Exit(1)
		}
		add("hello")
	case "grow":
		starts, _ := filepath.Glob(filepath.Join(dir, "start-*"))
		_ = os.WriteFile(filepath.Join(dir, "start-"+strconv.Itoa(os.Getpid())), nil, 0o600)
		add("base")
		if len(starts) > 0 { // restarted: a tool it did not list before
			add("reborn")
		}
		s.AddTool(&sdk.Tool{Name: "add", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			add("added") // the SDK sends notifications/tools/list_changed
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "added"}}}, nil
		})
		s.AddTool(&sdk.Tool{Name: "drop", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			s.RemoveTools("base")
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "dropped"}}}, nil
		})
		s.AddTool(&sdk.Tool{Name: "die", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	}
	_ = s.Run(context.Background(), &sdk.StdioTransport{})
}

// mcpServers is the configuration of fake servers (server name: kind, or
// "missing": a command that is not there), each leaving its marks in dir.
func mcpServers(t *testing.T, dir string, servers map[string]string) mcp.Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mc := mcp.Config{Servers: map[string]mcp.ServerConfig{}}
	for name, kind := range servers {
		if kind == "missing" {
			mc.Servers[name] = mcp.ServerConfig{Command: filepath.Join(dir, "no-such-server")}
		} else {
			mc.Servers[name] = mcp.ServerConfig{Command: exe, Env: map[string]string{fakeServerEnv: kind + ":" + dir}}
		}
	}
	return mc
}

// records is a log handler that keeps the messages of the records at or
// above level and tells waiters of each.
type records struct {
	level slog.Level
	mu    sync.Mutex
	msgs  []slog.Record
	added chan struct{}
}

func newRecords(level slog.Level) *records { return &records{level: level, added: make(chan struct{})} }

func (r *records) Enabled(_ context.Context, l slog.Level) bool { return l >= r.level }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Clone())
	close(r.added)
	r.added = make(chan struct{})
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// count is how many records of level have a message containing substr,
// and a channel closed at the next record.
func (r *records) count(level slog.Level, substr string) (int, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.msgs {
		if rec.Level == level && strings.Contains(rec.Message, substr) {
			n++
		}
	}
	return n, r.added
}

// waitRecord waits for a record of level whose message contains substr.
func (r *records) waitRecord(ctx context.Context, t *testing.T, level slog.Level, substr string) {
	t.Helper()
	for {
		n, added := r.count(level, substr)
		if n > 0 {
			return
		}
		select {
		case <-added:
		case <-ctx.Done():
			t.Fatalf("no record %q", substr)
		}
	}
}

// mcpNode starts a node whose MCP servers are servers (see mcpServers),
// quick to restart, that logs to log.
func mcpNode(ctx context.Context, t *testing.T, dir string, servers map[string]string, p llm.Provider, log *slog.Logger) *Node {
	t.Helper()
	cfg := bus.Default()
	cfg.DataDir, cfg.Port = t.TempDir(), -1
	mc := &MCPConfig{Servers: mcpServers(t, dir, servers), DataDir: cfg.DataDir,
		Bridge: mcp.Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, KeepAlive: -1}}
	n, err := Start(ctx, Options{Bus: cfg, Provider: p, Logger: log, MCP: mc,
		RemoteTools: &remote.Config{DiscoveryQuiet: 50 * time.Millisecond, ServiceWait: time.Minute, Logger: log},
		Session:     session.Config{Node: "n1", Logger: log}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n
}

// runTurn runs a turn of a new session sid that says "go", and returns its
// outcome.
func runTurn(ctx context.Context, t *testing.T, n *Node, sid string, started func()) session.Outcome {
	t.Helper()
	if _, err := session.Create(ctx, n.bus, sid, session.Config{}, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan session.Outcome, 1)
	if err := n.sessions.Deliver(sid, &session.Command{Kind: wire.CommandRun, InputID: "in_" + sid, Message: llm.User("go"),
		Done: func(o session.Outcome) { done <- o }}); err != nil {
		t.Fatal(err)
	}
	if started != nil {
		started()
	}
	select {
	case o := <-done:
		return o
	case <-ctx.Done():
		t.Fatal("the turn did not end")
	}
	return session.Outcome{}
}

// toolOutput is the output the model was given for the call of tool, in
// the requests p received.
func toolOutput(p *mock.Provider, tool string) (string, bool) {
	ids := map[string]bool{}
	for _, req := range p.Calls() {
		for _, m := range req.Messages {
			for _, c := range m.ToolCalls {
				if c.Name == tool {
					ids[c.ID] = true
				}
			}
			if m.Role == llm.RoleTool && ids[m.ToolCallID] {
				return m.Content, true
			}
		}
	}
	return "", false
}

// offered reports whether request i of p offered tool.
func offeredIn(p *mock.Provider, i int, tool string) bool {
	calls := p.Calls()
	return i < len(calls) && slices.ContainsFunc(calls[i].Tools, func(s llm.ToolSchema) bool { return s.Name == tool })
}

// TestMCPSlowServerHoldsNothing: an MCP server that answers only once told
// to (a cold `npx -y`) does not hold the node's start: the node is up, the
// server shown connecting; a turn started before the server is up waits
// for it, is offered its tool, and its call gets the tool's result (it
// was unknown_tool, after a start held for the connect timeout).
func TestMCPSlowServerHoldsNothing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	rec := newRecords(slog.LevelInfo)
	p := mock.Scripted(mock.CallTool("slow__echo", `{}`), mock.Say("done"))
	n := mcpNode(ctx, t, dir, map[string]string{"slow": "slow"}, p, slog.New(rec))

	// Start returned with the server still waiting for its cue.
	if got := n.MCPServers(); len(got) != 1 || got[0].Name != "slow" || got[0].State != mcp.StateConnecting {
		t.Fatalf("MCP servers after the start: %+v", got)
	}
	if _, ok := n.tools.Tool("slow__echo"); ok {
		t.Fatal("slow__echo listed before its server is up")
	}
	o := runTurn(ctx, t, n, "s1", func() {
		rec.waitRecord(ctx, t, slog.LevelInfo, "a turn waits for the MCP servers still connecting")
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if o.Status != projection.StatusCompleted {
		t.Fatalf("the turn: %+v", o)
	}
	if !offeredIn(p, 0, "slow__echo") {
		t.Fatalf("the first request did not offer slow__echo: %+v", p.Calls()[0].Tools)
	}
	if out, ok := toolOutput(p, "slow__echo"); !ok || out != "slow echo" {
		t.Fatalf("the call of slow__echo gave %q (%v)", out, ok)
	}
	if got := n.MCPServers(); len(got) != 1 || got[0].State != mcp.StateServing || !slices.Equal(got[0].Tools, []string{"slow__echo"}) {
		t.Fatalf("MCP servers once up: %+v", got)
	}
}

// TestMCPFlakyServer: a server whose first starts fail is started again
// with backoff until it is up, and served then (it was dropped for good);
// its failures are one warning, not one per attempt.
func TestMCPFlakyServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	rec := newRecords(slog.LevelInfo)
	p := mock.Scripted(mock.CallTool("flaky__hello", `{}`), mock.Say("done"))
	began := time.Now()
	n := mcpNode(ctx, t, dir, map[string]string{"flaky": "flaky"}, p, slog.New(rec))
	if err := n.WaitMCP(ctx); err != nil {
		t.Fatal(err)
	}
	starts, _ := filepath.Glob(filepath.Join(dir, "start-*"))
	if len(starts) != flakyFailures+1 {
		t.Fatalf("the server started %d times, want %d", len(starts), flakyFailures+1)
	}
	warned, _ := rec.count(slog.LevelWarn, "the server did not start")
	if most := 1 + int(time.Since(began)/time.Minute); warned < 1 || warned > most {
		t.Fatalf("%d warnings of %d failed starts, want 1 (at most one a minute)", warned, flakyFailures)
	}
	if o := runTurn(ctx, t, n, "s1", nil); o.Status != projection.StatusCompleted {
		t.Fatalf("the turn: %+v", o)
	}
	if out, ok := toolOutput(p, "flaky__hello"); !ok || out != "flaky hello" {
		t.Fatalf("the call of flaky__hello gave %q (%v)", out, ok)
	}
}

// TestMCPCreds: an embedded server's node issues the bridge a tool
// credential for its servers' namespaces, and no other tool; with an
// external NATS the operator's must be there and grant them all, or the
// error says what to put where.
func TestMCPCreds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := auth.Ensure(dir); err != nil {
		t.Fatal(err)
	}
	mc := MCPConfig{DataDir: dir}
	grants := []string{"api__*", "fs__*"}
	path, err := mcpCreds(mc, grants)
	if err != nil {
		t.Fatal(err)
	}
	if role, err := auth.CredsRole(path); err != nil || role != wire.RoleTool {
		t.Fatalf("role %q %v", role, err)
	}
	mine := []string{wire.NamespaceToolSubject("fs", "read_text_file"), wire.NamespaceToolSubject("api", "anything_added_later"), "$SRV.INFO.tah-tools-fs"}
	if denied, err := auth.Denied(path, []string{"$KV.tah_tool_results." + wire.NamespaceResultKey("fs", "read", "s_1", "c1")}, mine); err != nil || len(denied) > 0 {
		t.Fatalf("denied %v %v", denied, err)
	}
	for _, other := range []string{wire.ToolSubject("read_file"), wire.ToolSubject("fs__read_text_file"), wire.NamespaceToolSubject("web", "get")} {
		if denied, _ := auth.Denied(path, nil, []string{other}); len(denied) != 1 {
			t.Fatalf("the credential serves %s", other)
		}
	}

	ext := MCPConfig{DataDir: t.TempDir(), External: true}
	if _, err := mcpCreds(ext, grants); err == nil || !strings.Contains(err.Error(), `put a credential of the tool role named "mcp" for the tools api__*,fs__* at `+filepath.Join(ext.DataDir, "mcp.creds")) ||
		!strings.Contains(err.Error(), "tahctl creds nsc --role tool --tool 'api__*,fs__*' mcp") {
		t.Fatalf("no credential: %v", err)
	}
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(filepath.Join(ext.DataDir, "mcp.creds"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := mcpCreds(ext, append(grants, "web__*")); err == nil || !strings.Contains(err.Error(), "subscribe "+wire.NamespaceToolSubjects("web")) {
		t.Fatalf("a server missing: %v", err)
	}
	if _, err := mcpCreds(ext, grants); err != nil {
		t.Fatalf("the right credential: %v", err)
	}
}

// TestMCPTooManyServers: a credential of more servers than the server's
// first line holds cannot connect; the node runs without the bridge, and
// the error says why and what to do.
func TestMCPTooManyServers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	servers := map[string]string{"good": "good"}
	for i := range 80 {
		servers[fmt.Sprintf("server-%02d", i)] = "missing"
	}
	quiet := slog.New(slog.DiscardHandler)
	n := mcpNode(ctx, t, t.TempDir(), servers, mock.Scripted(), quiet)
	err := n.MCPErr()
	if err == nil || !strings.Contains(err.Error(), "for 81 servers") || !strings.Contains(err.Error(), "configure fewer servers") {
		t.Fatalf("the error: %v", err)
	}
	if n.MCPServers() != nil {
		t.Fatalf("servers of a bridge that does not run: %+v", n.MCPServers())
	}
}

// callTool calls name as the node does, once it lists it.
func callTool(t *testing.T, n *Node, name string) tools.Result {
	t.Helper()
	tool, ok := n.remote.Tool(name)
	if !ok {
		bustest.Eventually(t, 30*time.Second, "discovering "+name, func() bool {
			if err := n.remote.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			tool, ok = n.remote.Tool(name)
			return ok
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := tool.Run(tools.WithCall(ctx, tools.CallInfo{ID: "call_" + name, Session: "s_test"}), json.RawMessage(`{}`))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// remoteNames are the tools the node lists after a refresh.
func remoteNames(t *testing.T, n *Node) []string {
	t.Helper()
	if err := n.remote.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range n.remote.Schemas() {
		out = append(out, s.Name)
	}
	return out
}

// TestMCPManyTools: a server of 100 tools beside a server of one: every
// tool of both is listed and callable through the node's own credential
// (its size does not grow with the tools: a credential naming each of 101
// tools is longer than the NATS server's connect line allows).
func TestMCPManyTools(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := mcpNode(ctx, t, t.TempDir(), map[string]string{"many": "many", "good": "good"}, mock.Scripted(), slog.New(slog.DiscardHandler))
	if err := n.WaitMCP(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"good__hello"}
	for i := range 100 {
		want = append(want, fmt.Sprintf("many__tool_%03d", i))
	}
	bustest.Eventually(t, 60*time.Second, "listing the 101 tools", func() bool {
		return slices.Equal(remoteNames(t, n), want)
	})
	for _, name := range want {
		server, tool, _ := strings.Cut(name, "__")
		if res := callTool(t, n, name); res.IsError || res.Output != server+" "+tool {
			t.Fatalf("%s: %+v", name, res)
		}
	}
}

// TestMCPToolsChange: a server that adds a tool while it runs, removes one,
// and lists a new one after a restart has each change served in place:
// added tools are callable, removed ones withdrawn, the others stay, and
// the server is not restarted for it.
func TestMCPToolsChange(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	n := mcpNode(ctx, t, dir, map[string]string{"grow": "grow"}, mock.Scripted(), slog.New(slog.DiscardHandler))
	starts := func() int {
		s, _ := filepath.Glob(filepath.Join(dir, "start-*"))
		return len(s)
	}
	for _, c := range []struct{ tool, out string }{{"grow__base", "grow base"}, {"grow__add", "added"}, {"grow__added", "grow added"},
		{"grow__base", "grow base"}, {"grow__drop", "dropped"}} {
		if res := callTool(t, n, c.tool); res.Output != c.out {
			t.Fatalf("%s: %+v", c.tool, res)
		}
	}
	bustest.Eventually(t, 30*time.Second, "withdrawing grow__base", func() bool {
		return !slices.Contains(remoteNames(t, n), "grow__base")
	})
	if res := callTool(t, n, "grow__added"); res.Output != "grow added" {
		t.Fatalf("added after the drop: %+v", res)
	}
	if got := starts(); got != 1 {
		t.Fatalf("the server started %d times; the changes should not restart it", got)
	}

	// Restarted, it lists a tool it did not list before: served as well.
	die, _ := n.remote.Tool("grow__die")
	_, _ = die.Run(tools.WithCall(ctx, tools.CallInfo{ID: "call_die", Session: "s_test"}), json.RawMessage(`{}`))
	if res := callTool(t, n, "grow__reborn"); res.Output != "grow reborn" {
		t.Fatalf("reborn: %+v", res)
	}
	if res := callTool(t, n, "grow__base"); res.Output != "grow base" {
		t.Fatalf("base after the restart: %+v", res)
	}
	if got := starts(); got != 2 {
		t.Fatalf("the server started %d times, want 2", got)
	}
}
