// Package hardware reduces a node's Ironic inspection inventory and BIOS
// settings to the stable facts the satellite reports (ironlink.v1.HardwareState;
// docs/reference/conditions.md "Hardware"): CPU model and count, memory,
// disks, NICs, PCI devices (GPUs) by kind and count, firmware versions and
// BIOS settings. Reduce is a pure function; a document of unexpected shape
// yields what could be read and never panics.
package hardware

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/textcheck"
	"github.com/ironlink/ironlink/satellite/ironic"
)

// MaxBytes bounds a reduced HardwareState (16 KiB, its wire size): lists
// beyond it are cut from the end and counted in omitted_items.
const MaxBytes = 16 << 10

// maxString bounds every string taken from a document (bytes); maxItems
// the entries of each list and maxBIOS the BIOS settings kept before the
// size bound (the rest are counted in omitted_items).
const (
	maxString = 256
	maxItems  = 64
	maxBIOS   = 256
)

// Inventory statuses (HardwareState.inventory_status).
const (
	StatusRead         = "Read"
	StatusNotInspected = "NotInspected"
	StatusUnsupported  = "Unsupported"
	StatusMalformed    = "Malformed"
)

// Read is one read of a node's hardware: the inventory and the BIOS
// settings with the error of each read (nil on success).
type Read struct {
	// Inventory is the inventory read; InventoryErr the read's error.
	Inventory    ironic.Inventory
	InventoryErr error
	// BIOS are the BIOS settings read; BIOSErr the read's error.
	BIOS    []ironic.BIOSSetting
	BIOSErr error
	// InspectionFinishedAt is the node's inspection_finished_at as listed
	// (zero: none).
	InspectionFinishedAt time.Time
	// ReadAt is when the reads were made.
	ReadAt time.Time
}

// wire shapes of ironic-python-agent's inventory (only what is reduced).
// Its format (GenericHardwareManager.list_hardware_info) has no BMC
// firmware version: bmc_address, bmc_v6address and bmc_mac only; BMC
// firmware comes from Ironic's firmware interface (API 1.86), newer than
// the test bed's Ironic 21.4, and is not read.
type wireInventory struct {
	CPU struct {
		ModelName    string      `json:"model_name"`
		Count        json.Number `json:"count"`
		Architecture string      `json:"architecture"`
	} `json:"cpu"`
	Memory struct {
		Total      json.Number `json:"total"`
		PhysicalMB json.Number `json:"physical_mb"`
	} `json:"memory"`
	Disks []struct {
		Name       string      `json:"name"`
		Model      string      `json:"model"`
		Size       json.Number `json:"size"`
		Serial     string      `json:"serial"`
		Rotational bool        `json:"rotational"`
	} `json:"disks"`
	Interfaces []struct {
		Name      string      `json:"name"`
		MAC       string      `json:"mac_address"`
		SpeedMbps json.Number `json:"speed_mbps"`
	} `json:"interfaces"`
	SystemVendor struct {
		ProductName  string `json:"product_name"`
		Manufacturer string `json:"manufacturer"`
		Firmware     struct {
			Version string `json:"version"`
		} `json:"firmware"`
	} `json:"system_vendor"`
}

type wirePlugin struct {
	PCIDevices []struct {
		VendorID  string `json:"vendor_id"`
		ProductID string `json:"product_id"`
		Class     string `json:"class"`
	} `json:"pci_devices"`
}

// Reduce turns r into a HardwareState of at most MaxBytes. A missing
// inventory says so (inventory_available false, inventory_status naming
// why), never an empty machine.
func Reduce(r Read) *ironlinkv1.HardwareState {
	h := &ironlinkv1.HardwareState{ReadAt: timestamppb.New(r.ReadAt.UTC())}
	if !r.InspectionFinishedAt.IsZero() {
		h.InspectionFinishedAt = timestamppb.New(r.InspectionFinishedAt.UTC())
	}
	switch {
	case r.InventoryErr == nil:
		if reduceInventory(h, r.Inventory) {
			h.InventoryAvailable, h.InventoryStatus = true, StatusRead
		} else {
			h.InventoryStatus = StatusMalformed
		}
	case errors.Is(r.InventoryErr, ironic.ErrNoInventory):
		h.InventoryStatus = StatusNotInspected
	case errors.Is(r.InventoryErr, ironic.ErrHardwareUnsupported):
		h.InventoryStatus = StatusUnsupported
	default:
		h.InventoryStatus = StatusMalformed
	}
	if r.BIOSErr == nil {
		h.BiosAvailable = true
		for _, s := range r.BIOS {
			if s.Name == "" {
				continue
			}
			if h.BiosSettings == nil {
				h.BiosSettings = map[string]string{}
			}
			h.BiosSettings[clip(s.Name)] = clip(s.Value)
		}
	}
	capLists(h)
	bound(h)
	return h
}

// reduceInventory fills h from inv; false when the inventory is not an
// object of the expected shape.
func reduceInventory(h *ironlinkv1.HardwareState, inv ironic.Inventory) bool {
	var w wireInventory
	if len(inv.Inventory) == 0 || json.Unmarshal(inv.Inventory, &w) != nil {
		return false
	}
	h.CpuModel, h.CpuArchitecture = clip(w.CPU.ModelName), clip(w.CPU.Architecture)
	if n, err := w.CPU.Count.Int64(); err == nil && n > 0 && n < 1<<32 {
		h.CpuCount = uint32(n)
	}
	if n, err := w.Memory.PhysicalMB.Int64(); err == nil && n > 0 {
		h.MemoryMib = uint64(n)
	} else if n, err := w.Memory.Total.Int64(); err == nil && n > 0 {
		h.MemoryMib = uint64(n) >> 20
	}
	for _, d := range w.Disks {
		size, _ := d.Size.Int64()
		h.Disks = append(h.Disks, &ironlinkv1.HardwareDisk{Name: clip(d.Name), SizeBytes: uint64(max(size, 0)),
			Model: clip(strings.TrimSpace(d.Model)), Serial: clip(d.Serial), Rotational: d.Rotational})
	}
	for _, n := range w.Interfaces {
		speed, _ := n.SpeedMbps.Int64()
		h.Nics = append(h.Nics, &ironlinkv1.HardwareNIC{Name: clip(n.Name), MacAddress: clip(strings.ToLower(n.MAC)), SpeedMbps: uint64(max(speed, 0))})
	}
	h.SystemProduct = clip(strings.TrimSpace(w.SystemVendor.Manufacturer + " " + w.SystemVendor.ProductName))
	if v := w.SystemVendor.Firmware.Version; v != "" {
		h.FirmwareVersions = map[string]string{"bios": clip(v)}
	}
	var p wirePlugin
	if len(inv.PluginData) > 0 && json.Unmarshal(inv.PluginData, &p) == nil {
		h.PciDevices = groupPCI(p)
	}
	return true
}

// groupPCI counts the PCI devices by (vendor, product, class), in the
// order each kind first appears.
func groupPCI(p wirePlugin) []*ironlinkv1.HardwarePCIDevice {
	var out []*ironlinkv1.HardwarePCIDevice
	idx := map[[3]string]int{}
	for _, d := range p.PCIDevices {
		k := [3]string{clip(strings.ToLower(d.VendorID)), clip(strings.ToLower(d.ProductID)), clip(strings.ToLower(d.Class))}
		if i, ok := idx[k]; ok {
			out[i].Count++
			continue
		}
		idx[k] = len(out)
		out = append(out, &ironlinkv1.HardwarePCIDevice{VendorId: k[0], ProductId: k[1], Class: k[2], Count: 1})
	}
	return out
}

// capLists keeps the first maxItems disks, NICs and PCI kinds and the
// first maxBIOS BIOS settings by name, counting the rest.
func capLists(h *ironlinkv1.HardwareState) {
	if n := len(h.Disks); n > maxItems {
		h.Disks, h.OmittedItems = h.Disks[:maxItems], h.OmittedItems+uint32(n-maxItems)
	}
	if n := len(h.Nics); n > maxItems {
		h.Nics, h.OmittedItems = h.Nics[:maxItems], h.OmittedItems+uint32(n-maxItems)
	}
	if n := len(h.PciDevices); n > maxItems {
		h.PciDevices, h.OmittedItems = h.PciDevices[:maxItems], h.OmittedItems+uint32(n-maxItems)
	}
	if n := len(h.BiosSettings); n > maxBIOS {
		for _, k := range slices.Sorted(maps.Keys(h.BiosSettings))[maxBIOS:] {
			delete(h.BiosSettings, k)
		}
		h.OmittedItems += uint32(n - maxBIOS)
	}
}

// bound cuts h's lists (BIOS settings by name last, then disks, NICs, PCI
// kinds) until it is at most MaxBytes, counting what was cut.
func bound(h *ironlinkv1.HardwareState) {
	for proto.Size(h) > MaxBytes {
		switch {
		case len(h.BiosSettings) > 0:
			keys := slices.Sorted(maps.Keys(h.BiosSettings))
			delete(h.BiosSettings, keys[len(keys)-1])
		case len(h.Disks) > 0:
			h.Disks = h.Disks[:len(h.Disks)-1]
		case len(h.Nics) > 0:
			h.Nics = h.Nics[:len(h.Nics)-1]
		case len(h.PciDevices) > 0:
			h.PciDevices = h.PciDevices[:len(h.PciDevices)-1]
		default:
			return
		}
		h.OmittedItems++
	}
}

// clip makes s valid UTF-8 without control characters, at most maxString
// bytes.
func clip(s string) string {
	return textcheck.SanitizeLine(s, maxString)
}
