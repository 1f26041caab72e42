package nodecmd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/config"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/remote"
	"github.com/tah-dev/tah/wire"
)

// TestMCPCreds: an embedded server's node issues the bridge a tool
// credential for its servers' namespaces, and no other tool; with an
// external NATS the operator's must be there and grant them all, or the
// error says what to put where.
func TestMCPCreds(t *testing.T) {
	dir := t.TempDir()
	if _, err := auth.Ensure(dir); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir = dir
	grants := []string{"api__*", "fs__*"}
	path, err := mcpCreds(cfg, grants)
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

	ext := cfg
	ext.NATS.URL = "nats://127.0.0.1:1"
	ext.DataDir = t.TempDir()
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

// fakeServerEnv, set to KIND:DIR, makes the test binary an MCP server on
// stdio (runFakeServer): many (100 tools), good (one), or grow (its tools
// change while it runs and across a restart). It leaves marks in DIR.
const fakeServerEnv = "TAH_NODECMD_MCP_SERVER"

func TestMain(m *testing.M) {
	if v := os.Getenv(fakeServerEnv); v != "" {
		kind, dir, _ := strings.Cut(v, ":")
		runFakeServer(kind, dir)
		return
	}
	os.Exit(m.Run())
}

func textResult(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

func runFakeServer(kind, dir string) {
	s := sdk.NewServer(&sdk.Implementation{Name: kind, Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	add := func(name string) {
		s.AddTool(&sdk.Tool{Name: name, Description: "answers " + name, InputSchema: obj},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return textResult(name), nil })
	}
	switch kind {
	case "many":
		for i := range 100 {
			add(fmt.Sprintf("tool_%03d", i))
		}
	case "good":
		add("hello")
	case "grow":
		starts, _ := filepath.Glob(filepath.Join(dir, "start-*"))
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("start-%d", os.Getpid())), nil, 0o600)
		add("base")
		if len(starts) > 0 { // restarted: a tool it did not list before
			add("reborn")
		}
		s.AddTool(&sdk.Tool{Name: "add", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			add("added") // the SDK sends notifications/tools/list_changed
			return textResult("added"), nil
		})
		s.AddTool(&sdk.Tool{Name: "drop", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			s.RemoveTools("base")
			return textResult("dropped"), nil
		})
		s.AddTool(&sdk.Tool{Name: "die", InputSchema: obj}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	}
	_ = s.Run(context.Background(), &sdk.StdioTransport{})
}

// mcpNode is an embedded bus with its trust material, and the node's bridge
// of the fake servers named by kind (server name: kind), as the node starts
// it; it returns a registry of the remote tools on the node's connection,
// which calls them as a node does.
func mcpNode(t *testing.T, dir string, servers map[string]string) *remote.Registry {
	t.Helper()
	b, m, err := mcpStart(t, dir, servers)
	if err != nil {
		t.Fatalf("the bridge did not start: %v", err)
	}
	t.Cleanup(m.close)
	reg, err := remote.Open(b.Conn(), remote.Config{DiscoveryQuiet: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close(context.Background()) })
	return reg
}

// mcpStart starts an embedded bus and, on it, the bridge of servers (by
// name, their kind: a fake server's, or "missing": a command that is not
// there), as the node does.
func mcpStart(t *testing.T, dir string, servers map[string]string) (*bus.Bus, *mcpBridge, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	bc := bus.Default()
	bc.DataDir, bc.Port = t.TempDir(), -1
	b, err := bus.Open(ctx, bc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mc := map[string]any{}
	for name, kind := range servers {
		if kind == "missing" {
			mc[name] = map[string]any{"command": filepath.Join(dir, "no-such-server")}
		} else {
			mc[name] = map[string]any{"command": exe, "env": map[string]string{fakeServerEnv: kind + ":" + dir}}
		}
	}
	file, _ := json.Marshal(map[string]any{"mcpServers": mc})
	cfg := config.Default()
	cfg.DataDir, cfg.Tools.MCPConfig = bc.DataDir, filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfg.Tools.MCPConfig, file, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := startMCP(ctx, cfg, b.ClientURL(), nil, slog.New(slog.DiscardHandler))
	return b, m, err
}

// TestMCPTooManyServers: a credential of more servers than the server's
// first line holds cannot connect, and the error says why and what to do.
func TestMCPTooManyServers(t *testing.T) {
	servers := map[string]string{"good": "good"}
	for i := range 80 {
		servers[fmt.Sprintf("server-%02d", i)] = "missing"
	}
	_, m, err := mcpStart(t, t.TempDir(), servers)
	if err == nil {
		m.close()
		t.Fatal("the bridge of 81 servers connected")
	}
	if !strings.Contains(err.Error(), "for 81 servers") || !strings.Contains(err.Error(), "configure fewer servers") {
		t.Fatalf("the error: %v", err)
	}
}

// callTool calls name through reg as a node does, once it is discovered.
func callTool(t *testing.T, reg *remote.Registry, name string) tools.Result {
	t.Helper()
	tool, ok := reg.Tool(name)
	if !ok {
		bustest.Eventually(t, 30*time.Second, "discovering "+name, func() bool {
			if err := reg.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			tool, ok = reg.Tool(name)
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

// remoteNames are the tools reg lists after a refresh.
func remoteNames(t *testing.T, reg *remote.Registry) []string {
	t.Helper()
	if err := reg.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range reg.Schemas() {
		out = append(out, s.Name)
	}
	return out
}

// TestMCPManyTools: a server of 100 tools beside a server of one: every
// tool of both is listed and callable through the node's own credential
// (its size no longer grows with the tools: a credential naming each of
// 101 tools is longer than the NATS server's connect line allows, and
// switched every MCP tool off).
func TestMCPManyTools(t *testing.T) {
	reg := mcpNode(t, t.TempDir(), map[string]string{"many": "many", "good": "good"})
	want := []string{"good__hello"}
	for i := range 100 {
		want = append(want, fmt.Sprintf("many__tool_%03d", i))
	}
	bustest.Eventually(t, 60*time.Second, "listing the 101 tools", func() bool {
		return slices.Equal(remoteNames(t, reg), want)
	})
	for _, name := range want {
		remote := strings.SplitN(name, "__", 2)[1]
		if res := callTool(t, reg, name); res.IsError || res.Output != remote {
			t.Fatalf("%s: %+v", name, res)
		}
	}
}

// TestMCPToolsChange: a server that adds a tool while it runs, removes one,
// and lists a new one after a restart has each change served: added tools
// are callable, removed ones withdrawn, the others stay, and the server is
// not restarted for it (it was, in a loop, when the credential named only
// the tools listed at start).
func TestMCPToolsChange(t *testing.T) {
	dir := t.TempDir()
	reg := mcpNode(t, dir, map[string]string{"grow": "grow"})
	starts := func() int {
		s, _ := filepath.Glob(filepath.Join(dir, "start-*"))
		return len(s)
	}
	if res := callTool(t, reg, "grow__base"); res.Output != "base" {
		t.Fatalf("base: %+v", res)
	}
	if res := callTool(t, reg, "grow__add"); res.Output != "added" {
		t.Fatalf("add: %+v", res)
	}
	if res := callTool(t, reg, "grow__added"); res.Output != "added" {
		t.Fatalf("added: %+v", res)
	}
	if res := callTool(t, reg, "grow__base"); res.Output != "base" {
		t.Fatalf("base after the change: %+v", res)
	}
	if res := callTool(t, reg, "grow__drop"); res.Output != "dropped" {
		t.Fatalf("drop: %+v", res)
	}
	bustest.Eventually(t, 30*time.Second, "withdrawing grow__base", func() bool {
		return !slices.Contains(remoteNames(t, reg), "grow__base")
	})
	if res := callTool(t, reg, "grow__added"); res.Output != "added" {
		t.Fatalf("added after the drop: %+v", res)
	}
	if n := starts(); n != 1 {
		t.Fatalf("the server started %d times; the changes should not restart it", n)
	}

	// Restarted, it lists a tool it did not list before: served as well.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	die, _ := reg.Tool("grow__die")
	_, _ = die.Run(tools.WithCall(ctx, tools.CallInfo{ID: "call_die", Session: "s_test"}), json.RawMessage(`{}`))
	if res := callTool(t, reg, "grow__reborn"); res.Output != "reborn" {
		t.Fatalf("reborn: %+v", res)
	}
	if res := callTool(t, reg, "grow__base"); res.Output != "base" {
		t.Fatalf("base after the restart: %+v", res)
	}
	if n := starts(); n != 2 {
		t.Fatalf("the server started %d times, want 2", n)
	}
}
