// Package otlp turns a node's tracing on: OpenTelemetry's SDK with its
// official OTLP exporters, from the node's settings and the standard OTEL_*
// environment variables. On when the settings say so or when
// OTEL_TRACES_EXPORTER is "otlp"; off with OTEL_TRACES_EXPORTER=none or
// OTEL_SDK_DISABLED=true. The exporter follows OTEL_EXPORTER_OTLP_PROTOCOL
// ("http/protobuf", the default, or "grpc") and reads the
// OTEL_EXPORTER_OTLP_* endpoint, header, timeout and TLS variables itself;
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the process.
//
//	tr, err := otlp.Start(ctx, cfg.Tracing, otlp.Resource{NodeID: id}, os.LookupEnv)
//	defer tr.Shutdown(context.Background())
package otlp
