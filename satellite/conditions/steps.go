package conditions

import (
	"fmt"
	"slices"
	"time"

	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/satellite/ironic"
)

// The steps of MapInto, one per condition: each appends its condition
// through mk. now is the observation time; provTime is when the provision
// state last changed (now when Ironic did not say, or says the future).

// unsentMessage says which field condition t needs that Ironic's answer left
// out, or "" (see UnsentNeeded).
func unsentMessage(cfg Config, n ironic.Node, t condition.Type) string {
	if f := UnsentNeeded(cfg, t, n); f != "" {
		return "Ironic's answer did not include " + f + ", which this condition needs"
	}
	return ""
}

// mapEnrolled appends Enrolled: True once Ironic has verified the node
// (it left enroll and verifying).
func mapEnrolled(cfg Config, n *ironic.Node, mk mkFunc, now, provTime time.Time) {
	switch msg := unsentMessage(cfg, *n, condition.Enrolled); {
	case msg != "":
		mk(condition.Enrolled, condition.Unknown, ReasonFieldUnavailable, msg, now)
	case n.Missing["provision_state"]:
		mk(condition.Enrolled, condition.Unknown, ReasonFieldUnavailable, "Ironic did not report provision_state", now)
	case n.ProvisionState == "enroll":
		msg := "node is in enroll: not verified yet"
		if e := Clean(n.LastError); e != "" {
			msg = "verification failed: " + e
		}
		mk(condition.Enrolled, condition.False, ReasonNotVerified, msg, provTime)
	case n.ProvisionState == "verifying":
		mk(condition.Enrolled, condition.False, ReasonVerifying, "verifying the node's management credentials", provTime)
	case n.ProvisionState == "":
		mk(condition.Enrolled, condition.Unknown, ReasonUnrecognizedState, "Ironic reported an empty provision state", now)
	default:
		mk(condition.Enrolled, condition.True, ReasonEnrolled, "", provTime)
	}
}

// mapProvisioning appends ProvisioningHealthy: False in a failure state or
// a wait that outlasted CallbackTimeout, True in stable, held and moving
// states, Unknown for a state this satellite does not know.
func mapProvisioning(cfg Config, n *ironic.Node, mk mkFunc, now, provTime time.Time) {
	ps := n.ProvisionState
	switch msg := unsentMessage(cfg, *n, condition.ProvisioningHealthy); {
	case msg != "":
		mk(condition.ProvisioningHealthy, condition.Unknown, ReasonFieldUnavailable, msg, now)
	case n.Missing["provision_state"]:
		mk(condition.ProvisioningHealthy, condition.Unknown, ReasonFieldUnavailable, "Ironic did not report provision_state", now)
	case failureReasons[ps] != "":
		msg := Clean(n.LastError)
		if msg == "" {
			msg = fmt.Sprintf("provision state %q (Ironic reported no last_error)", ps)
		}
		mk(condition.ProvisioningHealthy, condition.False, failureReasons[ps], msg, provTime)
	case stableReasons[ps] != "":
		mk(condition.ProvisioningHealthy, condition.True, stableReasons[ps], "", provTime)
	case holdStates[ps]:
		mk(condition.ProvisioningHealthy, condition.True, ReasonHeld, arrow(ps, n.TargetProvisionState), provTime)
	default:
		wait, known := transientStates[ps]
		if !known {
			msg := fmt.Sprintf("provision state %q is not known to this satellite", ps)
			mk(condition.ProvisioningHealthy, condition.Unknown, ReasonUnrecognizedState, msg, now)
			break
		}
		pua := n.ProvisionUpdatedAt
		if wait && !pua.IsZero() && now.Sub(pua) > CallbackTimeout {
			msg := fmt.Sprintf("%s since %s, longer than the %s callback timeout", arrow(ps, n.TargetProvisionState),
				pua.UTC().Format(time.RFC3339), CallbackTimeout)
			mk(condition.ProvisioningHealthy, condition.False, ReasonTransitionStalled, msg, pua.Add(CallbackTimeout).UTC())
			break
		}
		mk(condition.ProvisioningHealthy, condition.True, ReasonTransitioning, arrow(ps, n.TargetProvisionState), provTime)
	}
}

// mapMaintenance appends MaintenanceClear: False under maintenance, with
// Ironic's fault (or Manual) as the reason.
func mapMaintenance(cfg Config, n *ironic.Node, mk mkFunc, now time.Time) {
	switch msg := unsentMessage(cfg, *n, condition.MaintenanceClear); {
	case msg != "":
		mk(condition.MaintenanceClear, condition.Unknown, ReasonFieldUnavailable, msg, now)
	case n.Missing["maintenance"]:
		mk(condition.MaintenanceClear, condition.Unknown, ReasonFieldUnavailable, "Ironic did not report maintenance", now)
	case !n.Maintenance:
		mk(condition.MaintenanceClear, condition.True, ReasonNoMaintenance, "", now)
	default:
		reason := ReasonManual
		switch {
		case n.Fault != "":
			reason = faultReasons[n.Fault]
			if reason == "" {
				reason = camel(n.Fault)
			}
		case n.Missing["fault"]:
			reason = ReasonUnspecified
		}
		msg := Clean(n.MaintenanceReason)
		if msg == "" {
			if n.Fault != "" {
				msg = "Ironic set maintenance: " + n.Fault
			} else {
				msg = "maintenance set without a reason"
			}
		}
		mk(condition.MaintenanceClear, condition.False, reason, msg, now)
	}
}

// mapValidationPool appends InValidationPool: whether the site's
// validation-pool selector matches the node.
func mapValidationPool(cfg Config, n *ironic.Node, mk mkFunc, now time.Time) {
	sel := cfg.ValidationPool
	switch match, unavailable := sel.Match(*n); {
	case sel.IsZero():
		mk(condition.InValidationPool, condition.False, ReasonNotInPool, "no validation pool is configured for this site", now)
	case unavailable != "":
		mk(condition.InValidationPool, condition.Unknown, ReasonFieldUnavailable,
			fmt.Sprintf("selector %s needs %s, which Ironic did not report", sel, unavailable), now)
	case match:
		mk(condition.InValidationPool, condition.True, ReasonMatchesSelector, "matches "+sel.String(), now)
	default:
		mk(condition.InValidationPool, condition.False, ReasonNotInPool, "does not match "+sel.String(), now)
	}
}

// mapInstance appends InstanceAllocated: True when Ironic holds the node
// for an instance or an allocation, with the sweep's instance mismatch when
// Nova disagrees.
func mapInstance(cfg Config, obs Observation, mk mkFunc, now time.Time) {
	n := &obs.Node
	switch msg := unsentMessage(cfg, *n, condition.InstanceAllocated); {
	case msg != "":
		mk(condition.InstanceAllocated, condition.Unknown, ReasonFieldUnavailable, msg, now)
	case obs.InstanceMismatch != "" && (n.InstanceUUID != "" || n.AllocationUUID != ""):
		// Ironic holds the node (SPEC: True when instance_uuid is set), but
		// for an instance Nova does not know: the reason says so.
		mk(condition.InstanceAllocated, condition.True, ReasonInstanceRecordMismatch, Clean(obs.InstanceMismatch), now)
	case obs.InstanceMismatch != "":
		// Ironic says free, Nova runs a server on it: cannot tell.
		mk(condition.InstanceAllocated, condition.Unknown, ReasonInstanceRecordMismatch, Clean(obs.InstanceMismatch), now)
	case n.AllocationUUID != "":
		mk(condition.InstanceAllocated, condition.True, ReasonIronicAllocation, "allocation "+n.AllocationUUID, now)
	case n.InstanceUUID != "" && !cfg.Standalone:
		mk(condition.InstanceAllocated, condition.True, ReasonNovaInstance, "instance "+n.InstanceUUID, now)
	case n.InstanceUUID != "":
		mk(condition.InstanceAllocated, condition.True, ReasonInstanceAssociated, "instance_uuid "+n.InstanceUUID, now)
	default:
		mk(condition.InstanceAllocated, condition.False, ReasonNoInstance, "", now)
	}
}

type mkFunc func(t condition.Type, s condition.Status, reason, msg string, ltt time.Time)

func mapCustomer(cfg Config, obs Observation, mk mkFunc, now time.Time) {
	n := &obs.Node
	internal := func(p string) bool { return slices.Contains(cfg.InternalProjects, p) }
	instance := n.InstanceUUID != "" || n.AllocationUUID != ""
	// A customer on either side wins; report the instance's project first.
	for _, c := range []struct{ what, project string }{{"instance project", obs.InstanceProject}, {"lessee", n.Lessee}} {
		if c.project != "" && !internal(c.project) {
			mk(condition.CustomerAllocated, condition.True, ReasonCustomerProject, c.what+" "+c.project, now)
			return
		}
	}
	switch {
	case obs.InstanceProject != "":
		mk(condition.CustomerAllocated, condition.False, ReasonInternalProject, "instance project "+obs.InstanceProject+" is internal", now)
	case instance:
		msg := "the project of instance " + n.InstanceUUID + " is not known"
		if n.InstanceUUID == "" {
			msg = "the project of allocation " + n.AllocationUUID + " is not known"
		}
		if n.Lessee != "" {
			msg += "; lessee " + n.Lessee + " is internal"
		} else if n.Missing["lessee"] {
			msg += "; lessee is not available at this Ironic microversion"
		}
		mk(condition.CustomerAllocated, condition.Unknown, ReasonProjectUnknown, msg, now)
	case n.Lessee != "":
		mk(condition.CustomerAllocated, condition.False, ReasonInternalProject, "lessee "+n.Lessee+" is internal", now)
	default:
		mk(condition.CustomerAllocated, condition.False, ReasonNotAllocated, "", now)
	}
}

func mapReady(cfg Config, obs Observation, mk mkFunc, now time.Time) {
	n := &obs.Node
	t := condition.CustomerReady
	var present bool
	var where, drift string
	if cfg.Standalone {
		if n.Missing["traits"] {
			mk(t, condition.Unknown, ReasonFieldUnavailable, "Ironic did not report the node's traits", now)
			return
		}
		present, where = n.HasTrait(ReadyTrait), "the Ironic node"
	} else {
		p := obs.Placement
		switch {
		case !p.Read:
			mk(t, condition.Unknown, ReasonPlacementUnreachable, "Placement could not be read", now)
			return
		case !p.ProviderExists:
			mk(t, condition.False, ReasonResourceProviderMissing, "no resource provider for this node in Placement (Nova has not registered it)", now)
			return
		case !p.TraitDefined:
			mk(t, condition.False, ReasonTraitNotDefined, ReadyTrait+" is not defined in Placement", now)
			return
		}
		present, where = p.HasTrait, "the resource provider"
		if !n.Missing["traits"] && n.HasTrait(ReadyTrait) != present {
			if present {
				drift = "; the Ironic node lacks it (drift: Nova will remove it from the provider)"
			} else {
				drift = "; the Ironic node has it (drift: Nova will copy it to the provider)"
			}
		}
	}
	gen := obs.AppliedGeneration
	switch {
	case present && obs.Quarantined:
		mk(t, condition.True, ReasonReadyTraitPresent, fmt.Sprintf("%s on %s; quarantine (generation %d) not applied yet%s", ReadyTrait, where, gen, drift), now)
	case present:
		mk(t, condition.True, ReasonReadyTraitPresent, ReadyTrait+" on "+where+drift, now)
	case obs.Quarantined:
		mk(t, condition.False, ReasonQuarantined, fmt.Sprintf("quarantined (generation %d): %s absent from %s%s", gen, ReadyTrait, where, drift), now)
	case gen > 0:
		mk(t, condition.False, ReasonTraitAbsent, fmt.Sprintf("%s absent from %s; release (generation %d) not applied yet%s", ReadyTrait, where, gen, drift), now)
	default:
		mk(t, condition.False, ReasonTraitAbsent, ReadyTrait+" absent from "+where+drift, now)
	}
}
