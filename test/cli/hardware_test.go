package cli

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/ctl"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/test/harness"
)

// ironlink drift, hardware history and validate runs against a real hub
// and satellite on the simulator: after a re-inspection stores one 7-GPU
// machine and one on BIOS 1.4.2 among six, drift shows the group's
// matching devices and each outlier group with its selector; a device's
// history shows its reads; describe device shows the hardware's state and
// key facts, "stale since" once the inventory went; a device without runs
// has none.
func TestHardwareCLI(t *testing.T) {
	f := newFleet(t, 6)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range f.nodes {
			if !yield(n) {
				return
			}
		}
	})
	for i, name := range names {
		hw := openstacksim.DefaultHardware
		switch i {
		case 1:
			hw.GPUs = 7
		case 2:
			hw.BIOSVersion = "1.4.2"
		}
		if err := f.sim.UpdateNode(f.nodes[name], func(x *openstacksim.Node) {
			openstacksim.SetHardware(x, hw)
			x.InspectionFinishedAt = time.Now().UTC()
		}); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, time.Minute, func() error {
		r := f.run("drift", "--site", site, "-o", "json")
		var d struct {
			Groups []struct {
				ResourceClass string `json:"resourceClass"`
				Matching      int    `json:"matching"`
				Outliers      []struct {
					SelectorText string `json:"selectorText"`
				} `json:"outliers"`
			} `json:"groups"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || r.code != 0 {
			return fmt.Errorf("drift -o json: %v\n%v", err, r)
		}
		for _, g := range d.Groups {
			if g.Matching == 4 && len(g.Outliers) >= 2 {
				return nil
			}
		}
		return fmt.Errorf("the re-inspected hardware not in yet: %s", r.stdout)
	})
	r := f.run("drift", "--site", site)
	f.expect(r, 0, []string{"4 match", "1 have 7 GPUs instead of 8", "hw.gpu_count=7", "hw.firmware.bios=1.4.2", names[1], names[2]}, nil)

	r = f.run("hardware", "history", site+"/"+names[1])
	f.expect(r, 0, []string{"Read", "gpu_count: "}, nil)
	if !strings.Contains(r.stdout, "-> 7") {
		t.Errorf("history does not show the change to 7 GPUs\n%v", r)
	}
	r = f.run("describe", "device", site+"/"+names[1])
	f.expect(r, 0, []string{"Hardware:", "Inventory:", "read ", "GPUs:", "7× 10de:2330", "Memory:", "2048 GiB", "Firmware:", "bios 1.5.0",
		"BIOS settings:", "HyperThreading=Disabled"}, nil)

	// An inspection that leaves no inventory: describe says the facts are
	// stale and still shows them.
	if err := f.sim.UpdateNode(f.nodes[names[3]], func(x *openstacksim.Node) {
		x.Inventory, x.PluginData = nil, nil
		x.InspectionFinishedAt = time.Now().UTC().Add(time.Second)
	}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, time.Minute, func() error {
		r := f.run("describe", "device", site+"/"+names[3])
		if r.code != 0 || !strings.Contains(r.stdout, "stale since ") || !strings.Contains(r.stdout, "Ironic answers NotInspected") ||
			!strings.Contains(r.stdout, "8× 10de:2330") {
			return fmt.Errorf("describe after the inventory went:\n%v", r)
		}
		return nil
	})
	r = f.run("validate", "runs", site+"/"+names[0])
	f.expect(r, 0, nil, []string{"No validation runs found."})
	r = f.run("drift", "--site", "no-such-site")
	f.expect(r, ctl.ExitNotFound, nil, []string{"no-such-site"})
	r = f.run("hardware", "reread", "--reason", "x")
	f.expect(r, ctl.ExitUsage, nil, []string{"name devices or give -l SELECTOR"})
	r = f.run("validate", names[0])
	f.expect(r, ctl.ExitUsage, nil, []string{"--reason is required"})
	if !strings.Contains(f.run("drift", "--help").stdout, "--resource-class") {
		t.Error("drift --help lacks --resource-class")
	}
}
