package operations

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
)

// The preconditions of each kind, checked against the hub's stored view of
// a device before an operation is accepted (docs/reference/operations.md,
// "Preconditions"). The satellite checks again against Ironic itself: this
// table refuses early what the hub already knows will fail.

// InstanceRule says what a kind needs of the node's instance.
type InstanceRule int

const (
	// InstanceAny: the kind does not look at the instance.
	InstanceAny InstanceRule = iota
	// InstanceNone: the node must have no instance_uuid, no Ironic
	// allocation and no Nova server on it (InstanceAllocated not True, no
	// instance mismatch).
	InstanceNone
)

// Precondition is what one kind needs of the hub's view of a device.
type Precondition struct {
	// From maps each provision state the kind is accepted from to the
	// Ironic verbs that take the node to the kind's goal (Ironic's state
	// machine, ironic/common/states.py; Ironic API reference "Node
	// states"); "" for the goal state itself (the reconcile confirms it).
	// A state not listed is refused: the state machine has no way from it.
	From map[string]string
	// Maintenance, when not empty, refuses a node in maintenance and says
	// why (Ironic's or Nova's rule).
	Maintenance string
	// Instance is the kind's instance rule.
	Instance InstanceRule
	// PowerError, when set, refuses a node whose power_state is "error":
	// Nova's Ironic driver offers no resources for it.
	PowerError bool
	// OffersToCustomers: the kind would offer the device to customers, so a
	// quarantined device is refused unless forced (recorded).
	OffersToCustomers bool
	// InterruptsCustomer: the kind would interrupt a customer's instance
	// (power off, reboot, reprovision), so a device with CustomerAllocated
	// True is refused (CUSTOMER_INSTANCE) unless forced (recorded).
	InterruptsCustomer bool
	// AnyState: the kind does not depend on the provision state (From is
	// not consulted); Ironic sets and clears maintenance in every state.
	AnyState bool
}

// Ironic's reason a manual clean or a deploy is refused in maintenance
// (NodeInMaintenance, ironic/conductor/manager.py do_node_clean and
// ironic/conductor/deployments.py validate_node).
const (
	maintIronicClean  = "Ironic refuses manual cleaning in maintenance (NodeInMaintenance)"
	maintIronicDeploy = "Ironic refuses to deploy a node in maintenance (NodeInMaintenance)"
	maintNova         = "Nova's Ironic driver offers no resources for a node in maintenance, so the server would fail with \"No valid host\""
)

// Preconditions is the precondition table, one row per kind (ENROL has
// none: its node may not exist yet; see checkEnrolTarget).
var Preconditions = map[store.OperationKind]Precondition{
	"INSPECT": {From: map[string]string{
		"manageable":     "inspect",
		"inspect failed": "inspect",
		"clean failed":   "manage, inspect",
	}},
	"CLEAN": {From: map[string]string{
		"manageable":     "clean",
		"clean failed":   "manage, clean",
		"inspect failed": "manage, clean",
	}, Maintenance: maintIronicClean},
	"PROVIDE": {From: map[string]string{
		"manageable":     "provide",
		"available":      "",
		"clean failed":   "manage, provide",
		"inspect failed": "manage, provide",
	}, OffersToCustomers: true},
	"DEPLOY": {From: map[string]string{
		"available": "deploy",
		"active":    "",
	}, Maintenance: maintIronicDeploy, Instance: InstanceNone, OffersToCustomers: true},
	"UNDEPLOY": {From: map[string]string{
		"active":        "deleted",
		"deploy failed": "deleted",
		"available":     "",
	}, Instance: InstanceNone},
	"NOVA_CREATE": {From: map[string]string{
		"available": "Nova server create (Nova deploys the node)",
	}, Maintenance: maintNova, Instance: InstanceNone, PowerError: true, OffersToCustomers: true},
	"NOVA_DELETE": {From: map[string]string{
		"active":    "Nova server delete (Nova tears the node down)",
		"available": "",
	}},
	"POWER_ON":          {From: powerStates("power on")},
	"POWER_OFF":         {From: powerStates("power off"), InterruptsCustomer: true},
	"REBOOT":            {From: powerStates("power off, power on"), InterruptsCustomer: true},
	"SET_MAINTENANCE":   {AnyState: true},
	"CLEAR_MAINTENANCE": {AnyState: true},
	// Undeploy where deployed ("deleted": Ironic tears down and cleans on
	// its way to available), else manage (when not manageable) and provide
	// (Ironic's automated cleaning); a manual clean with params.clean_steps
	// goes between manage and provide (the satellite's phases). A node
	// carrying an instance is refused: Ironic's tear-down would leave its
	// Nova server without a node (NOVA_DELETE first).
	"REPROVISION": {From: map[string]string{
		"active":         "deleted",
		"deploy failed":  "deleted",
		"error":          "deleted",
		"available":      "manage, provide",
		"manageable":     "provide",
		"clean failed":   "manage, provide",
		"inspect failed": "manage, provide",
		"adopt failed":   "manage, provide",
	}, Instance: InstanceNone, InterruptsCustomer: true},
	// Ironic's "adopt" verb: manageable (or adopt failed) → adopting →
	// active without deploying (ironic/conductor/manager.py
	// do_provisioning_action); Ironic does not check maintenance for it.
	"ADOPT": {From: map[string]string{
		"manageable":   "adopt",
		"adopt failed": "adopt",
		"active":       "",
	}, Instance: InstanceNone},
	// A read of the node's inventory and BIOS settings: no Ironic write.
	"HARDWARE_REREAD": {AnyState: true},
	// A validation run inspects and cleans (manual cleaning: refused in
	// maintenance) and, passing, offers the device.
	"VALIDATE": {From: map[string]string{
		"manageable":     "inspect, clean",
		"inspect failed": "inspect, clean",
		"clean failed":   "manage, inspect, clean",
	}, Maintenance: maintIronicClean, OffersToCustomers: true},
}

// powerStates are the stable provision states in which Ironic's conductor
// takes a power change (in a transitional state a conductor holds the
// node, and in a "* wait" state a power change would break the running
// deploy, clean or inspection): each mapped to verbs.
func powerStates(verbs string) map[string]string {
	m := map[string]string{}
	for _, s := range []string{"enroll", "manageable", "available", "active", "deploy failed",
		"clean failed", "inspect failed", "error", "rescue", "rescue failed", "adopt failed"} {
		m[s] = verbs
	}
	return m
}

// fromStates lists the states p accepts, sorted, for messages.
func (p Precondition) fromStates() string {
	ss := make([]string, 0, len(p.From))
	for s := range p.From {
		ss = append(ss, s)
	}
	slices.Sort(ss)
	return strings.Join(ss, ", ")
}

// deviceView is what the hub knows of a device when an operation is asked
// for: its last observation, corrected by an operation that ended after it.
type deviceView struct {
	d store.Device
	// ps is the provision state: the observation's, or the one an
	// operation that ended after the observation last saw.
	ps string
	// instanceCleared: an operation that ended after the observation
	// removed the node's instance (NOVA_DELETE or UNDEPLOY succeeded).
	instanceCleared bool
	// forceClear: the request asks the satellite to clear a stale
	// instance_uuid (one Nova does not know) first (NOVA_CREATE's
	// force_clear), so such an instance_uuid is not a refusal.
	forceClear bool
}

// checkPreconditions refuses (FailedPrecondition, naming what the hub saw
// and what to do) a device whose view does not meet kind's row of
// Preconditions. The quarantine guard is checked by the caller, which
// knows force. A state never reported passes (the satellite decides).
func checkPreconditions(field string, kind store.OperationKind, v deviceView) error {
	p, ok := Preconditions[kind]
	if !ok {
		return nil
	}
	id, f := v.d.ID, v.d.Facts
	if v.ps != "" && !p.AnyState {
		if _, ok := p.From[v.ps]; !ok {
			return precondition(ReasonProvisionState, fmt.Sprintf("%s: device %s is %q; %s starts from %s (docs/reference/operations.md, Preconditions)",
				field, id, v.ps, kind, p.fromStates()))
		}
	}
	if p.Maintenance != "" && f.Maintenance {
		return precondition(ReasonMaintenance, fmt.Sprintf("%s: device %s is in maintenance%s; %s: take it out of maintenance first (openstack baremetal node maintenance unset %s)",
			field, id, faultSuffix(f.Fault), p.Maintenance, id))
	}
	if p.PowerError && f.PowerState == "error" {
		return precondition(ReasonPowerState, fmt.Sprintf("%s: device %s has power_state \"error\" (Ironic cannot reach its BMC); %s needs a node Ironic can power: fix the BMC first",
			field, id, kind))
	}
	if p.Instance == InstanceNone && !v.instanceCleared {
		if msg := instanceHeld(v.d, kind, v.forceClear); msg != "" {
			return precondition(ReasonInstancePresent, fmt.Sprintf("%s: device %s %s", field, id, msg))
		}
	}
	return nil
}

// faultSuffix is " (fault: F)" for a node whose maintenance has a fault.
func faultSuffix(fault string) string {
	if fault == "" {
		return ""
	}
	return " (fault: " + fault + ")"
}

// reasonInstanceRecordMismatch is the satellite's InstanceAllocated reason
// when Ironic holds the node for an instance Nova does not know
// (docs/reference/conditions.md).
const reasonInstanceRecordMismatch = "InstanceRecordMismatch"

// customerInstance describes d's customer instance ("" when
// CustomerAllocated is not True), for the CUSTOMER_INSTANCE refusal.
func customerInstance(d store.Device) string {
	for _, c := range d.Conditions {
		if c.Type == condition.CustomerAllocated && c.Status == condition.True {
			who := c.Reason
			if c.Message != "" {
				who += ": " + c.Message
			}
			if d.Facts.InstanceUUID != "" {
				return fmt.Sprintf("carries customer instance %s (CustomerAllocated=True, %s)", d.Facts.InstanceUUID, who)
			}
			return fmt.Sprintf("is allocated to a customer (CustomerAllocated=True, %s)", who)
		}
	}
	return ""
}

// instanceHeld says how d is held by an instance, with what to do; "" when
// it is free: no instance_uuid, no mismatch the satellite's orphan sweep
// found, InstanceAllocated not True. With forceClear (NOVA_CREATE only) a
// stale instance_uuid Nova does not know is not a hold: the satellite
// clears it first.
func instanceHeld(d store.Device, kind store.OperationKind, forceClear bool) string {
	f := d.Facts
	stale := ""
	for _, m := range f.InstanceMismatches {
		switch {
		case m.Kind == store.MismatchNovaUnknown && m.IronicInstanceUUID != "":
			if forceClear && kind == "NOVA_CREATE" {
				stale = m.IronicInstanceUUID
				continue
			}
			way := ""
			if kind == "NOVA_CREATE" {
				way = " or use --force-clear (params.nova_create.force_clear)"
			}
			return fmt.Sprintf("has instance_uuid %s that Nova does not know (a stale record, seen since %s): clear it first (openstack baremetal node unset --instance-uuid %s)%s",
				m.IronicInstanceUUID, m.FirstSeenTime.UTC().Format("2006-01-02T15:04:05Z"), d.ID, way)
		case m.Kind == store.MismatchNodeUnaware && m.NovaServerID != "":
			return fmt.Sprintf("runs Nova server %s (%s) that Ironic's instance_uuid does not name: delete that server first", m.NovaServerID, m.NovaServerStatus)
		}
	}
	if f.InstanceUUID != "" && !strings.EqualFold(f.InstanceUUID, stale) {
		return fmt.Sprintf("has instance_uuid %s: it is in use; delete that instance first (NOVA_DELETE for a Nova server)", f.InstanceUUID)
	}
	for _, c := range d.Conditions {
		if c.Type == condition.InstanceAllocated && c.Status == condition.True && !(stale != "" && c.Reason == reasonInstanceRecordMismatch) {
			return fmt.Sprintf("is allocated (InstanceAllocated=True, %s: %s): release the allocation first", c.Reason, c.Message)
		}
	}
	return ""
}
