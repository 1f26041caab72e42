package telemetry

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C trace context headers, carried as NATS headers of the same names.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

var w3c = propagation.TraceContext{}

// natsCarrier reads and writes trace context in NATS headers. NATS header
// names are case-sensitive; a client may send "Traceparent" (what Go's
// http.Header would make of it), so reads try both spellings.
type natsCarrier nats.Header

func (c natsCarrier) Get(key string) string {
	if v := nats.Header(c).Get(key); v != "" {
		return v
	}
	for k, vs := range c {
		if len(vs) > 0 && equalFold(k, key) {
			return vs[0]
		}
	}
	return ""
}

func (c natsCarrier) Set(key, value string) { c[key] = []string{value} }

func (c natsCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// Inject writes ctx's span context into h (nothing when ctx holds no valid
// span context).
func Inject(ctx context.Context, h nats.Header) {
	if h == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	w3c.Inject(ctx, natsCarrier(h))
}

// Extract returns ctx with the remote span context h carries, if any; a
// malformed traceparent is ignored (W3C: start a new trace), never an error.
func Extract(ctx context.Context, h nats.Header) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return w3c.Extract(ctx, natsCarrier(h))
}

// Parent is the trace context to record in the log (a turn's, so that a
// node resuming the turn continues its trace): the traceparent, and the
// tracestate when there is one. Empty when ctx holds no valid span context.
type Parent struct {
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`
}

// ParentOf is ctx's span context as a Parent.
func ParentOf(ctx context.Context) Parent {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return Parent{}
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return Parent{Traceparent: c[HeaderTraceparent], Tracestate: c[HeaderTracestate]}
}

// Context returns ctx with p as its remote parent; ctx itself when p is
// empty or malformed.
func (p Parent) Context(ctx context.Context) context.Context {
	if p.Traceparent == "" {
		return ctx
	}
	c := propagation.MapCarrier{HeaderTraceparent: p.Traceparent}
	if p.Tracestate != "" {
		c[HeaderTracestate] = p.Tracestate
	}
	return w3c.Extract(ctx, c)
}

// IsZero says whether p carries no trace context.
func (p Parent) IsZero() bool { return p.Traceparent == "" }
