package remote_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/remote"
	"github.com/tah-dev/tah/tools/toolservice"
	"github.com/tah-dev/tah/wire"
)

// says is a tool named name that answers text.
func says(name, text string) tools.Tool {
	return tools.Func(tools.Spec{Name: name, Description: "says " + text}, func(context.Context, json.RawMessage) (tools.Result, error) {
		return tools.Text(text), nil
	})
}

// holds is a tool named name that answers "released" once release is
// closed, or ends with its context.
func holds(name string, release <-chan struct{}) tools.Tool {
	return tools.Func(tools.Spec{Name: name, Description: "Waits."}, func(ctx context.Context, _ json.RawMessage) (tools.Result, error) {
		select {
		case <-release:
			return tools.Text("released"), nil
		case <-ctx.Done():
			return tools.Result{}, ctx.Err()
		}
	})
}

// gone waits until reg no longer lists name.
func gone(t *testing.T, reg *remote.Registry, name string) {
	t.Helper()
	bustest.Eventually(t, 30*time.Second, name+" withdrawn", func() bool {
		if err := reg.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, ok := reg.Tool(name)
		return !ok
	})
}

// TestNamespaceRoundTrip: the tools of a namespace's service are
// discovered as <ns>__<tool>, called on tah.tool.<ns>.<tool>, stored under
// the namespace (found by call id), cancelled; Set adds, withdraws and
// redescribes them while the others stay; a tool's own service wins over
// a namespace's.
func TestNamespaceRoundTrip(t *testing.T) {
	ctx := testCtx(t)
	srv := bustest.Server(t)
	release := make(chan struct{})
	defer close(release)
	hold := holds("fs__hold", release)
	cfg := toolservice.Config{Logger: quiet, Namespace: "fs"}
	if _, err := toolservice.Start(ctx, bustest.Connect(t, srv), cfg, says("api__x", "x")); err == nil {
		t.Fatal("a tool outside the namespace is served")
	}
	svc, err := toolservice.Start(ctx, bustest.Connect(t, srv), cfg, says("fs__read", "read"), hold)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	if infos := svc.Info(); len(infos) != 2 || infos[0].Name != "tah-tools-fs" || infos[0].Endpoints[0].Subject != "tah.tool.fs.hold" {
		t.Fatalf("services: %+v", infos)
	}
	reg := openRegistry(t, srv)
	discover(t, reg, "fs__read", "fs__hold")
	read, _ := reg.Tool("fs__read")
	if read.Description() != "says read" || tools.RunnerOf(read) != "remote:tah-tools-fs" {
		t.Fatalf("fs__read: %q %q", read.Description(), tools.RunnerOf(read))
	}
	exec := tools.NewExecutor(reg, tools.Options{Logger: quiet})
	sctx := tools.WithCall(ctx, tools.CallInfo{Session: "s_ns"})
	if res := exec.Execute(sctx, llm.ToolCall{ID: "call_1", Name: "fs__read", Arguments: json.RawMessage(`{}`)}); res.IsError || res.Output != "read" {
		t.Fatalf("fs__read: %+v", res)
	}
	st, err := reg.Lookup(ctx, "s_ns", "call_1")
	if err != nil || st.State != wire.CallDone || st.Tool != "fs__read" || st.Service != "tah-tools-fs" || st.Result.Output != "read" {
		t.Fatalf("stored: %+v %v", st, err)
	}
	js, _ := jetstream.New(bustest.Connect(t, srv))
	kv, err := js.KeyValue(ctx, wire.ToolResultBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "ns=fs.read.s_ns.call_1"); err != nil {
		t.Fatalf("the call is not stored under its namespace: %v", err)
	}
	cctx, cancel := context.WithCancel(sctx)
	done := make(chan tools.Result, 1)
	go func() { done <- exec.Execute(cctx, llm.ToolCall{ID: "call_hold", Name: "fs__hold"}) }()
	stateOf(t, reg, "s_ns", "call_hold", wire.CallRunning)
	cancel()
	if res := <-done; res.Code != event.CodeCancelled {
		t.Fatalf("cancelled: %+v", res)
	}

	// Set: a tool added, one withdrawn, one redescribed; the service stays.
	if err := svc.Set(says("fs__read", "read v2"), says("fs__new", "new")); err != nil {
		t.Fatal(err)
	}
	discover(t, reg, "fs__new")
	gone(t, reg, "fs__hold")
	bustest.Eventually(t, 30*time.Second, "fs__read redescribed", func() bool {
		_ = reg.Refresh(ctx)
		tool, ok := reg.Tool("fs__read")
		return ok && tool.Description() == "says read v2"
	})
	if res := exec.Execute(sctx, llm.ToolCall{ID: "call_2", Name: "fs__read"}); res.Output != "read v2" {
		t.Fatalf("fs__read after Set: %+v", res)
	}
	if err := svc.Set(says("api__x", "x")); err == nil {
		t.Fatal("Set serves a tool outside the namespace")
	}

	// A tool's own service wins over its namespace's.
	own, err := toolservice.Start(ctx, bustest.Connect(t, srv), toolservice.Config{Logger: quiet}, says("fs__new", "its own"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = own.Close(context.Background()) })
	bustest.Eventually(t, 30*time.Second, "fs__new of its own service", func() bool {
		_ = reg.Refresh(ctx)
		tool, ok := reg.Tool("fs__new")
		return ok && tools.RunnerOf(tool) == "remote:tah-tool-fs__new"
	})
	if res := exec.Execute(sctx, llm.ToolCall{ID: "call_3", Name: "fs__new"}); res.Output != "its own" {
		t.Fatalf("fs__new: %+v", res)
	}

	// A call waiting for a namespace's tool that is not there yet finds it
	// at its namespace.
	waited := make(chan error, 1)
	go func() { waited <- reg.WaitFor(ctx, "fs__later") }()
	if err := svc.Set(says("fs__read", "read v2"), says("fs__later", "later")); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
}

// refused reports whether the server refused what nc just did with a
// permissions violation naming subject: its -ERR comes before the PONG of
// the flush.
func refused(t *testing.T, nc *nats.Conn, subject string) bool {
	t.Helper()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	err := nc.LastError()
	return err != nil && strings.Contains(err.Error(), "Permissions Violation") && strings.Contains(err.Error(), `"`+subject+`"`)
}

// TestNamespaceTrust: a credential that grants a namespace serves, describes
// and stores the calls of that namespace's tools, and of no other tool or
// namespace; a credential of a tool named like the namespace has none of
// the namespace's rights.
func TestNamespaceTrust(t *testing.T) {
	b, connect := securedBus(t)
	ctx := testCtx(t)
	grant := connect("fs-grant", wire.ToolNamespaceGrant("fs"))
	svc, err := toolservice.Start(ctx, grant, toolservice.Config{Logger: quiet, Namespace: "fs"}, says("fs__read", "read"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	reg, err := remote.Open(b.Conn(), remote.Config{DiscoveryQuiet: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close(context.Background()) })
	discover(t, reg, "fs__read")
	read, _ := reg.Tool("fs__read")
	if res, err := read.Run(tools.WithCall(ctx, tools.CallInfo{ID: "call_1", Session: "s_ns"}), json.RawMessage(`{}`)); err != nil || res.Output != "read" {
		t.Fatalf("fs__read: %+v %v", res, err)
	}
	if st, err := reg.Lookup(ctx, "s_ns", "call_1"); err != nil || st.State != wire.CallDone {
		t.Fatalf("stored: %+v %v", st, err)
	}
	for _, tc := range []struct {
		nc      *nats.Conn
		what    string
		sub     string // subscribe to it
		pub     string // or publish on it
		subject string
	}{
		{grant, "another namespace's tool", wire.NamespaceToolSubject("api", "x"), "", ""},
		{grant, "a tool of its namespace's name", wire.ToolSubject("fs__read"), "", ""},
		{grant, "another tool", wire.ToolSubject("shout"), "", ""},
		{grant, "another namespace's discovery", "$SRV.INFO.tah-tools-api", "", ""},
		{grant, "another namespace's results", "", "$KV." + wire.ToolResultBucket + "." + wire.NamespaceResultKey("api", "x", "s_ns", "call_1"), ""},
		{grant, "a tool's results", "", "$KV." + wire.ToolResultBucket + "." + wire.ResultKey("fs__read", "s_ns", "call_1"), ""},
		{grant, "reading another namespace's results", "", "$JS.API.DIRECT.GET." + wire.ToolResultStream + ".$KV." + wire.ToolResultBucket + "." + wire.NamespaceResultKey("api", "x", "s_ns", "call_1"), ""},
	} {
		var err error
		if tc.sub != "" {
			_, err = tc.nc.Subscribe(tc.sub, func(*nats.Msg) {})
			tc.subject = tc.sub
		} else {
			err = tc.nc.Publish(tc.pub, []byte(`{}`))
			tc.subject = tc.pub
		}
		if err != nil {
			t.Fatal(err)
		}
		if !refused(t, tc.nc, tc.subject) {
			t.Errorf("%s (%s) is not refused: %v", tc.what, tc.subject, tc.nc.LastError())
		}
	}

	// A tool named like the namespace: none of the namespace's rights.
	fs := connect("fs-tool", "fs")
	for _, sub := range []string{wire.NamespaceToolSubject("fs", "read"), "$SRV.INFO.tah-tools-fs"} {
		if _, err := fs.Subscribe(sub, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		if !refused(t, fs, sub) {
			t.Errorf("the tool fs may subscribe to %s", sub)
		}
	}
	key := "$KV." + wire.ToolResultBucket + "." + wire.NamespaceResultKey("fs", "read", "s_ns", "call_1")
	if err := fs.Publish(key, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if !refused(t, fs, key) {
		t.Errorf("the tool fs may store the namespace fs's calls")
	}

	// A forger of another namespace's tools is not listed.
	forger := connect("forger", wire.ToolNamespaceGrant("evil"))
	serve(t, forger, wire.ToolNamespaceService("evil"), "forged", wire.NamespaceToolSubject("evil", "ok"), wire.NamespaceToolSubject("fs", "forged"), wire.ToolSubject("shout"))
	discover(t, reg, "fs__read", "evil__ok")
	for _, name := range []string{"fs__forged", "shout"} {
		if _, ok := reg.Tool(name); ok {
			t.Errorf("%s is offered from another namespace's credential", name)
		}
	}
}
