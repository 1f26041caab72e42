package remote_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/nats-io/nats.go"

	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/tools"
	"github.com/tah-dev/tah/tools/toolservice"
)

// TestTraceGoesWithTheCall: a call made inside a span carries its W3C trace
// context to the service, whose execute_tool span is that span's child; a
// request from a stranger with a malformed traceparent starts a trace of
// its own and is served all the same.
func TestTraceGoesWithTheCall(t *testing.T) {
	ctx := testCtx(t)
	srv := bustest.Server(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	svc, err := toolservice.Start(ctx, bustest.Connect(t, srv), toolservice.Config{Logger: quiet, TracerProvider: tp}, goTools(nil)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	reg := openRegistry(t, srv)
	discover(t, reg, "shout")

	caller := sdktrace.NewTracerProvider() // the node's, exporting elsewhere
	sctx, parent := caller.Tracer("test").Start(tools.WithCall(ctx, tools.CallInfo{Session: "s_tr"}), "execute_tool shout")
	res := tools.NewExecutor(reg, tools.Options{Logger: quiet}).Execute(sctx, llm.ToolCall{ID: "call_tr", Name: "shout", Arguments: json.RawMessage(`{"text":"hi"}`)})
	parent.End()
	if res.IsError {
		t.Fatalf("shout: %+v", res)
	}
	bustest.Eventually(t, 30*time.Second, "the service's span", func() bool { return len(rec.Ended()) == 1 })
	s := rec.Ended()[0]
	if s.Name() != "execute_tool shout" || s.SpanKind() != trace.SpanKindServer {
		t.Errorf("span %q kind %v", s.Name(), s.SpanKind())
	}
	if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() || !s.Parent().IsRemote() {
		t.Errorf("not the caller's remote child: parent %v, want %v", s.Parent(), parent.SpanContext())
	}
	attrs := map[string]string{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["gen_ai.tool.name"] != "shout" || attrs["gen_ai.tool.call.id"] != "call_tr" || attrs["gen_ai.operation.name"] != "execute_tool" || attrs["tah.session.id"] != "s_tr" {
		t.Errorf("attributes: %v", attrs)
	}

	// A stranger's malformed context: served, in a trace of its own.
	nc := bustest.Connect(t, srv)
	msg := nats.NewMsg("tah.tool.shout")
	msg.Header.Set("Tah-Call-Id", "call_bad")
	msg.Header.Set("traceparent", "00-zz-not-a-trace-01")
	msg.Data = []byte(`{"input":{"text":"x"}}`)
	if _, err := nc.RequestMsg(msg, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// The span ends after the reply has gone.
	bustest.Eventually(t, 30*time.Second, "the stranger's call's span", func() bool { return len(rec.Ended()) == 2 })
	if p := rec.Ended()[1].Parent(); p.IsValid() {
		t.Fatalf("the stranger's call has a parent: %v", p)
	}
}
