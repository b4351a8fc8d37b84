package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/ironic/ironictest"
	"github.com/ironlink/ironlink/test/harness"
)

// TestHardwareProfileRealCloud is TestHardwareProfileSimulator on the real
// test bed: a hwtest-* node enrolled for the test (deleted after), its
// inventory stored with the bed's seed-inventory ($IRONLINK_E2E_SEED_INVENTORY),
// checked against a profile by a hub and a satellite; a real inspection
// (fake interface) after an inventory with half the memory turns
// HardwareMatchesProfile False. Run under the bed's lock.
func TestHardwareProfileRealCloud(t *testing.T) {
	c := realCloud(t)
	seed := os.Getenv("IRONLINK_E2E_SEED_INVENTORY")
	if seed == "" {
		if os.Getenv("IRONLINK_E2E_REQUIRE_REAL") == "1" {
			t.Fatal("IRONLINK_E2E_REQUIRE_REAL=1 but IRONLINK_E2E_SEED_INVENTORY is not set")
		}
		t.Skip("set IRONLINK_E2E_SEED_INVENTORY to the test bed's seed-inventory")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ir := ironic.New(c.bm, nil)
	name := fmt.Sprintf("hwtest-e2e-%06d", time.Now().UnixNano()%1000000)
	node, err := ir.CreateNode(ctx, map[string]any{"name": name, "driver": "fake-hardware", "inspect_interface": "fake", "resource_class": "hwtest-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		defer dcancel()
		if err := ir.DeleteNode(dctx, node.UUID); err != nil {
			t.Errorf("delete %s: %v", name, err)
		}
	})
	ironictest.RunSeed(t, seed, node.UUID)

	const site = "hwbed"
	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{site}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead}})
	profiles := filepath.Join(t.TempDir(), "profiles.yaml")
	if err := os.WriteFile(profiles, []byte(strings.Replace(e2eProfiles, "gpu-h100}", "hwtest-e2e}", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	hubAddr, _ := startHub(t, db, id, "--hardware-profiles-file", profiles)
	harness.Start(t, "ironlink-satellite", bins.Satellite(), append([]string{"--site", site, "--hub", hubAddr, "--clouds-yaml", c.cloudsYAML,
		"--cloud", c.name, "--poll-interval", "3s", "--max-backoff", "2s", "--auth-backoff", "1s", "--log-level", "debug"}, id.satelliteArgs(site)...)...)
	admin := ironlinkv1.NewFleetServiceClient(id.dialAs(t, hubAddr, "ops-admin"))
	r := waitVerdict(t, admin, node.UUID, ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE)
	if r.GetHardware().GetMemoryMib() != 2097152 {
		t.Fatalf("hardware at the hub: %v", r.GetHardware())
	}

	// The new inventory first, then the inspection: the satellite reads on a
	// changed inspection_finished_at, which seed-inventory does not touch
	// and the fake inspect interface sets without touching the inventory.
	// The other order races the satellite's next poll: it could read the
	// old inventory after the inspection and never again.
	ironictest.RunSeed(t, seed, "--memory-mib", "1048576", node.UUID)
	ironictest.Inspect(ctx, t, ir, node.UUID)
	began := time.Now()
	r = waitVerdict(t, admin, node.UUID, ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE)
	if c := r.GetHardwareProfile().GetCondition(); !strings.Contains(c.GetMessage(), "memory_mib: 1048576") {
		t.Fatalf("condition after re-inspection: %v", c)
	}
	// Within one poll: the inventory the verdict stands on was read by the
	// satellite's first poll after the inspection ended (the poll interval
	// plus one poll's own time; both clocks are the bed's).
	h := r.GetHardware()
	if lag := h.GetReadAt().AsTime().Sub(h.GetInspectionFinishedAt().AsTime()); lag < 0 || lag > 3*time.Second+5*time.Second {
		t.Fatalf("inventory read %s after the inspection ended (read %s, inspection %s), want within one 3 s poll",
			lag, h.GetReadAt().AsTime(), h.GetInspectionFinishedAt().AsTime())
	} else {
		t.Logf("inspection end to the satellite's read: %s (poll interval 3 s)", lag.Round(10*time.Millisecond))
	}
	t.Logf("re-inspection (inventory stored) to HardwareMatchesProfile=False at the hub: %s (poll interval 3 s, check every 2 s)", time.Since(began).Round(10*time.Millisecond))
}
