package otlp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/tah-dev/tah/telemetry"
)

// ErrInvalidConfig is wrapped by Start when the settings or the OTEL_*
// variables cannot make an exporter (an unknown protocol, say).
var ErrInvalidConfig = errors.New("invalid tracing settings")

// Config is what turns tracing on and how.
type Config struct {
	// Enabled exports traces over OTLP. OTEL_TRACES_EXPORTER=otlp turns it on
	// too, and OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true off.
	Enabled bool `json:"enabled,omitempty"`
	// Protocol is "http/protobuf" or "grpc"; empty: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
	// then OTEL_EXPORTER_OTLP_PROTOCOL, then "http/protobuf".
	Protocol string `json:"protocol,omitempty"`
	// Endpoint is the collector's address (http://host:4318 for HTTP,
	// host:4317 for gRPC); empty: the OTEL_EXPORTER_OTLP_* variables, then
	// the exporter's default on localhost.
	Endpoint string `json:"endpoint,omitempty"`
	// CaptureContent records messages, answers and tool arguments and
	// results on the spans. Off by default: they may hold anything a user or
	// a tool wrote. OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true
	// turns it on too.
	CaptureContent bool `json:"capture_content,omitempty"`
}

// Resource names the process that exports.
type Resource struct {
	ServiceName string // OTEL_SERVICE_NAME wins over it; default "tah-node"
	Version     string // service.version
	NodeID      string // service.instance.id and tah.node
}

// Start sets a node's tracing up from cfg and the environment lookup env
// (os.LookupEnv in a node): off unless cfg or OTEL_TRACES_EXPORTER says
// otherwise. The caller owns the result and must Shutdown it.
func Start(ctx context.Context, cfg Config, res Resource, env func(string) (string, bool)) (*telemetry.Tracing, error) {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	if !enabled(cfg, env) {
		return telemetry.Off(), nil
	}
	tp, err := NewProvider(ctx, cfg, res, env)
	if err != nil {
		return nil, err
	}
	content := cfg.CaptureContent
	if v, ok := env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"); ok && strings.EqualFold(v, "true") {
		content = true
	}
	return telemetry.New(tp, content), nil
}

// NewProvider is an SDK tracer provider that exports over OTLP as cfg and
// the OTEL_* variables say, whether or not cfg enables tracing: a tool
// service's (toolservice.Config.TracerProvider), say. The caller must
// Shutdown it.
func NewProvider(ctx context.Context, cfg Config, res Resource, env func(string) (string, bool)) (*sdktrace.TracerProvider, error) {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	exp, err := exporter(ctx, cfg, env)
	if err != nil {
		return nil, err
	}
	name := res.ServiceName
	if v, ok := env("OTEL_SERVICE_NAME"); ok && v != "" {
		name = v
	}
	if name == "" {
		name = "tah-node"
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(name)}
	if res.Version != "" {
		attrs = append(attrs, semconv.ServiceVersion(res.Version))
	}
	if res.NodeID != "" {
		attrs = append(attrs, semconv.ServiceInstanceID(res.NodeID), telemetry.Node(res.NodeID))
	}
	// resource.Default adds the SDK's own attributes and OTEL_RESOURCE_ATTRIBUTES.
	r, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL, attrs...))
	if err != nil {
		// Only a clash of schema URLs: keep ours.
		r = resource.NewWithAttributes(semconv.SchemaURL, attrs...)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(r)), nil
}

func enabled(cfg Config, env func(string) (string, bool)) bool {
	if v, _ := env("OTEL_SDK_DISABLED"); strings.EqualFold(v, "true") {
		return false
	}
	switch v, _ := env("OTEL_TRACES_EXPORTER"); strings.ToLower(strings.TrimSpace(v)) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return cfg.Enabled
}

// exporter is the OTLP exporter the protocol names; the official exporters
// read the other OTEL_EXPORTER_OTLP_* variables themselves.
func exporter(ctx context.Context, cfg Config, env func(string) (string, bool)) (sdktrace.SpanExporter, error) {
	protocol := cfg.Protocol
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v, ok := env(name); ok && v != "" && protocol == "" {
			protocol = v
		}
	}
	switch protocol {
	case "", "http/protobuf":
		var opts []otlptracehttp.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(endpointURL(cfg.Endpoint, "http://", "/v1/traces")))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("%w: OTLP over HTTP: %w", ErrInvalidConfig, err)
		}
		return exp, nil
	case "grpc":
		var opts []otlptracegrpc.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(endpointURL(cfg.Endpoint, "http://", "")))
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("%w: OTLP over gRPC: %w", ErrInvalidConfig, err)
		}
		return exp, nil
	default:
		return nil, fmt.Errorf(`%w: protocol %q (want "http/protobuf" or "grpc"; "http/json" is not offered by the Go exporter)`, ErrInvalidConfig, protocol)
	}
}

// endpointURL makes host:port a URL, and adds the signal's path to an HTTP
// endpoint that names none (as OTEL_EXPORTER_OTLP_ENDPOINT is read).
func endpointURL(endpoint, scheme, path string) string {
	if !strings.Contains(endpoint, "://") {
		endpoint = scheme + endpoint
	}
	if path != "" {
		rest := endpoint[strings.Index(endpoint, "://")+3:]
		if !strings.Contains(rest, "/") {
			endpoint += path
		}
	}
	return endpoint
}
