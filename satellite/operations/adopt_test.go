package operations_test

import (
	"context"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/satellite/operations"
	"github.com/ironlink/ironlink/satellite/site"
)

func adoptParams() *ironlinkv1.OperationParams {
	return &ironlinkv1.OperationParams{Adopt: &ironlinkv1.AdoptParams{ImageSource: "http://img/slurm-worker.qcow2", RootGb: 40,
		Capabilities: map[string]string{"boot_option": "local"}}}
}

// TestFixtureAdopt: ADOPT sets instance_info, asks for adopt once and ends
// with the node active; a failed adoption ends FAILED AdoptFailed with
// Ironic's last_error; a node neither manageable nor adopt failed is
// refused without a write; a runner stopped after the adopt request is
// replaced by one that does not ask again.
func TestFixtureAdopt(t *testing.T) {
	t.Run("manageable to active", func(t *testing.T) {
		f, r, got := fxRunner(t, "manageable")
		p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_ADOPT, fxNode, adoptParams()))
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		n, _ := f.NodeDetail(context.Background(), fxNode)
		if n.ProvisionState != "active" || n.InstanceInfo["image_source"] != "http://img/slurm-worker.qcow2" || n.InstanceInfo["root_gb"] != "40" {
			t.Errorf("node %s, instance_info %v", n.ProvisionState, n.InstanceInfo)
		}
		if n.Extra["ironlink_operation"] != nil {
			t.Errorf("marker left: %v", n.Extra)
		}
		if a, d := provisions(f, "adopt"), provisions(f, "active"); a != 1 || d != 0 {
			t.Errorf("%d adopt and %d deploy requests, want 1 and 0", a, d)
		}
	})
	t.Run("adopt failed ends FAILED with Ironic's error", func(t *testing.T) {
		f, r, got := fxRunner(t, "manageable")
		msg := "Error while attempting to adopt node " + fxNode + ": boot validation failed."
		f.FailNextActionOf(fxNode, "adopt", msg)
		p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_ADOPT, fxNode, adoptParams()))
		if p.GetState() != ironlinkv1.OperationState_OPERATION_STATE_FAILED || p.GetFailureReason() != "AdoptFailed" || p.GetError() != msg {
			t.Errorf("got %v %s: %s", p.GetState(), p.GetFailureReason(), p.GetError())
		}
		// A second ADOPT from adopt failed adopts.
		p = fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_ADOPT, fxNode, adoptParams()))
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	})
	t.Run("available is refused without a write", func(t *testing.T) {
		f, r, got := fxRunner(t, "available")
		p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_ADOPT, fxNode, adoptParams()))
		if p.GetState() != ironlinkv1.OperationState_OPERATION_STATE_FAILED || p.GetFailureReason() != "InvalidState" {
			t.Errorf("got %v %s: %s", p.GetState(), p.GetFailureReason(), p.GetError())
		}
		if w := f.Writes(); len(w) != 0 {
			t.Errorf("writes: %v", w)
		}
	})
	t.Run("a restarted runner does not ask again", func(t *testing.T) {
		f, _, _ := fxRunner(t, "manageable")
		req := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_ADOPT, fxNode, adoptParams())
		ctx1, cancel1 := context.WithCancel(context.Background())
		defer cancel1()
		// Stopped (as a killed satellite) by the progress that records the
		// adopt request, before its next pass.
		r1 := operations.NewOnSite(ctx1, operations.Site{Ironic: f}, operations.Config{PollInterval: time.Millisecond},
			func(p *ironlinkv1.OperationProgress) {
				for _, st := range p.GetSteps() {
					for _, rq := range st.GetRequests() {
						if rq.GetDetail() == "target=adopt" {
							cancel1()
						}
					}
				}
			}, nil)
		r1.Handle(req)
		r1.Wait()
		if n, _ := f.NodeDetail(context.Background(), fxNode); provisions(f, "adopt") != 1 || n.Extra["ironlink_operation"] == nil {
			t.Fatalf("the first runner did not stop after its adopt request with its marker on the node: %v", f.Calls())
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		got := make(chan *ironlinkv1.OperationProgress, 1000)
		r2 := operations.NewOnSite(ctx, operations.Site{Ironic: f}, operations.Config{PollInterval: time.Millisecond},
			func(p *ironlinkv1.OperationProgress) { got <- p }, nil)
		again := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_ADOPT, fxNode, adoptParams())
		again.OperationId, again.Attempt = req.GetOperationId(), 2
		wantState(t, fxRun(t, r2, got, again), ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		if n := provisions(f, "adopt"); n != 1 {
			t.Errorf("adopt asked for %d times, want 1", n)
		}
		patches := 0
		for _, c := range f.Calls() {
			if c.Method == site.MethodPatchNode {
				patches++
			}
		}
		if patches != 3 { // instance_info, marker, marker removal
			t.Errorf("%d PATCH requests, want 3 (instance_info, marker, marker removal): %v", patches, f.Calls())
		}
	})
}
