package healthsim

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/ironlink/ironlink/gen/datamodels"
)

// door is a PlatformConnector that records what it received.
type door struct {
	datamodels.UnimplementedPlatformConnectorServer
	mu  sync.Mutex
	got []*datamodels.HealthEvents
}

func (d *door) HealthEventOccurredV1(_ context.Context, in *datamodels.HealthEvents) (*emptypb.Empty, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, in)
	return &emptypb.Empty{}, nil
}

func TestSendDeliversNVSentinelShapedBatch(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "health.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	d := &door{}
	srv := grpc.NewServer()
	datamodels.RegisterPlatformConnectorServer(srv, d)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	c, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	f, err := Lookup("xid79")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Send(ctx, f.Event("node-007", 3, at, false), f.Event("10.0.15.233", 1, at, true)); err != nil {
		t.Fatal(err)
	}
	if len(d.got) != 1 || len(d.got[0].GetEvents()) != 2 {
		t.Fatalf("door got %v, want one batch of 2", d.got)
	}
	sick, ok := d.got[0].GetEvents()[0], d.got[0].GetEvents()[1]
	if sick.GetNodeName() != "node-007" || !sick.GetIsFatal() || sick.GetIsHealthy() || sick.GetErrorCode()[0] != "79" ||
		sick.GetComponentClass() != "GPU" || sick.GetCheckName() != "SysLogsXIDError" ||
		sick.GetRecommendedAction() != datamodels.RecommendedAction_RESTART_BM || !sick.GetGeneratedTimestamp().AsTime().Equal(at) ||
		sick.GetEntitiesImpacted()[0].GetEntityValue() != "3" || !strings.HasPrefix(sick.GetEntitiesImpacted()[1].GetEntityValue(), "GPU-") {
		t.Errorf("fatal event = %v", sick)
	}
	if ok.GetNodeName() != "10.0.15.233" || ok.GetIsFatal() || !ok.GetIsHealthy() || len(ok.GetErrorCode()) != 0 {
		t.Errorf("healthy event = %v", ok)
	}
}

func TestCatalogCoversTheFaultsOfIssue22(t *testing.T) {
	for _, name := range []string{"xid79", "xid48", "xid63", "xid64", "xid94", "xid95", "nvlink", "thermal", "psu"} {
		if _, err := Lookup(name); err != nil {
			t.Error(err)
		}
	}
	if _, err := Lookup("xid13"); err == nil || !strings.Contains(err.Error(), "xid79") {
		t.Errorf("Lookup(xid13) = %v, want an error naming the known faults", err)
	}
	if a, b := gpuUUID("n", 1), gpuUUID("n", 1); a != b || a == gpuUUID("n", 2) || len(a) != len("GPU-")+36 {
		t.Errorf("gpuUUID: %q %q", a, gpuUUID("n", 2))
	}
}
