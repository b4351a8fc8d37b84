package hwprofile

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// Device is what selects a profile for a device: its site, its name (the
// Ironic node name) and its Ironic resource_class.
type Device struct {
	Site, Name, ResourceClass string
}

// Select returns the first profile of f that matches d, or nil.
func (f *File) Select(d Device) *Profile {
	if f == nil {
		return nil
	}
	for i := range f.Profiles {
		p := &f.Profiles[i]
		m := p.Match
		if m.ResourceClass != "" && m.ResourceClass != d.ResourceClass {
			continue
		}
		if m.Name != "" {
			if ok, _ := path.Match(m.Name, d.Name); !ok {
				continue
			}
		}
		if len(m.Sites) > 0 && !slices.Contains(m.Sites, d.Site) {
			continue
		}
		return p
	}
	return nil
}

// Result is a device's hardware checked against its profile.
type Result struct {
	// Profile is the profile's name.
	Profile string
	// Fault is the profile's fault flag.
	Fault bool
	// Differences lists every expectation that does not hold, one line
	// each, in a fixed order (CPU, memory, GPUs, disks, NICs, BIOS
	// settings by name, firmware by component).
	Differences []string
	// Condition is HardwareMatchesProfile as derived (times set to now).
	Condition condition.Condition
}

// Check compares h with p at now. Without an inventory (h nil, or
// inventory_available false) the condition is Unknown/NoInventory; with
// every expectation holding True/Matches; else False with reason Mismatch
// (MismatchFault when p.Fault), the message naming the differences from
// the first (cut at condition.MaxMessageBytes).
func Check(p *Profile, h *ironlinkv1.HardwareState, now time.Time) Result {
	r := Result{Profile: p.Name, Fault: p.Fault}
	c := condition.Condition{Type: condition.HardwareMatchesProfile, ObservedTime: now, LastTransitionTime: now}
	switch {
	case h == nil || !h.GetInventoryAvailable():
		c.Status, c.Reason = condition.Unknown, condition.ReasonNoInventory
		c.Message = fmt.Sprintf("profile %s: Ironic has no inventory for the node (%s)", p.Name, h.GetInventoryStatus())
	default:
		r.Differences = differences(p.Expect, h)
		if len(r.Differences) == 0 {
			c.Status, c.Reason = condition.True, condition.ReasonProfileMatches
			c.Message = "matches profile " + p.Name
			break
		}
		c.Status, c.Reason = condition.False, condition.ReasonProfileMismatch
		if p.Fault {
			c.Reason = condition.ReasonProfileMismatchFault
		}
		c.Message = textcheck.SanitizeLine(fmt.Sprintf("profile %s: %s", p.Name, strings.Join(r.Differences, "; ")), condition.MaxMessageBytes)
	}
	r.Condition = c
	return r
}

// differences lists what of e does not hold for h.
func differences(e Expect, h *ironlinkv1.HardwareState) []string {
	var out []string
	if e.CPUModel != "" && e.CPUModel != h.GetCpuModel() {
		out = append(out, fmt.Sprintf("cpu_model: %q, want %q", h.GetCpuModel(), e.CPUModel))
	}
	rng := func(name string, r *Range, v uint64) {
		if r == nil {
			return
		}
		if ok, want := r.contains(v); !ok {
			out = append(out, fmt.Sprintf("%s: %d, want %s", name, v, want))
		}
	}
	rng("cpu_count", e.CPUCount, uint64(h.GetCpuCount()))
	rng("memory_mib", e.MemoryMiB, h.GetMemoryMib())
	if g := e.GPUs; g != nil {
		rng("gpus", &g.Count, countGPUs(h, g.VendorID, g.ProductID))
	}
	if d := e.Disks; d != nil {
		var n uint64
		for _, x := range h.GetDisks() {
			if x.GetSizeBytes() >= d.MinSizeBytes {
				n++
			}
		}
		rng("disks", &d.Count, n)
	}
	if d := e.NICs; d != nil {
		var n uint64
		for _, x := range h.GetNics() {
			if x.GetSpeedMbps() >= d.MinSpeedMbps {
				n++
			}
		}
		rng("nics", &d.Count, n)
	}
	for _, k := range slices.Sorted(maps.Keys(e.BIOSSettings)) {
		got, ok := h.GetBiosSettings()[k]
		switch {
		case !h.GetBiosAvailable():
			out = append(out, fmt.Sprintf("bios_settings.%s: not reported, want %q", k, e.BIOSSettings[k]))
		case !ok:
			out = append(out, fmt.Sprintf("bios_settings.%s: absent, want %q", k, e.BIOSSettings[k]))
		case got != e.BIOSSettings[k]:
			out = append(out, fmt.Sprintf("bios_settings.%s: %q, want %q", k, got, e.BIOSSettings[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(e.Firmware)) {
		got, ok := h.GetFirmwareVersions()[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("firmware.%s: not reported, want ≥ %s", k, e.Firmware[k]))
		case compareVersions(got, e.Firmware[k]) < 0:
			out = append(out, fmt.Sprintf("firmware.%s: %s, want ≥ %s", k, got, e.Firmware[k]))
		}
	}
	return out
}

// countGPUs counts h's display-class (PCI class 03xxxx) devices, of vendor
// and product when set.
func countGPUs(h *ironlinkv1.HardwareState, vendor, product string) uint64 {
	var n uint64
	for _, d := range h.GetPciDevices() {
		if !strings.HasPrefix(d.GetClass(), "03") || (vendor != "" && d.GetVendorId() != vendor) || (product != "" && d.GetProductId() != product) {
			continue
		}
		n += uint64(d.GetCount())
	}
	return n
}
