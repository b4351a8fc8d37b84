package hwprofile

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// NoValue is a fact's value for a device that does not report it.
const NoValue = "(none)"

// Facts flattens h to the facts fleet drift compares, by name
// (docs/reference/hardware.md "Facts"): cpu_model, cpu_count, memory_gib,
// system_product, gpu_count, gpu_model, disks, nics, firmware.<component>
// and bios.<setting>. Nil without a usable inventory (not inspected,
// unsupported, malformed) unless the state is stale (its last facts kept).
func Facts(h *ironlinkv1.HardwareState) map[string]string {
	if h == nil || !h.GetInventoryAvailable() && !h.GetStale() {
		return nil
	}
	f := map[string]string{
		"cpu_model":      h.GetCpuModel(),
		"cpu_count":      strconv.FormatUint(uint64(h.GetCpuCount()), 10),
		"memory_gib":     strconv.FormatUint((h.GetMemoryMib()+512)/1024, 10),
		"system_product": h.GetSystemProduct(),
	}
	gpus, models := uint32(0), map[string]bool{}
	for _, p := range h.GetPciDevices() {
		if strings.HasPrefix(p.GetClass(), "03") {
			gpus += p.GetCount()
			models[p.GetVendorId()+":"+p.GetProductId()] = true
		}
	}
	f["gpu_count"] = strconv.FormatUint(uint64(gpus), 10)
	f["gpu_model"] = strings.Join(slices.Sorted(maps.Keys(models)), "+")
	disks := map[string]int{}
	for _, d := range h.GetDisks() {
		kind := "ssd"
		if d.GetRotational() {
			kind = "hdd"
		}
		disks[fmt.Sprintf("%dGB-%s", d.GetSizeBytes()/1e9, kind)]++
	}
	f["disks"] = counted(disks)
	nics := map[string]int{}
	for _, n := range h.GetNics() {
		nics[fmt.Sprintf("%dMbps", n.GetSpeedMbps())]++
	}
	f["nics"] = counted(nics)
	for k, v := range h.GetFirmwareVersions() {
		f["firmware."+k] = v
	}
	for k, v := range h.GetBiosSettings() {
		f["bios."+k] = v
	}
	for k, v := range f {
		if v == "" {
			f[k] = NoValue
		}
	}
	return f
}

// counted renders a multiset as "2x100000Mbps+1x1000Mbps", largest
// count first, then by name.
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
		parts[i] = fmt.Sprintf("%dx%s", m[k], k)
	}
	return strings.Join(parts, "+")
}
