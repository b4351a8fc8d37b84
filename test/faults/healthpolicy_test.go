package faults

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/test/harness"
)

// healthPolicy quarantines a GPU that fell off the bus (XID 79) and
// nothing else.
const healthPolicy = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 5, maxPercent: 100, window: 1h}
    rules:
      - name: gpu-fell-off-the-bus
        to: [FAULTED]
        health: {componentClasses: [GPU], errorCodes: ["79"]}
`

// TestHealthPolicyQuarantinesXID79 sends two fatal GPU events through the
// satellite's door, XID 79 for one device offered to customers and XID 13
// for another: both turn FAULTED, the policy's health rule quarantines the
// first (its trait goes in the simulator) and decides the second matches
// no rule.
func TestHealthPolicyQuarantinesXID79(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(healthPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	hub, db, s, door := healthSite(t, "health-pol", 4, "--policy-file", path)
	fc := harness.Fleet(t, hub.Addr)
	ready := s.readyNodes()
	if len(ready) < 2 {
		t.Fatalf("need 2 ready nodes, have %d", len(ready))
	}
	names := map[string]string{}
	for _, n := range s.sim.Nodes() {
		names[n.UUID] = n.Name
	}
	bus, other := ready[0], ready[1]
	harness.Eventually(t, 30*time.Second, func() error {
		for _, id := range []string{bus, other} {
			switch st := device(t, fc, id).GetStatus(); st {
			case ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE, ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_ALLOCATED,
				ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_IN_SERVICE:
			default:
				return errorf("device %s is %v, want a status offered to customers", id, st)
			}
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	if err := report(ctx, door, xid(names[bus], "79", true), xid(names[other], "13", true)); err != nil {
		t.Fatalf("report: %v", err)
	}
	committed := time.Since(start)
	pool := harness.Pool(t, db)
	decision := func(id string) (action, reason, rule string) {
		_ = pool.QueryRow(ctx, `SELECT action, reason, COALESCE(rule, '') FROM policy_decisions WHERE device_id = $1 AND kind = 'QUARANTINE' ORDER BY id DESC LIMIT 1`, id).
			Scan(&action, &reason, &rule)
		return
	}
	harness.Eventually(t, 20*time.Second, func() error {
		if a, r, rule := decision(bus); a != "QUARANTINE" || rule != "gpu-fell-off-the-bus" {
			return errorf("XID 79 device: decision %q %q rule %q, want QUARANTINE by gpu-fell-off-the-bus", a, r, rule)
		}
		return nil
	})
	decided := time.Since(start)
	harness.Eventually(t, 20*time.Second, func() error {
		if tr, _, _ := s.sim.ProviderTraits(bus); slices.Contains(tr, readyTrait) {
			return errorf("XID 79 device still has %s in the simulator", readyTrait)
		}
		return nil
	})
	applied := time.Since(start)
	harness.Eventually(t, 20*time.Second, func() error {
		if a, r, _ := decision(other); a != "SKIP" || r != "NoRuleMatched" {
			return errorf("XID 13 device: decision %q %q, want SKIP NoRuleMatched", a, r)
		}
		return nil
	})
	if d := device(t, fc, other); d.GetDesiredImpairment() == ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED {
		t.Errorf("XID 13 device quarantined; the rule names XID 79 only")
	}
	t.Logf("report → committed (door answered) %s, → quarantine decided %s, → trait removed in the simulator %s",
		committed.Round(time.Millisecond), decided.Round(time.Millisecond), applied.Round(time.Millisecond))
}
