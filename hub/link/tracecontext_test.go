package link

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/ironlink/ironlink/hub/store"
)

// TestDeliverySpanContinuesTheStoredTraceContext: a command's "deliver
// command" span is a child of the trace context stored with it, and the
// context sent to the satellite is that span's (same trace id, the
// delivery's span id, tracestate kept); with tracing off the stored context
// is sent unchanged; without a stored context the delivery starts a trace.
func TestDeliverySpanContinuesTheStoredTraceContext(t *testing.T) {
	const (
		storedTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
		storedSpan   = "00f067aa0ba902b7"
		storedParent = "00-" + storedTrace + "-" + storedSpan + "-01"
	)
	tests := []struct {
		name      string
		tracing   bool
		cmd       store.Command
		wantChild bool // sent context is a recorded child of the stored one
		wantSent  string
		wantState string
	}{
		{name: "tracing on, stored context", tracing: true, cmd: store.Command{ID: "c1", TraceParent: storedParent, TraceState: "vendor=abc"},
			wantChild: true, wantState: "vendor=abc"},
		{name: "tracing off, stored context passes on unchanged", cmd: store.Command{ID: "c2", TraceParent: storedParent, TraceState: "vendor=abc"},
			wantSent: storedParent, wantState: "vendor=abc"},
		{name: "tracing off, nothing stored, nothing sent", cmd: store.Command{ID: "c3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prev := otel.GetTracerProvider()
			defer otel.SetTracerProvider(prev)
			rec := tracetest.NewSpanRecorder()
			if tc.tracing {
				otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
			} else {
				otel.SetTracerProvider(noop.NewTracerProvider())
			}
			l := &linkLoop{site: "site-a"}
			var span trace.Span
			sent := l.deliverySpan(tc.cmd, &span)
			span.End()
			if got := sent.Get("tracestate"); got != tc.wantState {
				t.Errorf("sent tracestate %q, want %q", got, tc.wantState)
			}
			if !tc.wantChild {
				if got := sent.Get("traceparent"); got != tc.wantSent {
					t.Errorf("sent traceparent %q, want %q", got, tc.wantSent)
				}
				return
			}
			ended := rec.Ended()
			if len(ended) != 1 || ended[0].Name() != "deliver command" {
				t.Fatalf("recorded spans %v, want one deliver command", ended)
			}
			s := ended[0]
			if s.Parent().TraceID().String() != storedTrace || s.Parent().SpanID().String() != storedSpan || !s.Parent().IsRemote() {
				t.Errorf("delivery span's parent %v, want the stored %s", s.Parent(), storedParent)
			}
			want := "00-" + storedTrace + "-" + s.SpanContext().SpanID().String() + "-01"
			if got := sent.Get("traceparent"); got != want || strings.Contains(got, storedSpan) {
				t.Errorf("sent traceparent %q, want the delivery span's %q", got, want)
			}
		})
	}
}
