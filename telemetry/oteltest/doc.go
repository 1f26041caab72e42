// Package oteltest is an OTLP trace receiver for tests: a real HTTP endpoint
// (/v1/traces, protobuf) and a real gRPC one, on 127.0.0.1, that decode what
// OpenTelemetry's exporters send with the OTLP protobuf types, keep every
// span, and keep every byte received (so that a test can show a string was
// never exported). No part of the SDK is mocked: a test points the real
// exporter at it.
//
//	rcv := oteltest.Start(t)
//	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.HTTPURL)
//	... run a turn with tracing on ...
//	spans := rcv.Wait(t, func(s []oteltest.Span) bool { return len(s) >= 4 })
//
// Discard is the same receiver for a benchmark: it answers every export but
// only counts them (Received), so that the CPU of the process it runs in holds
// little of its work.
package oteltest
