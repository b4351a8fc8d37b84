// Package hwview puts a device's stored hardware (ironlink.v1.HardwareState)
// in words for the device page and `ironlink describe device`: the state
// of its inventory ("no inventory: NotInspected", "stale since …") and
// its key facts (docs/reference/hardware.md "On the device").
package hwview

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// Fact is one key fact: a label and its value.
type Fact struct {
	Label, Value string
}

// State says what is known of the inventory: "never read" (nil), "no
// inventory: STATUS" (none usable, never read one), "stale since TIME
// (Ironic answers STATUS; the last facts are kept)", or "read TIME"
// with the inspection it was read after. Times are RFC 3339, UTC.
func State(h *ironlinkv1.HardwareState) string {
	switch {
	case h == nil:
		return "never read"
	case h.GetStale():
		return fmt.Sprintf("stale since %s (Ironic answers %s; the last facts are kept)", ts(h.GetStaleSince().AsTime()), orUnknown(h.GetInventoryStatus()))
	case !h.GetInventoryAvailable():
		return "no inventory: " + orUnknown(h.GetInventoryStatus())
	}
	s := "read " + ts(h.GetReadAt().AsTime())
	if h.GetInspectionFinishedAt() != nil {
		s += " (inspection finished " + ts(h.GetInspectionFinishedAt().AsTime()) + ")"
	}
	return s
}

// Facts are h's key facts in a fixed order: CPU, memory, GPUs, disks,
// NICs, system, firmware, BIOS settings; none without a usable inventory
// (a stale state keeps its last facts). A list the hub does not have is
// left out; omitted items are counted.
func Facts(h *ironlinkv1.HardwareState) []Fact {
	if h == nil || !h.GetInventoryAvailable() && !h.GetStale() {
		return nil
	}
	var out []Fact
	add := func(label, value string) {
		if value != "" {
			out = append(out, Fact{label, value})
		}
	}
	if h.GetCpuCount() > 0 || h.GetCpuModel() != "" {
		add("CPU", strings.TrimSpace(fmt.Sprintf("%d× %s %s", h.GetCpuCount(), h.GetCpuModel(), h.GetCpuArchitecture())))
	}
	if m := h.GetMemoryMib(); m > 0 {
		add("Memory", fmt.Sprintf("%d GiB", (m+512)/1024))
	}
	gpus := map[string]int{}
	for _, p := range h.GetPciDevices() {
		if strings.HasPrefix(p.GetClass(), "03") {
			gpus[p.GetVendorId()+":"+p.GetProductId()] += int(p.GetCount())
		}
	}
	add("GPUs", counted(gpus))
	disks := map[string]int{}
	for _, d := range h.GetDisks() {
		kind := "SSD"
		if d.GetRotational() {
			kind = "HDD"
		}
		disks[fmt.Sprintf("%d GB %s", d.GetSizeBytes()/1e9, kind)]++
	}
	add("Disks", counted(disks))
	nics := map[string]int{}
	for _, n := range h.GetNics() {
		nics[fmt.Sprintf("%d Mbit/s", n.GetSpeedMbps())]++
	}
	add("NICs", counted(nics))
	add("System", h.GetSystemProduct())
	add("Firmware", pairs(h.GetFirmwareVersions(), " "))
	add("BIOS settings", pairs(h.GetBiosSettings(), "="))
	if n := h.GetOmittedItems(); n > 0 {
		add("Omitted", fmt.Sprintf("%d items (over the 16 KiB bound)", n))
	}
	return out
}

// counted renders a multiset as "8× 10de:2330, 1× …", largest count
// first, then by name.
func counted(m map[string]int) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d× %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}

// pairs renders m sorted by key, "k<sep>v" joined by ", ".
func pairs(m map[string]string, sep string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+sep+m[k])
	}
	return strings.Join(parts, ", ")
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}
