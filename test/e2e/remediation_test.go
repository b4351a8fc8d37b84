package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// A remediation ladder on real processes (ironlink-hub with --policy-file,
// ironlink-satellite with its operations credential) over openstacksim:
// an available, offered node is put into maintenance in Ironic; the policy
// quarantines it; the ladder's first step (REBOOT) leaves the maintenance
// in place, so the step fails at its timeout; its second (CLEAR_MAINTENANCE) fixes it; the
// device stays good for the settle time and is released, offered again,
// and the ladder's record names step 2.
func TestLadderOnSimulator(t *testing.T) {
	sim := openstacksim.New(openstacksim.Options{ProvisionStep: 200 * time.Millisecond})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	node := sim.SeedLikeTestbed(1)[0] // available-ready: offered to customers
	clouds := writeSimOpsClouds(t, sim)
	const site = "ladder-e2e"
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(`
policy:
  default:
    enabled: true
    guard: {maxDevices: 5, maxPercent: 100, window: 1h}
    rules:
      - name: maint
        to: [MAINTENANCE]
        remediation:
          steps:
            - {action: REBOOT, timeout: 4s}
            - {action: CLEAR_MAINTENANCE, timeout: 1m}
          settle: 3s
`), 0o600); err != nil {
		t.Fatal(err)
	}
	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{site}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	addr, _ := startHub(t, db, id, "--policy-file", policyFile, "--policy-interval", "200ms", "--heartbeat-interval", "1s")
	cc := id.dialAs(t, addr, "ops-admin")
	fleet, rem := ironlinkv1.NewFleetServiceClient(cc), ironlinkv1.NewRemediationServiceClient(cc)
	harness.Start(t, "ironlink-satellite", bins.Satellite(), append([]string{"--site", site, "--hub", addr, "--clouds-yaml", clouds,
		"--cloud", "sim", "--operations-cloud", "sim-ops", "--operations-poll-interval", "200ms",
		"--state-file", filepath.Join(t.TempDir(), "state.json"), "--poll-interval", "1s", "--max-backoff", "2s"}, id.satelliteArgs(site)...)...)
	statusIs := func(want ironlinkv1.OperationalStatus) func() error {
		return func() error {
			r, err := fleet.GetDevice(context.Background(), &ironlinkv1.GetDeviceRequest{DeviceId: node.UUID})
			if err != nil {
				return err
			}
			if got := r.GetDevice().GetStatus(); got != want {
				return fmt.Errorf("status %v", got)
			}
			return nil
		}
	}
	harness.Eventually(t, time.Minute, statusIs(ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE))
	t0 := time.Now()
	if err := sim.UpdateNode(node.UUID, func(n *openstacksim.Node) {
		n.Maintenance, n.MaintenanceReason = true, openstacksim.SeedReasonPSU
	}); err != nil {
		t.Fatal(err)
	}
	var last *ironlinkv1.GetDeviceRemediationResponse
	harness.Eventually(t, 2*time.Minute, func() error {
		r, err := rem.GetDeviceRemediation(context.Background(), &ironlinkv1.GetDeviceRemediationRequest{Device: node.UUID})
		if err != nil {
			return err
		}
		last = r
		if r.GetLadderRun().GetState() != "SUCCEEDED" {
			return fmt.Errorf("ladder %q: %s", r.GetLadderRun().GetState(), r.GetPlan())
		}
		return nil
	})
	l := last.GetLadderRun()
	if l.GetFixedStep() != 2 || l.GetFixedKind() != "CLEAR_MAINTENANCE" || !l.GetReleased() || len(l.GetSteps()) != 2 ||
		l.GetSteps()[0].GetState() == "SUCCEEDED" {
		t.Fatalf("ladder %s", protojson.Format(l))
	}
	harness.Eventually(t, time.Minute, statusIs(ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE))
	t.Logf("MEASURE ladder on openstacksim: maintenance → quarantined → REBOOT (maintenance persists past its timeout) → CLEAR_MAINTENANCE → settled 3s → released, offered again: %s",
		time.Since(t0).Round(time.Millisecond))
	ops, err := ironlinkv1.NewOperationServiceClient(cc).ListOperations(context.Background(), &ironlinkv1.ListOperationsRequest{Device: node.UUID})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ops.GetOperations()); n != 2 {
		t.Fatalf("%d operations, want 2 (one per step, none repeated)", n)
	}
}
