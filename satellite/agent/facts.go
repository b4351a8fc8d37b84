package agent

import (
	"maps"

	"google.golang.org/protobuf/proto"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/textcheck"
	"github.com/ironlink/ironlink/satellite/ironic"
)

// Limits of the hub's link validation (hub/link: MaxFactBytes,
// MaxResultTextBytes, MaxCorrectionDetailBytes, MaxMismatchStatusBytes,
// MaxMismatchIDBytes), which the satellite cannot import: text relayed from
// OpenStack is sanitized to them (textcheck.SanitizeLine/SanitizeText)
// before it is sent, because the hub refuses a whole batch or result with
// InvalidArgument for one bad value and the satellite would resend it for
// ever.
const (
	maxFactBytes           = 255
	maxResultTextBytes     = 2048
	maxCorrectionBytes     = 1024
	maxMismatchStatusBytes = 32
	maxMismatchIDBytes     = 64
)

// sameFacts reports whether facts a (nil: none yet) and b are equal:
// field by field, the instance mismatches by proto.Equal (reflection only
// when a device has some; a poll compares 10,000 facts).
func sameFacts(a, b *ironlinkv1.DeviceFacts) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Name != b.Name || a.ProvisionState != b.ProvisionState || a.PowerState != b.PowerState || a.Maintenance != b.Maintenance ||
		a.ResourceClass != b.ResourceClass || a.InstanceUuid != b.InstanceUuid || a.Lessee != b.Lessee || a.Owner != b.Owner ||
		a.ConductorGroup != b.ConductorGroup || a.Fault != b.Fault || len(a.InstanceMismatches) != len(b.InstanceMismatches) ||
		!samePtr(a.Cpus, b.Cpus) || !samePtr(a.MemoryMb, b.MemoryMb) || !samePtr(a.LocalGb, b.LocalGb) || !samePtr(a.CpuArch, b.CpuArch) ||
		!maps.Equal(a.Labels, b.Labels) {
		return false
	}
	for i, m := range a.InstanceMismatches {
		if !proto.Equal(m, b.InstanceMismatches[i]) {
			return false
		}
	}
	return true
}

// samePtr reports whether two optional fact values are both unset or
// both set and equal.
func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// setPtr sets the optional fact *p to v when has (reusing *p's storage: f
// is the scratch message, whose values are never shared), else unsets it.
func setPtr[T any](p **T, v T, has bool) {
	switch {
	case !has:
		*p = nil
	case *p != nil:
		**p = v
	default:
		*p = &v
	}
}

// fillFacts sets every field of f but InstanceMismatches to n's facts for
// the hub, each one-line value sanitized (NUL and control characters
// replaced, cut to maxFactBytes). The node's properties (cpus, memory_mb,
// local_gb, cpu_arch) are unset when Ironic did not tell them.
func fillFacts(f *ironlinkv1.DeviceFacts, n ironic.Node) {
	l := func(s string) string { return textcheck.SanitizeLine(s, maxFactBytes) }
	f.Name, f.ProvisionState, f.PowerState, f.Maintenance = l(n.Name), l(n.ProvisionState), l(n.PowerState), n.Maintenance
	f.ResourceClass, f.InstanceUuid, f.Lessee, f.Owner = l(n.ResourceClass), l(n.InstanceUUID), l(n.Lessee), l(n.Owner)
	f.ConductorGroup, f.Fault = l(n.ConductorGroup), l(n.Fault)
	p := n.Properties
	setPtr(&f.Cpus, p.CPUs, p.HasCPUs)
	setPtr(&f.MemoryMb, p.MemoryMB, p.HasMemoryMB)
	setPtr(&f.LocalGb, p.LocalGB, p.HasLocalGB)
	setPtr(&f.CpuArch, l(p.CPUArch), p.HasCPUArch)
}
