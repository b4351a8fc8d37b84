package ironic

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ironlink/ironlink/satellite/openstack"
)

// Node is the part of an Ironic node the satellite uses (Ironic api-ref
// "Nodes", "Show Node Details"; docs/design/openstack.md §1.1). Absent or null string
// fields are "" (see Missing and Unsent for what was not sent). Timestamps
// are UTC.
type Node struct {
	// UUID is the node's UUID, the device key.
	UUID string
	// Name is the node's name (may be "").
	Name string
	// ProvisionState is the current provision state, e.g. "available",
	// "deploy failed" (docs/design/openstack.md §1.2); "" if Ironic sent none.
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
	// Properties are the four hardware properties inspection sets (the
	// rest of Ironic's properties is not decoded). They feed the device's
	// facts only, never a condition.
	Properties Properties
	// Extra and PropertyValues are the scalar values (strings, numbers,
	// booleans, as text) of the node's extra and properties objects by
	// key, for the label mapping (Labels); nil when none.
	Extra, PropertyValues map[string]string
	// InspectionFinishedAt is when the node's last inspection finished
	// (UTC, API 1.6); zero when Ironic sent null, none or an unparsable
	// timestamp.
	InspectionFinishedAt time.Time
	// Missing holds the Ironic field names (e.g. "lessee", "fault") that
	// the negotiated microversion does not have, that the server refused,
	// that came back null where null means "cannot tell" (provision_state,
	// maintenance, traits), or that the answer lacked (Unsent); nil when
	// nothing is missing. Conditions that need a missing field are never
	// False because of it. Read-only: nodes of one listing may share it.
	Missing map[string]bool
	// Unsent holds the fields that were asked for (?fields=) and whose key
	// was absent from this answer: some Ironic versions, proxies and
	// microversion mismatches drop fields from later pages or single
	// reads. Their values above are "" (or the last known value after
	// CarryUnsent); a condition that depends on one is Unknown with reason
	// FieldUnavailable, and the agent keeps the last known value of the
	// condition instead (docs/reference/conditions.md "Fields OpenStack did not send"). A subset of Missing; nil
	// when the answer had every field asked for.
	Unsent map[string]bool
	// ListedTwice is true when a listing returned this node on more than
	// one page (a listing hazard: the later copies are dropped, this first
	// one is kept); always false from GetNode.
	ListedTwice bool
}

// Properties are the hardware properties of a node that the satellite
// reports (Ironic api-ref "Nodes", field properties; set by inspection or
// at enrolment). Each value is known only when its Has flag is true: the
// node has no properties, the key is absent, or its value is not of the
// expected shape (Ironic stores what inspectors and operators wrote: old
// inspectors write "8" for 8, so numeric strings are accepted).
type Properties struct {
	// CPUs is properties.cpus, the CPU count.
	CPUs    uint32
	HasCPUs bool
	// MemoryMB is properties.memory_mb, RAM in MiB.
	MemoryMB    uint64
	HasMemoryMB bool
	// LocalGB is properties.local_gb, the root disk's size in GiB.
	LocalGB    uint64
	HasLocalGB bool
	// CPUArch is properties.cpu_arch, e.g. "x86_64".
	CPUArch    string
	HasCPUArch bool
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
// a 400 on Ironic 21.4, docs/design/openstack.md §8).
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
	// properties is decoded for four keys only (Properties): it feeds
	// facts, and a server that refuses it loses only those.
	{"properties", openstack.Microversion{Major: 1, Minor: 1}, true},
	// inspection_finished_at tells the agent when to read the node's
	// inventory and BIOS settings again (agent/hardware.go).
	{"inspection_finished_at", openstack.Microversion{Major: 1, Minor: 6}, true},
	// extra feeds failure-domain labels only (--label-map, e.g.
	// extra.rack); a server that refuses it loses only those.
	{"extra", openstack.Microversion{Major: 1, Minor: 1}, true},
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

// optString is a string field of a node that records whether the key was
// in the answer at all: absent (Set false), null (Set true, V "") and ""
// are told apart, which gophercloud's nodes.Node cannot (docs/design/openstack.md §6).
type optString struct {
	V         string
	Set, Null bool
}

func (o *optString) UnmarshalJSON(b []byte) error {
	o.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		o.V, o.Null = "", true
		return nil
	}
	if v, ok := plainJSONString(b); ok {
		o.V = v
		return nil
	}
	return json.Unmarshal(b, &o.V)
}

// plainJSONString decodes b when it is a JSON string without escapes and
// of valid UTF-8 — nearly every node field — without a nested
// json.Unmarshal (which re-validates b and costs an allocation per field:
// a 10,000-node listing has 170,000 of them). The enclosing decoder has
// validated b already; anything else is left to json.Unmarshal.
func plainJSONString(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	in := b[1 : len(b)-1]
	if bytes.IndexByte(in, '\\') >= 0 || !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

// optBool is optString for a boolean; null decodes as Set with V false
// and Null true.
type optBool struct {
	V, Set, Null bool
}

func (o *optBool) UnmarshalJSON(b []byte) error {
	o.Set = true
	switch string(bytes.TrimSpace(b)) {
	case "null":
		o.V, o.Null = false, true
		return nil
	case "true":
		o.V = true
		return nil
	case "false":
		o.V = false
		return nil
	}
	return json.Unmarshal(b, &o.V)
}

// optStrings is optString for a list of strings; null is Set with Null.
type optStrings struct {
	V         []string
	Set, Null bool
}

func (o *optStrings) UnmarshalJSON(b []byte) error {
	o.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		o.V, o.Null = nil, true
		return nil
	}
	return json.Unmarshal(b, &o.V)
}

// propUint is a non-negative integer property that Ironic may hold as a
// JSON number or a string of digits ("16384"); anything else (null, "",
// a fraction, a negative number, an object) leaves Set false. It never
// fails decoding, so one odd node cannot fail a page.
type propUint struct {
	V   uint64
	Set bool
}

func (p *propUint) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		b = bytes.TrimSpace(b[1 : len(b)-1])
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	*p = propUint{V: v, Set: err == nil}
	return nil
}

// propString is a string property; a value that is not a JSON string
// (null, a number) leaves Set false and never fails decoding.
type propString struct {
	V   string
	Set bool
}

func (p *propString) UnmarshalJSON(b []byte) error {
	*p = propString{}
	if len(b) == 0 || b[0] != '"' {
		return nil
	}
	if v, ok := plainJSONString(b); ok {
		p.V, p.Set = v, true
		return nil
	}
	if json.Unmarshal(b, &p.V) == nil {
		p.Set = true
	}
	return nil
}

// optTime is flexTime that records whether the key was present.
type optTime struct {
	flexTime
	Set bool
}

func (o *optTime) UnmarshalJSON(b []byte) error {
	o.Set = true
	return o.flexTime.UnmarshalJSON(b)
}

// wireNode is a node as Ironic sends it. Every field records whether its
// key was present, so a field that was asked for and not sent (some Ironic
// versions, proxies or microversions drop fields from later pages) is
// reported in Node.Unsent instead of decoding as "".
type wireNode struct {
	UUID                 string        `json:"uuid"`
	Name                 optString     `json:"name"`
	ProvisionState       optString     `json:"provision_state"`
	TargetProvisionState optString     `json:"target_provision_state"`
	ProvisionUpdatedAt   optTime       `json:"provision_updated_at"`
	PowerState           optString     `json:"power_state"`
	Maintenance          optBool       `json:"maintenance"`
	MaintenanceReason    optString     `json:"maintenance_reason"`
	Fault                optString     `json:"fault"`
	LastError            optString     `json:"last_error"`
	InstanceUUID         optString     `json:"instance_uuid"`
	AllocationUUID       optString     `json:"allocation_uuid"`
	ResourceClass        optString     `json:"resource_class"`
	Traits               optStrings    `json:"traits"`
	ConductorGroup       optString     `json:"conductor_group"`
	Owner                optString     `json:"owner"`
	Lessee               optString     `json:"lessee"`
	Properties           optProperties `json:"properties"`
	InspectionFinishedAt optTime       `json:"inspection_finished_at"`
	Extra                optScalars    `json:"extra"`
}

// present reports whether field f (an Ironic field name of nodeFields) was
// in the answer; uuid always is (a node without one is refused).
func (w *wireNode) present(f string) bool {
	switch f {
	case "uuid":
		return true
	case "name":
		return w.Name.Set
	case "provision_state":
		return w.ProvisionState.Set
	case "target_provision_state":
		return w.TargetProvisionState.Set
	case "provision_updated_at":
		return w.ProvisionUpdatedAt.Set
	case "power_state":
		return w.PowerState.Set
	case "maintenance":
		return w.Maintenance.Set
	case "maintenance_reason":
		return w.MaintenanceReason.Set
	case "fault":
		return w.Fault.Set
	case "last_error":
		return w.LastError.Set
	case "instance_uuid":
		return w.InstanceUUID.Set
	case "allocation_uuid":
		return w.AllocationUUID.Set
	case "resource_class":
		return w.ResourceClass.Set
	case "traits":
		return w.Traits.Set
	case "conductor_group":
		return w.ConductorGroup.Set
	case "owner":
		return w.Owner.Set
	case "lessee":
		return w.Lessee.Set
	case "properties":
		return w.Properties.Set
	case "inspection_finished_at":
		return w.InspectionFinishedAt.Set
	case "extra":
		return w.Extra.Set
	}
	return false
}

// toNode converts a wire node. asked are the fields the request named;
// versionMissing are the fields the microversion (or the server) lacks
// (copied, never shared between nodes). An asked field whose key is absent
// is reported in both Unsent and Missing.
func (w *wireNode) toNode(asked []string, versionMissing map[string]bool) Node {
	n := Node{
		UUID:                 w.UUID,
		Name:                 w.Name.V,
		ProvisionState:       w.ProvisionState.V,
		TargetProvisionState: w.TargetProvisionState.V,
		PowerState:           w.PowerState.V,
		Maintenance:          w.Maintenance.V,
		MaintenanceReason:    w.MaintenanceReason.V,
		Fault:                w.Fault.V,
		LastError:            w.LastError.V,
		InstanceUUID:         w.InstanceUUID.V,
		AllocationUUID:       w.AllocationUUID.V,
		ResourceClass:        w.ResourceClass.V,
		ConductorGroup:       w.ConductorGroup.V,
		Owner:                w.Owner.V,
		Lessee:               w.Lessee.V,
		Traits:               w.Traits.V,
		ProvisionUpdatedAt:   w.ProvisionUpdatedAt.T,
		Properties:           w.Properties.properties(),
		InspectionFinishedAt: w.InspectionFinishedAt.T,
		Extra:                w.Extra.V,
		PropertyValues:       w.Properties.Scalars,
	}
	for k := range versionMissing {
		n.miss(k)
	}
	for _, f := range asked {
		if !w.present(f) {
			n.unsent(f)
		}
	}
	// Fields whose null means "cannot tell" (Ironic always has a value).
	if w.ProvisionState.Null {
		n.miss("provision_state") // null: Ironic reported none
	}
	if w.Maintenance.Null {
		n.miss("maintenance")
	}
	if w.Traits.Null {
		// Ironic sends "traits": [] for a node without traits; null means
		// we cannot tell.
		n.miss("traits")
	}
	if len(n.Missing) > 0 && len(n.Missing) == len(versionMissing) {
		// Nothing beyond what the request could not ask for (the common
		// case: one map shared by the listing's nodes, not one per node).
		n.Missing = versionMissing
	}
	return n
}

// unsent records that field f was asked for and not in the answer.
func (n *Node) unsent(f string) {
	if n.Unsent == nil {
		n.Unsent = map[string]bool{}
	}
	n.Unsent[f] = true
	n.miss(f)
}

// CarryUnsent returns n with every field in n.Unsent taken from prev, the
// last read of the same node (when prev read it: a field missing from prev
// too stays as decoded). Unsent and Missing are kept as they are, so
// conditions still know the values are not fresh. It is how facts and the
// sweep keep the last known value of a field a page left out.
func (n Node) CarryUnsent(prev Node) Node {
	if len(n.Unsent) == 0 || prev.UUID != n.UUID {
		return n
	}
	for f := range n.Unsent {
		if prev.Missing[f] && !prev.Unsent[f] {
			continue // prev lacked it too (not asked for, null): nothing known
		}
		switch f {
		case "name":
			n.Name = prev.Name
		case "provision_state":
			n.ProvisionState = prev.ProvisionState
		case "target_provision_state":
			n.TargetProvisionState = prev.TargetProvisionState
		case "provision_updated_at":
			n.ProvisionUpdatedAt = prev.ProvisionUpdatedAt
		case "power_state":
			n.PowerState = prev.PowerState
		case "maintenance":
			n.Maintenance = prev.Maintenance
		case "maintenance_reason":
			n.MaintenanceReason = prev.MaintenanceReason
		case "fault":
			n.Fault = prev.Fault
		case "last_error":
			n.LastError = prev.LastError
		case "instance_uuid":
			n.InstanceUUID = prev.InstanceUUID
		case "allocation_uuid":
			n.AllocationUUID = prev.AllocationUUID
		case "resource_class":
			n.ResourceClass = prev.ResourceClass
		case "traits":
			n.Traits = slices.Clone(prev.Traits)
		case "conductor_group":
			n.ConductorGroup = prev.ConductorGroup
		case "owner":
			n.Owner = prev.Owner
		case "lessee":
			n.Lessee = prev.Lessee
		case "properties":
			n.Properties, n.PropertyValues = prev.Properties, prev.PropertyValues
		case "extra":
			n.Extra = prev.Extra
		case "inspection_finished_at":
			n.InspectionFinishedAt = prev.InspectionFinishedAt
		}
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
