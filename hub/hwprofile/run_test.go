package hwprofile_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/hwprofile"
	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

const profilesYAML = `profiles:
  - name: strict-h100
    match: {resource_class: gpu-h100, name: "site-a-002"}
    fault: true
    expect:
      memory_mib: {min: 2097152}
  - name: gpu-h100
    match: {resource_class: gpu-h100}
    expect:
      cpu_model: "Intel(R) Xeon(R) Platinum 8480+"
      gpus: {count: {exactly: 8}, vendor_id: "10de"}
      memory_mib: {min: 2097152}
      disks: {count: {min: 2}, min_size_bytes: 3000000000000}
      bios_settings: {HyperThreading: Disabled}
      firmware_min: {bios: 1.5.0}
`

// machine is seed-inventory's H100 server with gpus GPUs and memMiB MiB.
func machine(gpus uint32, memMiB uint64, bios string) *ironlinkv1.HardwareState {
	disk := &ironlinkv1.HardwareDisk{Name: "/dev/nvme0n1", SizeBytes: 3840755982336, Model: "SAMSUNG"}
	return &ironlinkv1.HardwareState{
		CpuModel: "Intel(R) Xeon(R) Platinum 8480+", CpuCount: 224, MemoryMib: memMiB,
		Disks:        []*ironlinkv1.HardwareDisk{disk, disk},
		PciDevices:   []*ironlinkv1.HardwarePCIDevice{{VendorId: "10de", ProductId: "2330", Class: "030200", Count: gpus}},
		BiosSettings: map[string]string{"HyperThreading": "Disabled"}, BiosAvailable: true,
		FirmwareVersions: map[string]string{"bios": bios}, InventoryAvailable: true, InventoryStatus: "Read",
		ReadAt: timestamppb.Now(),
	}
}

func sendHardware(t *testing.T, site *storetest.Site, i int, h *ironlinkv1.HardwareState) {
	t.Helper()
	b, err := protojson.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	at := site.Now()
	site.Send([]store.DeviceUpdate{{DeviceID: site.IDs[i], ObservedTime: at,
		Facts:    &store.Facts{Name: site.Name + "-00" + string(rune('0'+i)), ResourceClass: "gpu-h100"},
		Hardware: &store.Hardware{JSON: b, ReadAt: h.GetReadAt().AsTime()}}})
}

func hwCondition(t *testing.T, st *store.Store, id string) (condition.Condition, store.Device) {
	t.Helper()
	d, err := st.GetDevice(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Conditions {
		if c.Type == condition.HardwareMatchesProfile {
			return c, d
		}
	}
	return condition.Condition{}, d
}

// Profiles checked against stored hardware on real PostgreSQL: a match, a
// mismatch that is a warning, one that is a fault (FAULTED); nothing
// written again when nothing changed; a reload and a re-inspection each
// turn a verdict.
func TestProfileConditionsOnStore(t *testing.T) {
	log := testlog.New(t)
	st, url := storetest.New(t, log)
	site := storetest.NewSite(t, st, "site-a", 4, nil)
	first := machine(8, 2<<20, "1.5.0")
	sendHardware(t, site, 0, first)
	sendHardware(t, site, 1, machine(7, 2<<20, "1.4.2"))
	sendHardware(t, site, 2, machine(8, 1<<20, "1.5.0"))
	noInv := &ironlinkv1.HardwareState{InventoryStatus: "NotInspected", ReadAt: timestamppb.Now()}
	sendHardware(t, site, 3, noInv)

	f, err := hwprofile.Parse([]byte(profilesYAML))
	if err != nil {
		t.Fatal(err)
	}
	current := f
	r := hwprofile.NewRunner(st, func() *hwprofile.File { return current }, time.Hour, log)
	ctx := context.Background()
	if n, err := r.Pass(ctx); err != nil || n != 4 {
		t.Fatalf("first pass wrote %d conditions (err %v), want 4", n, err)
	}
	c, d := hwCondition(t, st, site.IDs[0])
	if c.Status != condition.True || c.Reason != "Matches" || d.Status != status.Available {
		t.Fatalf("matching device: %+v, status %s", c, d.Status)
	}
	c, d = hwCondition(t, st, site.IDs[1])
	if c.Status != condition.False || c.Reason != "Mismatch" || d.Status != status.Available ||
		!strings.Contains(c.Message, "gpus: 7, want 8") || !strings.Contains(c.Message, "firmware.bios: 1.4.2, want ≥ 1.5.0") {
		t.Fatalf("7-GPU device: %+v, status %s (want a warning, AVAILABLE)", c, d.Status)
	}
	c, d = hwCondition(t, st, site.IDs[2])
	if c.Reason != "MismatchFault" || d.Status != status.Faulted || !strings.Contains(d.StatusReason, "HardwareMatchesProfile=False") {
		t.Fatalf("half-memory device under a fault profile: %+v, status %s %q", c, d.Status, d.StatusReason)
	}
	if c, _ = hwCondition(t, st, site.IDs[3]); c.Status != condition.Unknown || c.Reason != "NoInventory" {
		t.Fatalf("device without inventory: %+v", c)
	}

	if n, err := r.Pass(ctx); err != nil || n != 0 {
		t.Fatalf("unchanged pass wrote %d (err %v)", n, err)
	}
	// The same read again (a snapshot after a reconnect): no history row.
	sendHardware(t, site, 0, first)
	if n := pgtest.Count(t, url, `SELECT count(*) FROM device_hardware_history`); n != 4 {
		t.Fatalf("%d hardware history rows after a repeated read, want 4", n)
	}

	// A reload that allows 7 GPUs and BIOS 1.4.2: every device checked again.
	current, err = hwprofile.Parse([]byte(strings.NewReplacer("exactly: 8", "min: 7", "bios: 1.5.0", "bios: 1.4.0").Replace(profilesYAML)))
	if err != nil {
		t.Fatal(err)
	}
	r.Reloaded()
	if n, err := r.Pass(ctx); err != nil || n != 1 {
		t.Fatalf("pass after reload wrote %d (err %v), want 1", n, err)
	}
	if c, _ = hwCondition(t, st, site.IDs[1]); c.Status != condition.True {
		t.Fatalf("7-GPU device after reload: %+v", c)
	}

	// Re-inspection finds half the memory: False on the next pass.
	sendHardware(t, site, 0, machine(8, 1<<20, "1.5.0"))
	if n, err := r.Pass(ctx); err != nil || n != 1 {
		t.Fatalf("pass after re-inspection wrote %d (err %v)", n, err)
	}
	if c, _ = hwCondition(t, st, site.IDs[0]); c.Status != condition.False || !strings.Contains(c.Message, "memory_mib: 1048576, want ≥ 2097152") {
		t.Fatalf("device after re-inspection: %+v", c)
	}
}

// A profiles file with an unknown key is refused naming its line; an
// impossible range naming the profile's line, the profile and the key.
func TestParseRefusesBadFiles(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"profiles:\n  - name: a\n    match: {resource_class: x}\n    expect:\n      memry_mib: {min: 1}\n", "line 5"},
		{"profiles:\n  - name: a\n    match: {resource_class: x}\n    expect:\n      memory_mib: {min: 9, max: 1}\n", "line 2: profiles[0] (a): expect.memory_mib: min 9 is above max 1"},
		{"profiles:\n  - name: a\n    expect: {}\n", "match needs resource_class or name"},
		{"profiles:\n  - name: a\n    match: {name: x}\n    expect:\n      firmware_min: {bios: v1}\n", "not a dotted version"},
	} {
		_, err := hwprofile.Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.yaml, err, tc.want)
		}
	}
}
