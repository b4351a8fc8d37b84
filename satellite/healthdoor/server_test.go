package healthdoor

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/ironlink/ironlink/gen/datamodels"
	"github.com/ironlink/ironlink/internal/grpcraw"
)

// TestDoorRefusesUndecodableStrings: a string that is not valid UTF-8 (the
// gRPC codec cannot decode the batch) and a NUL (it can; the door's own
// check) are both InvalidArgument naming the field as the door names
// fields, and nothing reaches the spool (nothing is forwarded to the hub).
// Without the decode options grpc-go would answer Internal.
func TestDoorRefusesUndecodableStrings(t *testing.T) {
	spool := NewSpool(100, nil)
	srv := NewServer(spool, time.Second, NewMetrics(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(io.Discard, nil)))
	sock := filepath.Join(t.TempDir(), "health.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-served })
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(grpcraw.Codec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })

	// body is a batch of two good events with placeholder replaced by bad
	// (same length, so the wire lengths stay right).
	body := func(placeholder, bad string) []byte {
		ev := func(node, msg string) *datamodels.HealthEvent {
			return &datamodels.HealthEvent{Agent: "gpu-health-monitor", ComponentClass: "GPU", CheckName: "GpuXidError",
				IsFatal: true, Message: msg, ErrorCode: []string{"79"}, GeneratedTimestamp: timestamppb.Now(), NodeName: node,
				EntitiesImpacted: []*datamodels.Entity{{EntityType: "GPU", EntityValue: "gpu-3"}}}
		}
		b, err := proto.Marshal(&datamodels.HealthEvents{Version: 1, Events: []*datamodels.HealthEvent{ev("node-001", "XID 79"), ev("node-002", "XID 79 again")}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(placeholder)) {
			t.Fatalf("%q is not in the batch", placeholder)
		}
		return bytes.Replace(b, []byte(placeholder), []byte(bad), 1)
	}
	for _, c := range []struct {
		name      string
		req       []byte
		wantField string
	}{
		{"invalid UTF-8 in nodeName", body("node-002", "node-\xff02"), "events[1].node_name"},
		{"invalid UTF-8 in message", body("XID 79 again", "XID 79 \xc3gain"), "events[1].message"},
		{"invalid UTF-8 in an entity", body("gpu-3", "gpu\xfe3"), "events[0].entities_impacted[0].entity_value"},
		{"NUL in message", body("XID 79 again", "XID 79\x00again"), "events[1].message"},
		{"NUL in nodeName", body("node-001", "node\x00001"), "events[0].node_name"},
	} {
		callCtx, callCancel := context.WithTimeout(ctx, 10*time.Second)
		err := cc.Invoke(callCtx, "/datamodels.PlatformConnector/HealthEventOccurredV1", &c.req, new(emptypb.Empty))
		callCancel()
		st := status.Convert(err)
		if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), c.wantField+" ") {
			t.Errorf("%s: %v (%s), want InvalidArgument naming %s", c.name, st.Code(), st.Message(), c.wantField)
		}
	}
	if d := spool.Depth(); d != 0 {
		t.Errorf("the spool holds %d events after refused batches, want 0 (nothing forwarded)", d)
	}
	if got := spool.Take(); len(got) != 0 {
		t.Errorf("the spool would forward %d reports, want none", len(got))
	}
}
