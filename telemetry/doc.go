// Package telemetry traces TAH's turns on OpenTelemetry: a node's Tracing
// (its tracer, no-op when off), the GenAI semantic conventions' names, and
// W3C trace context carried in NATS headers and recorded in the log. It
// depends on OpenTelemetry's API alone, so that a tool service may import it;
// telemetry/otlp sets up the SDK and its OTLP exporter.
//
// Conventions: the GenAI semantic conventions (gen_ai.*), experimental, as the
// OpenTelemetry Go module's semconv v1.41.0 carries them (the last core
// release that holds them; they have since moved to the
// open-telemetry/semantic-conventions-genai repository, which has made no
// release yet, and the Go project asks instrumentations to keep using these
// constants until it does). TAH's own attributes are under "tah.".
//
// Off by default, at no cost: with tracing off, Tracer is OpenTelemetry's
// no-op tracer and nothing is exported.
//
// Message content (prompts, answers, tool arguments and results) is never
// recorded unless CaptureContent is set, as the conventions require:
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true or the
// configuration's capture_content.
package telemetry
