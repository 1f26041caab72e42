package remote_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tah-dev/tah/actors/session"
	"github.com/tah-dev/tah/auth"
	"github.com/tah-dev/tah/bus"
	"github.com/tah-dev/tah/bus/bustest"
	"github.com/tah-dev/tah/client"
	"github.com/tah-dev/tah/internal/localnode"
	"github.com/tah-dev/tah/llm"
	"github.com/tah-dev/tah/llm/mock"
	"github.com/tah-dev/tah/node"
	"github.com/tah-dev/tah/projection"
	"github.com/tah-dev/tah/telemetry/oteltest"
	"github.com/tah-dev/tah/telemetry/otlp"
	"github.com/tah-dev/tah/tools/remote"
	"github.com/tah-dev/tah/wire"
)

// TestJavaScriptToolServiceTrace: a turn on a node that traces calls the
// JavaScript example's shout; the example, told where to export by the
// standard OTEL_* variables, continues the trace the call's traceparent
// header carries: its span is a server span, the child of the node's
// execute_tool shout, in the client's trace, exported over OTLP/HTTP
// (protobuf) by OpenTelemetry's JS SDK to the same receiver as the node's.
func TestJavaScriptToolServiceTrace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rcv := oteltest.Start(t)
	cfg := bus.Default()
	cfg.DataDir, cfg.Port, cfg.Partitions = t.TempDir(), -1, 2
	p := mock.Scripted(mock.CallTool("shout", `{"text":"hello"}`), mock.Say("done"))
	n, err := node.Start(ctx, node.Options{Bus: cfg, Provider: p, Logger: quiet,
		RemoteTools: &remote.Config{RefreshEvery: 100 * time.Millisecond, DiscoveryQuiet: 50 * time.Millisecond, Logger: quiet},
		Session:     session.Config{Node: "n1", Logger: quiet, Model: "test-model"},
		Tracing:     otlp.Config{Enabled: true, Endpoint: rcv.HTTPURL}})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = n.Close(context.Background())
		}
	})

	// The example connects as a tool credential, as docs/operations.md has
	// one made with tahctl creds add --role tool.
	trust, err := auth.Load(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	u, err := auth.RoleUser(wire.RoleTool, "jstools", []string{"shout", "word_count", "wait"})
	if err != nil {
		t.Fatal(err)
	}
	issued, err := trust.Issue(u)
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), "jstools.creds")
	if err := os.WriteFile(creds, issued.Creds, 0o600); err != nil {
		t.Fatal(err)
	}
	startJS(t, n.Bus().ClientURL(), "NATS_CREDS="+creds,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.HTTPURL, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=",
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_TRACES_EXPORTER=", "OTEL_SDK_DISABLED=",
		"OTEL_SERVICE_NAME=", "OTEL_BSP_SCHEDULE_DELAY=100") // its spans go out soon after they end
	bustest.Eventually(t, 30*time.Second, "the node lists shout", func() bool {
		return slices.ContainsFunc(n.ToolSchemas(), func(s llm.ToolSchema) bool { return s.Name == "shout" })
	})

	if _, err := session.Create(ctx, n.Bus(), "s_jstrace", session.Config{}, nil); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(n.Bus().ClientURL(), nats.UserCredentials(localnode.NodeCredsPath(cfg.DataDir)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cl, err := client.New(nc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cctx, clientSpan := sdktrace.NewTracerProvider().Tracer("client").Start(ctx, "client asks")
	run, err := cl.Run(cctx, "s_jstrace", wire.Input{ID: "in_js", Text: "shout hello"})
	if err != nil {
		t.Fatal(err)
	}
	o, err := run.Outcome(ctx)
	clientSpan.End()
	if err != nil || o.Status != projection.StatusCompleted {
		t.Fatalf("the turn: %+v %v", o, err)
	}
	// Closing the node flushes its spans.
	closed = true
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}

	traceID := clientSpan.SpanContext().TraceID().String()
	var nodeSpan, js oteltest.Span
	rcv.Wait(t, func(spans []oteltest.Span) bool {
		for _, s := range oteltest.Named(spans, "execute_tool shout") {
			if s.TraceID != traceID {
				continue
			}
			switch s.Scope {
			case "tah-tool-service-js":
				js = s
			default:
				nodeSpan = s
			}
		}
		return nodeSpan.SpanID != "" && js.SpanID != ""
	})
	if js.ParentSpanID != nodeSpan.SpanID {
		t.Errorf("the JS span's parent is %s, want the node's execute_tool span %s", js.ParentSpanID, nodeSpan.SpanID)
	}
	if js.Kind.String() != "SPAN_KIND_SERVER" || nodeSpan.Kind.String() != "SPAN_KIND_INTERNAL" {
		t.Errorf("kinds: JS %v, node %v", js.Kind, nodeSpan.Kind)
	}
	if js.Attrs["gen_ai.operation.name"] != "execute_tool" || js.Attrs["gen_ai.tool.name"] != "shout" ||
		js.Attrs["gen_ai.tool.call.id"] != nodeSpan.Attrs["gen_ai.tool.call.id"] || js.Attrs["tah.session.id"] != "s_jstrace" {
		t.Errorf("the JS span's attributes: %v (the node's: %v)", js.Attrs, nodeSpan.Attrs)
	}
	if js.Resource["service.name"] != "tah-tool-service-js" || js.Resource["telemetry.sdk.language"] != "nodejs" {
		t.Errorf("the JS span's resource: %v", js.Resource)
	}
	if nodeSpan.Resource["service.name"] != "tah-node" {
		t.Errorf("the node's span's resource: %v", nodeSpan.Resource)
	}
	// No content: the example records neither arguments nor results.
	if rcv.Contains("HELLO!") {
		t.Error("the tool's result was exported")
	}
}
