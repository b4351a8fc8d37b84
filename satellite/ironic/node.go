package ironic

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/ironlink/ironlink/satellite/openstack"
)

// Node is the part of an Ironic node the satellite uses (Ironic api-ref
// "Nodes", "Show Node Details"; OPENSTACK.md §1.1). Absent or null string
// fields are "". Timestamps are UTC.
type Node struct {
	// UUID is the node's UUID, the device key.
	UUID string
	// Name is the node's name (may be "").
	Name string
	// ProvisionState is the current provision state, e.g. "available",
	// "deploy failed" (OPENSTACK.md §1.2); "" if Ironic sent none.
	ProvisionState string
	// TargetProvisionState is where an in-flight transition is heading;
	// "" when the node rests in a stable state.
	TargetProvisionState string
	// PowerState is "power on", "power off" or "" when Ironic cannot tell.
	PowerState string
	// Maintenance is Ironic's maintenance flag.
	Maintenance bool
	// MaintenanceReason is the free-text reason for maintenance.
	MaintenanceReason string
	// Fault says why Ironic itself set maintenance ("power failure",
	// "clean failure", "rescue abort failure", "service failure"); "" when
	// an operator set it or the field is missing (1.42+).
	Fault string
	// LastError is the error text of the last failed operation.
	LastError string
	// InstanceUUID is the consumer (Nova instance or other client) lock.
	InstanceUUID string
	// AllocationUUID is the Ironic allocation that claimed the node (1.52+).
	AllocationUUID string
	// ResourceClass is the Placement resource class the node is sold as.
	ResourceClass string
	// ConductorGroup is the conductor affinity group (1.46+).
	ConductorGroup string
	// Owner is the project owning the hardware (1.50+).
	Owner string
	// Lessee is the project leasing the node (1.65+).
	Lessee string
	// Traits are the node's traits (1.37+), in Ironic's order.
	Traits []string
	// ProvisionUpdatedAt is when ProvisionState last changed (UTC); zero
	// when Ironic sent null or a timestamp that could not be parsed.
	ProvisionUpdatedAt time.Time
	// Missing holds the Ironic field names (e.g. "lessee", "fault") that
	// the negotiated microversion does not have, or that the response
	// lacked; nil when nothing is missing. Conditions that need a missing
	// field are Unknown/FieldUnavailable, never False.
	Missing map[string]bool
}

// HasTrait reports whether the node carries trait t.
func (n Node) HasTrait(t string) bool {
	for _, x := range n.Traits {
		if x == t {
			return true
		}
	}
	return false
}

// field is one node field and the microversion that introduced it
// (Ironic's VERSIONED_FIELDS, ironic/api/controllers/v1/utils.py).
// Optional fields may be dropped from the request when a server rejects
// them (see Client.dropField).
type field struct {
	name     string
	since    openstack.Microversion
	optional bool
}

// nodeFields are the fields requested with ?fields= (never updated_at:
// a 400 on Ironic 21.4, OPENSTACK.md §8).
var nodeFields = []field{
	{"uuid", openstack.Microversion{Major: 1, Minor: 1}, false},
	{"name", openstack.Microversion{Major: 1, Minor: 5}, true},
	{"provision_state", openstack.Microversion{Major: 1, Minor: 1}, false},
	{"target_provision_state", openstack.Microversion{Major: 1, Minor: 1}, true},
	{"provision_updated_at", openstack.Microversion{Major: 1, Minor: 1}, true},
	{"power_state", openstack.Microversion{Major: 1, Minor: 1}, true},
	{"maintenance", openstack.Microversion{Major: 1, Minor: 1}, false},
	{"maintenance_reason", openstack.Microversion{Major: 1, Minor: 1}, true},
	{"fault", openstack.Microversion{Major: 1, Minor: 42}, true},
	{"last_error", openstack.Microversion{Major: 1, Minor: 1}, true},
	{"instance_uuid", openstack.Microversion{Major: 1, Minor: 1}, false},
	{"allocation_uuid", openstack.Microversion{Major: 1, Minor: 52}, true},
	{"resource_class", openstack.Microversion{Major: 1, Minor: 21}, true},
	{"traits", openstack.Microversion{Major: 1, Minor: 37}, false},
	{"conductor_group", openstack.Microversion{Major: 1, Minor: 46}, true},
	{"owner", openstack.Microversion{Major: 1, Minor: 50}, true},
	{"lessee", openstack.Microversion{Major: 1, Minor: 65}, true},
}

// Fields returns the node fields requested at microversion v, and the
// wanted fields that v does not have (nil when none).
func Fields(v openstack.Microversion) (fields []string, missing map[string]bool) {
	return fieldsWithout(v, nil)
}

// fieldsWithout is Fields minus the fields in dropped (reported missing).
func fieldsWithout(v openstack.Microversion, dropped map[string]bool) (fields []string, missing map[string]bool) {
	for _, f := range nodeFields {
		if v.AtLeast(f.since) && !dropped[f.name] {
			fields = append(fields, f.name)
			continue
		}
		if missing == nil {
			missing = map[string]bool{}
		}
		missing[f.name] = true
	}
	return fields, missing
}

// wireNode is a node as Ironic sends it. Pointers mark fields whose absence
// matters (reported in Missing).
type wireNode struct {
	UUID                 string    `json:"uuid"`
	Name                 string    `json:"name"`
	ProvisionState       *string   `json:"provision_state"`
	TargetProvisionState string    `json:"target_provision_state"`
	ProvisionUpdatedAt   flexTime  `json:"provision_updated_at"`
	PowerState           string    `json:"power_state"`
	Maintenance          *bool     `json:"maintenance"`
	MaintenanceReason    string    `json:"maintenance_reason"`
	Fault                string    `json:"fault"`
	LastError            string    `json:"last_error"`
	InstanceUUID         string    `json:"instance_uuid"`
	AllocationUUID       string    `json:"allocation_uuid"`
	ResourceClass        string    `json:"resource_class"`
	Traits               *[]string `json:"traits"`
	ConductorGroup       string    `json:"conductor_group"`
	Owner                string    `json:"owner"`
	Lessee               string    `json:"lessee"`
}

// toNode converts a wire node; versionMissing are the fields the
// microversion lacks (copied, never shared between nodes).
func (w *wireNode) toNode(versionMissing map[string]bool) Node {
	n := Node{
		UUID:                 w.UUID,
		Name:                 w.Name,
		TargetProvisionState: w.TargetProvisionState,
		PowerState:           w.PowerState,
		MaintenanceReason:    w.MaintenanceReason,
		Fault:                w.Fault,
		LastError:            w.LastError,
		InstanceUUID:         w.InstanceUUID,
		AllocationUUID:       w.AllocationUUID,
		ResourceClass:        w.ResourceClass,
		ConductorGroup:       w.ConductorGroup,
		Owner:                w.Owner,
		Lessee:               w.Lessee,
		ProvisionUpdatedAt:   w.ProvisionUpdatedAt.T,
	}
	for k := range versionMissing {
		n.miss(k)
	}
	if w.ProvisionState != nil {
		n.ProvisionState = *w.ProvisionState
	} else {
		n.miss("provision_state")
	}
	if w.Maintenance != nil {
		n.Maintenance = *w.Maintenance
	} else {
		n.miss("maintenance")
	}
	if w.Traits != nil {
		n.Traits = *w.Traits
	} else if !versionMissing["traits"] {
		// Ironic sends "traits": [] for a node without traits; null or
		// absent means we cannot tell.
		n.miss("traits")
	}
	return n
}

func (n *Node) miss(f string) {
	if n.Missing == nil {
		n.Missing = map[string]bool{}
	}
	n.Missing[f] = true
}

// flexTime decodes Ironic timestamps leniently: ISO 8601 with or without
// a UTC offset (offset-less means UTC), "T" or space separated, any
// fraction; null or "" is the zero time; anything else is the zero time
// with Bad set (never a decode error, so one odd node cannot fail a page).
type flexTime struct {
	T   time.Time
	Bad string
}

var timeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999Z0700",
	"2006-01-02 15:04:05.999999999",
}

func (f *flexTime) UnmarshalJSON(b []byte) error {
	*f = flexTime{}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		f.Bad = string(b)
		return nil
	}
	t, ok := ParseTimestamp(s)
	if !ok {
		f.Bad = s
		return nil
	}
	f.T = t
	return nil
}

// ParseTimestamp parses an Ironic timestamp as flexTime does: RFC 3339
// with or without offset ("2026-11-29T18:00:00" is UTC), space or "T"
// separated. It returns the UTC time and true, or the zero time and false
// ("" gives false too).
func ParseTimestamp(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, false
	}
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}
