package ctl

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// behindFleet answers the first WatchFleet with a progress mark and two
// changes, then ends it as the hub ends a watch that fell behind
// (ResourceExhausted, ErrorInfo WATCH_FELL_BEHIND naming the last cursor);
// the second gets a change 2m5s behind the feed and one caught up, then
// the CLI is interrupted.
type behindFleet struct {
	ironlinkv1.UnimplementedFleetServiceServer
	stop    context.CancelFunc
	mu      sync.Mutex
	cursors []string // the cursor of each WatchFleet request
}

func statusChange(cursor, name string) *ironlinkv1.WatchFleetResponse {
	return &ironlinkv1.WatchFleetResponse{Cursor: cursor, Event: &ironlinkv1.FleetEvent{
		EventTime: timestamppb.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), Kind: ironlinkv1.FleetEventKind_FLEET_EVENT_KIND_DEVICE_STATUS,
		Change: &ironlinkv1.FleetEvent_DeviceStatus{DeviceStatus: &ironlinkv1.DeviceStatusEvent{
			DeviceId: name, Site: "demo", Name: name, Status: ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED, Reason: "test"}}}}
}

func (f *behindFleet) WatchFleet(req *ironlinkv1.WatchFleetRequest, s ironlinkv1.FleetService_WatchFleetServer) error {
	f.mu.Lock()
	f.cursors = append(f.cursors, req.GetCursor())
	n := len(f.cursors)
	f.mu.Unlock()
	if n == 1 {
		for _, m := range []*ironlinkv1.WatchFleetResponse{{Cursor: "1.0.0"}, statusChange("1.1.1", "node-1"), statusChange("1.1.2", "node-2")} {
			if err := s.Send(m); err != nil {
				return err
			}
		}
		st, _ := status.New(codes.ResourceExhausted, `this watch fell behind: the hub could not send it a change for 1m0s (the consumer is not reading); resume with cursor "1.1.2"`).WithDetails(
			&errdetails.ErrorInfo{Reason: "WATCH_FELL_BEHIND", Domain: "ironlink.v1", Metadata: map[string]string{"cursor": "1.1.2"}})
		return st.Err()
	}
	lagging := statusChange("1.1.3", "node-3")
	lagging.Behind = durationpb.New(2*time.Minute + 5*time.Second)
	for _, m := range []*ironlinkv1.WatchFleetResponse{{Cursor: req.GetCursor()}, lagging, statusChange("1.1.4", "node-4")} {
		if err := s.Send(m); err != nil {
			return err
		}
	}
	time.Sleep(200 * time.Millisecond) // the CLI prints it
	f.stop()
	<-s.Context().Done()
	return nil
}

// TestWatchResumesAfterFallingBehind: when the hub ends `ironlink watch`'s
// stream because it fell behind (WATCH_FELL_BEHIND), watch says so on
// stderr, resumes by itself from the last cursor it received (the one the
// hub names) and prints every change once; a change the hub marks behind
// by a minute or more makes it say so, and once caught up that it is.
func TestWatchResumesAfterFallingBehind(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := grpc.NewServer()
	f := &behindFleet{stop: cancel}
	ironlinkv1.RegisterFleetServiceServer(srv, f)
	go srv.Serve(lis)
	defer srv.Stop()
	var out, errb bytes.Buffer
	code := Execute(ctx, Options{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }},
		[]string{"--config", filepath.Join(t.TempDir(), "none.yaml"), "--hub", lis.Addr().String(), "--plaintext", "--no-auth", "watch"})
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	f.mu.Lock()
	cursors := f.cursors
	f.mu.Unlock()
	if len(cursors) != 2 || cursors[1] != "1.1.2" {
		t.Fatalf("WatchFleet requests with cursors %q, want a second one resuming after 1.1.2", cursors)
	}
	for _, n := range []string{"node-1", "node-2", "node-3", "node-4"} {
		if c := strings.Count(out.String(), "demo/"+n+" "); c != 1 {
			t.Errorf("%s printed %d times, want once:\n%s", n, c, out.String())
		}
	}
	if !strings.Contains(errb.String(), "fell behind") || !strings.Contains(errb.String(), "resuming after cursor 1.1.2") {
		t.Errorf("stderr does not say the watch fell behind and where it resumes:\n%s", errb.String())
	}
	// The hub's Behind on a change: the watch says how far behind it is,
	// then that it caught up.
	if !strings.Contains(errb.String(), "this watch is 2m5s behind the fleet") || !strings.Contains(errb.String(), "this watch has caught up") {
		t.Errorf("stderr does not say the watch was 2m5s behind, then caught up:\n%s", errb.String())
	}
	t.Logf("stderr:\n%s", errb.String())
}
