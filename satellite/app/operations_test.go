package app_test

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/app"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
)

// opsHub is a scripted hub: it welcomes every Hello, sends an operation once
// a Hello announced "operations", and records the progress that comes back.
type opsHub struct {
	ironlinkv1.UnimplementedLinkServiceServer
	op       *ironlinkv1.OperationRequest
	mu       sync.Mutex
	hellos   [][]string
	progress []*ironlinkv1.OperationProgress
}

func (h *opsHub) Connect(stream ironlinkv1.LinkService_ConnectServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	caps := first.GetHello().GetCapabilities()
	h.mu.Lock()
	h.hellos = append(h.hellos, caps)
	h.mu.Unlock()
	if err := stream.Send(&ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Welcome{Welcome: &ironlinkv1.Welcome{Replica: "test"}}}); err != nil {
		return err
	}
	if slices.Contains(caps, "operations") {
		if err := stream.Send(&ironlinkv1.ConnectResponse{Msg: &ironlinkv1.ConnectResponse_Operation{Operation: h.op}}); err != nil {
			return err
		}
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			return err
		}
		if p := m.GetOperationProgress(); p != nil {
			h.mu.Lock()
			h.progress = append(h.progress, p)
			h.mu.Unlock()
		}
	}
}

// With --operations-cloud the satellite announces "operations" once that
// credential works, runs the operation the hub sends and reports its
// progress up the link until it is final.
func TestOperationsCapabilityAndProgressOverTheLink(t *testing.T) {
	sim, oc := ostest.StartSim(t, openstacksim.Options{ProvisionStep: 20 * time.Millisecond})
	n := sim.AddNode(openstacksim.Node{Name: "to-provide", ProvisionState: "manageable", PowerState: "power off", ResourceClass: "gpu-h100"})
	hub := &opsHub{op: &ironlinkv1.OperationRequest{OperationId: "5f0c3c1e-0000-4000-8000-000000000001", Attempt: 1,
		Kind: ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE, DeviceId: n.UUID}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	ironlinkv1.RegisterLinkServiceServer(srv, hub)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	cfg := app.Options{Site: "ops", HubAddr: ln.Addr().String(), OpenStack: oc, OperationsCloud: oc.Cloud,
		Identity: app.Identity{NoAuth: true, Plaintext: true}}
	cfg.Agent.PollInterval = time.Second
	cfg.Link.MinBackoff, cfg.Link.MaxBackoff = 10*time.Millisecond, 100*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, validated(t, cfg), ostest.Logger(t)) }()
	for {
		hub.mu.Lock()
		var last *ironlinkv1.OperationProgress
		if len(hub.progress) > 0 {
			last = hub.progress[len(hub.progress)-1]
		}
		hellos := slices.Clone(hub.hellos)
		hub.mu.Unlock()
		if last != nil && last.GetState() != ironlinkv1.OperationState_OPERATION_STATE_RUNNING {
			if last.GetState() != ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED || last.GetProvisionState() != "available" {
				t.Fatalf("final progress %v in %s: %s", last.GetState(), last.GetProvisionState(), last.GetError())
			}
			for _, caps := range hellos[:len(hellos)-1] {
				if slices.Contains(caps, "operations") {
					t.Errorf("an earlier Hello announced operations: %v", hellos)
				}
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no final progress; hellos %v, progress %v", hellos, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, _ := sim.Node(n.UUID); got.ProvisionState != "available" {
		t.Fatalf("node is %s", got.ProvisionState)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
