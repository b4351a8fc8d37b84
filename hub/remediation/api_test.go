package remediation_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/internal/testlog"
)

// GetDeviceRemediation (what `ironlink explain` shows): the ladder, the
// step in progress, attempts used and left, the next step and when; the
// handoff is closed through CloseHandoff, once.
func TestExplainAndCloseThroughTheAPI(t *testing.T) {
	r := newRig(t, ladderPolicy, 10, false)
	f, err := policy.Parse([]byte(ladderPolicy))
	if err != nil {
		t.Fatal(err)
	}
	api := remediation.NewAPI(r.st, func() *policy.File { return f }, func(context.Context) string { return "alice" }, testlog.New(t))
	ctx := context.Background()
	dev := r.site.IDs[0]
	r.site.Fault([]string{dev}, "DeployFailed", r.clk.Now())
	r.tick()
	got, err := api.GetDeviceRemediation(ctx, &ironlinkv1.GetDeviceRemediationRequest{Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetRule() != "faulted" || len(got.GetLadder()) != 2 || got.GetLadder()[1].GetKind() != "REPROVISION" ||
		got.GetAttemptsUsed() != 1 || got.GetAttemptsLeft() != 1 || got.GetLadderRun().GetState() != "RUNNING" ||
		got.GetLadderRun().GetSteps()[0].GetState() != "RUNNING" || got.GetNextStep() != 2 || got.GetNextTime() == nil ||
		!strings.Contains(got.GetPlan(), "step 1 of 2 (REBOOT) RUNNING; if the fault persists, step 2 (REPROVISION) at") {
		t.Fatalf("explain: %v", got)
	}
	// Step 1 fails, step 2 fails: exhausted, handed off.
	for i := 0; i < 2; i++ {
		r.finishOps(dev, "FAILED")
		r.tick()
		r.tick()
	}
	got, err = api.GetDeviceRemediation(ctx, &ironlinkv1.GetDeviceRemediationRequest{Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetHandoffs()) != 1 || got.GetHandoffs()[0].GetReason() != "LadderExhausted" || got.GetLadderRun().GetState() != "HANDED_OFF" {
		t.Fatalf("after exhaustion: %v", got)
	}
	id := got.GetHandoffs()[0].GetId()
	if _, err := api.CloseHandoff(ctx, &ironlinkv1.CloseHandoffRequest{Id: id}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("close without a note: %v", err)
	}
	if _, err := api.CloseHandoff(ctx, &ironlinkv1.CloseHandoffRequest{Id: id, Note: "  \t"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("close without a note: %v", err)
	}
	closed, err := api.CloseHandoff(ctx, &ironlinkv1.CloseHandoffRequest{Id: id, Note: "replaced the PSU"})
	if err != nil || closed.GetHandoff().GetState() != "CLOSED" || closed.GetHandoff().GetClosedBy() != "alice" {
		t.Fatalf("close: %v %v", closed, err)
	}
	if _, err := api.CloseHandoff(ctx, &ironlinkv1.CloseHandoffRequest{Id: id, Note: "again"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("second close: %v", err)
	}
	if _, err := api.GetDeviceRemediation(ctx, &ironlinkv1.GetDeviceRemediationRequest{Device: "no-such-node"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown device: %v", err)
	}
}
