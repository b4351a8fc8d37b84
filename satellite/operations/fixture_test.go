package operations_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/testlog"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/operations"
	"github.com/ironlink/ironlink/satellite/site"
)

// These tests run the runner over site.Fixture (no HTTP): each pass reads
// the node, which moves it one state along Ironic's state machine, so an
// operation runs in a few milliseconds and every call it made is recorded.

const fxNode = "00000000-0000-4000-8000-000000000001"

// fxRunner returns a fixture with one node in state and a runner over it
// (Nova and Glance included).
func fxRunner(t *testing.T, state string) (*site.Fixture, *operations.Runner, chan *ironlinkv1.OperationProgress) {
	t.Helper()
	f := site.NewFixture()
	f.PutNode(ironic.Node{UUID: fxNode, Name: "fx-1", ProvisionState: state, PowerState: "power off", ResourceClass: "gpu"})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	got := make(chan *ironlinkv1.OperationProgress, 1000)
	r := operations.NewOnSite(ctx, operations.Site{Ironic: f, Nova: f, Images: f},
		operations.Config{PollInterval: time.Millisecond, NoValidHostWait: time.Millisecond},
		func(p *ironlinkv1.OperationProgress) { got <- p }, testlog.Discard())
	return f, r, got
}

// fxRun handles req and returns its final progress.
func fxRun(t *testing.T, r *operations.Runner, got chan *ironlinkv1.OperationProgress, req *ironlinkv1.OperationRequest) *ironlinkv1.OperationProgress {
	t.Helper()
	r.Handle(req)
	return final(t, got, req.GetOperationId())
}

// provisions counts the provision requests with target the runner made.
func provisions(f *site.Fixture, target string) int {
	n := 0
	for _, c := range f.Calls() {
		if c.Method == site.MethodSetProvisionState && c.Trait == target && c.Err == nil {
			n++
		}
	}
	return n
}

func TestFixtureEachKindReachesItsGoal(t *testing.T) {
	cases := []struct {
		name, from, to string
		kind           ironlinkv1.OperationKind
		params         *ironlinkv1.OperationParams
		target         string
	}{
		{"inspect", "manageable", "manageable", ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, nil, "inspect"},
		{"clean", "manageable", "manageable", ironlinkv1.OperationKind_OPERATION_KIND_CLEAN,
			&ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "erase_devices_metadata"}}}, "clean"},
		{"provide", "manageable", "available", ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE, nil, "provide"},
		{"deploy", "available", "active", ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY,
			&ironlinkv1.OperationParams{Deploy: &ironlinkv1.DeployParams{ImageSource: "glance-image"}}, "active"},
		{"undeploy", "active", "available", ironlinkv1.OperationKind_OPERATION_KIND_UNDEPLOY, nil, "deleted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, r, got := fxRunner(t, tc.from)
			p := fxRun(t, r, got, ironicReq(tc.kind, fxNode, tc.params))
			wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
			if n, _ := f.Node(fxNode); n.ProvisionState != tc.to {
				t.Errorf("node ends in %q, want %q", n.ProvisionState, tc.to)
			}
			if got := provisions(f, tc.target); got != 1 {
				t.Errorf("%d provision requests for %q, want 1; calls %v", got, tc.target, f.Calls())
			}
		})
	}
}

// INSPECT starts and ends in manageable: a second runner (a restarted
// satellite) given the same operation while the node inspects finds its
// marker and a newer provision_updated_at, and does not inspect again.
func TestFixtureRedeliveredInspectIsNotRepeated(t *testing.T) {
	f, _, _ := fxRunner(t, "manageable")
	f.Hold(fxNode, true)
	req := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, fxNode, nil)
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	got1 := make(chan *ironlinkv1.OperationProgress, 100)
	r1 := operations.NewOnSite(ctx1, operations.Site{Ironic: f}, operations.Config{PollInterval: time.Millisecond},
		func(p *ironlinkv1.OperationProgress) { got1 <- p }, nil)
	r1.Handle(req)
	for p := range got1 {
		if p.GetProvisionState() == "inspect wait" {
			break
		}
	}
	cancel1()
	r1.Wait()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got2 := make(chan *ironlinkv1.OperationProgress, 100)
	r2 := operations.NewOnSite(ctx, operations.Site{Ironic: f}, operations.Config{PollInterval: time.Millisecond},
		func(p *ironlinkv1.OperationProgress) { got2 <- p }, nil)
	f.Hold(fxNode, false)
	again := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, fxNode, nil)
	again.OperationId, again.Attempt = req.GetOperationId(), 2
	wantState(t, fxRun(t, r2, got2, again), ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	if n := provisions(f, "inspect"); n != 1 {
		t.Errorf("inspect asked for %d times, want 1", n)
	}
}

func TestFixtureEnrolCreatesPortsTraitsAndManages(t *testing.T) {
	f, r, got := fxRunner(t, "available")
	props, _ := structpb.NewStruct(map[string]any{"cpus": 4})
	req := &ironlinkv1.OperationRequest{OperationId: opID(), Attempt: 1, Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL,
		Node: &ironlinkv1.NodeSpec{Name: "new-1", Driver: "fake-hardware", Properties: props, Traits: []string{"CUSTOM_X"},
			Ports: []*ironlinkv1.PortSpec{{Address: "52:54:00:00:00:01", PxeEnabled: true}}}}
	p := fxRun(t, r, got, req)
	wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	d, err := f.NodeDetail(context.Background(), p.GetDeviceId())
	if err != nil || d.Name != "new-1" || d.ProvisionState != "manageable" {
		t.Fatalf("enrolled node %+v, %v", d, err)
	}
	if ports, _ := f.ListPorts(context.Background(), d.UUID); len(ports) != 1 {
		t.Errorf("ports %v", ports)
	}
	if n, _ := f.Node(d.UUID); !n.HasTrait("CUSTOM_X") {
		t.Errorf("traits %v", n.Traits)
	}
	// A second ENROL of the same name takes the node over: nothing created.
	req2 := proto(req)
	p2 := fxRun(t, r, got, req2)
	wantState(t, p2, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	creates := 0
	for _, c := range f.Calls() {
		if (c.Method == site.MethodCreateNode || c.Method == site.MethodCreatePort) && c.Err == nil {
			creates++
		}
	}
	if creates != 2 || p2.GetDeviceId() != d.UUID {
		t.Errorf("%d creates (want 2: one node, one port), second enrol on %s", creates, p2.GetDeviceId())
	}
}

func proto(req *ironlinkv1.OperationRequest) *ironlinkv1.OperationRequest {
	return &ironlinkv1.OperationRequest{OperationId: opID(), Attempt: 1, Kind: req.GetKind(), Node: req.GetNode()}
}

func TestFixtureFailuresEndTheOperation(t *testing.T) {
	t.Run("ironic failure state", func(t *testing.T) {
		f, r, got := fxRunner(t, "manageable")
		f.FailNextAction(fxNode, "disk erase failed")
		p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE, fxNode, nil))
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
		if p.GetFailureReason() != "CleanFailed" || p.GetError() != "disk erase failed" {
			t.Errorf("failed %s: %s", p.GetFailureReason(), p.GetError())
		}
	})
	t.Run("node locked", func(t *testing.T) {
		f, r, got := fxRunner(t, "manageable")
		f.Lock(fxNode, "conductor-1")
		p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE, fxNode, nil))
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
		if p.GetFailureReason() != "NodeLocked" {
			t.Errorf("failed %s: %s", p.GetFailureReason(), p.GetError())
		}
	})
	t.Run("wrong start state writes nothing", func(t *testing.T) {
		f, r, got := fxRunner(t, "active")
		p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, fxNode,
			&ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "erase_devices_metadata"}}}))
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
		if p.GetFailureReason() != "InvalidState" || !strings.Contains(p.GetError(), "active") || len(f.Writes()) != 0 {
			t.Errorf("failed %s: %s; writes %v", p.GetFailureReason(), p.GetError(), f.Writes())
		}
	})
	t.Run("unknown node", func(t *testing.T) {
		_, r, got := fxRunner(t, "available")
		p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE, "nope", nil))
		if p.GetFailureReason() != "NodeNotFound" {
			t.Errorf("failed %s: %s", p.GetFailureReason(), p.GetError())
		}
	})
}

// A second operation on a node that runs one is refused (NodeBusy) without
// touching the node; the first one goes on.
func TestFixtureOneOperationPerNode(t *testing.T) {
	f, r, got := fxRunner(t, "manageable")
	f.Hold(fxNode, true)
	first := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE, fxNode, nil)
	r.Handle(first)
	for p := range got {
		if p.GetProvisionState() == "clean wait" {
			break
		}
	}
	calls := len(f.Calls())
	second := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, fxNode, nil)
	r.Handle(second)
	p := final(t, got, second.GetOperationId())
	if p.GetState() != ironlinkv1.OperationState_OPERATION_STATE_FAILED || p.GetFailureReason() != "NodeBusy" || !strings.Contains(p.GetError(), first.GetOperationId()) {
		t.Fatalf("second operation: %v %s %s", p.GetState(), p.GetFailureReason(), p.GetError())
	}
	for _, c := range f.Calls()[calls:] {
		if c.Method != site.MethodNodeDetail { // the first operation's reads
			t.Errorf("the refused operation called %v", c)
		}
	}
	f.Hold(fxNode, false)
	wantState(t, final(t, got, first.GetOperationId()), ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
}

// A cancel while the node waits in clean wait aborts it there.
func TestFixtureCancelAbortsFromAWaitState(t *testing.T) {
	f, r, got := fxRunner(t, "manageable")
	f.Hold(fxNode, true)
	req := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, fxNode,
		&ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "erase_devices_metadata"}}})
	r.Handle(req)
	deadline := time.After(10 * time.Second)
	for waiting := false; !waiting; {
		select {
		case p := <-got:
			waiting = p.GetProvisionState() == "clean wait"
		case <-deadline:
			t.Fatal("never saw clean wait")
		}
	}
	cancelReq := proto(req)
	cancelReq.OperationId, cancelReq.DeviceId, cancelReq.Params, cancelReq.Attempt, cancelReq.Cancel = req.GetOperationId(), fxNode, req.GetParams(), 2, true
	r.Handle(cancelReq)
	p := final(t, got, req.GetOperationId())
	wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_CANCELLED)
	if n, _ := f.Node(fxNode); n.ProvisionState != "clean failed" {
		t.Errorf("node in %q after abort", n.ProvisionState)
	}
}

func TestFixtureNovaCreateAndDelete(t *testing.T) {
	f, r, got := fxRunner(t, "available")
	f.PutFlavor(nova.Flavor{ID: "fl-1", Name: "baremetal-gpu", ExtraSpecs: map[string]string{"resources:CUSTOM_GPU": "1"}})
	f.PutImage("ubuntu", "11111111-2222-4333-8444-555555555555")
	create := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, fxNode,
		&ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{Name: "vm-1", Image: "ubuntu"}})
	p := fxRun(t, r, got, create)
	wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	n, _ := f.Node(fxNode)
	if n.ProvisionState != "active" || n.InstanceUUID != p.GetServerId() {
		t.Fatalf("node %s instance %s, server %s", n.ProvisionState, n.InstanceUUID, p.GetServerId())
	}
	del := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE, fxNode, nil)
	wantState(t, fxRun(t, r, got, del), ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	if n, _ := f.Node(fxNode); n.ProvisionState != "available" || n.InstanceUUID != "" {
		t.Errorf("after delete: node %s instance %q", n.ProvisionState, n.InstanceUUID)
	}
}

// NOVA_CREATE refuses a node in maintenance or without a power state before
// it boots anything.
func TestFixtureNovaCreateNeedsASchedulableNode(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		setup        func(f *site.Fixture)
	}{
		{"maintenance", "InvalidState", func(f *site.Fixture) { f.SetMaintenance(fxNode, true, "PSU swap", "") }},
		{"no power state", "PowerStateUnknown", func(f *site.Fixture) { f.SetPower(fxNode, "") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, r, got := fxRunner(t, "available")
			f.PutFlavor(nova.Flavor{ID: "fl-1", Name: "baremetal-gpu", ExtraSpecs: map[string]string{"resources:CUSTOM_GPU": "1"}})
			tc.setup(f)
			p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, fxNode,
				&ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{Name: "vm-1", Image: "11111111-2222-4333-8444-555555555555"}}))
			if p.GetFailureReason() != tc.reason {
				t.Errorf("failed %s: %s", p.GetFailureReason(), p.GetError())
			}
			for _, c := range f.Calls() {
				if c.Method == site.MethodCreateServer {
					t.Errorf("booted a server: %v", c)
				}
			}
		})
	}
}

// Without Nova, NOVA_* fail NovaUnavailable before any call.
func TestFixtureNovaOperationWithoutNova(t *testing.T) {
	f := site.NewFixture()
	f.PutNode(ironic.Node{UUID: fxNode, ProvisionState: "available"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan *ironlinkv1.OperationProgress, 100)
	r := operations.NewOnSite(ctx, operations.Site{Ironic: f}, operations.Config{PollInterval: time.Millisecond},
		func(p *ironlinkv1.OperationProgress) { got <- p }, nil)
	p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE, fxNode, nil))
	if p.GetFailureReason() != "NovaUnavailable" || len(f.Calls()) != 0 {
		t.Errorf("failed %s; calls %v", p.GetFailureReason(), f.Calls())
	}
}
