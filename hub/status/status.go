// Package status derives a device's operational_status from its conditions,
// the hub's quarantine state and the site's liveness. Derive is a pure
// function; the rule order is SPEC.md "operational_status (hub side)": the
// first matching rule wins, and every result carries a reason.
package status

import (
	"fmt"

	"github.com/ironlink/ironlink/internal/condition"
)

// Status is one operational_status value, spelled as the proto enum suffix
// (ironlink.v1.OperationalStatus without the OPERATIONAL_STATUS_ prefix).
type Status string

// The operational statuses, in rule order.
const (
	Unknown     Status = "UNKNOWN"
	Unreachable Status = "UNREACHABLE"
	Onboarding  Status = "ONBOARDING"
	Faulted     Status = "FAULTED"
	Maintenance Status = "MAINTENANCE"
	Quarantined Status = "QUARANTINED"
	Validating  Status = "VALIDATING"
	InService   Status = "IN_SERVICE"
	Allocated   Status = "ALLOCATED"
	Available   Status = "AVAILABLE"
	Held        Status = "HELD"
)

// All lists every status in rule order.
var All = []Status{Unknown, Unreachable, Onboarding, Faulted, Maintenance, Quarantined, Validating, InService, Allocated, Available, Held}

// Valid reports whether s is one of All.
func (s Status) Valid() bool {
	for _, k := range All {
		if k == s {
			return true
		}
	}
	return false
}

// Input is everything the status depends on.
type Input struct {
	// Reported is false when the device has never been reported by its site.
	Reported bool
	// SiteStale is true when the site has been silent for longer than stale_after.
	SiteStale bool
	// Quarantined is true when the hub's desired impairment state is quarantined.
	Quarantined bool
	// Conditions holds the current conditions by type; a missing type counts as Unknown.
	Conditions map[condition.Type]condition.Condition
}

// Result is a derived status with its reason.
type Result struct {
	// Status is the derived operational_status.
	Status Status
	// Reason names the rule that matched, for example "ProvisioningHealthy=False: CleanFailed".
	Reason string
}

// Derive returns the operational_status for in. Rules, first match wins:
// UNKNOWN (never reported) · UNREACHABLE (site stale) · ONBOARDING
// (Enrolled≠True) · FAULTED (ProvisioningHealthy=False) · MAINTENANCE
// (MaintenanceClear=False) · QUARANTINED (hub quarantine in force) ·
// VALIDATING (InValidationPool=True) · IN_SERVICE (CustomerAllocated=True) ·
// ALLOCATED (InstanceAllocated=True) · AVAILABLE (CustomerReady=True) · HELD.
func Derive(in Input) Result {
	get := func(t condition.Type) condition.Condition {
		if c, ok := in.Conditions[t]; ok {
			return c
		}
		return condition.Condition{Type: t, Status: condition.Unknown, Reason: "NotReported"}
	}
	why := func(c condition.Condition) string { return fmt.Sprintf("%s=%s: %s", c.Type, c.Status, c.Reason) }

	if !in.Reported {
		return Result{Unknown, "NeverReported"}
	}
	if in.SiteStale {
		return Result{Unreachable, "SiteStale"}
	}
	if c := get(condition.Enrolled); c.Status != condition.True {
		return Result{Onboarding, why(c)}
	}
	if c := get(condition.ProvisioningHealthy); c.Status == condition.False {
		return Result{Faulted, why(c)}
	}
	if c := get(condition.MaintenanceClear); c.Status == condition.False {
		return Result{Maintenance, why(c)}
	}
	if in.Quarantined {
		return Result{Quarantined, "QuarantinedByHub"}
	}
	if c := get(condition.InValidationPool); c.Status == condition.True {
		return Result{Validating, why(c)}
	}
	if c := get(condition.CustomerAllocated); c.Status == condition.True {
		return Result{InService, why(c)}
	}
	if c := get(condition.InstanceAllocated); c.Status == condition.True {
		return Result{Allocated, why(c)}
	}
	if c := get(condition.CustomerReady); c.Status == condition.True {
		return Result{Available, why(c)}
	}
	return Result{Held, "HealthyNotOffered: " + why(get(condition.CustomerReady))}
}
