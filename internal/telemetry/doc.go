// Package telemetry sets up OpenTelemetry tracing for both binaries from the
// standard OTEL_* environment variables, and adds trace ids to log lines.
//
// Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_TRACES_EXPORTER is set (and
// OTEL_SDK_DISABLED is not "true", OTEL_TRACES_EXPORTER not "none"). Then
// spans go to an OTLP exporter (OTEL_EXPORTER_OTLP_PROTOCOL: "grpc", or
// "http/protobuf", the specification's default), which reads its endpoint,
// headers, TLS and timeout settings from the same variables; the service
// name comes from OTEL_SERVICE_NAME (else the binary's name) and
// OTEL_RESOURCE_ATTRIBUTES; sampling from OTEL_TRACES_SAMPLER. W3C trace
// context is propagated, so a span started by an operator's tool continues
// on the hub.
//
// It is shared by hub/ and satellite/ and imports neither.
package telemetry
