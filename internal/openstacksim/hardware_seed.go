package openstacksim

import (
	"fmt"
	"strings"
	"time"
)

// Hardware describes a machine for SeedHardware, as the test bed's
// seed-inventory does (docs/howto and the test bed's README): GPUs H100
// SXM (vendor 10de, product 2330), memory in MiB, the BIOS version and
// Hyper-Threading.
type Hardware struct {
	GPUs        int
	MemoryMiB   uint64
	BIOSVersion string
	HT          bool
}

// DefaultHardware is seed-inventory's default: a matching 8-GPU server
// with 2 TiB of memory, BIOS 1.5.0 and Hyper-Threading off.
var DefaultHardware = Hardware{GPUs: 8, MemoryMiB: 2 << 20, BIOSVersion: "1.5.0"}

// SetHardware fills n's Inventory, PluginData and BIOS with hw in
// ironic-python-agent's shape (what seed-inventory writes on the test bed).
// It does not touch InspectionFinishedAt.
func SetHardware(n *Node, hw Hardware) {
	suffix := strings.ReplaceAll(n.UUID, "-", "")
	if len(suffix) >= 6 {
		suffix = suffix[len(suffix)-6:]
	}
	mac := func(i int) string {
		return fmt.Sprintf("52:54:%02x:%s:%s:%s", i, suffix[0:2], suffix[2:4], suffix[4:6])
	}
	flags := []any{"avx512f", "amx_tile"}
	ht := "Disabled"
	if hw.HT {
		flags, ht = append(flags, "ht"), "Enabled"
	}
	var disks []any
	for i := range 2 {
		disks = append(disks, map[string]any{"name": fmt.Sprintf("/dev/nvme%dn1", i), "model": "SAMSUNG MZQL23T8HCLS",
			"size": int64(3840755982336), "rotational": false, "serial": fmt.Sprintf("S64H%s%02d", strings.ToUpper(suffix), i)})
	}
	n.Inventory = map[string]any{
		"interfaces": []any{
			map[string]any{"name": "eno1", "mac_address": mac(1), "speed_mbps": 200000, "has_carrier": true},
			map[string]any{"name": "eno2", "mac_address": mac(2), "speed_mbps": 25000, "has_carrier": true},
		},
		"cpu":    map[string]any{"model_name": "Intel(R) Xeon(R) Platinum 8480+", "frequency": "2000", "count": 224, "architecture": "x86_64", "flags": flags},
		"memory": map[string]any{"total": hw.MemoryMiB << 20, "physical_mb": hw.MemoryMiB},
		"disks":  disks,
		"system_vendor": map[string]any{"product_name": "SYS-821GE-TNHR", "manufacturer": "Supermicro",
			"firmware": map[string]any{"vendor": "American Megatrends International, LLC.", "version": hw.BIOSVersion}},
		"hostname": "gpu-" + suffix,
	}
	var pci []any
	for i := range hw.GPUs {
		pci = append(pci, map[string]any{"vendor_id": "10de", "product_id": "2330", "class": "030200", "bus": fmt.Sprintf("0000:%02x:00.0", 0x18+0x10*i)})
	}
	pci = append(pci, map[string]any{"vendor_id": "15b3", "product_id": "1021", "class": "020700", "bus": "0000:1a:00.0"})
	n.PluginData = map[string]any{"pci_devices": pci}
	n.BIOS = map[string]string{"HyperThreading": ht, "SriovGlobalEnable": "Enabled", "BootMode": "Uefi",
		"ProcTurboMode": "Enabled", "BiosVersion": hw.BIOSVersion}
}

// DemoOutliers are the machines SeedHardware makes differ from
// DefaultHardware, by node name: one with 7 GPUs, one on older BIOS
// firmware with Hyper-Threading on (the issue's "3 have 7 GPUs; 11 run
// BIOS 1.4.2 instead of 1.5.0; 2 have HT on", in small).
var DemoOutliers = map[string]Hardware{
	"node-006": {GPUs: 7, MemoryMiB: 2 << 20, BIOSVersion: "1.5.0"},
	"node-009": {GPUs: 8, MemoryMiB: 2 << 20, BIOSVersion: "1.4.2", HT: true},
}

// SeedHardware gives every node that has been inspected — every node but
// those in enroll, which Ironic has never inspected — an inventory, plugin
// data and BIOS settings as seed-inventory writes them on the test bed:
// DefaultHardware, or outliers[name] for the nodes it names, and
// inspection_finished_at a second after the node was created. Nodes in
// enroll keep none (their inventory answers 404). It returns the names of
// the nodes it gave hardware, in the cloud's node order.
func (c *Cloud) SeedHardware(outliers map[string]Hardware) []string {
	var out []string
	for _, n := range c.Nodes() {
		if n.ProvisionState == "enroll" {
			continue
		}
		hw, ok := outliers[n.Name]
		if !ok {
			hw = DefaultHardware
		}
		_ = c.UpdateNode(n.UUID, func(x *Node) {
			SetHardware(x, hw)
			x.InspectionFinishedAt = x.CreatedAt.Add(time.Second)
		})
		out = append(out, n.Name)
	}
	return out
}
