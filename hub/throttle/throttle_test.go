package throttle_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/throttle"
	"github.com/ironlink/ironlink/internal/auth"
)

// fleetStub answers ListSites and counts the calls that reached it.
type fleetStub struct {
	ironlinkv1.UnimplementedFleetServiceServer
	calls atomic.Int64
}

func (f *fleetStub) ListSites(context.Context, *ironlinkv1.ListSitesRequest) (*ironlinkv1.ListSitesResponse, error) {
	f.calls.Add(1)
	return &ironlinkv1.ListSitesResponse{}, nil
}

// linkStub answers each Connect with one heartbeat, then holds the stream
// until the client goes away.
type linkStub struct {
	ironlinkv1.UnimplementedLinkServiceServer
	opened atomic.Int64
}

func (l *linkStub) Connect(s ironlinkv1.LinkService_ConnectServer) error {
	l.opened.Add(1)
	if err := s.Send(&ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Heartbeat{Heartbeat: &ironlinkv1.Heartbeat{}}}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// holdDesc is an operator-side streaming service (the API has none yet;
// a change feed will be one): Hold sends one message and waits.
var holdDesc = grpc.ServiceDesc{
	ServiceName: "test.Hold",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{StreamName: "Hold", ServerStreams: true, Handler: func(_ any, s grpc.ServerStream) error {
		if err := s.SendMsg(&ironlinkv1.Heartbeat{}); err != nil {
			return err
		}
		<-s.Context().Done()
		return nil
	}}},
}

// asClient stands in for authentication: the "x-client" header becomes
// the caller's identity, as authn puts it in the context.
func asClient(ctx context.Context) context.Context {
	if v := metadata.ValueFromIncomingContext(ctx, "x-client"); len(v) == 1 {
		return authn.NewContext(ctx, auth.Identity{ClientID: v[0]})
	}
	return ctx
}

type idStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *idStream) Context() context.Context { return s.ctx }

// serve runs the stubs behind the throttle (after the stand-in
// authentication, as the hub chains them) and returns a client connection.
func serve(t *testing.T, cfg throttle.Config) (*grpc.ClientConn, *fleetStub, *linkStub, *throttle.Limiter) {
	t.Helper()
	lim, err := throttle.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(asClient(ctx), req)
		}, lim.UnaryInterceptor()),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, &idStream{ServerStream: ss, ctx: asClient(ss.Context())})
		}, lim.StreamInterceptor()),
	)
	fs, ls := &fleetStub{}, &linkStub{}
	ironlinkv1.RegisterFleetServiceServer(gs, fs)
	ironlinkv1.RegisterLinkServiceServer(gs, ls)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	gs.RegisterService(&holdDesc, nil)
	lis := bufconn.Listen(1 << 20)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc, fs, ls, lim
}

func as(client string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-client", client)
}

// openLink opens a link stream as client and waits for its first message.
func openLink(t *testing.T, cc *grpc.ClientConn, ctx context.Context) {
	t.Helper()
	s, err := ironlinkv1.NewLinkServiceClient(cc).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatalf("link: %v", err)
	}
}

// TestBurstGetsResourceExhaustedWithRetryInfo: a client over its burst is
// refused with ResourceExhausted carrying RetryInfo and ErrorInfo; the
// refused calls never reach the service; another client and the link are
// not affected; after the delay RetryInfo names, the client may call again.
func TestBurstGetsResourceExhaustedWithRetryInfo(t *testing.T) {
	cc, fs, ls, _ := serve(t, throttle.Config{Rate: 5, Burst: 3})
	fleet := ironlinkv1.NewFleetServiceClient(cc)

	var ok, refused int
	var retry time.Duration
	start := time.Now()
	for range 20 {
		_, err := fleet.ListSites(as("ops-script"), &ironlinkv1.ListSitesRequest{})
		if err == nil {
			ok++
			continue
		}
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted {
			t.Fatalf("refusal %v, want ResourceExhausted", err)
		}
		refused++
		var info *errdetails.ErrorInfo
		retry = 0
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				retry = d.GetRetryDelay().AsDuration()
			case *errdetails.ErrorInfo:
				info = d
			}
		}
		if retry <= 0 || retry > time.Second/5 {
			t.Fatalf("RetryInfo delay %s, want within (0, 200ms] at 5 calls/s", retry)
		}
		if info.GetReason() != throttle.ReasonRateLimited || info.GetDomain() != "ironlink.v1" {
			t.Fatalf("ErrorInfo %v", info)
		}
		if !strings.Contains(st.Message(), "ops-script") {
			t.Fatalf("message %q does not name the client", st.Message())
		}
	}
	// The burst of 3 plus what refilled at 5/s while the loop ran, no more.
	allowed := 3 + int(5*time.Since(start).Seconds()) + 1
	if ok < 3 || ok > allowed || refused == 0 || int(fs.calls.Load()) != ok {
		t.Fatalf("%d calls passed (at most %d allowed), %d refused, %d reached the service", ok, allowed, refused, fs.calls.Load())
	}
	t.Logf("burst of 20: %d passed, %d refused, last RetryInfo %s", ok, refused, retry)

	// Another client has its own bucket.
	if _, err := fleet.ListSites(as("ops-other"), &ironlinkv1.ListSitesRequest{}); err != nil {
		t.Fatalf("another client: %v", err)
	}
	// The link and health are exempt: a satellite opens links while the
	// script is throttled, far beyond any burst.
	for range 10 {
		openLink(t, cc, as("ironlink-agent-site-a"))
	}
	if _, err := healthpb.NewHealthClient(cc).Check(as("ops-script"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health while throttled: %v", err)
	}
	if ls.opened.Load() != 10 {
		t.Fatalf("%d links opened, want 10", ls.opened.Load())
	}
	// After the delay RetryInfo named, the script may call again.
	time.Sleep(retry)
	if _, err := fleet.ListSites(as("ops-script"), &ironlinkv1.ListSitesRequest{}); err != nil {
		t.Fatalf("after waiting RetryInfo's %s: %v", retry, err)
	}
}

// TestStreamCapPerClient: a client holds at most MaxStreams operator
// streams at once; links are not counted and not capped.
func TestStreamCapPerClient(t *testing.T) {
	cc, _, _, lim := serve(t, throttle.Config{MaxStreams: 2})
	hold := func(ctx context.Context) error {
		s, err := cc.NewStream(ctx, &holdDesc.Streams[0], "/test.Hold/Hold")
		if err == nil {
			if err = s.CloseSend(); err == nil {
				err = s.RecvMsg(&ironlinkv1.Heartbeat{})
			}
		}
		return err
	}
	ctx1, cancel1 := context.WithCancel(as("ops-watch"))
	defer cancel1()
	ctx2, cancel2 := context.WithCancel(as("ops-watch"))
	defer cancel2()
	for _, ctx := range []context.Context{ctx1, ctx2} {
		if err := hold(ctx); err != nil {
			t.Fatalf("stream within the cap: %v", err)
		}
	}
	err := hold(as("ops-watch"))
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || len(st.Details()) != 1 ||
		st.Details()[0].(*errdetails.ErrorInfo).GetReason() != throttle.ReasonTooManyStreams {
		t.Fatalf("third stream: %v %v, want ResourceExhausted %s", err, st.Details(), throttle.ReasonTooManyStreams)
	}
	// Another client is not capped by this one, nor is the link.
	if err := hold(as("ops-other")); err != nil {
		t.Fatalf("another client's stream: %v", err)
	}
	for range 4 {
		openLink(t, cc, as("ops-watch"))
	}
	// Closing a stream frees its place.
	cancel1()
	deadline := time.Now().Add(10 * time.Second)
	for lim.Streams("ops-watch") > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams still counted after one was closed", lim.Streams("ops-watch"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := hold(as("ops-watch")); err != nil {
		t.Fatalf("stream after one closed: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  throttle.Config
		bad  string
	}{
		{"defaults", throttle.DefaultConfig(), ""},
		{"zero: no limits", throttle.Config{}, ""},
		{"negative rate", throttle.Config{Rate: -1, Burst: 1}, "--operator-rate"},
		{"rate without burst", throttle.Config{Rate: 10}, "--operator-burst"},
		{"negative streams", throttle.Config{MaxStreams: -1}, "--operator-max-streams"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err != nil) != (tc.bad != "") || (err != nil && !strings.Contains(err.Error(), tc.bad)) {
				t.Fatalf("Validate() = %v, want an error naming %q", err, tc.bad)
			}
			if _, nerr := throttle.New(tc.cfg); (nerr != nil) != (err != nil) {
				t.Fatalf("New and Validate disagree: %v / %v", nerr, err)
			}
		})
	}
}
