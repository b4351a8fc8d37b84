package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// TestRereadAndDriftRealCloud on the real test bed (under its lock): three
// inspected hwtest-val nodes match their profile; seed-inventory then
// stores 7 GPUs for one and BIOS 1.4.2 with Hyper-Threading on for another
// without an inspection, which the satellite does not read by itself; a
// HARDWARE_REREAD of the two by the drift selectors turns
// HardwareMatchesProfile False, and GetFleetDrift names both outlier
// groups with their selectors.
func TestRereadAndDriftRealCloud(t *testing.T) {
	c := realCloud(t)
	seed, oc := os.Getenv("IRONLINK_E2E_SEED_INVENTORY"), os.Getenv("IRONLINK_E2E_OPERATIONS_CLOUD")
	if seed == "" || oc == "" {
		if os.Getenv("IRONLINK_E2E_REQUIRE_REAL") == "1" {
			t.Fatal("IRONLINK_E2E_REQUIRE_REAL=1 but IRONLINK_E2E_SEED_INVENTORY or IRONLINK_E2E_OPERATIONS_CLOUD is not set")
		}
		t.Skip("set IRONLINK_E2E_SEED_INVENTORY and IRONLINK_E2E_OPERATIONS_CLOUD")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ir := ironic.New(c.bm, nil)
	nodes := []string{valNode(ctx, t, ir, seed), valNode(ctx, t, ir, seed), valNode(ctx, t, ir, seed)}

	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{valSite}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	profiles := filepath.Join(t.TempDir(), "profiles.yaml")
	if err := os.WriteFile(profiles, []byte(strings.Replace(strings.Replace(e2eProfiles, "gpu-h100}", "hwtest-val}", 1), "fault: true", "fault: false", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	hubAddr, _ := startHub(t, db, id, "--hardware-profiles-file", profiles)
	harness.Start(t, "ironlink-satellite", bins.Satellite(), append([]string{"--site", valSite, "--hub", hubAddr, "--clouds-yaml", c.cloudsYAML,
		"--cloud", c.name, "--operations-cloud", oc, "--operations-poll-interval", "500ms",
		"--state-file", filepath.Join(t.TempDir(), "state.json"), "--poll-interval", "3s", "--max-backoff", "2s", "--auth-backoff", "1s",
		"--log-level", "debug"}, id.satelliteArgs(valSite)...)...)
	admin := id.dialAs(t, hubAddr, "ops-admin")
	fleet, hw := ironlinkv1.NewFleetServiceClient(admin), ironlinkv1.NewHardwareServiceClient(admin)
	ops, bulk := ironlinkv1.NewOperationServiceClient(admin), ironlinkv1.NewBulkServiceClient(admin)
	for _, n := range nodes {
		waitVerdict(t, fleet, n, ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE)
	}
	ironictest.RunSeed(t, seed, "--gpus", "7", nodes[1])
	ironictest.RunSeed(t, seed, "--bios-version", "1.4.2", "--ht", "on", nodes[2])

	// Nothing inspected: the hub still has the old facts.
	d, err := hw.GetFleetDrift(ctx, &ironlinkv1.GetFleetDriftRequest{ResourceClass: "hwtest-val", Site: valSite})
	if err != nil || len(d.GetGroups()) != 1 || d.GetGroups()[0].GetMatching() != 3 {
		t.Fatalf("drift before the re-read: %v %v", d, err)
	}
	began := time.Now()
	var opIDs []string
	harness.Eventually(t, time.Minute, func() error {
		r, err := ops.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_HARDWARE_REREAD,
			Devices: nodes, Reason: "e2e re-read"})
		for _, o := range r.GetOperations() {
			opIDs = append(opIDs, o.GetOperationId())
		}
		return err
	})
	for _, n := range nodes[1:] {
		waitVerdict(t, fleet, n, ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE)
	}
	t.Logf("HARDWARE_REREAD asked to HardwareMatchesProfile=False at the hub for both changed nodes: %s", time.Since(began).Round(10*time.Millisecond))
	var g *ironlinkv1.DriftGroup
	harness.Eventually(t, time.Minute, func() error {
		d, err := hw.GetFleetDrift(ctx, &ironlinkv1.GetFleetDriftRequest{ResourceClass: "hwtest-val", Site: valSite})
		if err != nil || len(d.GetGroups()) != 1 {
			return fmt.Errorf("drift: %v %v", d, err)
		}
		g = d.GetGroups()[0]
		if g.GetMatching() != 1 {
			return fmt.Errorf("drift: %s", g.GetSummary())
		}
		return nil
	})
	var got []string
	for _, o := range g.GetOutliers() {
		got = append(got, o.GetSelectorText())
	}
	slices.Sort(got)
	want := []string{"site=valbed,class=hwtest-val,hw.gpu_count=7", "site=valbed,class=hwtest-val,hw.firmware.bios=1.4.2",
		"site=valbed,class=hwtest-val,hw.bios.HyperThreading=Enabled"}
	for _, s := range want {
		if !slices.Contains(got, s) {
			t.Errorf("outlier selectors %q lack %q (summary %q)", got, s, g.GetSummary())
		}
	}
	if !strings.Contains(g.GetSummary(), "1 have 7 GPUs instead of 8") || !strings.Contains(g.GetSummary(), "1 run BIOS firmware 1.4.2 instead of 1.5.0") ||
		!strings.Contains(g.GetSummary(), "1 have HyperThreading Enabled instead of Disabled") {
		t.Errorf("summary %q", g.GetSummary())
	}
	// The outlier selector selects exactly the 7-GPU node for a bulk action.
	p, err := bulk.PreviewBulkImpairment(ctx, &ironlinkv1.PreviewBulkImpairmentRequest{Selector: g.GetOutliers()[slices.IndexFunc(g.GetOutliers(),
		func(o *ironlinkv1.DriftOutlier) bool { return o.GetFact() == "gpu_count" })].GetSelector()})
	if err != nil || p.GetCount() != 1 || p.GetDevices()[0].GetDeviceId() != nodes[1] {
		t.Fatalf("preview of the gpu_count outliers: %v %v", p, err)
	}
	t.Logf("drift: %s", g.GetSummary())

	// A bulk action on an outlier group: inspect every device the BIOS
	// firmware outliers' selector matches (the node on 1.4.2 only), for
	// real on the bed's Ironic.
	p, err = bulk.PreviewBulkImpairment(ctx, &ironlinkv1.PreviewBulkImpairmentRequest{Selector: g.GetOutliers()[slices.IndexFunc(g.GetOutliers(),
		func(o *ironlinkv1.DriftOutlier) bool { return o.GetFact() == "firmware.bios" })].GetSelector()})
	if err != nil || p.GetCount() != 1 || p.GetDevices()[0].GetDeviceId() != nodes[2] {
		t.Fatalf("preview of the BIOS firmware outliers: %v %v", p, err)
	}
	r, err := ops.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT,
		Devices: []string{p.GetDevices()[0].GetDeviceId()}, Reason: "e2e: inspect the BIOS outliers"})
	if err != nil || len(r.GetOperations()) != 1 {
		t.Fatalf("inspect the outliers: %v %v", r, err)
	}
	harness.Eventually(t, 2*time.Minute, func() error {
		o, err := ops.GetOperation(ctx, &ironlinkv1.GetOperationRequest{OperationId: r.GetOperations()[0].GetOperationId()})
		if err != nil || o.GetOperation().GetState() != ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED {
			return fmt.Errorf("inspection of the outlier: %v %v", o, err)
		}
		return nil
	})
}
