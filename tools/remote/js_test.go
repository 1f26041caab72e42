package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/wire"
)

// syncBuffer collects a process's output for the test's messages.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startJS runs examples/tool-service-js against url, with env added to this
// process's environment, and returns a function that kills it with SIGKILL
// and waits for it.
func startJS(t *testing.T, url string, env ...string) (kill func()) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH: skipping the JavaScript tool service test (install Node.js 18+ to run it)")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples", "tool-service-js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "nats")); err != nil {
		t.Fatalf("the example's npm dependencies are missing (%v): run `make js-deps` (make test does it)", err)
	}
	var out syncBuffer
	cmd := exec.Command(node, "index.js")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "NATS_URL="+url), env...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // owned by the test; ends when the process does
	var once sync.Once
	kill = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
	}
	t.Cleanup(func() {
		kill()
		if t.Failed() {
			t.Logf("tool-service-js output:\n%s", out.String())
		}
	})
	bustest.Eventually(t, 30*time.Second, "tool-service-js ready", func() bool {
		select {
		case <-exited:
			t.Fatalf("tool-service-js exited early:\n%s", out.String())
		default:
		}
		return strings.Contains(out.String(), `"ready":true`)
	})
	return kill
}

func TestJavaScriptToolService(t *testing.T) {
	ctx := testCtx(t)
	srv := bustest.Server(t)
	// The node creates the ledger's bucket; a tool service only binds to it.
	js, _ := jetstream.New(bustest.Connect(t, srv))
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: wire.ToolResultBucket, History: 1, TTL: wire.ToolResultTTL}); err != nil {
		t.Fatal(err)
	}
	kill := startJS(t, srv.ClientURL())
	reg := openRegistry(t, srv)
	discover(t, reg, "shout", "word_count", "wait")

	shout, _ := reg.Tool("shout")
	var schema map[string]any
	if err := json.Unmarshal(shout.Schema(), &schema); err != nil || schema["type"] != "object" ||
		!strings.Contains(shout.Description(), "capital letters") || !tools.IsIdempotent(shout) || tools.RunnerOf(shout) != "remote:tah-tool-shout" {
		t.Fatalf("discovered shout: %q %s %v", shout.Description(), shout.Schema(), err)
	}

	exec := tools.NewExecutor(tools.Merge(tools.MustRegistry(), reg), tools.Options{Logger: quiet})
	sctx := tools.WithCall(ctx, tools.CallInfo{Session: "s_js"})
	run := func(ctx context.Context, id, name, args string) tools.Result {
		return exec.Execute(ctx, llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)})
	}

	if res := run(sctx, "call_1", "shout", `{"text":"hello world"}`); res.IsError || res.Output != "HELLO WORLD!" {
		t.Fatalf("shout: %+v", res)
	}
	if res := run(sctx, "call_2", "word_count", `{"text":"one two  three"}`); res.IsError || res.Output != "3 words" {
		t.Fatalf("word_count: %+v", res)
	}
	// The caller validates first...
	if res := run(sctx, "call_3", "shout", `{"text":1}`); res.Code != event.CodeInvalidInput {
		t.Fatalf("caller-side validation: %+v", res)
	}
	// ...and so does the service, answering with micro error headers.
	out, err := shout.Run(tools.WithCall(ctx, tools.CallInfo{ID: "call_4", Session: "s_js"}), json.RawMessage(`{"txt":"x"}`))
	if err != nil || out.Code != event.CodeInvalidInput || !strings.Contains(out.Output, "missing property 'text'") {
		t.Fatalf("service-side validation: %+v %v", out, err)
	}
	// A call id that is not a subject token.
	if res := run(sctx, "call.with dots", "shout", `{"text":"odd id"}`); res.Output != "ODD ID!" {
		t.Fatalf("odd call id: %+v", res)
	}
	if st, err := reg.Lookup(ctx, "s_js", "call.with dots"); err != nil || st.Result == nil || st.Result.Output != "ODD ID!" {
		t.Fatalf("lookup of an odd call id: %+v %v", st, err)
	}

	// Cancel mid-call reaches the JavaScript tool.
	cctx, cancel := context.WithCancel(sctx)
	done := make(chan tools.Result, 1)
	go func() { done <- run(cctx, "call_5", "wait", `{"ms":600000}`) }()
	stateOf(t, reg, "s_js", "call_5", wire.CallRunning)
	cancel()
	if res := <-done; res.Code != event.CodeCancelled {
		t.Fatalf("cancel: %+v", res)
	}
	if st := stateOf(t, reg, "s_js", "call_5", wire.CallDone); st.Result.Code != event.CodeCancelled {
		t.Fatalf("the service did not see the cancel: %+v", st.Result)
	}

	// So does a deadline.
	dctx, dcancel := context.WithTimeout(sctx, 300*time.Millisecond)
	defer dcancel()
	if res := run(dctx, "call_6", "wait", `{"ms":600000}`); res.Code != event.CodeTimeout {
		t.Fatalf("deadline: %+v", res)
	}
	if st := stateOf(t, reg, "s_js", "call_6", wire.CallDone); st.Result.Code != event.CodeTimeout {
		t.Fatalf("the service did not see the deadline: %+v", st.Result)
	}

	// The runner is killed mid-call: the call fails with a clear result...
	go func() { done <- run(sctx, "call_7", "wait", `{"ms":600000}`) }()
	stateOf(t, reg, "s_js", "call_7", wire.CallRunning)
	kill()
	res := <-done
	if res.Code != event.CodeInterrupted || !strings.Contains(res.Output, "tool wait (service tah-tool-wait") || !strings.Contains(res.Output, "outcome is unknown") {
		t.Fatalf("killed runner: %+v", res)
	}
	// ...and a result stored before the kill is still found by call id.
	if st, err := reg.Lookup(ctx, "s_js", "call_1"); err != nil || st.State != wire.CallDone || st.Result.Output != "HELLO WORLD!" {
		t.Fatalf("lookup after the kill: %+v %v", st, err)
	}
}
