package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/artifacts"
	"github.com/tah-dev/tah/wire"
)

var quiet = slog.New(slog.DiscardHandler)

const echoSchema = `{
	"type": "object",
	"properties": {
		"text": {"type": "string", "maxLength": 10},
		"n": {"type": "integer", "minimum": 1}
	},
	"required": ["text"],
	"additionalProperties": false
}`

func echo(ran *int) tools.Tool {
	return tools.Func(tools.Spec{Name: "echo", Description: "echoes", Schema: json.RawMessage(echoSchema)},
		func(ctx context.Context, in json.RawMessage) (tools.Result, error) {
			if ran != nil {
				*ran++
			}
			var a struct{ Text string }
			if err := json.Unmarshal(in, &a); err != nil {
				return tools.Result{}, err
			}
			return tools.Text(a.Text), nil
		})
}

func call(name, args string) llm.ToolCall {
	return llm.ToolCall{ID: "call_1", Name: name, Arguments: json.RawMessage(args)}
}

func TestRegistry(t *testing.T) {
	noop := func(context.Context, json.RawMessage) (tools.Result, error) { return tools.Text(""), nil }
	mk := func(name, schema string) tools.Tool {
		var s json.RawMessage
		if schema != "" {
			s = json.RawMessage(schema)
		}
		return tools.Func(tools.Spec{Name: name, Schema: s}, noop)
	}
	if _, err := tools.NewRegistry(mk("a", ""), mk("a", "")); !errors.Is(err, tools.ErrDuplicateTool) {
		t.Errorf("duplicate: %v", err)
	}
	for _, name := range []string{"", "has space", "dot.ted", "star*", strings.Repeat("x", 65), "ünï"} {
		if _, err := tools.NewRegistry(mk(name, "")); !errors.Is(err, tools.ErrInvalidName) {
			t.Errorf("name %q: %v", name, err)
		}
	}
	for _, schema := range []string{
		`{"type":"string"}`,
		`[1,2]`,
		`{"type":"object","properties":{"a":{"type":"nonsense"}}}`,
		`{"type":"object","properties":{"a":{"$ref":"https://example.com/schema.json"}}}`,
		`{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`,
	} {
		if _, err := tools.NewRegistry(mk("x", schema)); !errors.Is(err, tools.ErrInvalidSchema) {
			t.Errorf("schema %s: %v", schema, err)
		}
	}
	reg := tools.MustRegistry(mk("zeta", ""), mk("alpha", `{"type":"object"}`), mk("mid-1", ""))
	if err := reg.Add(mk("alpha", "")); !errors.Is(err, tools.ErrDuplicateTool) {
		t.Errorf("add duplicate: %v", err)
	}
	var names []string
	for _, s := range reg.Schemas() {
		names = append(names, s.Name)
		if len(s.InputSchema) == 0 {
			t.Errorf("%s: no input schema", s.Name)
		}
	}
	if got := strings.Join(names, ","); got != "alpha,mid-1,zeta" {
		t.Errorf("schemas order = %s", got)
	}
	if !reg.Remove("zeta") || reg.Remove("zeta") {
		t.Error("remove")
	}
	if _, ok := reg.Tool("zeta"); ok {
		t.Error("removed tool still there")
	}
}

func TestMerge(t *testing.T) {
	mk := func(name, out string) tools.Tool {
		return tools.Func(tools.Spec{Name: name, Description: out}, func(context.Context, json.RawMessage) (tools.Result, error) {
			return tools.Text(out), nil
		})
	}
	local := tools.MustRegistry(mk("b", "local"), mk("d", "local"))
	remote := tools.MustRegistry(mk("a", "remote"), mk("b", "remote"))
	cat := tools.Merge(local, remote)
	var got []string
	for _, s := range cat.Schemas() {
		got = append(got, s.Name+"="+s.Description)
	}
	if strings.Join(got, " ") != "a=remote b=local d=local" {
		t.Errorf("schemas = %v", got)
	}
	if res := tools.Execute(context.Background(), cat, call("b", "{}")); res.Output != "local" {
		t.Errorf("b ran %q", res.Output)
	}
}

// farTool runs on a tool service.
type farTool struct{ tools.Tool }

func (farTool) Runner() string { return wire.RemoteRunner(wire.ToolServicePrefix + "far") }

func TestRunnerIn(t *testing.T) {
	near := tools.Func(tools.Spec{Name: "near"}, func(context.Context, json.RawMessage) (tools.Result, error) { return tools.Text("ok"), nil })
	far := farTool{tools.Func(tools.Spec{Name: "far"}, func(context.Context, json.RawMessage) (tools.Result, error) { return tools.Text("ok"), nil })}
	cat := tools.MustRegistry(near, far)
	for name, want := range map[string]string{"near": "local", "far": "remote:tah-tool-far", "missing": "local"} {
		if got := tools.RunnerIn(cat, name); got != want {
			t.Errorf("RunnerIn(%s) = %q, want %q", name, got, want)
		}
	}
}

func TestExecuteValidation(t *testing.T) {
	cases := []struct {
		name, args string
		want       string // in the output
	}{
		{"not json", `{"text":`, "not valid JSON"},
		{"not an object", `"hello"`, "want object"},
		{"missing required", `{}`, "text"},
		{"wrong type", `{"text": 5}`, "/text"},
		{"too long", `{"text": "this is far too long"}`, "/text"},
		{"below minimum", `{"text": "a", "n": 0}`, "/n"},
		{"not integer", `{"text": "a", "n": 1.5}`, "/n"},
		{"unknown property", `{"text": "a", "extra": true}`, "extra"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ran := 0
			res := tools.Execute(context.Background(), tools.MustRegistry(echo(&ran)), call("echo", c.args))
			if !res.IsError || res.Code != event.CodeInvalidInput {
				t.Fatalf("result = %+v", res)
			}
			if ran != 0 {
				t.Error("the tool ran on invalid input")
			}
			if !strings.Contains(res.Output, c.want) || !strings.Contains(res.Output, "invalid input for tool echo") {
				t.Errorf("output %q does not say %q", res.Output, c.want)
			}
			if testing.Verbose() {
				t.Log(res.Output)
			}
		})
	}
	// Valid input, and no arguments at all for a tool without required fields.
	ran := 0
	if res := tools.Execute(context.Background(), tools.MustRegistry(echo(&ran)), call("echo", `{"text":"hi","n":2}`)); res.IsError || res.Output != "hi" || ran != 1 {
		t.Errorf("valid call: %+v", res)
	}
	free := tools.Func(tools.Spec{Name: "free"}, func(ctx context.Context, in json.RawMessage) (tools.Result, error) {
		return tools.Text(string(in)), nil
	})
	for _, args := range []string{"", "null", "  "} {
		if res := tools.Execute(context.Background(), tools.MustRegistry(free), call("free", args)); res.IsError || res.Output != "{}" {
			t.Errorf("args %q: %+v", args, res)
		}
	}
}

func TestExecuteUnknownTool(t *testing.T) {
	res := tools.Execute(context.Background(), tools.MustRegistry(echo(nil)), call("nope", `{}`))
	if !res.IsError || res.Code != event.CodeUnknownTool || !strings.Contains(res.Output, "Available tools: echo") {
		t.Fatalf("result = %+v", res)
	}
}

// blocking returns a tool that reports its start on started and then waits for
// its context, reporting the context's end on stopped.
func blocking(name string, timeout time.Duration, started, stopped chan struct{}) tools.Tool {
	return tools.Func(tools.Spec{Name: name, Timeout: timeout}, func(ctx context.Context, _ json.RawMessage) (tools.Result, error) {
		close(started)
		<-ctx.Done()
		close(stopped)
		return tools.Result{}, ctx.Err()
	})
}

func TestExecuteTimeout(t *testing.T) {
	started, stopped := make(chan struct{}), make(chan struct{})
	reg := tools.MustRegistry(blocking("slow", 50*time.Millisecond, started, stopped))
	res := tools.Execute(context.Background(), reg, call("slow", `{}`))
	if !res.IsError || res.Code != event.CodeTimeout || !strings.Contains(res.Output, "timed out after 50ms") {
		t.Fatalf("result = %+v", res)
	}
	<-stopped

	// The executor's default timeout applies to a tool without one.
	started, stopped = make(chan struct{}), make(chan struct{})
	exec := tools.NewExecutor(tools.MustRegistry(blocking("slow", 0, started, stopped)), tools.Options{Timeout: 20 * time.Millisecond})
	if res := exec.Execute(context.Background(), call("slow", `{}`)); res.Code != event.CodeTimeout {
		t.Fatalf("default timeout: %+v", res)
	}

	// The caller's deadline (a batch deadline) is a timeout too.
	started, stopped = make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	res = tools.Execute(ctx, tools.MustRegistry(blocking("slow", time.Hour, started, stopped)), call("slow", `{}`))
	if res.Code != event.CodeTimeout || !strings.Contains(res.Output, "deadline of its batch") {
		t.Fatalf("batch deadline: %+v", res)
	}
}

func TestExecuteCancel(t *testing.T) {
	started, stopped := make(chan struct{}), make(chan struct{})
	reg := tools.MustRegistry(blocking("slow", time.Hour, started, stopped))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan tools.Result)
	go func() { done <- tools.Execute(ctx, reg, call("slow", `{}`)) }()
	<-started
	cancel()
	<-stopped // the cancel reached the tool's context
	res := <-done
	if !res.IsError || res.Code != event.CodeCancelled {
		t.Fatalf("result = %+v", res)
	}
	// A call whose context is already done does not run.
	ran := 0
	if res := tools.Execute(ctx, tools.MustRegistry(echo(&ran)), call("echo", `{"text":"x"}`)); res.Code != event.CodeCancelled || ran != 0 {
		t.Fatalf("already cancelled: %+v, ran %d", res, ran)
	}
}

func TestExecuteToolIgnoringContext(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	stubborn := tools.Func(tools.Spec{Name: "stubborn"}, func(ctx context.Context, _ json.RawMessage) (tools.Result, error) {
		close(started)
		<-release
		return tools.Text("too late"), nil
	})
	exec := tools.NewExecutor(tools.MustRegistry(stubborn), tools.Options{Grace: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan tools.Result)
	go func() { done <- exec.Execute(ctx, call("stubborn", `{}`)) }()
	<-started
	cancel()
	if res := <-done; res.Code != event.CodeCancelled {
		t.Fatalf("result = %+v", res)
	}
}

func TestExecutePanic(t *testing.T) {
	boom := tools.Func(tools.Spec{Name: "boom"}, func(context.Context, json.RawMessage) (tools.Result, error) {
		panic("the tool's own bug")
	})
	exec := tools.NewExecutor(tools.MustRegistry(boom), tools.Options{Logger: quiet})
	res := exec.Execute(context.Background(), call("boom", `{}`))
	if !res.IsError || res.Code != event.CodeInternal || !strings.Contains(res.Output, "panicked") {
		t.Fatalf("result = %+v", res)
	}
}

func TestExecuteToolErrors(t *testing.T) {
	mk := func(name string, res tools.Result, err error) tools.Tool {
		return tools.Func(tools.Spec{Name: name}, func(context.Context, json.RawMessage) (tools.Result, error) { return res, err })
	}
	reg := tools.MustRegistry(
		mk("plain", tools.Result{}, errors.New("disk on fire")),
		mk("coded", tools.Result{}, tools.Errorf(event.CodeInvalidInput, "path %q is outside the root", "../x")),
		mk("flagged", tools.Result{Output: "no such thing", IsError: true}, nil),
		mk("fine", tools.Result{Output: "ok", Code: "stray"}, nil),
	)
	for _, c := range []struct{ tool, code, out string }{
		{"plain", event.CodeToolError, "Error: disk on fire"},
		{"coded", event.CodeInvalidInput, `Error: path "../x" is outside the root`},
		{"flagged", event.CodeToolError, "no such thing"},
		{"fine", "", "ok"},
	} {
		res := tools.Execute(context.Background(), reg, call(c.tool, `{}`))
		if res.Code != c.code || res.Output != c.out || res.IsError != (c.code != "") {
			t.Errorf("%s: %+v", c.tool, res)
		}
	}
}

func TestExecuteCallInfo(t *testing.T) {
	var got tools.CallInfo
	spy := tools.Func(tools.Spec{Name: "spy"}, func(ctx context.Context, _ json.RawMessage) (tools.Result, error) {
		got, _ = tools.CallFrom(ctx)
		return tools.Text(""), nil
	})
	ctx := tools.WithCall(context.Background(), tools.CallInfo{Session: "s_1"})
	tools.Execute(ctx, tools.MustRegistry(spy), llm.ToolCall{ID: "call_9", Name: "spy"})
	if got != (tools.CallInfo{ID: "call_9", Name: "spy", Session: "s_1"}) {
		t.Fatalf("call info = %+v", got)
	}
}

func TestLargeOutput(t *testing.T) {
	big := strings.Repeat("0123456789", 1000) + "é" // 10,001 characters, 10,002 bytes
	loud := tools.Func(tools.Spec{Name: "loud"}, func(context.Context, json.RawMessage) (tools.Result, error) {
		return tools.Text(big), nil
	})
	reg := tools.MustRegistry(loud)

	t.Run("kept whole under the limit", func(t *testing.T) {
		res := tools.NewExecutor(reg, tools.Options{MaxOutput: 20_000}).Execute(context.Background(), call("loud", `{}`))
		if res.Output != big || res.Artifact != nil {
			t.Fatalf("output cut: %d chars", len(res.Output))
		}
	})
	t.Run("cut without a store", func(t *testing.T) {
		res := tools.NewExecutor(reg, tools.Options{MaxOutput: 1000, Preview: 100}).Execute(context.Background(), call("loud", `{}`))
		if !strings.HasPrefix(res.Output, big[:100]+"\n\n[output truncated: showing the first 100 of 10001 characters (10002 bytes)") || res.Artifact != nil {
			t.Fatalf("output = %q", res.Output)
		}
	})
	t.Run("stored in the object store", func(t *testing.T) {
		nc := bustest.Connect(t, bustest.Server(t))
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		store, err := artifacts.Open(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		exec := tools.NewExecutor(reg, tools.Options{MaxOutput: 1000, Preview: 100, Artifacts: store})
		res := exec.Execute(tools.WithCall(ctx, tools.CallInfo{Session: "s_7"}), call("loud", `{}`))
		if res.IsError || res.Artifact == nil {
			t.Fatalf("result = %+v", res)
		}
		ref := *res.Artifact
		want := "[output truncated: showing the first 100 of 10001 characters (10002 bytes); the full output is artifact tah_artifacts/calls/s_7/call_1/output.txt]"
		if !strings.HasPrefix(res.Output, big[:100]) || !strings.HasSuffix(res.Output, want) {
			t.Fatalf("output = %q", res.Output)
		}
		if ref.Size != int64(len(big)) || ref.SHA256 == "" {
			t.Fatalf("ref = %+v", ref)
		}
		rc, err := store.Open(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		full, _ := io.ReadAll(rc)
		if string(full) != big {
			t.Fatalf("stored %d bytes, want %d", len(full), len(big))
		}
	})
}
