package hardware_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ironlink/ironlink/satellite/hardware"
	"github.com/ironlink/ironlink/satellite/ironic"
)

// ipaInventory is an inventory in ironic-python-agent's format
// (GenericHardwareManager.list_hardware_info: interfaces, cpu, disks,
// memory, bmc_address, bmc_v6address, system_vendor, boot, hostname,
// bmc_mac) with the inspection's pci_devices plugin data.
const ipaInventory = `{
 "interfaces": [
  {"name": "eno1", "mac_address": "52:54:00:AA:BB:01", "ipv4_address": "10.0.0.5", "speed_mbps": 200000, "has_carrier": true},
  {"name": "eno2", "mac_address": "52:54:00:aa:bb:02", "speed_mbps": 25000},
  {"name": "eno3", "mac_address": "52:54:00:aa:bb:03"}
 ],
 "cpu": {"model_name": "Intel(R) Xeon(R) Platinum 8480+", "frequency": "2000", "count": 224, "architecture": "x86_64", "flags": ["avx512f"]},
 "disks": [
  {"name": "/dev/nvme0n1", "model": "SAMSUNG MZQL23T8HCLS  ", "size": 3840755982336, "rotational": false, "serial": "S64H01"},
  {"name": "/dev/sda", "model": "ST8000NM", "size": 8001563222016, "rotational": true, "serial": "ZA01"}
 ],
 "memory": {"total": 2199023255552, "physical_mb": 2097152},
 "bmc_address": "10.1.0.5",
 "bmc_v6address": "::/0",
 "bmc_mac": "3c:ec:ef:00:00:01",
 "system_vendor": {"product_name": "SYS-821GE-TNHR", "serial_number": "S1", "manufacturer": "Supermicro",
  "firmware": {"vendor": "American Megatrends International, LLC.", "version": "1.5.0", "build_date": "2024-01-01"}},
 "boot": {"current_boot_mode": "uefi", "pxe_interface": "52:54:00:aa:bb:01"},
 "hostname": "gpu-1"
}`

func pluginData(gpus int) string {
	var pci []map[string]string
	for i := range gpus {
		pci = append(pci, map[string]string{"vendor_id": "10DE", "product_id": "2330", "class": "030200", "bus": fmt.Sprintf("0000:%02x:00.0", i)})
	}
	pci = append(pci, map[string]string{"vendor_id": "15b3", "product_id": "1021", "class": "020700"},
		map[string]string{"vendor_id": "10de", "product_id": "2330", "class": "030200"})
	b, _ := json.Marshal(map[string]any{"pci_devices": pci})
	return string(b)
}

// An inventory in ironic-python-agent's format is reduced to its facts:
// CPU model and count, memory, disks by size and kind, NICs by speed, GPUs
// by model and count from the PCI devices, the BIOS firmware version and
// the BIOS settings; the BMC's address and MAC are not a firmware version.
func TestReduceIPAInventory(t *testing.T) {
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.FixedZone("x", 3600))
	h := hardware.Reduce(hardware.Read{
		Inventory:            ironic.Inventory{Inventory: json.RawMessage(ipaInventory), PluginData: json.RawMessage(pluginData(7))},
		BIOS:                 []ironic.BIOSSetting{{Name: "HyperThreading", Value: "Disabled"}, {Name: "BootMode", Value: "Uefi"}, {Name: "", Value: "x"}},
		InspectionFinishedAt: at, ReadAt: at.Add(time.Minute),
	})
	if !h.GetInventoryAvailable() || h.GetInventoryStatus() != hardware.StatusRead || !h.GetBiosAvailable() {
		t.Fatalf("status: available %v %q, bios %v", h.GetInventoryAvailable(), h.GetInventoryStatus(), h.GetBiosAvailable())
	}
	if h.GetCpuModel() != "Intel(R) Xeon(R) Platinum 8480+" || h.GetCpuCount() != 224 || h.GetCpuArchitecture() != "x86_64" {
		t.Errorf("CPU: %q x %d (%s)", h.GetCpuModel(), h.GetCpuCount(), h.GetCpuArchitecture())
	}
	if h.GetMemoryMib() != 2<<20 {
		t.Errorf("memory %d MiB, want %d", h.GetMemoryMib(), 2<<20)
	}
	if h.GetSystemProduct() != "Supermicro SYS-821GE-TNHR" {
		t.Errorf("system product %q", h.GetSystemProduct())
	}
	d := h.GetDisks()
	if len(d) != 2 || d[0].GetSizeBytes() != 3840755982336 || d[0].GetRotational() || d[0].GetModel() != "SAMSUNG MZQL23T8HCLS" ||
		d[1].GetName() != "/dev/sda" || !d[1].GetRotational() || d[1].GetSizeBytes() != 8001563222016 {
		t.Errorf("disks: %v", d)
	}
	n := h.GetNics()
	if len(n) != 3 || n[0].GetSpeedMbps() != 200000 || n[0].GetMacAddress() != "52:54:00:aa:bb:01" || n[1].GetSpeedMbps() != 25000 || n[2].GetSpeedMbps() != 0 {
		t.Errorf("NICs: %v", n)
	}
	p := h.GetPciDevices()
	if len(p) != 2 || p[0].GetVendorId() != "10de" || p[0].GetProductId() != "2330" || p[0].GetClass() != "030200" || p[0].GetCount() != 8 ||
		p[1].GetVendorId() != "15b3" || p[1].GetCount() != 1 {
		t.Errorf("PCI devices (8 GPUs 10de:2330 counted together, one NIC): %v", p)
	}
	if fw := h.GetFirmwareVersions(); len(fw) != 1 || fw["bios"] != "1.5.0" {
		t.Errorf("firmware versions %v, want only bios 1.5.0 (the inventory has no BMC firmware version)", fw)
	}
	if b := h.GetBiosSettings(); len(b) != 2 || b["HyperThreading"] != "Disabled" || b["BootMode"] != "Uefi" {
		t.Errorf("BIOS settings %v", b)
	}
	if !h.GetInspectionFinishedAt().AsTime().Equal(at) || !h.GetReadAt().AsTime().Equal(at.Add(time.Minute)) || h.GetOmittedItems() != 0 {
		t.Errorf("times %v %v, omitted %d", h.GetInspectionFinishedAt(), h.GetReadAt(), h.GetOmittedItems())
	}
}

// memory.total (bytes) is used when physical_mb is missing; no plugin data
// means no PCI devices, not a failure.
func TestReduceMemoryTotalAndNoPluginData(t *testing.T) {
	h := hardware.Reduce(hardware.Read{Inventory: ironic.Inventory{Inventory: json.RawMessage(`{"memory": {"total": 1099511627776}, "cpu": {"count": "64"}}`)}})
	if !h.GetInventoryAvailable() || h.GetMemoryMib() != 1<<20 || len(h.GetPciDevices()) != 0 || h.GetCpuCount() != 64 {
		t.Fatalf("got %v", h)
	}
}

// Without an inventory the state says why and carries no facts.
func TestReduceWithoutInventory(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("read: %w", ironic.ErrNoInventory), hardware.StatusNotInspected},
		{fmt.Errorf("read: %w", ironic.ErrHardwareUnsupported), hardware.StatusUnsupported},
		{fmt.Errorf("read: %w", ironic.ErrHardwareTooLarge), hardware.StatusMalformed},
	} {
		h := hardware.Reduce(hardware.Read{InventoryErr: c.err, BIOSErr: c.err})
		if h.GetInventoryAvailable() || h.GetInventoryStatus() != c.want || h.GetCpuCount() != 0 || h.GetBiosAvailable() {
			t.Errorf("%v: got %v, want status %s and no facts", c.err, h, c.want)
		}
	}
	if h := hardware.Reduce(hardware.Read{Inventory: ironic.Inventory{Inventory: json.RawMessage(`[1,2]`)}}); h.GetInventoryStatus() != hardware.StatusMalformed {
		t.Errorf("an array inventory: %v", h)
	}
}
