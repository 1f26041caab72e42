package node

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/event"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/telemetry/oteltest"
	"github.com/tah-dev/tah/telemetry/otlp"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/remote"
	"github.com/tah-dev/tah/tools/toolservice"
	"github.com/tah-dev/tah/wire"
)

// A turn with two tool calls, one local and one served by a tool service,
// sent with a client's traceparent, is one trace on the GenAI conventions:
// the client's span → invoke_agent → two chat spans and two execute_tool
// spans, and the service's own execute_tool span under the node's. With
// content capture off, no prompt, answer or tool output is in any byte
// exported.
func TestTurnIsOneTrace(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rcv := oteltest.Start(t)
	quiet := slog.New(slog.DiscardHandler)
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = t.TempDir(), -1, 2
	echo := tools.Func(tools.Spec{Name: "echo"}, func(_ context.Context, in json.RawMessage) (tools.Result, error) {
		return tools.Text("SECRET-TOOL-OUTPUT " + string(in)), nil
	})
	p := mock.Scripted(mock.CallTool("echo", `{"a":"SECRET-ARGUMENT"}`).AndCall("shout", `{"b":2}`), mock.Say("SECRET-ANSWER"))
	n, err := Start(ctx, Options{Bus: cfg, Provider: p, Tools: tools.MustRegistry(echo), Logger: quiet,
		RemoteTools: &remote.Config{DiscoveryQuiet: 50 * time.Millisecond, Logger: quiet},
		Session:     session.Config{Node: "n1", Logger: quiet, Model: "test-model"},
		Tracing:     otlp.Config{Enabled: true, Endpoint: rcv.HTTPURL}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })

	// A tool service in its own process would set up its SDK: here one that
	// exports to the same receiver.
	nc, err := nats.Connect(n.bus.ClientURL(), nats.UserCredentials(localnode.NodeCredsPath(cfg.DataDir)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	svcProvider, err := otlp.NewProvider(ctx, otlp.Config{Endpoint: rcv.HTTPURL}, otlp.Resource{ServiceName: "shout-service"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	shout := tools.Func(tools.Spec{Name: "shout"}, func(_ context.Context, in json.RawMessage) (tools.Result, error) {
		return tools.Text(strings.ToUpper(string(in))), nil
	})
	svc, err := toolservice.Start(ctx, nc, toolservice.Config{Logger: quiet, TracerProvider: svcProvider}, shout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	bustest.Eventually(t, 30*time.Second, "shout discovered", func() bool {
		_ = n.remote.Refresh(ctx)
		_, ok := n.tools.Tool("shout")
		return ok
	})

	clientSpan := tracedTurn(t, ctx, n, nc, "SECRET-PROMPT")
	_ = svcProvider.ForceFlush(ctx)
	if err := n.tracing.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}

	traceID := clientSpan.SpanContext().TraceID().String()
	spans := rcv.Wait(t, func(s []oteltest.Span) bool {
		return len(inTrace(s, traceID)) >= 6 // invoke_agent, 2 chat, 2 execute_tool, the service's
	})
	spans = inTrace(spans, traceID)
	turns := oteltest.Named(spans, "invoke_agent tah")
	if len(turns) != 1 || turns[0].ParentSpanID != clientSpan.SpanContext().SpanID().String() {
		t.Fatalf("the turn's span is not the client's child: %+v", turns)
	}
	turn := turns[0]
	if turn.Attrs["gen_ai.conversation.id"] != "s1" || turn.Attrs["gen_ai.operation.name"] != "invoke_agent" || turn.Attrs["tah.input.id"] != "in_1" ||
		turn.Attrs["tah.node"] != "n1" || turn.Attrs["tah.turn.status"] != "completed" || turn.Attrs["gen_ai.agent.name"] != "tah" {
		t.Errorf("turn attributes: %v", turn.Attrs)
	}
	chats := oteltest.Named(spans, "chat test-model")
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want 2: %v", len(chats), spanNames(spans))
	}
	for _, c := range chats {
		if c.ParentSpanID != turn.SpanID || c.Attrs["gen_ai.provider.name"] != "mock" || c.Attrs["gen_ai.request.model"] != "test-model" ||
			c.Attrs["gen_ai.usage.input_tokens"] == nil || c.Kind.String() != "SPAN_KIND_CLIENT" {
			t.Errorf("chat span: parent %s, attrs %v", c.ParentSpanID, c.Attrs)
		}
	}
	var nodeShout oteltest.Span
	for _, name := range []string{"execute_tool echo", "execute_tool shout"} {
		calls := oteltest.Named(spans, name)
		var mine []oteltest.Span
		for _, c := range calls {
			if c.ParentSpanID == turn.SpanID {
				mine = append(mine, c)
			}
		}
		if len(mine) != 1 {
			t.Fatalf("%s: %d spans under the turn: %v", name, len(mine), spanNames(spans))
		}
		if mine[0].Attrs["gen_ai.tool.name"] == nil || mine[0].Attrs["gen_ai.tool.call.id"] == nil || mine[0].Attrs["tah.tool.runner"] == nil {
			t.Errorf("%s attributes: %v", name, mine[0].Attrs)
		}
		if name == "execute_tool shout" {
			nodeShout = mine[0]
		}
	}
	served := false
	for _, s := range oteltest.Named(spans, "execute_tool shout") {
		if s.ParentSpanID == nodeShout.SpanID && s.Kind.String() == "SPAN_KIND_SERVER" {
			served = true
		}
	}
	if !served {
		t.Errorf("the service's span is not the child of the node's execute_tool shout: %v", spanNames(spans))
	}
	rec := httptest.NewRecorder()
	n.Metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`gen_ai_client_operation_duration_seconds_count{error_type="",gen_ai_operation_name="chat",gen_ai_provider_name="mock"`,
		`gen_ai_client_token_usage_count{gen_ai_operation_name="chat",gen_ai_provider_name="mock"`,
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, secret := range []string{"SECRET-PROMPT", "SECRET-ANSWER", "SECRET-ARGUMENT", "SECRET-TOOL-OUTPUT"} {
		if rcv.Contains(secret) {
			t.Errorf("%s was exported with content capture off", secret)
		}
	}
}

// tracedTurn creates session s1 and runs a turn of it with text (input
// in_1) from a client in a span of its own, which package client sends
// with the input (W3C traceparent header); it returns that span, ended,
// once the turn completed.
func tracedTurn(t *testing.T, ctx context.Context, n *Node, nc *nats.Conn, text string) trace.Span {
	t.Helper()
	if _, err := session.Create(ctx, n.bus, "s1", session.Config{}, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(nc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cctx, clientSpan := sdktrace.NewTracerProvider().Tracer("client").Start(ctx, "client asks")
	run, err := cl.Run(cctx, "s1", wire.Input{ID: "in_1", Text: text})
	if err != nil {
		t.Fatal(err)
	}
	if o, err := run.Outcome(ctx); err != nil || o.Status != projection.StatusCompleted {
		t.Fatalf("%+v %v", o, err)
	}
	clientSpan.End()
	return clientSpan
}

func inTrace(spans []oteltest.Span, traceID string) []oteltest.Span {
	var out []oteltest.Span
	for _, s := range spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

func spanNames(spans []oteltest.Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name + "<" + s.ParentSpanID + ">"
	}
	return out
}

// A turn its node left mid-call (stopped, its input unacknowledged) and that
// the next node on the log resumes stays one trace: the resumed work's span
// is the child of the span recorded in turn.started, in the client's trace,
// with an event saying where and why it went on.
func TestResumedTurnStaysInItsTrace(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rcv := oteltest.Start(t)
	quiet := slog.New(slog.DiscardHandler)
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = t.TempDir(), -1, 2
	started := make(chan struct{}, 1)
	hold := tools.Func(tools.Spec{Name: "hold"}, func(ctx context.Context, _ json.RawMessage) (tools.Result, error) {
		started <- struct{}{}
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	})
	start := func(name string, tool tools.Tool) *Node {
		p := mock.Scripted(mock.CallTool("hold", `{}`), mock.Say("done"))
		n, err := Start(ctx, Options{Bus: cfg, Provider: p, Tools: tools.MustRegistry(tool), Logger: quiet,
			Session: session.Config{Node: name, Logger: quiet},
			Tracing: otlp.Config{Enabled: true, Endpoint: rcv.HTTPURL}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	first := start("first", hold)
	if _, err := session.Create(ctx, first.bus, "s1", session.Config{}, nil); err != nil {
		t.Fatal(err)
	}
	cctx, clientSpan := sdktrace.NewTracerProvider().Tracer("client").Start(ctx, "client asks")
	if _, err := first.bus.PublishInput(cctx, "s1", wire.Input{ID: "in_1", Command: wire.CommandRun, Text: "go"}); err != nil {
		t.Fatal(err)
	}
	clientSpan.End()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the call never started")
	}
	if err := first.Close(ctx); err != nil { // the turn stops unfinished; its input comes back
		t.Fatal(err)
	}

	quick := tools.Func(tools.Spec{Name: "hold"}, func(context.Context, json.RawMessage) (tools.Result, error) {
		return tools.Text("held"), nil
	})
	second := start("second", quick)
	t.Cleanup(func() { _ = second.Close(context.Background()) })
	traceID := clientSpan.SpanContext().TraceID().String()
	spans := rcv.Wait(t, func(s []oteltest.Span) bool {
		for _, sp := range oteltest.Named(inTrace(s, traceID), "invoke_agent tah") {
			if sp.Attrs["tah.node"] == "second" && sp.Attrs["tah.turn.status"] == "completed" {
				return true
			}
		}
		return false
	})
	var firstSpan, resumed oteltest.Span
	for _, sp := range oteltest.Named(inTrace(spans, traceID), "invoke_agent tah") {
		switch sp.Attrs["tah.node"] {
		case "first":
			firstSpan = sp
		case "second":
			resumed = sp
		}
	}
	if firstSpan.SpanID == "" || firstSpan.ParentSpanID != clientSpan.SpanContext().SpanID().String() {
		t.Fatalf("the first node's span is not the client's child: %+v", firstSpan)
	}
	if resumed.ParentSpanID != firstSpan.SpanID {
		t.Fatalf("the resumed work's parent is %s, want the recorded turn span %s", resumed.ParentSpanID, firstSpan.SpanID)
	}
	continued := false
	for _, e := range resumed.Events {
		if e.Name == "tah.turn.continued" && e.Attrs["tah.node"] == "second" && e.Attrs["tah.previous_node"] == "first" {
			continued = true
		}
	}
	if !continued {
		t.Errorf("no tah.turn.continued event naming the nodes: %+v", resumed.Events)
	}
	chat := false
	for _, sp := range inTrace(spans, traceID) {
		if sp.ParentSpanID == resumed.SpanID && strings.HasPrefix(sp.Name, "chat") {
			chat = true
		}
	}
	if !chat {
		t.Errorf("no chat span under the resumed work: %v", spanNames(inTrace(spans, traceID)))
	}
}

// A turn stopped by its budget ends its span in error, code
// budget_exceeded, with an event that names the limit and the spend.
func TestBudgetStopIsInTheTrace(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rcv := oteltest.Start(t)
	quiet := slog.New(slog.DiscardHandler)
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = t.TempDir(), -1, 2
	p := mock.Scripted(mock.Say("spent").WithUsage(llm.Usage{InputTokens: 90, OutputTokens: 30}))
	n, err := Start(ctx, Options{Bus: cfg, Provider: p, Logger: quiet,
		Session: session.Config{Node: "n1", Logger: quiet, Budget: event.Budget{Session: event.Limits{Tokens: 100}}},
		Tracing: otlp.Config{Enabled: true, Endpoint: rcv.HTTPURL}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	if _, err := session.Create(ctx, n.bus, "s1", session.Config{}, nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"in_1", "in_2"} { // the second turn finds the session's tokens spent
		if _, err := n.bus.PublishInput(ctx, "s1", wire.Input{ID: id, Command: wire.CommandRun, Text: "go"}); err != nil {
			t.Fatal(err)
		}
	}
	spans := rcv.Wait(t, func(s []oteltest.Span) bool {
		for _, sp := range oteltest.Named(s, "invoke_agent tah") {
			if sp.Attrs["tah.turn.code"] == event.CodeBudgetExceeded {
				return true
			}
		}
		return false
	})
	for _, sp := range oteltest.Named(spans, "invoke_agent tah") {
		if sp.Attrs["tah.turn.code"] != event.CodeBudgetExceeded {
			continue
		}
		for _, e := range sp.Events {
			if e.Name == "tah.budget.reached" && e.Attrs["tah.budget.scope"] == "session" && e.Attrs["tah.budget.kind"] == "tokens" &&
				e.Attrs["tah.budget.from"] == "node" && e.Attrs["tah.budget.limit"] == float64(100) && e.Attrs["tah.budget.spent"] == float64(120) {
				return
			}
		}
		t.Fatalf("the stopped turn's span has no tah.budget.reached naming the limit: %+v", sp.Events)
	}
}

// A sub-agent's turn is in its parent's trace: the child's invoke_agent
// span is a child of the parent's execute_tool span of the call (its task
// input carries it), whichever node runs the child.
func TestSubAgentTurnIsInItsParentsTrace(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rcv := oteltest.Start(t)
	quiet := slog.New(slog.DiscardHandler)
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = t.TempDir(), -1, 2
	p := mock.Scripted(
		mock.CallTool("agent_researcher", `{"task":"the tides"}`).OnPrompt("research"),
		mock.Say("high at noon").OnPrompt("the tides"),
		mock.Say("the tides are high at noon").OnPrompt("research"),
	)
	n, err := Start(ctx, Options{Bus: cfg, Provider: p, Logger: quiet,
		Session: session.Config{Node: "n1", Logger: quiet, Model: "test-model",
			SubAgents: []session.SubAgent{{Name: "researcher", Description: "Finds out about one thing.", SystemPrompt: "You research."}}},
		Tracing: otlp.Config{Enabled: true, Endpoint: rcv.HTTPURL}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	nc, err := nats.Connect(n.bus.ClientURL(), nats.UserCredentials(localnode.NodeCredsPath(cfg.DataDir)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	clientSpan := tracedTurn(t, ctx, n, nc, "research the sea")
	if err := n.tracing.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	traceID := clientSpan.SpanContext().TraceID().String()
	spans := rcv.Wait(t, func(s []oteltest.Span) bool {
		return len(oteltest.Named(inTrace(s, traceID), "invoke_agent tah")) >= 2
	})
	spans = inTrace(spans, traceID)
	calls := oteltest.Named(spans, "execute_tool agent_researcher")
	if len(calls) != 1 {
		t.Fatalf("execute_tool agent_researcher spans: %d of %v", len(calls), spanNames(spans))
	}
	var childTurn *oteltest.Span
	for _, s := range oteltest.Named(spans, "invoke_agent tah") {
		if s.Attrs["gen_ai.conversation.id"] != "s1" {
			childTurn = &s
		}
	}
	if childTurn == nil || childTurn.ParentSpanID != calls[0].SpanID {
		t.Fatalf("the child's turn %+v is not the call's (%s) child; spans %v", childTurn, calls[0].SpanID, spanNames(spans))
	}
}
