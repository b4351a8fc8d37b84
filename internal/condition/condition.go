// Package condition holds the device-condition vocabulary that the satellite
// and the hub share: the seven condition types of docs/design/requirements.md, their tri-state
// status and the Condition value itself, shaped like Kubernetes
// metav1.Condition (KEP-1623) plus an observed time.
package condition

import (
	"fmt"
	"slices"
	"time"
)

// Type names one of the seven device conditions (docs/design/requirements.md "Device conditions").
type Type string

// The seven condition types, in the fixed order used everywhere they are listed.
const (
	// Enrolled is True once the node has left Ironic's enroll/verifying states.
	Enrolled Type = "Enrolled"
	// ProvisioningHealthy is False when provision_state is a failure state (including "error").
	ProvisioningHealthy Type = "ProvisioningHealthy"
	// MaintenanceClear is False when the node is in maintenance.
	MaintenanceClear Type = "MaintenanceClear"
	// InValidationPool is True when the node matches the site's validation-pool selector.
	InValidationPool Type = "InValidationPool"
	// InstanceAllocated is True when instance_uuid or allocation_uuid is set.
	InstanceAllocated Type = "InstanceAllocated"
	// CustomerAllocated is True when the instance or lessee belongs to a customer project.
	CustomerAllocated Type = "CustomerAllocated"
	// CustomerReady is True when the CUSTOM_CUSTOMER_READY trait gates the node open.
	CustomerReady Type = "CustomerReady"
)

// Types lists all condition types in their fixed order.
var Types = []Type{Enrolled, ProvisioningHealthy, MaintenanceClear, InValidationPool, InstanceAllocated, CustomerAllocated, CustomerReady}

// Valid reports whether t is one of the seven condition types.
func (t Type) Valid() bool {
	return slices.Contains(Types, t)
}

// Site condition types: conditions about a whole site rather than a device,
// sent by the satellite in the link's SiteConditions message.
const (
	// OpenStackAuthenticated is True while Keystone accepts the site's
	// application credential; False/AuthenticationFailed once a
	// (re-)authentication got 401 (expired, deleted or rotated credential,
	// access rules rejected), until one succeeds again; False/ConfigInvalid
	// when clouds.yaml cannot authenticate at all (no request sent);
	// Unknown/KeystoneUnreachable when Keystone does not answer.
	OpenStackAuthenticated Type = "OpenStackAuthenticated"
	// OrphanDetection is True when the sweep can compare Nova with Ironic;
	// False/Standalone on a site without Nova, False/HypervisorFieldHidden
	// when the credential cannot see Nova's hypervisor field, Unknown when
	// Nova could not be read.
	OrphanDetection Type = "OrphanDetection"
	// OpenStackTLSVerified is True when the satellite verifies OpenStack's
	// TLS certificates (clouds.yaml without verify: false);
	// False/VerifyDisabled when clouds.yaml says verify: false and the
	// satellite was started with --openstack-insecure-skip-verify (without
	// the flag it refuses the file); Unknown/NotChecked until clouds.yaml
	// has been read.
	OpenStackTLSVerified Type = "OpenStackTLSVerified"
	// InventoryPolled is True/PollSucceeded after every complete Ironic
	// listing (its ObservedTime is the poll's time: the satellite sends the
	// set after each poll, after that poll's deltas, so the hub can tell a
	// fresh poll from an old one); False/PollFailed with the error when the
	// last poll failed. The hub's policy acts only on a site whose last
	// poll succeeded after its link came up (docs/reference/policy.md
	// "Fresh evidence").
	InventoryPolled Type = "InventoryPolled"
	// ListingConsistent is True/NoHazards when the last complete listing
	// had none of Ironic's listing hazards; False with a reason naming the
	// hazard kind (FieldsUnsent: answers lacked fields that were asked for;
	// DuplicateNodes: a node listed twice) when it had, the poll then being
	// degraded (docs/reference/conditions.md "Site conditions").
	ListingConsistent Type = "ListingConsistent"
	// StateFileWritten is True/Written once the satellite's state file
	// (--state-file: applied generations, orphan sweep memory) was last
	// written; False/WriteFailed with the error when the last write failed
	// (full disk, read-only or missing directory): the satellite keeps
	// serving, but a restart would forget what was not written. The next
	// write (a command, a resync, a sweep) writes the whole state again.
	// Not sent by a satellite without a state file.
	StateFileWritten Type = "StateFileWritten"
)

// Reasons of InventoryPolled and ListingConsistent.
const (
	ReasonPollSucceeded  = "PollSucceeded"
	ReasonPollFailed     = "PollFailed"
	ReasonNoHazards      = "NoHazards"
	ReasonFieldsUnsent   = "FieldsUnsent"
	ReasonDuplicateNodes = "DuplicateNodes"
)

// SiteTypes lists the site condition types in their fixed order.
var SiteTypes = []Type{OpenStackAuthenticated, OrphanDetection, OpenStackTLSVerified, InventoryPolled, ListingConsistent, StateFileWritten}

// ValidSite reports whether t is one of the site condition types.
func (t Type) ValidSite() bool {
	return slices.Contains(SiteTypes, t)
}

// Status is a condition's tri-state value. True is always the good/yes direction.
type Status string

// Condition statuses, spelled as in Kubernetes.
const (
	True    Status = "True"
	False   Status = "False"
	Unknown Status = "Unknown"
)

// Valid reports whether s is True, False or Unknown.
func (s Status) Valid() bool { return s == True || s == False || s == Unknown }

// MaxMessageBytes is the longest message kept; longer ones are truncated
// (on a UTF-8 boundary) with a trailing "…".
const MaxMessageBytes = 1024

// MaxReasonBytes is the longest reason accepted.
const MaxReasonBytes = 128

// ValidReason reports whether r is one CamelCase word as docs/design/requirements.md requires
// of a reason: an ASCII letter followed by ASCII letters and digits, at most
// MaxReasonBytes. It does not insist on an upper-case first letter.
func ValidReason(r string) bool {
	if r == "" || len(r) > MaxReasonBytes {
		return false
	}
	for i := 0; i < len(r); i++ {
		b := r[i]
		switch {
		case 'A' <= b && b <= 'Z', 'a' <= b && b <= 'z':
		case '0' <= b && b <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Condition is one observation about a device.
type Condition struct {
	// Type is the condition type.
	Type Type
	// Status is True, False or Unknown.
	Status Status
	// Reason is one CamelCase word naming the cause; never empty.
	Reason string
	// Message is human-readable detail; may be empty; at most MaxMessageBytes.
	Message string
	// LastTransitionTime is when Status last changed (UTC).
	LastTransitionTime time.Time
	// ObservedTime is when the satellite last observed the condition (UTC).
	ObservedTime time.Time
	// ObservedGeneration is, on CustomerReady, the command generation last applied; 0 elsewhere.
	ObservedGeneration int64
	// Health is set on health conditions (Type.IsHealth) only: the last
	// applied event's details. On them ObservedTime is the event's
	// generated time.
	Health *Health
}

// SameObservation reports whether c and o say the same thing (status, reason,
// message, observed generation and, on health conditions, the health
// detail but its times and event id); times are ignored. A delta is sent
// only when this is false.
func (c Condition) SameObservation(o Condition) bool {
	return c.Type == o.Type && c.Status == o.Status && c.Reason == o.Reason &&
		c.Message == o.Message && c.ObservedGeneration == o.ObservedGeneration && sameHealth(c.Health, o.Health)
}

// Validate checks a condition received from the wire. It returns an error
// naming the first bad field: unknown type, bad status, empty, overlong or
// non-CamelCase reason, a message over MaxMessageBytes, or a zero observed
// time.
func (c Condition) Validate() error {
	if !c.Type.Valid() {
		return fmt.Errorf("condition type %q is not one of %v", c.Type, Types)
	}
	return c.validateFields()
}

// ValidateSite checks a site condition received from the wire, like
// Validate but against SiteTypes.
func (c Condition) ValidateSite() error {
	if !c.Type.ValidSite() {
		return fmt.Errorf("site condition type %q is not one of %v", c.Type, SiteTypes)
	}
	return c.validateFields()
}

func (c Condition) validateFields() error {
	switch {
	case !c.Status.Valid():
		return fmt.Errorf("condition %s: status %q is not True, False or Unknown", c.Type, c.Status)
	case c.Reason == "":
		return fmt.Errorf("condition %s: reason is empty", c.Type)
	case len(c.Reason) > MaxReasonBytes:
		return fmt.Errorf("condition %s: reason is %d bytes, limit %d", c.Type, len(c.Reason), MaxReasonBytes)
	case !ValidReason(c.Reason):
		return fmt.Errorf("condition %s: reason %q is not one CamelCase word (ASCII letter, then letters and digits)", c.Type, c.Reason)
	case len(c.Message) > MaxMessageBytes:
		return fmt.Errorf("condition %s: message is %d bytes, limit %d", c.Type, len(c.Message), MaxMessageBytes)
	case c.ObservedTime.IsZero():
		return fmt.Errorf("condition %s: observed time is missing", c.Type)
	}
	return nil
}

// Truncate shortens s to at most MaxMessageBytes on a UTF-8 boundary, adding
// "…" when it cut something.
func Truncate(s string) string {
	if len(s) <= MaxMessageBytes {
		return s
	}
	cut := MaxMessageBytes - len("…")
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
