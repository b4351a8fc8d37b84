// Package hwprofile holds the hardware profiles (--hardware-profiles-file):
// what the machines of a resource class (or of a name pattern) must
// contain, with tolerances, and whether a mismatch is a fault. Parse and
// Load validate the YAML file (unknown keys and impossible ranges refused,
// naming the line or the profile); Check compares a device's hardware
// (ironlink.v1.HardwareState) with the profile that applies to it and
// makes the condition HardwareMatchesProfile (docs/reference/conditions.md
// "HardwareMatchesProfile"); Runner keeps that condition up to date in the
// store on every hardware change and every reload of the file.
package hwprofile

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/filewatch"
)

// File is a parsed profiles file: its profiles in file order (the first
// that matches a device applies).
type File struct {
	Profiles []Profile
}

// Profile is one hardware profile.
type Profile struct {
	// Name names the profile in conditions and answers.
	Name string `yaml:"name"`
	// Match selects the devices the profile applies to.
	Match Selector `yaml:"match"`
	// Fault makes a mismatch FAULTED; false (the default) makes it a
	// warning that leaves the status as it is.
	Fault bool `yaml:"fault"`
	// Expect is what the hardware must contain.
	Expect Expect `yaml:"expect"`
	// Validation is what a validation run (VALIDATE) of a device of the
	// profile does when its request does not say.
	Validation Validation `yaml:"validation"`
}

// Validation are a profile's defaults for validation runs.
type Validation struct {
	// CleanSteps are the clean steps of a run whose request names none,
	// e.g. Ironic's burn-in steps (deploy.burnin_cpu, burnin_memory,
	// burnin_disk, burnin_network); empty: such a run does not clean.
	CleanSteps []CleanStep `yaml:"clean_steps"`
}

// CleanStep is one Ironic clean step.
type CleanStep struct {
	// Interface is the driver interface, e.g. "deploy".
	Interface string `yaml:"interface"`
	// Step is the step's name, e.g. "burnin_cpu".
	Step string `yaml:"step"`
	// Args are the step's arguments, as Ironic takes them.
	Args map[string]any `yaml:"args"`
}

// MaxCleanSteps bounds a profile's validation.clean_steps (the hub's
// bound on an operation's clean steps).
const MaxCleanSteps = 50

// Selector selects devices; every field set must match (at least one must
// be set).
type Selector struct {
	// ResourceClass is the device's Ironic resource_class, exactly.
	ResourceClass string `yaml:"resource_class"`
	// Name is a shell pattern (path.Match) over the device's name, the
	// label-like part of a node an operator chooses, e.g. "gpu-*".
	Name string `yaml:"name"`
	// Sites, when set, limits the profile to these sites.
	Sites []string `yaml:"sites"`
}

// Expect is what a profile expects; unset fields are not checked.
type Expect struct {
	// CPUModel is the CPU model name, exactly.
	CPUModel string `yaml:"cpu_model"`
	// CPUCount is the logical CPU count.
	CPUCount *Range `yaml:"cpu_count"`
	// MemoryMiB is the memory in MiB.
	MemoryMiB *Range `yaml:"memory_mib"`
	// GPUs counts the display-class PCI devices (class 03xxxx), of
	// VendorID/ProductID when set.
	GPUs *GPUs `yaml:"gpus"`
	// Disks counts the disks of at least MinSizeBytes.
	Disks *Disks `yaml:"disks"`
	// NICs counts the interfaces of at least MinSpeedMbps.
	NICs *NICs `yaml:"nics"`
	// BIOSSettings are settings that must have these values.
	BIOSSettings map[string]string `yaml:"bios_settings"`
	// Firmware are minimum versions by component ("bios"; the inventory
	// reports no other), compared as dotted numbers (1.10.0 > 1.9.2).
	Firmware map[string]string `yaml:"firmware_min"`
}

// Range is an inclusive range of a count or size; Exactly is shorthand for
// min = max.
type Range struct {
	// Min is the least value accepted; nil: no lower bound.
	Min *uint64 `yaml:"min"`
	// Max is the greatest value accepted; nil: no upper bound.
	Max *uint64 `yaml:"max"`
	// Exactly is the one value accepted (not with Min or Max).
	Exactly *uint64 `yaml:"exactly"`
}

// GPUs is the expected GPU count, optionally of one model.
type GPUs struct {
	// Count is the accepted number of GPUs.
	Count Range `yaml:"count"`
	// VendorID and ProductID, when set (4 lower-case hex digits), count
	// only GPUs of that vendor and product.
	VendorID  string `yaml:"vendor_id"`
	ProductID string `yaml:"product_id"`
}

// Disks is the expected disk count, counting disks of at least
// MinSizeBytes.
type Disks struct {
	// Count is the accepted number of such disks.
	Count Range `yaml:"count"`
	// MinSizeBytes is the least size of a disk counted, in bytes.
	MinSizeBytes uint64 `yaml:"min_size_bytes"`
}

// NICs is the expected interface count, counting interfaces of at least
// MinSpeedMbps.
type NICs struct {
	// Count is the accepted number of such interfaces.
	Count Range `yaml:"count"`
	// MinSpeedMbps is the least link speed of an interface counted, in Mbit/s.
	MinSpeedMbps uint64 `yaml:"min_speed_mbps"`
}

var (
	nameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	ifaceRE   = regexp.MustCompile(`^[a-z][a-z_]{0,63}$`)
	stepRE    = regexp.MustCompile(`^[a-z][a-z0-9_]{0,254}$`)
	hexRE     = regexp.MustCompile(`^[0-9a-f]{4}$`)
	versionRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)
)

// Load reads and parses the profiles file at p (bounded, a regular file).
func Load(p string) (*File, error) {
	return filewatch.ReadConfig(p, "hardware profiles file", Parse)
}

// Parse parses a profiles file: a `profiles:` list. Unknown keys are
// refused with their line (yaml's KnownFields); a profile with no
// selector, a bad name, a duplicate name, an impossible range (min > max,
// exactly beside min or max) or a malformed id or version is refused
// naming the profile and the key. Every problem is reported.
func Parse(data []byte) (*File, error) {
	var doc struct {
		Profiles []Profile `yaml:"profiles"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	var nodes struct {
		Profiles []yaml.Node `yaml:"profiles"`
	}
	_ = yaml.Unmarshal(data, &nodes) // decoded above: only the lines are taken
	var errs []error
	seen := map[string]bool{}
	for i, p := range doc.Profiles {
		where := fmt.Sprintf("profiles[%d]", i)
		if i < len(nodes.Profiles) {
			where = fmt.Sprintf("line %d: %s", nodes.Profiles[i].Line, where)
		}
		if p.Name != "" {
			where += " (" + p.Name + ")"
		}
		if !nameRE.MatchString(p.Name) {
			errs = append(errs, fmt.Errorf("%s: name must be 1-63 of [a-z0-9._-], starting with a letter or digit", where))
		}
		if seen[p.Name] {
			errs = append(errs, fmt.Errorf("%s: name used twice", where))
		}
		seen[p.Name] = true
		errs = append(errs, p.validate(where)...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &File{Profiles: doc.Profiles}, nil
}

func (p Profile) validate(where string) []error {
	var errs []error
	m := p.Match
	if m.ResourceClass == "" && m.Name == "" {
		errs = append(errs, fmt.Errorf("%s: match needs resource_class or name", where))
	}
	if _, err := path.Match(m.Name, ""); err != nil {
		errs = append(errs, fmt.Errorf("%s: match.name: %w", where, err))
	}
	e := p.Expect
	errs = append(errs, e.CPUCount.check(where+": expect.cpu_count")...)
	errs = append(errs, e.MemoryMiB.check(where+": expect.memory_mib")...)
	if e.GPUs != nil {
		errs = append(errs, e.GPUs.Count.check(where+": expect.gpus.count")...)
		for k, v := range map[string]string{"vendor_id": e.GPUs.VendorID, "product_id": e.GPUs.ProductID} {
			if v != "" && !hexRE.MatchString(v) {
				errs = append(errs, fmt.Errorf("%s: expect.gpus.%s %q is not 4 lower-case hex digits", where, k, v))
			}
		}
	}
	if e.Disks != nil {
		errs = append(errs, e.Disks.Count.check(where+": expect.disks.count")...)
	}
	if e.NICs != nil {
		errs = append(errs, e.NICs.Count.check(where+": expect.nics.count")...)
	}
	for k, v := range e.Firmware {
		if !versionRE.MatchString(v) {
			errs = append(errs, fmt.Errorf("%s: expect.firmware_min.%s %q is not a dotted version like 1.5.0", where, k, v))
		}
	}
	steps := p.Validation.CleanSteps
	if len(steps) > MaxCleanSteps {
		errs = append(errs, fmt.Errorf("%s: validation.clean_steps: %d, at most %d", where, len(steps), MaxCleanSteps))
	}
	for i, st := range steps {
		f := fmt.Sprintf("%s: validation.clean_steps[%d]", where, i)
		if !ifaceRE.MatchString(st.Interface) {
			errs = append(errs, fmt.Errorf("%s.interface %q is not a driver interface (deploy, management, bios, raid, ...)", f, st.Interface))
		}
		if !stepRE.MatchString(st.Step) {
			errs = append(errs, fmt.Errorf("%s.step %q is not a step name (e.g. burnin_cpu)", f, st.Step))
		}
		if _, err := structpb.NewStruct(st.Args); err != nil {
			errs = append(errs, fmt.Errorf("%s.args: %w", f, err))
		}
	}
	return errs
}

// ValidationCleanSteps returns the validation clean steps of the profile
// that applies to d (nil: no profile, or it names none).
func (f *File) ValidationCleanSteps(d Device) []*ironlinkv1.CleanStep {
	p := f.Select(d)
	if p == nil {
		return nil
	}
	var out []*ironlinkv1.CleanStep
	for _, st := range p.Validation.CleanSteps {
		s := &ironlinkv1.CleanStep{Interface: st.Interface, Step: st.Step}
		if len(st.Args) > 0 {
			s.Args, _ = structpb.NewStruct(st.Args) // checked by Parse
		}
		out = append(out, s)
	}
	return out
}

// check refuses an impossible range; nil is fine (not checked).
func (r *Range) check(where string) []error {
	if r == nil {
		return nil
	}
	switch {
	case r.Exactly != nil && (r.Min != nil || r.Max != nil):
		return []error{fmt.Errorf("%s: exactly cannot go with min or max", where)}
	case r.Exactly == nil && r.Min == nil && r.Max == nil:
		return []error{fmt.Errorf("%s: needs min, max or exactly", where)}
	case r.Min != nil && r.Max != nil && *r.Min > *r.Max:
		return []error{fmt.Errorf("%s: min %d is above max %d", where, *r.Min, *r.Max)}
	}
	return nil
}

// contains reports whether v is in r, and the range in words.
func (r *Range) contains(v uint64) (bool, string) {
	switch {
	case r.Exactly != nil:
		return v == *r.Exactly, strconv.FormatUint(*r.Exactly, 10)
	case r.Min != nil && r.Max != nil:
		return v >= *r.Min && v <= *r.Max, fmt.Sprintf("%d-%d", *r.Min, *r.Max)
	case r.Min != nil:
		return v >= *r.Min, fmt.Sprintf("≥ %d", *r.Min)
	case r.Max != nil:
		return v <= *r.Max, fmt.Sprintf("≤ %d", *r.Max)
	}
	return true, "any"
}

// compareVersions compares dotted versions numerically: -1, 0 or 1.
// Parts that are not numbers compare as strings.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		x, y := "0", "0"
		if i < len(as) {
			x = as[i]
		}
		if i < len(bs) {
			y = bs[i]
		}
		xi, err1 := strconv.ParseUint(x, 10, 64)
		yi, err2 := strconv.ParseUint(y, 10, 64)
		switch {
		case err1 != nil || err2 != nil:
			if c := strings.Compare(x, y); c != 0 {
				return c
			}
		case xi < yi:
			return -1
		case xi > yi:
			return 1
		}
	}
	return 0
}
