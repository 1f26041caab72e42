package oteltest_test

import (
	"context"
	"testing"
	"time"

	"github.com/tah-dev/tah/telemetry/oteltest"
	"github.com/tah-dev/tah/telemetry/otlp"
)

// Both receivers take what the SDK's OTLP/HTTP exporter sends: Start keeps
// the spans, Discard only counts the exports and their bytes.
func TestReceivers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	export := func(rcv *oteltest.Receiver) {
		t.Helper()
		tp, err := otlp.NewProvider(ctx, otlp.Config{Endpoint: rcv.HTTPURL}, otlp.Resource{ServiceName: "oteltest"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, span := tp.Tracer("oteltest").Start(ctx, "one span")
		span.End()
		if err := tp.Shutdown(ctx); err != nil { // the exporter's error, if the receiver refused
			t.Fatal(err)
		}
	}

	kept := oteltest.Start(t)
	export(kept)
	if spans := kept.Spans(); len(spans) != 1 || spans[0].Name != "one span" || spans[0].Resource["service.name"] != "oteltest" {
		t.Fatalf("kept: %+v", spans)
	}
	if n, b := kept.Received(); n != 1 || b == 0 {
		t.Fatalf("kept received %d exports, %d bytes", n, b)
	}

	discarded := oteltest.Discard(t)
	export(discarded)
	if n, b := discarded.Received(); n != 1 || b == 0 || len(discarded.Spans()) != 0 || discarded.Contains("one span") {
		t.Fatalf("discarded: %d exports, %d bytes, spans %v", n, b, discarded.Spans())
	}
}
