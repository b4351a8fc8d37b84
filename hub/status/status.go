// Package status derives a device's operational_status from its conditions,
// the hub's quarantine state and the site's liveness. Derive is a pure
// function; the rule order is docs/design/requirements.md "operational_status (hub side)": the
// first matching rule wins, and every result carries a reason.
package status

import (
	"fmt"
	"slices"
	"strings"

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
	return slices.Contains(All, s)
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
	// Rule is the rule of the order that matched (1-11).
	Rule Rule
	// Because is the type of the condition behind the status ("" when the
	// rule looks at no condition: UNKNOWN, UNREACHABLE, QUARANTINED).
	Because condition.Type
	// Warnings are the health conditions that are False, not fatal and
	// acting, sorted by type: they leave the status as it is and show as
	// warnings (docs/design/status.md). Set whatever the status.
	Warnings []condition.Type
}

// Rule is one rule of the status order (docs/design/requirements.md "operational_status (hub
// side)"), numbered from 1 in the order they are tried.
type Rule int

// The rules, in the order Derive tries them.
const (
	RuleNeverReported     Rule = iota + 1 // UNKNOWN: the device was never reported.
	RuleSiteStale                         // UNREACHABLE: the site is silent for longer than stale_after.
	RuleNotEnrolled                       // ONBOARDING: Enrolled is not True.
	RuleProvisioningBad                   // FAULTED: ProvisioningHealthy is False.
	RuleInMaintenance                     // MAINTENANCE: MaintenanceClear is False.
	RuleQuarantined                       // QUARANTINED: the hub's quarantine is in force.
	RuleInValidation                      // VALIDATING: InValidationPool is True.
	RuleCustomerAllocated                 // IN_SERVICE: CustomerAllocated is True.
	RuleInstanceAllocated                 // ALLOCATED: InstanceAllocated is True.
	RuleCustomerReady                     // AVAILABLE: CustomerReady is True.
	RuleHealthyNotOffered                 // HELD: healthy but not offered to customers.
	// RuleHealthFatal is tried right after RuleProvisioningBad (it is
	// numbered last so that rules 1-11 keep SPEC's numbers): FAULTED, a
	// health condition is False, fatal and acting (docs/design/status.md).
	RuleHealthFatal
)

// ruleText says what each rule tests, indexed by Rule.
var ruleText = [...]string{
	RuleNeverReported:     "never reported by its site",
	RuleSiteStale:         "site silent for longer than stale_after",
	RuleNotEnrolled:       "Enrolled is not True",
	RuleProvisioningBad:   "ProvisioningHealthy is False",
	RuleInMaintenance:     "MaintenanceClear is False",
	RuleQuarantined:       "the hub's quarantine is in force",
	RuleInValidation:      "InValidationPool is True",
	RuleCustomerAllocated: "CustomerAllocated is True",
	RuleInstanceAllocated: "InstanceAllocated is True",
	RuleCustomerReady:     "CustomerReady is True",
	RuleHealthyNotOffered: "healthy but not offered to customers",
	RuleHealthFatal:       "a fatal health check reports unhealthy",
}

// Valid reports whether r is one of the twelve rules.
func (r Rule) Valid() bool { return r >= RuleNeverReported && r <= RuleHealthFatal }

// Status is the status rule r yields ("" for an invalid rule).
func (r Rule) Status() Status {
	switch {
	case !r.Valid():
		return ""
	case r == RuleHealthFatal:
		return Faulted
	}
	return All[r-1]
}

// String renders r as "<n>. <STATUS>: <what it tests>", for example
// "4. FAULTED: ProvisioningHealthy is False"; RuleHealthFatal, tried
// between rules 4 and 5, is "4b. FAULTED: ...".
func (r Rule) String() string {
	if !r.Valid() {
		return fmt.Sprintf("rule(%d)", int(r))
	}
	if r == RuleHealthFatal {
		return fmt.Sprintf("4b. %s: %s", r.Status(), ruleText[r])
	}
	return fmt.Sprintf("%d. %s: %s", int(r), r.Status(), ruleText[r])
}

// Derive returns the operational_status for in. Rules, first match wins:
// UNKNOWN (never reported) · UNREACHABLE (site stale) · ONBOARDING
// (Enrolled≠True) · FAULTED (ProvisioningHealthy=False) · FAULTED (a health
// condition False, fatal and acting: the first by type) · MAINTENANCE
// (MaintenanceClear=False) · QUARANTINED (hub quarantine in force) ·
// VALIDATING (InValidationPool=True) · IN_SERVICE (CustomerAllocated=True) ·
// ALLOCATED (InstanceAllocated=True) · AVAILABLE (CustomerReady=True) · HELD.
// The result names the rule that matched (Rule) and the condition it looked
// at (Because), which is what GetDevice's explanation is built from.
func Derive(in Input) Result {
	r := derive(in)
	r.Warnings = warnings(in.Conditions)
	return r
}

// healthFault returns the first (by type) health condition of conds that
// makes a device FAULTED.
func healthFault(conds map[condition.Type]condition.Condition) (condition.Condition, bool) {
	var found condition.Condition
	ok := false
	for t, c := range conds {
		if c.Fault() && (!ok || t < found.Type) {
			found, ok = c, true
		}
	}
	return found, ok
}

// warnings lists the health conditions of conds that are warnings, by type.
func warnings(conds map[condition.Type]condition.Condition) []condition.Type {
	var out []condition.Type
	for t, c := range conds {
		if c.Warning() {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// HealthReason is the reason of a status a health condition c set:
// "<type>=False: <reason> (<codes>)", for example
// "health.GPU/GpuXidError=False: FatalError (79)"; without codes, no
// parenthesis.
func HealthReason(c condition.Condition) string {
	r := fmt.Sprintf("%s=%s: %s", c.Type, c.Status, c.Reason)
	if c.Health != nil && len(c.Health.ErrorCodes) > 0 {
		r += " (" + strings.Join(c.Health.ErrorCodes, ",") + ")"
	}
	return r
}

func derive(in Input) Result {
	get := func(t condition.Type) condition.Condition {
		if c, ok := in.Conditions[t]; ok {
			return c
		}
		return condition.Condition{Type: t, Status: condition.Unknown, Reason: "NotReported"}
	}
	why := func(c condition.Condition) string { return fmt.Sprintf("%s=%s: %s", c.Type, c.Status, c.Reason) }

	if !in.Reported {
		return Result{Unknown, "NeverReported", RuleNeverReported, "", nil}
	}
	if in.SiteStale {
		return Result{Unreachable, "SiteStale", RuleSiteStale, "", nil}
	}
	if c := get(condition.Enrolled); c.Status != condition.True {
		return Result{Onboarding, why(c), RuleNotEnrolled, c.Type, nil}
	}
	if c := get(condition.ProvisioningHealthy); c.Status == condition.False {
		return Result{Faulted, why(c), RuleProvisioningBad, c.Type, nil}
	}
	if c, ok := healthFault(in.Conditions); ok {
		return Result{Faulted, HealthReason(c), RuleHealthFatal, c.Type, nil}
	}
	if c := get(condition.MaintenanceClear); c.Status == condition.False {
		return Result{Maintenance, why(c), RuleInMaintenance, c.Type, nil}
	}
	if in.Quarantined {
		return Result{Quarantined, "QuarantinedByHub", RuleQuarantined, "", nil}
	}
	if c := get(condition.InValidationPool); c.Status == condition.True {
		return Result{Validating, why(c), RuleInValidation, c.Type, nil}
	}
	if c := get(condition.CustomerAllocated); c.Status == condition.True {
		return Result{InService, why(c), RuleCustomerAllocated, c.Type, nil}
	}
	if c := get(condition.InstanceAllocated); c.Status == condition.True {
		return Result{Allocated, why(c), RuleInstanceAllocated, c.Type, nil}
	}
	if c := get(condition.CustomerReady); c.Status == condition.True {
		return Result{Available, why(c), RuleCustomerReady, c.Type, nil}
	}
	return Result{Held, "HealthyNotOffered: " + why(get(condition.CustomerReady)), RuleHealthyNotOffered, condition.CustomerReady, nil}
}

// RuleFor returns the rule that yields s (0 for a status that is not one of All).
func RuleFor(s Status) Rule {
	for i, k := range All {
		if k == s {
			return Rule(i + 1)
		}
	}
	return 0
}

// Condition is the condition type rule r looks at ("" for UNKNOWN,
// UNREACHABLE and QUARANTINED, which look at none): the one whose reason
// and message explain a device that has r's status.
func (r Rule) Condition() condition.Type {
	switch r {
	case RuleNotEnrolled:
		return condition.Enrolled
	case RuleProvisioningBad:
		return condition.ProvisioningHealthy
	case RuleInMaintenance:
		return condition.MaintenanceClear
	case RuleInValidation:
		return condition.InValidationPool
	case RuleCustomerAllocated:
		return condition.CustomerAllocated
	case RuleInstanceAllocated:
		return condition.InstanceAllocated
	case RuleCustomerReady, RuleHealthyNotOffered:
		return condition.CustomerReady
	}
	return ""
}
