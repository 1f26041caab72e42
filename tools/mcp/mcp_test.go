package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/artifacts"
	"github.com/tah-dev/tah/tools/mcp"
	"github.com/tah-dev/tah/wire"
)

var quiet = slog.New(slog.DiscardHandler)

func TestMain(m *testing.M) {
	if dir := os.Getenv(edgeServerEnv); dir != "" {
		runEdgeServer(dir)
		return
	}
	if dir := os.Getenv(fsServerEnv); dir != "" {
		runFSServer(dir)
		return
	}
	if os.Getenv(floodServerEnv) != "" {
		runFloodServer()
		return
	}
	os.Exit(m.Run())
}

// bridged opens cfg's servers and serves them on a fresh NATS server until
// the test ends; it returns a connection for the calls.
func bridged(t *testing.T, cfg mcp.Config) (*mcp.Bridge, *nats.Conn) {
	t.Helper()
	return bridgedWith(t, cfg, mcp.Options{KeepAlive: -1})
}

// bridgedWith is bridged with opts (quiet, and quick restarts).
func bridgedWith(t *testing.T, cfg mcp.Config, opts mcp.Options) (*mcp.Bridge, *nats.Conn) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv := bustest.Server(t)
	nc := bustest.Connect(t, srv)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	store, err := artifacts.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger, opts.MinBackoff, opts.MaxBackoff = quiet, 50*time.Millisecond, time.Second
	b, err := mcp.Open(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { b.Serve(ctx, nc, store); close(done) }() // stopped by the cleanup
	t.Cleanup(func() { cancel(); <-done })
	return b, bustest.Connect(t, srv)
}

// waitServing waits until server's tools are served (want true) or withdrawn.
func waitServing(t *testing.T, b *mcp.Bridge, server string, want bool) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		names, ok := b.Serving()[server]
		if ok == want {
			return names
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("server %s: serving should be %v; serving %v", server, want, b.Serving())
	return nil
}

// call asks the tool service of name for a call, as a node does.
func call(t *testing.T, nc *nats.Conn, name, id, input string) tools.Result {
	t.Helper()
	res, err := request(nc, name, id, input)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// request calls the tool <server>__<tool> on its server's namespace's
// endpoint, tah.tool.<server>.<tool>.
func request(nc *nats.Conn, name, id, input string) (tools.Result, error) {
	body, _ := json.Marshal(wire.ToolRequest{CallID: id, Session: "s_test", Tool: name, Input: json.RawMessage(input)})
	ns, tool, ok := wire.SplitToolName(name)
	if !ok {
		return tools.Result{}, fmt.Errorf("%s is no tool of an MCP server", name)
	}
	reply, err := nc.Request(wire.NamespaceToolSubject(ns, tool), body, 30*time.Second)
	if err != nil {
		return tools.Result{}, err
	}
	var res tools.Result
	if err := json.Unmarshal(reply.Data, &res); err != nil {
		return tools.Result{}, fmt.Errorf("reply %q: %w", reply.Data, err)
	}
	return res, nil
}

// waitFile waits for path to exist.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
}

func TestConfig(t *testing.T) {
	good := `{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "x"]}, "api": {"type": "http", "url": "https://h/mcp", "headers": {"A": "b"}},
		"off": {"command": "x", "disabled": true}}, "otherKey": 1}`
	c, err := mcp.ParseConfig([]byte(good))
	if err != nil || len(c.Servers) != 3 || c.Servers["api"].Headers["A"] != "b" {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []string{
		`{}`,
		`{"mcpServers": {"a b": {"command": "x"}}}`,
		`{"mcpServers": {"a__b": {"command": "x"}}}`,
		`{"mcpServers": {"a": {}}}`,
		`{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}`,
		`{"mcpServers": {"a": {"url": "ftp://h"}}}`,
		`{"mcpServers": {"a": {"type": "sse", "url": "http://h/sse"}}}`,
	} {
		if _, err := mcp.ParseConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), "invalid MCP configuration") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestToolName(t *testing.T) {
	if n, err := mcp.ToolName("fs", "read.file v2"); err != nil || n != "fs__read_file_v2" {
		t.Fatal(n, err)
	}
	if _, err := mcp.ToolName("fs", strings.Repeat("x", 61)); err == nil || !strings.Contains(err.Error(), "over 64") {
		t.Fatal(err)
	}
}

// TestEdgeCases runs a Go SDK server (this test binary) over stdio.
func TestEdgeCases(t *testing.T) {
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, nc := bridged(t, mcp.Config{Servers: map[string]mcp.ServerConfig{
		"edge": {Command: exe, Env: map[string]string{edgeServerEnv: dir}},
	}})
	problems := strings.Join(b.Problems(), "\n")
	for _, want := range []string{`tool "bad" of server edge is skipped: its input schema is malformed`, "over 64", `is named edge__dup_name like tool "dup.name"`} {
		if !strings.Contains(problems, want) {
			t.Errorf("problems lack %q:\n%s", want, problems)
		}
	}
	want := []string{"edge__die", "edge__dup_name", "edge__echo", "edge__fails", "edge__grow", "edge__image", "edge__slow"}
	if got := b.Names(); !slices.Equal(got, want) {
		t.Fatalf("names %v, want %v; problems:\n%s", got, want, problems)
	}
	if got := waitServing(t, b, "edge", true); !slices.Equal(got, want) {
		t.Fatalf("serving %v", got)
	}

	t.Run("text", func(t *testing.T) {
		if res := call(t, nc, "edge__echo", "c_echo", `{"text":"hi"}`); res.IsError || res.Output != "echo: hi" {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("isError", func(t *testing.T) {
		if res := call(t, nc, "edge__fails", "c_fail", `{}`); !res.IsError || res.Code != event.CodeToolError || res.Output != "it failed on purpose" {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("image and structured content", func(t *testing.T) {
		res := call(t, nc, "edge__image", "c_img", `{}`)
		if res.IsError || res.Artifact == nil || res.Artifact.Object != "calls/s_test/c_img/content-1.png" ||
			!strings.Contains(res.Output, "here it is\n[image (image/png), 4 bytes, stored as artifact tah_artifacts/calls/s_test/c_img/content-1.png]") ||
			!strings.Contains(res.Output, `{"pixels":4}`) {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("cancel reaches the server", func(t *testing.T) {
		got := make(chan tools.Result, 1)
		go func() { got <- call(t, nc, "edge__slow", "c_slow", `{}`) }()
		waitFile(t, filepath.Join(dir, "slow-started"))
		body, _ := json.Marshal(wire.ToolCancel{CallID: "c_slow", Session: "s_test"})
		if err := nc.Publish(wire.ToolCancelSubject("c_slow"), body); err != nil {
			t.Fatal(err)
		}
		if res := <-got; !res.IsError || res.Code != event.CodeCancelled {
			t.Fatalf("%+v", res)
		}
		waitFile(t, filepath.Join(dir, "slow-cancelled")) // notifications/cancelled arrived
	})
	t.Run("server dies mid-call, then is back", func(t *testing.T) {
		res := call(t, nc, "edge__die", "c_die", `{}`)
		if !res.IsError || res.Code != event.CodeInterrupted || !strings.Contains(res.Output, "MCP server edge stopped during the call") {
			t.Fatalf("%+v", res)
		}
		deadline := time.Now().Add(30 * time.Second)
		for { // withdrawn, then served by the restarted server
			res, err := request(nc, "edge__echo", "c_again", `{"text":"back"}`)
			if err == nil && res.Output == "echo: back" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("never back: %+v %v", res, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	t.Run("the server's tools change", func(t *testing.T) {
		if res := call(t, nc, "edge__grow", "c_grow", `{}`); res.IsError {
			t.Fatalf("%+v", res)
		}
		deadline := time.Now().Add(30 * time.Second)
		for !slices.Contains(b.Serving()["edge"], "edge__grown") {
			if time.Now().After(deadline) {
				t.Fatalf("edge__grown never served: %v", b.Serving())
			}
			time.Sleep(20 * time.Millisecond)
		}
		for {
			res, err := request(nc, "edge__grown", "c_grown", `{}`)
			if err == nil && res.Output == "grown" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("edge__grown: %+v %v", res, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// counted is a log that counts its bytes, and whether a record said a
// summary of lines not logged.
type counted struct {
	mu      sync.Mutex
	n       int
	summary bool
}

func (c *counted) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += len(p)
	c.summary = c.summary || bytes.Contains(p, []byte("lines_not_logged="))
	return len(p), nil
}

// TestStderrFlood: a server that writes 20 MB to its stderr costs the log
// at most what one run of a server may log (4 MiB, docs/operations.md),
// which says how many lines it left out, and its tools work meanwhile.
func TestStderrFlood(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var logged counted
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := bustest.Server(t)
	b, err := mcp.Open(ctx, mcp.Config{Servers: map[string]mcp.ServerConfig{
		"flood": {Command: exe, Env: map[string]string{floodServerEnv: "1"}},
	}}, mcp.Options{Logger: slog.New(slog.NewTextHandler(&logged, nil)), KeepAlive: -1})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { b.Serve(ctx, bustest.Connect(t, srv), nil); close(done) }() // stopped below
	waitServing(t, b, "flood", true)
	nc := bustest.Connect(t, srv)
	if res := call(t, nc, "flood__flooded", "c1", `{}`); res.IsError || res.Output != "flooded" {
		t.Fatalf("flooded: %+v", res)
	}
	if res := call(t, nc, "flood__hello", "c2", `{}`); res.IsError || res.Output != "hello" {
		t.Fatalf("hello: %+v", res)
	}
	cancel()
	<-done // the server's run is over: its stderr is all read
	logged.mu.Lock()
	defer logged.mu.Unlock()
	if bound := 4<<20 + 64<<10; logged.n > bound {
		t.Fatalf("the log has %d bytes of a %d-byte flood, over %d", logged.n, floodBytes, bound)
	}
	if !logged.summary {
		t.Fatal("no record says how many lines were not logged")
	}
}

// attrs is a log that keeps its records' attributes.
type attrs struct {
	mu   sync.Mutex
	recs []map[string]any
}

func (a *attrs) Enabled(context.Context, slog.Level) bool { return true }
func (a *attrs) Handle(_ context.Context, r slog.Record) error {
	m := map[string]any{"msg": r.Message, "level": r.Level}
	r.Attrs(func(at slog.Attr) bool { m[at.Key] = at.Value.Any(); return true })
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, m)
	return nil
}
func (a *attrs) WithAttrs([]slog.Attr) slog.Handler { return a }
func (a *attrs) WithGroup(string) slog.Handler      { return a }

// TestSlowServerIsGivenTime: New starts nothing and Serve holds nothing up;
// a server that does not answer in its connect timeout (a cold `npx -y`)
// is started again with twice the time each attempt, up to
// MaxConnectTimeout, rather than killed at the same point every time; it
// stays "connecting" with its failures counted, and only its first failure
// is a warning.
func TestSlowServerIsGivenTime(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := bustest.Server(t)
	nc := bustest.Connect(t, srv)
	log := &attrs{}
	b := mcp.New(mcp.Config{Servers: map[string]mcp.ServerConfig{"mute": {Command: "sh", Args: []string{"-c", "cat >/dev/null"}}}},
		mcp.Options{Logger: slog.New(log), KeepAlive: -1, ConnectTimeout: 20 * time.Millisecond, MaxConnectTimeout: 80 * time.Millisecond,
			MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
	states, changed := b.States()
	if st := states["mute"]; st.State != mcp.StateConnecting || st.Failures != 0 {
		t.Fatalf("before Serve: %+v", st)
	}
	done := make(chan struct{})
	go func() { b.Serve(ctx, nc, nil); close(done) }() // stopped below
	defer func() { cancel(); <-done }()
	deadline := time.After(time.Minute)
	for states["mute"].Failures < 4 {
		select {
		case <-changed:
			states, changed = b.States()
		case <-deadline:
			t.Fatalf("states: %+v", states)
		}
	}
	if st := states["mute"]; st.State != mcp.StateConnecting || !strings.Contains(st.Err, "deadline exceeded") {
		t.Fatalf("after 4 attempts: %+v", st)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	var timeouts []time.Duration
	warnings := 0
	for _, r := range log.recs {
		if strings.Contains(r["msg"].(string), "did not start") {
			if d, ok := r["connect_timeout"].(time.Duration); ok {
				timeouts = append(timeouts, d)
			}
			if r["level"] == slog.LevelWarn {
				warnings++
			}
		}
	}
	if want := []time.Duration{40 * time.Millisecond, 80 * time.Millisecond, 80 * time.Millisecond}; len(timeouts) < 3 || !slices.Equal(timeouts[:3], want) {
		t.Fatalf("the next attempts' connect timeouts: %v, want %v (20ms doubling up to 80ms)", timeouts, want)
	}
	if warnings != 1 {
		t.Fatalf("%d warnings for %d failed attempts, want 1", warnings, len(timeouts))
	}
}
