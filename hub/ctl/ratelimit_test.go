package ctl

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// limitedFleet refuses the first `refuse` ListSites calls as the hub's rate
// limiter does (ResourceExhausted, ErrorInfo RATE_LIMITED, RetryInfo).
type limitedFleet struct {
	ironlinkv1.UnimplementedFleetServiceServer
	refuse int32
	calls  atomic.Int32
}

func (f *limitedFleet) ListSites(context.Context, *ironlinkv1.ListSitesRequest) (*ironlinkv1.ListSitesResponse, error) {
	if f.calls.Add(1) <= f.refuse {
		st, _ := status.New(codes.ResourceExhausted, "client x is over its limit of 50 calls/s (burst 100); retry in 20ms").WithDetails(
			&errdetails.ErrorInfo{Reason: "RATE_LIMITED", Domain: "ironlink.v1"},
			&errdetails.RetryInfo{RetryDelay: durationpb.New(20 * time.Millisecond)})
		return nil, st.Err()
	}
	return &ironlinkv1.ListSitesResponse{}, nil
}

// TestRateLimitedCallIsRetried: a call the hub refused for the rate limit
// (nothing was done; RetryInfo says when to come back) is retried after
// that delay, so a script or a --wait loop does not die with exit 1.
func TestRateLimitedCallIsRetried(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	f := &limitedFleet{refuse: 2}
	ironlinkv1.RegisterFleetServiceServer(srv, f)
	go srv.Serve(lis)
	defer srv.Stop()
	var out, errb bytes.Buffer
	code := Execute(context.Background(), Options{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }},
		[]string{"--config", filepath.Join(t.TempDir(), "none.yaml"), "--hub", lis.Addr().String(), "--plaintext", "--no-auth", "get", "sites"})
	if code != ExitOK || f.calls.Load() != 3 {
		t.Fatalf("exit %d after %d calls: %q, want 0 after 3", code, f.calls.Load(), errb.String())
	}
	// A limiter that never lets the call through ends with a clear message.
	f.calls.Store(0)
	f.refuse = 1000
	errb.Reset()
	code = Execute(context.Background(), Options{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }},
		[]string{"--config", filepath.Join(t.TempDir(), "none.yaml"), "--hub", lis.Addr().String(), "--plaintext", "--no-auth", "get", "sites"})
	if code == ExitOK || !strings.Contains(errb.String(), "rate limit") {
		t.Fatalf("always limited: exit %d %q, want a failure naming the rate limit", code, errb.String())
	}
}
