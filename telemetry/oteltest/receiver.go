package oteltest

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, decoded into plain values.
type Span struct {
	TraceID, SpanID, ParentSpanID string // hex
	Name                          string
	Kind                          tracepb.Span_SpanKind
	Start, End                    time.Time
	Attrs                         map[string]any // string, int64, float64, bool, []any
	Resource                      map[string]any
	Scope                         string
	Events                        []Event
	StatusCode                    tracepb.Status_StatusCode
	StatusMessage                 string
	Links                         []string // the linked spans' trace ids
}

// Event is a span event.
type Event struct {
	Name  string
	Attrs map[string]any
}

// TB is what a receiver needs of its test (testing.TB has it; so does a
// benchmark's harness, natstest.TB).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Receiver collects what exporters send it until the test ends.
type Receiver struct {
	// HTTPURL is the OTLP/HTTP endpoint's base ("http://127.0.0.1:N"), as
	// OTEL_EXPORTER_OTLP_ENDPOINT takes it.
	HTTPURL string
	// GRPCAddr is the OTLP/gRPC endpoint ("127.0.0.1:N").
	GRPCAddr string

	// discard: count the exports, decode and keep nothing (Discard).
	discard bool

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at each export
	spans   []Span
	raw     [][]byte
	exports int
	bytes   int64
}

// Start runs a receiver until tb ends.
func Start(tb TB) *Receiver {
	tb.Helper()
	return start(tb, &Receiver{})
}

// Discard runs a receiver that answers every export as a collector does but
// decodes and keeps nothing of it: it only counts the exports and their
// bytes (Received). A benchmark's, that measures the CPU of a process the
// receiver runs in: its share is reading the requests, no more.
func Discard(tb TB) *Receiver {
	tb.Helper()
	return start(tb, &Receiver{discard: true})
}

func start(tb TB, r *Receiver) *Receiver {
	tb.Helper()
	r.changed = make(chan struct{})
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("oteltest: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(hl) }()
	r.HTTPURL = "http://" + hl.Addr().String()

	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("oteltest: %v", err)
	}
	gs := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(gs, grpcService{r: r})
	go func() { _ = gs.Serve(gl) }()
	r.GRPCAddr = gl.Addr().String()

	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		gs.Stop()
	})
	return r
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if r.discard {
		n, err := io.Copy(io.Discard, req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.count(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		return // an empty ExportTraceServiceResponse is zero bytes
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, fmt.Sprintf("not an OTLP protobuf trace export: %v", err), http.StatusBadRequest)
		return
	}
	r.add(body, &msg)
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

type grpcService struct {
	collectorpb.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcService) Export(_ context.Context, msg *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	if g.r.discard {
		g.r.count(int64(proto.Size(msg)))
		return &collectorpb.ExportTraceServiceResponse{}, nil
	}
	raw, _ := proto.Marshal(msg)
	g.r.add(raw, msg)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) add(raw []byte, msg *collectorpb.ExportTraceServiceRequest) {
	var spans []Span
	for _, rs := range msg.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					TraceID:       hex.EncodeToString(s.GetTraceId()),
					SpanID:        hex.EncodeToString(s.GetSpanId()),
					ParentSpanID:  hex.EncodeToString(s.GetParentSpanId()),
					Name:          s.GetName(),
					Kind:          s.GetKind(),
					Start:         time.Unix(0, int64(s.GetStartTimeUnixNano())),
					End:           time.Unix(0, int64(s.GetEndTimeUnixNano())),
					Attrs:         attrs(s.GetAttributes()),
					Resource:      res,
					Scope:         ss.GetScope().GetName(),
					StatusCode:    s.GetStatus().GetCode(),
					StatusMessage: s.GetStatus().GetMessage(),
				}
				for _, e := range s.GetEvents() {
					sp.Events = append(sp.Events, Event{Name: e.GetName(), Attrs: attrs(e.GetAttributes())})
				}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetTraceId()))
				}
				spans = append(spans, sp)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, spans...)
	r.raw = append(r.raw, bytes.Clone(raw))
	r.exports++
	r.bytes += int64(len(raw))
	close(r.changed)
	r.changed = make(chan struct{})
}

// count counts an export that Discard's receiver did not keep.
func (r *Receiver) count(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exports++
	r.bytes += n
	close(r.changed)
	r.changed = make(chan struct{})
}

// Received is how many exports came, and their bytes (the bodies as sent
// over HTTP, the messages' protobuf size over gRPC).
func (r *Receiver) Received() (exports int, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exports, r.bytes
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_ArrayValue:
		out := make([]any, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	default:
		return nil
	}
}

// Spans is every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Contains says whether any byte received holds s (an exported prompt, say).
func (r *Receiver) Contains(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.raw {
		if bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

// Wait returns the spans once done says they are enough; it fails tb if
// that never happens (the deadline catches a hang, it times nothing).
func (r *Receiver) Wait(tb TB, done func([]Span) bool) []Span {
	tb.Helper()
	deadline := time.After(time.Minute)
	for {
		r.mu.Lock()
		spans, changed := append([]Span(nil), r.spans...), r.changed
		r.mu.Unlock()
		if done(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline:
			tb.Fatalf("oteltest: the spans wanted never came; got %d: %v", len(spans), names(spans))
			return nil
		}
	}
}

func names(spans []Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}

// Named returns the spans whose name is name.
func Named(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}
