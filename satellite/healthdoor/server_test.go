package healthdoor

import (
	"bytes"
	"context"
	"fmt"
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
	"github.com/ironlink/ironlink/internal/reporterlimit"
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

// TestOversizedBatchSpendsNoTokens: a batch over MaxEvents is refused
// InvalidArgument before the per-agent limit is consulted, so the agents
// it names keep their tokens (and the limiter learns no new agents): each
// of them reports next without being throttled.
func TestOversizedBatchSpendsNoTokens(t *testing.T) {
	srv := NewServer(NewSpool(1000, nil), 50*time.Millisecond, NewMetrics(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv.SetReporterLimit(reporterlimit.New(0.001, 1)) // one event per agent, then nothing for 1000 s
	ev := func(agent string) *datamodels.HealthEvent {
		return &datamodels.HealthEvent{Agent: agent, ComponentClass: "GPU", CheckName: "GpuXidError", IsFatal: true, Message: "XID 79",
			GeneratedTimestamp: timestamppb.Now(), NodeName: "node-001"}
	}
	var big datamodels.HealthEvents
	for i := range MaxEvents + 1 {
		big.Events = append(big.Events, ev(fmt.Sprintf("monitor-%d", i)))
	}
	if _, err := srv.HealthEventOccurredV1(context.Background(), &big); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "want 1 to") {
		t.Fatalf("a batch of %d events: %v, want InvalidArgument naming the limit", len(big.Events), err)
	}
	for _, agent := range []string{"monitor-0", fmt.Sprintf("monitor-%d", MaxEvents)} {
		_, err := srv.HealthEventOccurredV1(context.Background(), &datamodels.HealthEvents{Version: 1, Events: []*datamodels.HealthEvent{ev(agent)}})
		if status.Code(err) == codes.ResourceExhausted {
			t.Fatalf("%s throttled after its oversized batch was refused: %v", agent, err)
		}
	}
}
