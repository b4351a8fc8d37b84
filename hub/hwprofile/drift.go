package hwprofile

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// DriftDevice is one device of a drift group with its facts (nil: no
// usable inventory).
type DriftDevice struct {
	ID, Name string
	Facts    map[string]string
	Stale    bool
}

// DriftOutlier is the devices of a group whose fact has one value other
// than the expected.
type DriftOutlier struct {
	Fact, Expected, Actual string
	// Devices are the devices' names (ids for unnamed ones), sorted.
	Devices []string
	Summary string
}

// Drift is one group's comparison.
type Drift struct {
	Devices, Matching, WithoutInventory, Stale int
	// Expected is the value most devices with facts share, by fact.
	Expected map[string]string
	// Outliers, most devices first, then by fact and value.
	Outliers []DriftOutlier
}

// CompareGroup compares the devices of one group (a resource class at a
// site): each fact's expected value is the one most devices with facts
// have (ties: the smaller value), every other value an outlier group. A
// device that lacks a fact others report has NoValue. Pure.
func CompareGroup(devs []DriftDevice) Drift {
	d := Drift{Devices: len(devs), Expected: map[string]string{}}
	counts := map[string]map[string][]string{} // fact → value → devices
	var with []DriftDevice
	for _, dv := range devs {
		if dv.Facts == nil {
			d.WithoutInventory++
			continue
		}
		if dv.Stale {
			d.Stale++
		}
		with = append(with, dv)
		for k := range dv.Facts {
			if counts[k] == nil {
				counts[k] = map[string][]string{}
			}
		}
	}
	for _, dv := range with {
		for k := range counts {
			v, ok := dv.Facts[k]
			if !ok {
				v = NoValue
			}
			counts[k][v] = append(counts[k][v], dv.label())
		}
	}
	outlying := map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		byValue := counts[k]
		exp := mode(byValue)
		d.Expected[k] = exp
		for _, v := range slices.Sorted(maps.Keys(byValue)) {
			if v == exp {
				continue
			}
			names := slices.Sorted(slices.Values(byValue[v]))
			for _, n := range names {
				outlying[n] = true
			}
			d.Outliers = append(d.Outliers, DriftOutlier{Fact: k, Expected: exp, Actual: v, Devices: names,
				Summary: OutlierSummary(k, exp, v, len(names))})
		}
	}
	d.Matching = len(with) - len(outlying)
	slices.SortStableFunc(d.Outliers, func(a, b DriftOutlier) int { return len(b.Devices) - len(a.Devices) })
	return d
}

func (dv DriftDevice) label() string {
	if dv.Name != "" {
		return dv.Name
	}
	return dv.ID
}

// mode is the value with the most devices (ties: the smaller value).
func mode(byValue map[string][]string) string {
	best := ""
	for _, v := range slices.Sorted(maps.Keys(byValue)) {
		if best == "" && len(byValue[v]) > 0 || len(byValue[v]) > len(byValue[best]) {
			best = v
		}
	}
	return best
}

// OutlierSummary says in words what n devices have: "3 have 7 GPUs
// instead of 8", "11 run BIOS 1.4.2 instead of 1.5.0", "2 have
// HyperThreading Enabled instead of Disabled".
func OutlierSummary(fact, expected, actual string, n int) string {
	switch {
	case fact == "gpu_count":
		return fmt.Sprintf("%d have %s GPUs instead of %s", n, actual, expected)
	case fact == "memory_gib":
		return fmt.Sprintf("%d have %s GiB of memory instead of %s", n, actual, expected)
	case fact == "cpu_count":
		return fmt.Sprintf("%d have %s CPUs instead of %s", n, actual, expected)
	case strings.HasPrefix(fact, "firmware."):
		return fmt.Sprintf("%d run %s firmware %s instead of %s", n, strings.ToUpper(strings.TrimPrefix(fact, "firmware.")), actual, expected)
	case strings.HasPrefix(fact, "bios."):
		return fmt.Sprintf("%d have %s %s instead of %s", n, strings.TrimPrefix(fact, "bios."), actual, expected)
	}
	return fmt.Sprintf("%d have %s %s instead of %s", n, fact, actual, expected)
}

// Summary is the group in words: "gpu-h100: 412 match; 3 have 7 GPUs
// instead of 8; 2 without inventory".
func (d Drift) Summary(class string) string {
	if class == "" {
		class = "(no resource class)"
	}
	parts := []string{fmt.Sprintf("%s: %d match", class, d.Matching)}
	for _, o := range d.Outliers {
		parts = append(parts, o.Summary)
	}
	if d.WithoutInventory > 0 {
		parts = append(parts, fmt.Sprintf("%d without inventory", d.WithoutInventory))
	}
	if d.Stale > 0 {
		parts = append(parts, fmt.Sprintf("%d stale", d.Stale))
	}
	return strings.Join(parts, "; ")
}
