package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// InstrumentationName names TAH's tracer (the instrumentation scope).
const InstrumentationName = "github.com/tah-dev/tah"

// Tracing is a node's tracing: its tracer (a no-op one when off), whether
// content may be recorded, and how to flush and stop the exporter behind it
// (telemetry/otlp builds one that exports).
type Tracing struct {
	tracer   trace.Tracer
	enabled  bool
	content  bool
	flush    func(context.Context) error
	shutdown func(context.Context) error
}

// Off is tracing that records nothing.
func Off() *Tracing { return &Tracing{tracer: noop.NewTracerProvider().Tracer(InstrumentationName)} }

// New is tracing with the spans of tp (an SDK TracerProvider, say);
// captureContent lets spans carry message content. Shutdown and ForceFlush
// call tp's when it has them.
func New(tp trace.TracerProvider, captureContent bool) *Tracing {
	t := &Tracing{tracer: tp.Tracer(InstrumentationName, trace.WithSchemaURL(SchemaURL)), enabled: true, content: captureContent}
	if f, ok := tp.(interface{ ForceFlush(context.Context) error }); ok {
		t.flush = f.ForceFlush
	}
	if s, ok := tp.(interface{ Shutdown(context.Context) error }); ok {
		t.shutdown = s.Shutdown
	}
	return t
}

// Tracer is the tracer to start spans with (a no-op one when off). A nil
// Tracing is off.
func (t *Tracing) Tracer() trace.Tracer {
	if t == nil {
		return Off().tracer
	}
	return t.tracer
}

// Enabled says whether spans are recorded: a caller may skip building
// attributes when not.
func (t *Tracing) Enabled() bool { return t != nil && t.enabled }

// CaptureContent says whether spans may carry message content.
func (t *Tracing) CaptureContent() bool { return t != nil && t.content }

// ForceFlush exports the spans ended so far.
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if t == nil || t.flush == nil {
		return nil
	}
	return t.flush(ctx)
}

// Shutdown exports what is left and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}
