package conditions

import (
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/textcheck"
	"github.com/ironlink/ironlink/satellite/ironic"
)

// ReadyTrait is the gate trait CustomerReady looks for.
const ReadyTrait = "CUSTOM_CUSTOMER_READY"

// CallbackTimeout is Ironic's default deploy/clean/inspect callback
// timeout (1800 s, docs/design/openstack.md §1.2): a "* wait" state older than this by
// provision_updated_at is reported as TransitionStalled.
const CallbackTimeout = 30 * time.Minute

// Reasons (docs/design/openstack.md §2.3). Shared by several conditions where noted.
const (
	// Any condition.
	ReasonFieldUnavailable     = "FieldUnavailable"     // the microversion or response lacks a needed field
	ReasonIronicUnreachable    = "IronicUnreachable"    // for callers marking staleness (§2.2)
	ReasonAuthenticationFailed = "AuthenticationFailed" // for callers marking staleness (§2.2)

	// Enrolled.
	ReasonEnrolled    = "Enrolled"
	ReasonNotVerified = "NotVerified"
	ReasonVerifying   = "Verifying"

	// ProvisioningHealthy, True.
	ReasonAvailable     = "Available"
	ReasonActive        = "Active"
	ReasonManageable    = "Manageable"
	ReasonEnroll        = "Enroll"
	ReasonRescue        = "Rescue"
	ReasonTransitioning = "Transitioning"
	ReasonHeld          = "Held"
	// ProvisioningHealthy, False.
	ReasonDeployFailed      = "DeployFailed"
	ReasonCleanFailed       = "CleanFailed"
	ReasonInspectFailed     = "InspectFailed"
	ReasonRescueFailed      = "RescueFailed"
	ReasonUnrescueFailed    = "UnrescueFailed"
	ReasonAdoptFailed       = "AdoptFailed"
	ReasonServiceFailed     = "ServiceFailed"
	ReasonTeardownFailed    = "TeardownFailed"
	ReasonTransitionStalled = "TransitionStalled"
	// ProvisioningHealthy, Unknown.
	ReasonUnrecognizedState = "UnrecognizedState"

	// MaintenanceClear.
	ReasonNoMaintenance      = "NoMaintenance"
	ReasonPowerFailure       = "PowerFailure"
	ReasonCleanFailure       = "CleanFailure"
	ReasonRescueAbortFailure = "RescueAbortFailure"
	ReasonServiceFailure     = "ServiceFailure"
	ReasonManual             = "Manual"
	ReasonUnspecified        = "Unspecified"

	// InValidationPool.
	ReasonMatchesSelector = "MatchesSelector"
	ReasonNotInPool       = "NotInPool"

	// InstanceAllocated.
	ReasonInstanceAssociated     = "InstanceAssociated"
	ReasonNovaInstance           = "NovaInstance"
	ReasonIronicAllocation       = "IronicAllocation"
	ReasonNoInstance             = "NoInstance"
	ReasonInstanceRecordMismatch = "InstanceRecordMismatch"

	// CustomerAllocated.
	ReasonCustomerProject = "CustomerProject"
	ReasonNotAllocated    = "NotAllocated"
	ReasonInternalProject = "InternalProject"
	ReasonProjectUnknown  = "ProjectUnknown"

	// CustomerReady.
	ReasonReadyTraitPresent       = "ReadyTraitPresent"
	ReasonQuarantined             = "Quarantined"
	ReasonTraitAbsent             = "TraitAbsent"
	ReasonResourceProviderMissing = "ResourceProviderMissing"
	ReasonTraitNotDefined         = "TraitNotDefined"
	ReasonPlacementUnreachable    = "PlacementUnreachable"
)

// Config is the site's mapping configuration.
type Config struct {
	// ValidationPool selects the nodes of the validation pool; zero = none.
	ValidationPool Selector
	// InternalProjects are project ids that are not customers.
	InternalProjects []string
	// Standalone: no Nova/Placement; CustomerReady reads the node's traits.
	Standalone bool
}

// PlacementView is what the caller read from Placement for the node's
// resource provider (ignored on standalone sites).
type PlacementView struct {
	// Read: Placement answered; false gives CustomerReady
	// Unknown/PlacementUnreachable.
	Read bool
	// ProviderExists: a provider with the node's UUID exists.
	ProviderExists bool
	// HasTrait: the provider carries CUSTOM_CUSTOMER_READY.
	HasTrait bool
	// TraitDefined: Placement knows CUSTOM_CUSTOMER_READY at all.
	TraitDefined bool
}

// Observation is everything Map needs about one node at one time.
type Observation struct {
	// Node is the node as listed by Ironic.
	Node ironic.Node
	// Now is the observation time; it becomes ObservedTime (UTC).
	Now time.Time
	// Placement is the node's provider as read from Placement.
	Placement PlacementView
	// Quarantined is the hub's desired state known to the satellite: true =
	// quarantined; false with AppliedGeneration > 0 = released;
	// AppliedGeneration 0 = never touched.
	Quarantined bool
	// AppliedGeneration is the hub command generation last applied for the
	// device (CustomerReady.ObservedGeneration); 0 = none.
	AppliedGeneration int64
	// InstanceProject is the project of the node's Nova instance when the
	// caller knows it (from Nova); "" = unknown.
	InstanceProject string
	// InstanceMismatch, when not "", is the orphan sweep's description of a
	// Nova↔Ironic disagreement about the node's instance
	// (InstanceAllocated reason InstanceRecordMismatch: True while Ironic
	// holds the node, Unknown when only Nova does; docs/design/openstack.md §4).
	InstanceMismatch string
}

// failureReasons maps Ironic failure states (plus "error") to reasons.
var failureReasons = map[string]string{
	"deploy failed":   ReasonDeployFailed,
	"clean failed":    ReasonCleanFailed,
	"inspect failed":  ReasonInspectFailed,
	"rescue failed":   ReasonRescueFailed,
	"unrescue failed": ReasonUnrescueFailed,
	"adopt failed":    ReasonAdoptFailed,
	"service failed":  ReasonServiceFailed,
	"error":           ReasonTeardownFailed,
}

// stableReasons maps Ironic's stable, healthy states to reasons.
var stableReasons = map[string]string{
	"available":  ReasonAvailable,
	"active":     ReasonActive,
	"manageable": ReasonManageable,
	"enroll":     ReasonEnroll,
	"rescue":     ReasonRescue,
}

// transientStates are the known transient states (ironic/common/states.py,
// up to service* of 1.87); the value says whether it is a "* wait" state
// subject to CallbackTimeout.
var transientStates = map[string]bool{
	"verifying":       false,
	"inspecting":      false,
	"inspect wait":    true,
	"cleaning":        false,
	"clean wait":      true,
	"deploying":       false,
	"wait call-back":  true,
	"deleting":        false,
	"deleted":         false,
	"deploy complete": false,
	"adopting":        false,
	"rescuing":        false,
	"rescue wait":     true,
	"unrescuing":      false,
	"servicing":       false,
	"service wait":    true,
	"building":        false,
}

// IsTransient reports whether Ironic's provision state ps is one a node
// passes through (deploying, wait call-back, cleaning, deleting, ...), in
// which Nova and Ironic legitimately disagree about an instance for a while
// (docs/design/openstack.md §4 exclusions). Unknown states count as transient.
func IsTransient(ps string) bool {
	if _, ok := transientStates[ps]; ok {
		return true
	}
	return failureReasons[ps] == "" && stableReasons[ps] == "" && !holdStates[ps]
}

// holdStates are the "* hold" states (steps paused by request).
var holdStates = map[string]bool{"clean hold": true, "deploy hold": true, "service hold": true}

// faultReasons maps Ironic's fault values to reasons.
var faultReasons = map[string]string{
	"power failure":        ReasonPowerFailure,
	"clean failure":        ReasonCleanFailure,
	"rescue abort failure": ReasonRescueAbortFailure,
	"service failure":      ReasonServiceFailure,
}

// Map returns the seven conditions for obs, in condition.Types order.
// ObservedTime is obs.Now (UTC). LastTransitionTime is a proposal for the
// Tracker: provision_updated_at for Enrolled and ProvisioningHealthy when
// the provision state drives them (the stall time for TransitionStalled),
// obs.Now otherwise. ObservedGeneration is obs.AppliedGeneration on CustomerReady,
// 0 elsewhere.
func Map(cfg Config, obs Observation) []condition.Condition {
	return MapInto(make([]condition.Condition, 0, len(condition.Types)), cfg, obs)
}

// MapInto is Map appending to dst[:0] and returning it: a caller that
// evaluates every node of a listing reuses one buffer (it must not keep
// the result past its next call) instead of allocating seven conditions
// per node per poll.
func MapInto(dst []condition.Condition, cfg Config, obs Observation) []condition.Condition {
	now := obs.Now.UTC()
	if obs.Now.IsZero() {
		now = time.Now().UTC()
	}
	n := &obs.Node
	provTime := now
	if pua := n.ProvisionUpdatedAt; !pua.IsZero() && !pua.After(now) {
		provTime = pua.UTC()
	}
	out := dst[:0]
	mk := func(t condition.Type, s condition.Status, reason, msg string, ltt time.Time) {
		out = append(out, condition.Condition{
			Type: t, Status: s, Reason: reason, Message: textcheck.SanitizeText(msg, condition.MaxMessageBytes),
			LastTransitionTime: ltt, ObservedTime: now,
		})
	}

	mapEnrolled(cfg, n, mk, now, provTime)
	mapProvisioning(cfg, n, mk, now, provTime)
	mapMaintenance(cfg, n, mk, now)
	mapValidationPool(cfg, n, mk, now)
	mapInstance(cfg, obs, mk, now)

	// CustomerAllocated.
	if msg := unsentMessage(cfg, *n, condition.CustomerAllocated); msg != "" {
		mk(condition.CustomerAllocated, condition.Unknown, ReasonFieldUnavailable, msg, now)
	} else {
		mapCustomer(cfg, obs, mk, now)
	}

	// CustomerReady.
	if msg := unsentMessage(cfg, *n, condition.CustomerReady); msg != "" {
		mk(condition.CustomerReady, condition.Unknown, ReasonFieldUnavailable, msg, now)
	} else {
		mapReady(cfg, obs, mk, now)
	}
	for i := range out {
		if out[i].Type == condition.CustomerReady {
			out[i].ObservedGeneration = obs.AppliedGeneration
		}
	}
	return out
}

// UnsentNeeded returns the first field, in nodeFields order, that
// condition t of node n needs and that Ironic's answer left out
// (ironic.Node.Unsent), or "" when t can be computed from what was sent.
// What a condition needs can depend on the fields that were sent: Enrolled
// needs last_error only in enroll, MaintenanceClear needs fault and
// maintenance_reason only under maintenance, and so on. Map reports such a
// condition Unknown/FieldUnavailable; the agent keeps the last known value
// instead when there is one.
func UnsentNeeded(cfg Config, t condition.Type, n ironic.Node) string {
	if len(n.Unsent) == 0 {
		return ""
	}
	var need []string
	ps := n.ProvisionState
	switch t {
	case condition.Enrolled:
		need = []string{"provision_state"}
		if ps == "enroll" {
			need = append(need, "last_error")
		}
	case condition.ProvisioningHealthy:
		need = []string{"provision_state"}
		switch wait, transient := transientStates[ps]; {
		case failureReasons[ps] != "":
			need = append(need, "last_error")
		case holdStates[ps]:
			need = append(need, "target_provision_state")
		case transient && wait:
			need = append(need, "target_provision_state", "provision_updated_at")
		case transient:
			need = append(need, "target_provision_state")
		}
	case condition.MaintenanceClear:
		need = []string{"maintenance"}
		if n.Maintenance {
			need = append(need, "fault", "maintenance_reason")
		}
	case condition.InValidationPool:
		// Map asks Selector.Match, which already tells a definite
		// mismatch of a sent field from a field that is not there.
		s := cfg.ValidationPool
		for _, f := range []struct{ want, field string }{{s.ResourceClass, "resource_class"}, {s.Trait, "traits"},
			{s.Owner, "owner"}, {s.ConductorGroup, "conductor_group"}} {
			if f.want != "" {
				need = append(need, f.field)
			}
		}
	case condition.InstanceAllocated:
		need = []string{"instance_uuid", "allocation_uuid"}
	case condition.CustomerAllocated:
		need = []string{"instance_uuid", "allocation_uuid", "lessee"}
	case condition.CustomerReady:
		need = []string{"traits"}
	}
	for _, f := range need {
		if n.Unsent[f] {
			return f
		}
	}
	return ""
}

// arrow renders "state → target" ("state" when there is no target).
func arrow(state, target string) string {
	if target == "" || target == state {
		return state
	}
	return state + " → " + target
}

// camel turns an unknown fault string ("bmc lost contact") into a reason
// ("BmcLostContact"); never empty, at most condition.MaxReasonBytes.
func camel(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if r > unicode.MaxASCII || !(unicode.IsLetter(r) || unicode.IsDigit(r)) {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	out := b.String()
	if out == "" || !unicode.IsLetter(rune(out[0])) {
		out = "Fault" + out
	}
	if len(out) > condition.MaxReasonBytes {
		out = out[:condition.MaxReasonBytes]
	}
	return out
}

// Volatile parts of Ironic error texts that would make an unchanged error
// look new each poll.
var (
	reRequestID = regexp.MustCompile(`(?i)\(?\s*request[-_ ]id:?\s*req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\s*\)?|\breq-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	reTimestamp = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?`)
	reAddr      = regexp.MustCompile(`\b0x[0-9a-fA-F]{6,}\b`)
	reSpace     = regexp.MustCompile(`\s+`)
)

// Clean makes an Ironic error text stable and short: it removes request
// ids, replaces timestamps with "<time>" and memory addresses with
// "<addr>", collapses whitespace (tracebacks become one line) and
// truncates to condition.MaxMessageBytes.
func Clean(s string) string {
	if s == "" {
		return ""
	}
	cleanMu.Lock()
	out, ok := cleanCache[s]
	cleanMu.Unlock()
	if ok {
		return out
	}
	out = clean(s)
	if len(s) > cleanCacheMaxLen {
		return out
	}
	cleanMu.Lock()
	if len(cleanCache) >= cleanCacheMax {
		clear(cleanCache) // errors repeat poll after poll; a full reset is cheap
	}
	cleanCache[s] = out
	cleanMu.Unlock()
	return out
}

// cleanCache memoises Clean: the same last_error comes back every poll.
var (
	cleanMu    sync.Mutex
	cleanCache = map[string]string{}
)

// Cache bounds: at most cleanCacheMax entries of at most cleanCacheMaxLen
// bytes each (≈16 MiB worst case).
const (
	cleanCacheMax    = 2048
	cleanCacheMaxLen = 8192
)

func clean(s string) string {
	if strings.Contains(s, "req-") {
		s = reRequestID.ReplaceAllString(s, "")
	}
	s = reTimestamp.ReplaceAllString(s, "<time>")
	if strings.Contains(s, "0x") {
		s = reAddr.ReplaceAllString(s, "<addr>")
	}
	s = strings.TrimSpace(reSpace.ReplaceAllString(s, " "))
	return condition.Truncate(s)
}
