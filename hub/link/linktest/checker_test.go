package linktest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

const (
	dev  = "3f0b2a5e-4c1d-4e8f-9a7b-1c2d3e4f5a6b"
	cmd1 = "6e0c6f7e-1b7a-4c55-9f34-0f7e2d2b1a01"
	cmd2 = "6e0c6f7e-1b7a-4c55-9f34-0f7e2d2b1a02"
)

func welcome() *ironlinkv1.ConnectResponse {
	return &ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Welcome{Welcome: &ironlinkv1.Welcome{}}}
}

func ack(seq uint64) *ironlinkv1.ConnectResponse {
	return &ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Ack{Ack: &ironlinkv1.BatchAck{Sequence: seq}}}
}

func command(id string, gen int64) *ironlinkv1.ConnectResponse {
	return &ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Command{Command: &ironlinkv1.Command{
		CommandId: id, DeviceId: dev, Generation: gen, Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED}}}
}

func desired(gen int64) *ironlinkv1.ConnectResponse {
	return &ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_DesiredStates{DesiredStates: &ironlinkv1.DesiredStates{
		Devices: []*ironlinkv1.DeviceDesiredState{{DeviceId: dev, Generation: gen, Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED}}}}}
}

func heartbeat(valid bool) *ironlinkv1.ConnectResponse {
	hb := &ironlinkv1.Heartbeat{}
	if valid {
		hb.SentTime = timestamppb.Now()
	}
	return &ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Heartbeat{Heartbeat: hb}}
}

func operation(id string, attempt int32) *ironlinkv1.ConnectResponse {
	return &ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Operation{Operation: &ironlinkv1.OperationRequest{
		OperationId: id, Attempt: attempt, Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT}}}
}

// TestCheckerFlagsEachViolation: every invariant the Checker documents is
// caught, and a well-behaved sequence passes.
func TestCheckerFlagsEachViolation(t *testing.T) {
	tests := []struct {
		name string
		msgs []*ironlinkv1.ConnectResponse
		want string // "" = no violation
	}{
		{"good link", []*ironlinkv1.ConnectResponse{welcome(), desired(1), command(cmd1, 1), command(cmd1, 1), ack(3), ack(4),
			heartbeat(true), command(cmd2, 2), desired(2)}, ""},
		{"first not a welcome", []*ironlinkv1.ConnectResponse{ack(1)}, "not a Welcome"},
		{"second welcome", []*ironlinkv1.ConnectResponse{welcome(), welcome()}, "second Welcome"},
		{"empty message", []*ironlinkv1.ConnectResponse{welcome(), {}}, "no message kind"},
		{"ack repeated", []*ironlinkv1.ConnectResponse{welcome(), ack(2), ack(2)}, "strictly increase"},
		{"ack going back", []*ironlinkv1.ConnectResponse{welcome(), ack(5), ack(4)}, "strictly increase"},
		{"ack zero", []*ironlinkv1.ConnectResponse{welcome(), ack(0)}, "sequence 0"},
		{"command generation down", []*ironlinkv1.ConnectResponse{welcome(), command(cmd2, 2), command(cmd1, 1)}, "never go down"},
		{"desired state below a command", []*ironlinkv1.ConnectResponse{welcome(), command(cmd2, 2), desired(1)}, "never go down"},
		{"command generation zero", []*ironlinkv1.ConnectResponse{welcome(), command(cmd1, 0)}, "want > 0"},
		{"command id not a UUID", []*ironlinkv1.ConnectResponse{welcome(), command("c-1", 1)}, "not a UUID"},
		{"heartbeat without time", []*ironlinkv1.ConnectResponse{welcome(), heartbeat(false)}, "sent_time"},
		{"operation attempts increase", []*ironlinkv1.ConnectResponse{welcome(), operation(cmd1, 1), operation(cmd2, 1), operation(cmd1, 2)}, ""},
		{"operation attempt repeated", []*ironlinkv1.ConnectResponse{welcome(), operation(cmd1, 2), operation(cmd1, 2)}, "strictly increase"},
		{"operation attempt zero", []*ironlinkv1.ConnectResponse{welcome(), operation(cmd1, 0)}, "strictly increase"},
		{"operation id not a UUID", []*ironlinkv1.ConnectResponse{welcome(), operation("op-1", 1)}, "not a UUID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Checker
			s := c.Wrap(NewStream(context.Background()))
			for _, m := range tc.msgs {
				if err := s.Send(m); err != nil {
					t.Fatal(err)
				}
			}
			v := c.Violations()
			if tc.want == "" {
				if len(v) != 0 {
					t.Fatalf("violations %q on a good link", v)
				}
				return
			}
			if len(v) != 1 || !strings.Contains(v[0], tc.want) {
				t.Fatalf("violations %q, want one containing %q", v, tc.want)
			}
		})
	}
}

// TestCheckerFlagsSendsAfterFailureOrReturn: a Send after a failed Send, or
// after the handler returned, is a violation.
func TestCheckerFlagsSendsAfterFailureOrReturn(t *testing.T) {
	var c Checker
	inner := NewStream(context.Background())
	s := c.Wrap(inner)
	inner.FailSendsAfter(1, errors.New("connection reset"))
	_ = s.Send(welcome())
	if err := s.Send(ack(1)); err == nil {
		t.Fatal("injected failure did not fail Send")
	}
	_ = s.Send(ack(2))
	if v := c.Violations(); len(v) != 1 || !strings.Contains(v[0], "after Send failed") {
		t.Fatalf("violations %q", v)
	}

	var c2 Checker
	s2 := c2.Wrap(NewStream(context.Background()))
	_ = s2.Send(welcome())
	s2.Returned()
	_ = s2.Send(heartbeat(true))
	if v := c2.Violations(); len(v) != 1 || !strings.Contains(v[0], "after the handler returned") {
		t.Fatalf("violations %q", v)
	}
}
