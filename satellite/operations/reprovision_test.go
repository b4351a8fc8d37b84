package operations_test

import (
	"context"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/operations"
)

// TestFixtureReprovision: REPROVISION undeploys a deployed node, then
// cleans (with clean steps) and provides it; from each state it starts in
// it sends each phase's request once and ends available; a node with an
// instance, or in a state it cannot start from, fails without a write.
func TestFixtureReprovision(t *testing.T) {
	steps := &ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "erase_devices_metadata"}}}
	cases := []struct {
		name, from string
		params     *ironlinkv1.OperationParams
		want       map[string]int // provision target → requests
	}{
		{"active: undeploy only", "active", nil, map[string]int{"deleted": 1}},
		{"active with clean steps: undeploy, manage, clean, provide", "active", steps, map[string]int{"deleted": 1, "manage": 1, "clean": 1, "provide": 1}},
		{"deploy failed: undeploy", "deploy failed", nil, map[string]int{"deleted": 1}},
		{"available: manage, provide", "available", nil, map[string]int{"manage": 1, "provide": 1}},
		{"manageable: provide", "manageable", nil, map[string]int{"provide": 1}},
		{"manageable with clean steps: clean, provide", "manageable", steps, map[string]int{"clean": 1, "provide": 1}},
		{"clean failed: manage, provide", "clean failed", nil, map[string]int{"manage": 1, "provide": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, r, got := fxRunner(t, tc.from)
			p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION, fxNode, tc.params))
			wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
			if n, _ := f.Node(fxNode); n.ProvisionState != "available" {
				t.Errorf("node ends in %q, want available", n.ProvisionState)
			}
			for _, target := range []string{"deleted", "manage", "clean", "provide", "rebuild"} {
				if n := provisions(f, target); n != tc.want[target] {
					t.Errorf("%d %q requests, want %d; calls %v", n, target, tc.want[target], f.Calls())
				}
			}
			if n, _ := f.NodeDetail(context.Background(), fxNode); n.Extra["ironlink_operation"] != nil {
				t.Errorf("marker left on the node: %v", n.Extra)
			}
		})
	}
	t.Run("an instance on the node is refused without a write", func(t *testing.T) {
		f, r, got := fxRunner(t, "active")
		f.UpdateNode(fxNode, func(n *ironic.Node) { n.InstanceUUID = "0d6b4a1e-36c4-4f55-9d0c-1a4f5e6b7c8d" })
		p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION, fxNode, nil))
		if p.GetState() != ironlinkv1.OperationState_OPERATION_STATE_FAILED || p.GetFailureReason() != "InvalidState" || !strings.Contains(p.GetError(), "NOVA_DELETE") {
			t.Errorf("got %v %s: %s", p.GetState(), p.GetFailureReason(), p.GetError())
		}
		if w := f.Writes(); len(w) != 0 {
			t.Errorf("writes: %v", w)
		}
	})
	t.Run("a failed tear-down ends it FAILED with Ironic's error", func(t *testing.T) {
		f, r, got := fxRunner(t, "active")
		f.FailNextActionOf(fxNode, "deleted", "Failed to tear down: BMC unreachable")
		p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION, fxNode, nil))
		if p.GetState() != ironlinkv1.OperationState_OPERATION_STATE_FAILED || p.GetError() != "Failed to tear down: BMC unreachable" {
			t.Errorf("got %v %s: %s", p.GetState(), p.GetFailureReason(), p.GetError())
		}
	})
}

// TestFixtureReprovisionResumesAfterRestart: a runner stopped (as a killed
// satellite) in each phase of a REPROVISION with clean steps is replaced by
// one that finishes it; every phase's request went out once in all.
func TestFixtureReprovisionResumesAfterRestart(t *testing.T) {
	steps := &ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "erase_devices_metadata"}}}
	for _, stopAfter := range []string{"deleted", "manage", "clean", "provide"} {
		t.Run("stopped after "+stopAfter, func(t *testing.T) {
			f, _, _ := fxRunner(t, "active")
			req := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION, fxNode, steps)
			ctx1, cancel1 := context.WithCancel(context.Background())
			defer cancel1()
			// The first runner is stopped (as a killed satellite) by the
			// progress that records the request: before its next pass.
			r1 := operations.NewOnSite(ctx1, operations.Site{Ironic: f}, operations.Config{PollInterval: time.Millisecond},
				func(p *ironlinkv1.OperationProgress) {
					for _, st := range p.GetSteps() {
						for _, rq := range st.GetRequests() {
							if rq.GetDetail() == "target="+stopAfter {
								cancel1()
							}
						}
					}
				}, nil)
			r1.Handle(req)
			r1.Wait()
			if provisions(f, stopAfter) != 1 {
				t.Fatalf("the first runner sent no %q request; calls %v", stopAfter, f.Calls())
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := make(chan *ironlinkv1.OperationProgress, 1000)
			r2 := operations.NewOnSite(ctx, operations.Site{Ironic: f}, operations.Config{PollInterval: time.Millisecond},
				func(p *ironlinkv1.OperationProgress) { got <- p }, nil)
			again := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION, fxNode, steps)
			again.OperationId, again.Attempt = req.GetOperationId(), 2
			wantState(t, fxRun(t, r2, got, again), ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
			for _, target := range []string{"deleted", "manage", "clean", "provide"} {
				if n := provisions(f, target); n != 1 {
					t.Errorf("%q asked for %d times, want 1; calls %v", target, n, f.Calls())
				}
			}
			if n, _ := f.Node(fxNode); n.ProvisionState != "available" {
				t.Errorf("node ends in %q", n.ProvisionState)
			}
		})
	}
}
