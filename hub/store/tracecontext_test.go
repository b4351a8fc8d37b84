package store_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/ironlink/ironlink/hub/store"
)

// TestCommandKeepsCallersTraceContext: a command created in a traced
// context (quarantine, retry) keeps that context's W3C traceparent and
// tracestate, and DueCommands hands them back for the delivery; a command
// created without a span has none.
func TestCommandKeepsCallersTraceContext(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("vendor=abc")
	traced := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true}))
	const wantParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	rtid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	rsid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	retryCtx := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: rtid, SpanID: rsid, TraceFlags: trace.FlagsSampled, Remote: true}))
	const retryParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tests := []struct {
		name                  string
		ctx                   context.Context
		wantParent, wantState string
	}{
		{"traced call", traced, wantParent, "vendor=abc"},
		{"untraced call", context.Background(), "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newStore(t)
			sess := open(t, s, "site-a")
			id := addDevice(t, s, "site-a", sess, 1)
			cmd, err := s.SetDesiredImpairment(tc.ctx, id, store.ImpairmentQuarantined, "op", "why", "operator-api")
			if err != nil {
				t.Fatal(err)
			}
			if cmd.TraceParent != tc.wantParent || cmd.TraceState != tc.wantState {
				t.Errorf("created command: traceparent %q tracestate %q, want %q %q", cmd.TraceParent, cmd.TraceState, tc.wantParent, tc.wantState)
			}
			due, err := s.DueCommands(context.Background(), "site-a", sess.Epoch, store.DeliveryPolicy{}, false, 10)
			if err != nil || len(due) != 1 {
				t.Fatalf("DueCommands: %v, %v", due, err)
			}
			if due[0].TraceParent != tc.wantParent || due[0].TraceState != tc.wantState {
				t.Errorf("due command: traceparent %q tracestate %q, want %q %q", due[0].TraceParent, due[0].TraceState, tc.wantParent, tc.wantState)
			}

			// A retry carries the retrying call's context, not the original's.
			if err := s.MarkSent(context.Background(), cmd.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := s.RecordResult(context.Background(), "site-a", store.CommandResult{CommandID: cmd.ID, DeviceID: id,
				Generation: cmd.Generation, Error: "gone", FailureClass: store.FailurePermanent}); err != nil {
				t.Fatal(err)
			}
			retried, err := s.RetryCommand(retryCtx, cmd.ID, "op", "again", "operator-api")
			if err != nil {
				t.Fatal(err)
			}
			if retried.TraceParent != retryParent || retried.TraceState != "" {
				t.Errorf("retried command: traceparent %q tracestate %q, want %q and none", retried.TraceParent, retried.TraceState, retryParent)
			}
		})
	}
}
