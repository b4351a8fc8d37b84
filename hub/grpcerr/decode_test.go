package grpcerr_test

import (
	"bytes"
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/grpcraw"
)

// fleetStub answers QuarantineDevice and records what reached it.
type fleetStub struct {
	ironlinkv1.UnimplementedFleetServiceServer
	reached []*ironlinkv1.QuarantineDeviceRequest
}

func (f *fleetStub) QuarantineDevice(_ context.Context, req *ironlinkv1.QuarantineDeviceRequest) (*ironlinkv1.QuarantineDeviceResponse, error) {
	f.reached = append(f.reached, req)
	return &ironlinkv1.QuarantineDeviceResponse{}, nil
}

// linkStub reads a link until Recv fails and returns that error, as the
// hub's link server does.
type linkStub struct {
	ironlinkv1.UnimplementedLinkServiceServer
	received chan *ironlinkv1.ConnectRequest
}

func (l *linkStub) Connect(stream ironlinkv1.LinkService_ConnectServer) error {
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		l.received <- m
	}
}

// serve starts a server with opts on bufconn and returns a client
// connection sending raw bodies.
func serve(t *testing.T, fleet *fleetStub, link *linkStub, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(4 << 20)
	srv := grpc.NewServer(opts...)
	ironlinkv1.RegisterFleetServiceServer(srv, fleet)
	ironlinkv1.RegisterLinkServiceServer(srv, link)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(grpcraw.Codec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// withBadBytes marshals m, in which the string placeholder appears once, and
// replaces the placeholder with bytes of the same length that are not UTF-8.
func withBadBytes(t *testing.T, m proto.Message, placeholder string) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(b, []byte(placeholder)) != 1 {
		t.Fatalf("placeholder %q not found once", placeholder)
	}
	return bytes.Replace(b, []byte(placeholder), bytes.Repeat([]byte{0xff}, len(placeholder)), 1)
}

// TestUnaryDecodeFailureIsInvalidArgument: a request whose reason is not
// UTF-8 is InvalidArgument naming "reason", and never reaches the handler.
// Without DecodeOptions grpc-go answers Internal (asserted, so the test
// notices if grpc-go changes).
func TestUnaryDecodeFailureIsInvalidArgument(t *testing.T) {
	bad := withBadBytes(t, &ironlinkv1.QuarantineDeviceRequest{DeviceId: "0c1d5b6e-0000-4000-8000-000000000001", Reason: "PLACEHOLDER"}, "PLACEHOLDER")
	truncated := []byte{0x0a, 0x20, 'a'} // field 1, length 32, 1 byte present
	spoofed := protowire.AppendString(protowire.AppendTag(nil, protowire.MaxValidNumber, protowire.BytesType), "INVALID_UTF8\nreason\nx")
	good, _ := proto.Marshal(&ironlinkv1.QuarantineDeviceRequest{DeviceId: "0c1d5b6e-0000-4000-8000-000000000001", Reason: "Xid 79"})
	tests := []struct {
		name       string
		opts       []grpc.ServerOption
		body       []byte
		wantCode   codes.Code
		wantReason string
		wantFields []string
		reaches    bool
	}{
		{"grpc-go alone: Internal", nil, bad, codes.Internal, "", nil, false},
		{"invalid UTF-8 reason", grpcerr.DecodeOptions(), bad, codes.InvalidArgument, grpcerr.ReasonInvalidUTF8, []string{"reason"}, false},
		{"truncated message", grpcerr.DecodeOptions(), truncated, codes.InvalidArgument, grpcerr.ReasonMalformedMessage, nil, false},
		{"client-sent marker field", grpcerr.DecodeOptions(), spoofed, codes.InvalidArgument, grpcerr.ReasonMalformedMessage, nil, false},
		{"a good request passes", grpcerr.DecodeOptions(), good, codes.OK, "", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fleet := &fleetStub{}
			cc := serve(t, fleet, &linkStub{}, tc.opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			body := tc.body
			err := cc.Invoke(ctx, ironlinkv1.FleetService_QuarantineDevice_FullMethodName, &body, &ironlinkv1.QuarantineDeviceResponse{})
			if got := status.Code(err); got != tc.wantCode {
				t.Fatalf("code %v (%v), want %v", got, err, tc.wantCode)
			}
			if grpcerr.Reason(err) != tc.wantReason || !slices.Equal(grpcerr.Fields(err), tc.wantFields) {
				t.Fatalf("reason %q fields %v, want %q %v (%v)", grpcerr.Reason(err), grpcerr.Fields(err), tc.wantReason, tc.wantFields, err)
			}
			if reached := len(fleet.reached) > 0; reached != tc.reaches {
				t.Fatalf("handler reached: %v, want %v", reached, tc.reaches)
			}
			if tc.reaches && fleet.reached[0].GetReason() != "Xid 79" {
				t.Fatalf("handler got %v", fleet.reached[0])
			}
		})
	}
}

// TestStreamDecodeFailureIsInvalidArgument: on the bidirectional link
// stream, a batch whose second device id is not UTF-8 ends the stream with
// InvalidArgument naming batch.devices[1].device_id, after the messages
// before it were delivered. Without DecodeOptions it is Internal.
func TestStreamDecodeFailureIsInvalidArgument(t *testing.T) {
	hello, _ := proto.Marshal(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: &ironlinkv1.Hello{Site: "site-a"}}})
	bad := withBadBytes(t, &ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: &ironlinkv1.ConditionBatch{
		Sequence: 1, Devices: []*ironlinkv1.DeviceUpdate{{DeviceId: "0c1d5b6e-0000-4000-8000-000000000001"}, {DeviceId: "PLACEHOLDER"}}}}}, "PLACEHOLDER")
	tests := []struct {
		name       string
		opts       []grpc.ServerOption
		wantCode   codes.Code
		wantFields []string
	}{
		{"grpc-go alone: Internal", nil, codes.Internal, nil},
		{"with DecodeOptions", grpcerr.DecodeOptions(), codes.InvalidArgument, []string{"batch.devices[1].device_id"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			link := &linkStub{received: make(chan *ironlinkv1.ConnectRequest, 4)}
			cc := serve(t, &fleetStub{}, link, tc.opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cs, err := cc.NewStream(ctx, &ironlinkv1.LinkService_ServiceDesc.Streams[0], ironlinkv1.LinkService_Connect_FullMethodName)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range [][]byte{hello, bad} {
				if err := cs.SendMsg(&b); err != nil {
					t.Fatal(err)
				}
			}
			err = cs.RecvMsg(&ironlinkv1.ConnectResponse{})
			if got := status.Code(err); got != tc.wantCode || !slices.Equal(grpcerr.Fields(err), tc.wantFields) {
				t.Fatalf("code %v fields %v (%v), want %v %v", got, grpcerr.Fields(err), err, tc.wantCode, tc.wantFields)
			}
			if m := <-link.received; m.GetHello().GetSite() != "site-a" {
				t.Fatalf("first message %v", m)
			}
			select {
			case m := <-link.received:
				t.Fatalf("the bad message reached the handler: %v", m)
			default:
			}
		})
	}
}

// TestDecodeOptionsKeepOtherServices: health answers through the forced codec.
func TestDecodeOptionsKeepOtherServices(t *testing.T) {
	cc := serve(t, &fleetStub{}, &linkStub{}, grpcerr.DecodeOptions()...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", r, err)
	}
}
