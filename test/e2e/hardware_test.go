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
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

const e2eProfiles = `profiles:
  - name: gpu-h100
    match: {resource_class: gpu-h100}
    fault: true
    expect:
      gpus: {count: {exactly: 8}, vendor_id: "10de"}
      memory_mib: {min: 2097152}
      bios_settings: {HyperThreading: Disabled}
      firmware_min: {bios: 1.5.0}
    validation:
      clean_steps:
        - {interface: deploy, step: burnin_cpu}
        - {interface: deploy, step: burnin_memory}
`

// TestHardwareProfileSimulator runs a hub with --hardware-profiles-file and
// a satellite on the simulator: a matching machine's hardware reaches
// GetDevice with HardwareMatchesProfile=True; a re-inspection that finds
// half the memory turns it False (MismatchFault, the profile's fault: true)
// and the device FAULTED, the message naming the memory; a rewritten
// profiles file that accepts it turns it True again without a restart; an
// inspection that leaves no inventory keeps the last facts, stale; a
// VALIDATE naming no clean steps is stored with the profile's.
func TestHardwareProfileSimulator(t *testing.T) {
	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{"hw"}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	profiles := filepath.Join(t.TempDir(), "profiles.yaml")
	if err := os.WriteFile(profiles, []byte(e2eProfiles), 0o600); err != nil {
		t.Fatal(err)
	}
	hubAddr, _ := startHub(t, db, id, "--hardware-profiles-file", profiles)
	sim := openstacksim.New(openstacksim.Options{})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	harness.Start(t, "ironlink-satellite hw", bins.Satellite(), append([]string{"--site", "hw", "--hub", hubAddr, "--clouds-yaml", writeSimOpsClouds(t, sim),
		"--cloud", "sim", "--operations-cloud", "sim-ops", "--operations-poll-interval", "200ms", "--state-file", filepath.Join(t.TempDir(), "state.json"),
		"--poll-interval", "1s", "--max-backoff", "2s"}, id.satelliteArgs("hw")...)...)
	n := openstacksim.Node{Name: "gpu-001", ProvisionState: "available", PowerState: "power off", ResourceClass: "gpu-h100",
		Traits: []string{readyTrait}, InspectionFinishedAt: time.Now().UTC().Add(-time.Hour).Truncate(time.Second)}
	n = sim.AddNode(n)
	if err := sim.UpdateNode(n.UUID, func(x *openstacksim.Node) { openstacksim.SetHardware(x, openstacksim.DefaultHardware) }); err != nil {
		t.Fatal(err)
	}
	admin := ironlinkv1.NewFleetServiceClient(id.dialAs(t, hubAddr, "ops-admin"))
	r := waitVerdict(t, admin, n.UUID, ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE)
	if h := r.GetHardware(); h.GetMemoryMib() != 2<<20 || h.GetPciDevices()[0].GetCount() != 8 || r.GetHardwareProfile().GetProfile() != "gpu-h100" {
		t.Fatalf("GetDevice hardware %v, profile %v", h, r.GetHardwareProfile())
	}

	began := time.Now()
	if err := sim.UpdateNode(n.UUID, func(x *openstacksim.Node) {
		openstacksim.SetHardware(x, openstacksim.Hardware{GPUs: 8, MemoryMiB: 1 << 20, BIOSVersion: "1.5.0"})
		x.InspectionFinishedAt = time.Now().UTC()
	}); err != nil {
		t.Fatal(err)
	}
	r = waitVerdict(t, admin, n.UUID, ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE)
	took := time.Since(began)
	c := r.GetHardwareProfile().GetCondition()
	if c.GetReason() != "MismatchFault" || !strings.Contains(c.GetMessage(), "memory_mib: 1048576, want ≥ 2097152") ||
		r.GetDevice().GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED {
		t.Fatalf("after re-inspection: condition %v, status %v", c, r.GetDevice().GetStatus())
	}
	t.Logf("re-inspection to HardwareMatchesProfile=False at the hub: %s (poll interval 1 s, check every 2 s)", took.Round(10*time.Millisecond))

	// A validation run that names no clean steps gets the profile's.
	spare := sim.AddNode(openstacksim.Node{Name: "gpu-002", ProvisionState: "manageable", PowerState: "power off", ResourceClass: "gpu-h100"})
	ops := ironlinkv1.NewOperationServiceClient(id.dialAs(t, hubAddr, "ops-admin"))
	harness.Eventually(t, 60*time.Second, func() error {
		resp, err := ops.StartOperation(context.Background(), &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_VALIDATE,
			Devices: []string{spare.UUID}, Reason: "burn-in"})
		if err != nil {
			return err
		}
		var steps []string
		for _, st := range resp.GetOperations()[0].GetParams().GetCleanSteps() {
			steps = append(steps, st.GetInterface()+"."+st.GetStep())
		}
		if strings.Join(steps, ",") != "deploy.burnin_cpu,deploy.burnin_memory" {
			t.Fatalf("VALIDATE stored clean steps %v, want the profile's deploy.burnin_cpu, deploy.burnin_memory", steps)
		}
		return nil
	})

	// The running hub reloads a rewritten profiles file: a profile that
	// accepts 1 TiB turns the same hardware True again, with no new read.
	relaxed := strings.Replace(e2eProfiles, "memory_mib: {min: 2097152}", "memory_mib: {min: 1048576}", 1)
	if err := os.WriteFile(profiles, []byte(relaxed), 0o600); err != nil {
		t.Fatal(err)
	}
	r = waitVerdict(t, admin, n.UUID, ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE)
	if r.GetHardware().GetMemoryMib() != 1<<20 {
		t.Fatalf("after the reload: hardware %v", r.GetHardware())
	}

	// An inspection that leaves no inventory (Ironic answers 404): the hub
	// keeps the last facts, marked stale.
	if err := sim.UpdateNode(n.UUID, func(x *openstacksim.Node) {
		x.Inventory, x.PluginData = nil, nil
		x.InspectionFinishedAt = time.Now().UTC().Add(time.Second)
	}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 60*time.Second, func() error {
		r, err := admin.GetDevice(context.Background(), &ironlinkv1.GetDeviceRequest{DeviceId: n.UUID})
		if err != nil {
			return err
		}
		if h := r.GetHardware(); !h.GetStale() || h.GetInventoryStatus() != "NotInspected" || h.GetMemoryMib() != 1<<20 {
			return fmt.Errorf("hardware %v, want stale NotInspected with the last facts", h)
		}
		return nil
	})
}

// waitVerdict waits (60 s) until device id's HardwareMatchesProfile, as
// stored and in GetDevice's hardware_profile, has status want.
func waitVerdict(t *testing.T, admin ironlinkv1.FleetServiceClient, id string, want ironlinkv1.ConditionStatus) *ironlinkv1.GetDeviceResponse {
	t.Helper()
	var r *ironlinkv1.GetDeviceResponse
	harness.Eventually(t, 60*time.Second, func() error {
		var err error
		if r, err = admin.GetDevice(context.Background(), &ironlinkv1.GetDeviceRequest{DeviceId: id}); err != nil {
			return err
		}
		var stored *ironlinkv1.Condition
		for _, c := range r.GetDevice().GetConditions() {
			if c.GetType() == "HardwareMatchesProfile" {
				stored = c
			}
		}
		if stored.GetStatus() != want || r.GetHardwareProfile().GetCondition().GetStatus() != want {
			return fmt.Errorf("HardwareMatchesProfile stored %v, in hardware_profile %v; want %v", stored, r.GetHardwareProfile(), want)
		}
		return nil
	})
	return r
}
