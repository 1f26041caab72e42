package otlp_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/tah-dev/tah/telemetry"
	"github.com/tah-dev/tah/telemetry/oteltest"
	"github.com/tah-dev/tah/telemetry/otlp"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestExportsOverBothProtocols(t *testing.T) {
	rcv := oteltest.Start(t)
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"http by the config's endpoint", nil},
		{"http by the standard variables", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": rcv.HTTPURL}},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := otlp.Config{}
			switch {
			case tc.env == nil:
				cfg = otlp.Config{Enabled: true, Endpoint: rcv.HTTPURL}
			case tc.env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "grpc":
				cfg = otlp.Config{Enabled: true, Endpoint: rcv.GRPCAddr}
			}
			// The exporters read the OTEL_EXPORTER_OTLP_* variables from the
			// process's environment themselves.
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			tr, err := otlp.Start(t.Context(), cfg, otlp.Resource{NodeID: "n1", Version: "v9"}, os.LookupEnv)
			if err != nil {
				t.Fatal(err)
			}
			if !tr.Enabled() {
				t.Fatal("not enabled")
			}
			name := "invoke_agent " + tc.name
			_, span := tr.Tracer().Start(t.Context(), name)
			span.SetAttributes(telemetry.KeyConversation.String("s_1"), telemetry.KeyTurn.Int(3))
			span.End()
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := oteltest.Named(rcv.Wait(t, func(s []oteltest.Span) bool { return len(oteltest.Named(s, name)) == 1 }), name)[0]
			if got.Attrs["gen_ai.conversation.id"] != "s_1" || got.Attrs["tah.turn"] != int64(3) {
				t.Errorf("attributes: %v", got.Attrs)
			}
			if got.Resource["service.name"] != "tah-node" || got.Resource["service.instance.id"] != "n1" || got.Resource["service.version"] != "v9" {
				t.Errorf("resource: %v", got.Resource)
			}
			if got.Scope != telemetry.InstrumentationName {
				t.Errorf("scope %q", got.Scope)
			}
		})
	}
}

func TestOffRecordsNothing(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"default":     nil,
		"none wins":   {"OTEL_TRACES_EXPORTER": "none"},
		"sdk off":     {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"},
		"other value": {"OTEL_TRACES_EXPORTER": "console"},
	} {
		cfg := otlp.Config{Enabled: name == "none wins"}
		tr, err := otlp.Start(t.Context(), cfg, otlp.Resource{}, envOf(env))
		if err != nil {
			t.Fatal(err)
		}
		if tr.Enabled() {
			t.Errorf("%s: enabled", name)
		}
		_, span := tr.Tracer().Start(t.Context(), "x")
		if span.IsRecording() {
			t.Errorf("%s: a span records", name)
		}
		span.End()
		if err := tr.Shutdown(t.Context()); err != nil {
			t.Error(err)
		}
	}
}

func TestBadProtocolIsRefused(t *testing.T) {
	_, err := otlp.Start(t.Context(), otlp.Config{Enabled: true}, otlp.Resource{}, envOf(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}))
	if !errors.Is(err, otlp.ErrInvalidConfig) {
		t.Fatalf("err = %v", err)
	}
}

func TestCaptureContentIsOptIn(t *testing.T) {
	rcv := oteltest.Start(t)
	for _, want := range []bool{false, true} {
		env := map[string]string{}
		if want {
			env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
		}
		tr, err := otlp.Start(t.Context(), otlp.Config{Enabled: true, Endpoint: rcv.HTTPURL}, otlp.Resource{}, envOf(env))
		if err != nil {
			t.Fatal(err)
		}
		if tr.CaptureContent() != want {
			t.Errorf("CaptureContent = %v, want %v", tr.CaptureContent(), want)
		}
		_ = tr.Shutdown(t.Context())
	}
}

func TestTraceContextInNATSHeadersAndTheLog(t *testing.T) {
	rcv := oteltest.Start(t)
	tr, err := otlp.Start(t.Context(), otlp.Config{Enabled: true, Endpoint: rcv.HTTPURL}, otlp.Resource{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := tr.Tracer().Start(t.Context(), "client")
	h := nats.Header{}
	telemetry.Inject(ctx, h)
	if h.Get("traceparent") == "" {
		t.Fatalf("no traceparent in %v", h)
	}

	// The receiving side: its span is the client's child.
	rctx := telemetry.Extract(context.Background(), h)
	_, child := tr.Tracer().Start(rctx, "turn")
	if child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Fatal("the child is in another trace")
	}

	// Recorded in the log and read back by another node: the same trace.
	rec := telemetry.ParentOf(trace.ContextWithSpan(context.Background(), child))
	if rec.IsZero() {
		t.Fatal("nothing to record")
	}
	_, resumed := tr.Tracer().Start(rec.Context(context.Background()), "turn resumed")
	if resumed.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Fatal("a resumed turn left the trace")
	}
	resumed.End()
	child.End()
	parent.End()
	_ = tr.Shutdown(t.Context())
	spans := rcv.Wait(t, func(s []oteltest.Span) bool { return len(s) == 3 })
	byName := map[string]oteltest.Span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	if byName["turn"].ParentSpanID != byName["client"].SpanID || byName["turn resumed"].ParentSpanID != byName["turn"].SpanID {
		t.Errorf("the tree: %+v", spans)
	}
}

func TestHostileHeadersAreIgnored(t *testing.T) {
	for _, v := range []string{"", "garbage", "00-00000000000000000000000000000000-0000000000000000-01", "ff-" + string(make([]byte, 300))} {
		ctx := telemetry.Extract(context.Background(), nats.Header{"traceparent": []string{v}})
		if trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("%q made a span context", v)
		}
		if p := (telemetry.Parent{Traceparent: v}); trace.SpanContextFromContext(p.Context(context.Background())).IsValid() {
			t.Errorf("recorded %q made a span context", v)
		}
	}
	// Any spelling of the header name a client's library makes.
	ctx := telemetry.Extract(context.Background(), nats.Header{"Traceparent": []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
	if !trace.SpanContextFromContext(ctx).IsValid() {
		t.Error("Traceparent (capitalised) was not read")
	}
	// Nothing to inject, nothing written.
	h := nats.Header{}
	telemetry.Inject(context.Background(), h)
	if len(h) != 0 {
		t.Errorf("injected %v from an empty context", h)
	}
}
