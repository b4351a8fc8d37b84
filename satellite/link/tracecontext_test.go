package link

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// TestApplySpanContinuesTheCommandsTraceContext: a command's "apply
// command" span is a child of the trace context the hub sent with it, and
// the ctx handed to the command handler (hence to the OpenStack requests)
// carries that span; a command without one is applied under a child of the
// link's own span.
func TestApplySpanContinuesTheCommandsTraceContext(t *testing.T) {
	prev := otel.GetTracerProvider()
	defer otel.SetTracerProvider(prev)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	linkCtx, linkSpan := tp.Tracer("test").Start(context.Background(), "link")
	defer linkSpan.End()

	tests := []struct {
		name                  string
		cmd                   *ironlinkv1.Command
		wantTrace, wantParent string
		wantRemote            bool
	}{
		{"hub sent a trace context", &ironlinkv1.Command{CommandId: "c1", Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Tracestate: "vendor=abc"},
			"4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", true},
		{"no trace context", &ironlinkv1.Command{CommandId: "c2"},
			linkSpan.SpanContext().TraceID().String(), linkSpan.SpanContext().SpanID().String(), false},
		{"an invalid traceparent is ignored", &ironlinkv1.Command{CommandId: "c3", Traceparent: "garbage"},
			linkSpan.SpanContext().TraceID().String(), linkSpan.SpanContext().SpanID().String(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, span := startApplySpan(linkCtx, tc.cmd)
			span.End()
			if got := trace.SpanContextFromContext(ctx); got.SpanID() != span.SpanContext().SpanID() {
				t.Errorf("handler ctx carries span %v, want the apply span %v", got.SpanID(), span.SpanContext().SpanID())
			}
			var s sdktrace.ReadOnlySpan
			for _, e := range rec.Ended() {
				if e.SpanContext().SpanID() == span.SpanContext().SpanID() {
					s = e
				}
			}
			if s == nil || s.Name() != "apply command" {
				t.Fatalf("no recorded apply command span")
			}
			if s.SpanContext().TraceID().String() != tc.wantTrace || s.Parent().SpanID().String() != tc.wantParent || s.Parent().IsRemote() != tc.wantRemote {
				t.Errorf("apply span in trace %s under %s (remote %v), want trace %s under %s (remote %v)",
					s.SpanContext().TraceID(), s.Parent().SpanID(), s.Parent().IsRemote(), tc.wantTrace, tc.wantParent, tc.wantRemote)
			}
			if tc.cmd.GetTracestate() != "" && s.SpanContext().TraceState().String() != tc.cmd.GetTracestate() {
				t.Errorf("tracestate %q, want %q", s.SpanContext().TraceState().String(), tc.cmd.GetTracestate())
			}
		})
	}
}
