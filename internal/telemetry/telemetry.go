package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/ironlink/ironlink/internal/version"
)

// Enabled reports whether the environment asks for tracing (see the
// package doc); getenv is os.Getenv in production.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")))
	if exp == "none" {
		return false
	}
	return exp != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs the global tracer provider and propagator when Enabled,
// naming the service defaultService unless OTEL_SERVICE_NAME says
// otherwise. It returns enabled = false and a no-op shutdown when tracing is
// off. shutdown flushes the spans still buffered; call it before exiting.
// Errors: an exporter other than otlp, an unknown OTLP protocol, or an
// exporter that cannot be built.
func Setup(ctx context.Context, defaultService string) (shutdown func(context.Context) error, enabled bool, err error) {
	noop := func(context.Context) error { return nil }
	if !Enabled(os.Getenv) {
		return noop, false, nil
	}
	if exp := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))); exp != "" && exp != "otlp" {
		return noop, false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: only otlp (or none) is supported", exp)
	}
	var client otlptrace.Client
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "grpc":
		client = otlptracegrpc.NewClient()
	case "", "http/protobuf":
		client = otlptracehttp.NewClient()
	default:
		return noop, false, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: want grpc or http/protobuf", proto)
	}
	exporter, err := otlptrace.New(ctx, client)
	if err != nil {
		return noop, false, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(defaultService), semconv.ServiceVersion(version.Version)))
	if err != nil {
		return noop, false, fmt.Errorf("trace resource: %w", err)
	}
	// Environment (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) wins over the defaults.
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, env); err == nil {
			res = merged
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, true, nil
}

// Log field names for the trace context of a log line.
const (
	// TraceIDKey is the hex trace id.
	TraceIDKey = "trace_id"
	// SpanIDKey is the hex span id.
	SpanIDKey = "span_id"
)

// LogHandler wraps h so that every record logged with a context that
// carries a sampled or remote span gets trace_id and span_id attributes.
// Records without a span are passed through unchanged.
func LogHandler(h slog.Handler) slog.Handler { return traceHandler{h} }

type traceHandler struct{ slog.Handler }

// Handle implements slog.Handler.
func (t traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(TraceIDKey, sc.TraceID().String()), slog.String(SpanIDKey, sc.SpanID().String()))
	}
	return t.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (t traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{t.Handler.WithAttrs(as)}
}

// WithGroup implements slog.Handler.
func (t traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{t.Handler.WithGroup(name)}
}
