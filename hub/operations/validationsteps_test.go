package operations_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/hwprofile"
	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/internal/testlog"
)

// A VALIDATE that names no clean steps stores the clean steps of the
// device's hardware profile (validation.clean_steps); one that names its
// own keeps them; a device no profile matches gets none.
func TestValidateUsesTheProfilesCleanSteps(t *testing.T) {
	f := newFixture(t)
	file, err := hwprofile.Parse([]byte(`profiles:
  - name: site-a-nodes
    match: {name: "a-*"}
    validation:
      clean_steps:
        - {interface: deploy, step: burnin_cpu}
        - {interface: deploy, step: burnin_memory}
`))
	if err != nil {
		t.Fatal(err)
	}
	srv := operations.NewServer(f.st, operations.Config{}, testlog.New(t))
	srv.SetValidationCleanSteps(func(site, name, rc string) []*ironlinkv1.CleanStep {
		return file.ValidationCleanSteps(hwprofile.Device{Site: site, Name: name, ResourceClass: rc})
	})
	ctx := context.Background()
	var lastID string // of the first device started
	stored := func(dev string, p *ironlinkv1.OperationParams) []string {
		t.Helper()
		resp, err := srv.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_VALIDATE,
			Devices: []string{dev}, Params: p, Reason: "test"})
		if err != nil {
			t.Fatalf("validate %s: %v", dev, err)
		}
		if lastID == "" {
			lastID = resp.GetOperations()[0].GetOperationId()
		}
		o, err := f.st.GetOperation(ctx, resp.GetOperations()[0].GetOperationId())
		if err != nil {
			t.Fatal(err)
		}
		var got ironlinkv1.OperationParams
		if err := protojson.Unmarshal(o.Params, &got); err != nil {
			t.Fatal(err)
		}
		var steps []string
		for _, s := range got.GetCleanSteps() {
			steps = append(steps, s.GetInterface()+"."+s.GetStep())
		}
		if len(p.GetValidationChecks()) > 0 && len(got.GetValidationChecks()) != len(p.GetValidationChecks()) {
			t.Errorf("validation checks %v, want %v", got.GetValidationChecks(), p.GetValidationChecks())
		}
		return steps
	}
	if got := stored("a-manageable", &ironlinkv1.OperationParams{ValidationChecks: []string{"burn-in"}}); len(got) != 2 || got[0] != "deploy.burnin_cpu" || got[1] != "deploy.burnin_memory" {
		t.Errorf("a run naming no steps stored %v, want the profile's deploy.burnin_cpu, deploy.burnin_memory", got)
	}
	if got := stored("b-manageable", nil); len(got) != 0 {
		t.Errorf("a device no profile matches stored clean steps %v", got)
	}
	if _, err := srv.CancelOperation(ctx, &ironlinkv1.CancelOperationRequest{OperationId: lastID, Reason: "next case"}); err != nil {
		t.Fatal(err)
	}
	own := &ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "erase_devices_metadata"}}}
	if got := stored("a-manageable", own); len(got) != 1 || got[0] != "deploy.erase_devices_metadata" {
		t.Errorf("a run naming its own steps stored %v, want only deploy.erase_devices_metadata", got)
	}
}
