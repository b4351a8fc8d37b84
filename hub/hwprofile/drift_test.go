package hwprofile_test

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/hwprofile"
)

// Facts: GPUs are the display-class PCI devices; disks and NICs are
// counted by kind; a state without inventory has no facts, a stale one
// keeps its last.
func TestFacts(t *testing.T) {
	h := machine(8, 2<<20, "1.5.0")
	h.PciDevices = append(h.PciDevices, &ironlinkv1.HardwarePCIDevice{VendorId: "15b3", ProductId: "1021", Class: "020700", Count: 4})
	h.Nics = []*ironlinkv1.HardwareNIC{{SpeedMbps: 100000}, {SpeedMbps: 100000}, {SpeedMbps: 1000}}
	f := hwprofile.Facts(h)
	for k, want := range map[string]string{"gpu_count": "8", "gpu_model": "10de:2330", "memory_gib": "2048", "disks": "2x3840GB-ssd",
		"nics": "2x100000Mbps+1x1000Mbps", "firmware.bios": "1.5.0", "bios.HyperThreading": "Disabled", "system_product": hwprofile.NoValue} {
		if f[k] != want {
			t.Errorf("%s = %q, want %q", k, f[k], want)
		}
	}
	if f := hwprofile.Facts(&ironlinkv1.HardwareState{InventoryStatus: "NotInspected", ReadAt: timestamppb.Now()}); f != nil {
		t.Errorf("no inventory: facts %v", f)
	}
	h.InventoryAvailable, h.Stale = false, true
	if f := hwprofile.Facts(h); f["gpu_count"] != "8" {
		t.Errorf("stale: facts %v, want the last ones", f)
	}
}

// CompareGroup: the value most devices share is expected; each other
// value is an outlier group with its devices; devices without inventory
// are counted, not compared.
func TestCompareGroup(t *testing.T) {
	var devs []hwprofile.DriftDevice
	for i := range 5 {
		devs = append(devs, hwprofile.DriftDevice{ID: string(rune('a' + i)), Name: "gpu-0" + string(rune('0'+i)), Facts: hwprofile.Facts(machine(8, 2<<20, "1.5.0"))})
	}
	devs[1].Facts = hwprofile.Facts(machine(7, 2<<20, "1.5.0"))
	devs[2].Facts = hwprofile.Facts(machine(7, 2<<20, "1.4.2"))
	devs[3].Facts = hwprofile.Facts(machine(8, 2<<20, "1.4.2"))
	devs[3].Facts["bios.HyperThreading"] = "Enabled"
	devs = append(devs, hwprofile.DriftDevice{ID: "z", Name: "gpu-09"})
	d := hwprofile.CompareGroup(devs)
	if d.Devices != 6 || d.Matching != 2 || d.WithoutInventory != 1 || d.Expected["gpu_count"] != "8" {
		t.Fatalf("drift %+v", d)
	}
	var got []string
	for _, o := range d.Outliers {
		got = append(got, o.Summary+" "+slices.Concat(o.Devices)[0])
	}
	want := []string{"2 run BIOS firmware 1.4.2 instead of 1.5.0 gpu-02", "2 have 7 GPUs instead of 8 gpu-01",
		"1 have HyperThreading Enabled instead of Disabled gpu-03"}
	if !slices.Equal(got, want) {
		t.Errorf("outliers %q, want %q", got, want)
	}
	if s := d.Summary("gpu-h100"); s != "gpu-h100: 2 match; "+want[0][:len(want[0])-7]+"; 2 have 7 GPUs instead of 8; 1 have HyperThreading Enabled instead of Disabled; 1 without inventory" {
		t.Errorf("summary %q", s)
	}
}
