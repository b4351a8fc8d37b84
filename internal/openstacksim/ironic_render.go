package openstacksim

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// ironicVersionedFields is VERSIONED_FIELDS of
// ironic/api/controllers/v1/utils.py (Ironic 21.4): the first API minor in
// which each node field exists. Asking for a newer field in fields= is 406;
// it is hidden from responses at older versions.
var ironicVersionedFields = map[string]int{
	"driver_internal_info":   3,
	"name":                   5,
	"inspection_finished_at": 6,
	"inspection_started_at":  6,
	"clean_step":             7,
	"raid_config":            12,
	"target_raid_config":     12,
	"network_interface":      20,
	"resource_class":         21,
	"storage_interface":      33,
	"traits":                 37,
	"rescue_interface":       38,
	"bios_interface":         40,
	"fault":                  42,
	"deploy_step":            44,
	"conductor_group":        46,
	"automated_clean":        47,
	"protected":              48,
	"protected_reason":       48,
	"conductor":              49,
	"owner":                  50,
	"description":            51,
	"allocation_uuid":        52,
	"events":                 54,
	"retired":                61,
	"retired_reason":         61,
	"lessee":                 65,
	"network_data":           66,
	"boot_mode":              75,
	"secure_boot":            75,
	"shard":                  82,
	// V31_FIELDS
	"boot_interface":       31,
	"console_interface":    31,
	"deploy_interface":     31,
	"inspect_interface":    31,
	"management_interface": 31,
	"power_interface":      31,
	"raid_interface":       31,
	"vendor_interface":     31,
}

// ironicNodeFields is valid_fields of _get_fields_for_node_query plus the
// fields it accepts besides them (uuid, traits, allocation_uuid,
// chassis_uuid, conductor). Anything else in fields= is 400 "Field X is not
// a valid field." — including created_at and updated_at.
var ironicNodeFields = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`automated_clean bios_interface boot_interface boot_mode clean_step
		conductor_group console_enabled console_interface deploy_interface deploy_step description
		driver driver_info driver_internal_info extra fault inspection_finished_at
		inspection_started_at inspect_interface instance_info instance_uuid last_error lessee
		maintenance maintenance_reason management_interface name network_data network_interface
		owner power_interface power_state properties protected protected_reason provision_state
		provision_updated_at raid_config raid_interface rescue_interface reservation
		resource_class retired retired_reason secure_boot shard storage_interface
		target_power_state target_provision_state target_raid_config traits vendor_interface
		uuid allocation_uuid chassis_uuid conductor`) {
		ironicNodeFields[f] = true
	}
}

// nodeDBColumns are the attributes of Ironic 21.4's Node DB model. A node
// list whose fields= names anything else fails inside the DB query with a
// 500 "type object 'Node' has no attribute 'X'" — including the API-computed
// conductor, allocation_uuid and chassis_uuid (seen on the test bed; a
// single-node GET accepts them).
var nodeDBColumns = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`allocation_id automated_clean bios_interface boot_interface
		boot_mode chassis_id clean_step conductor_affinity conductor_group console_enabled
		console_interface created_at deploy_interface deploy_step description driver driver_info
		driver_internal_info extra fault id inspect_interface inspection_finished_at
		inspection_started_at instance_info instance_uuid last_error lessee maintenance
		maintenance_reason management_interface name network_data network_interface owner
		power_interface power_state properties protected protected_reason provision_state
		provision_updated_at raid_config raid_interface rescue_interface reservation
		resource_class retired retired_reason secure_boot shard storage_interface tags
		target_power_state target_provision_state target_raid_config traits updated_at uuid
		vendor_interface version`) {
		nodeDBColumns[f] = true
	}
}

// ironicDefaultFields is _DEFAULT_RETURN_FIELDS, in Ironic's order (it
// shows in the fields= of "next" links).
var ironicDefaultFields = []string{"instance_uuid", "maintenance", "power_state", "provision_state", "uuid", "name"}

// ironicStates is states.machine.states of Ironic 21.4: the values the
// provision_state filter accepts.
var ironicStates = map[string]bool{}

func init() {
	for _, s := range []string{"active", "adopt failed", "adopting", "available", "clean failed",
		"clean wait", "cleaning", "deleting", "deploy failed", "deploying", "enroll", "error",
		"inspect failed", "inspect wait", "inspecting", "manageable", "rescue", "rescue failed",
		"rescue wait", "rescuing", "unrescue failed", "unrescuing", "verifying", "wait call-back"} {
		ironicStates[s] = true
	}
}

// validFaults is faults.VALID_FAULTS of Ironic 21.4.
var validFaults = []string{"power failure", "clean failure", "rescue abort failure"}

func strOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func mapOrEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// ironicLink is link.make_link: "<public>/v1/<resource>/<args>" or, for
// bookmarks, "<public>/<resource>/<args>".
func ironicLink(rel, public, resource, args string, bookmark bool) map[string]any {
	href := public + "/v1/" + resource
	if bookmark {
		href = public + "/" + resource
	}
	if strings.HasPrefix(args, "?") {
		href += args
	} else {
		href += "/" + args
	}
	return map[string]any{"href": href, "rel": rel}
}

// renderNode is node_convert_with_links + node_sanitize for an admin caller:
// the node as a JSON object at API minor ver, limited to fields (plus links)
// when fields is non-nil.
func renderNode(rec *nodeRec, ver int, fields []string, public string) map[string]any {
	n := &rec.n
	want := func(f string) bool { return fields == nil || slices.Contains(fields, f) }
	out := nodeDocument(n, public)
	if ver >= 49 && want("conductor") {
		out["conductor"] = strOrNil(n.Conductor)
	}
	if ver >= 52 && want("allocation_uuid") {
		out["allocation_uuid"] = strOrNil(n.AllocationUUID)
	}
	if want("chassis_uuid") {
		out["chassis_uuid"] = nil
	}
	if fields == nil {
		addNodeSubresourceLinks(out, n.UUID, ver, public)
	} else {
		for k := range out {
			if k != "links" && !slices.Contains(fields, k) {
				delete(out, k)
			}
		}
	}
	// update_state_in_older_versions
	if ps, ok := out["provision_state"]; ok {
		if ver < 2 && ps == "available" {
			out["provision_state"] = nil
		}
		if ver < 39 && ps == "inspect wait" {
			out["provision_state"] = "inspecting"
		}
	}
	// hide_fields_in_newer_versions
	for f, minor := range ironicVersionedFields {
		if ver < minor {
			delete(out, f)
		}
	}
	return out
}

// nodeDocument is every stored field of a node as the API shows it (the
// fake-hardware interfaces, nulls for "" and zero times) and its links.
func nodeDocument(n *Node, public string) map[string]any {
	traits := n.Traits
	if traits == nil {
		traits = []string{}
	}
	return map[string]any{
		"uuid":                   n.UUID,
		"created_at":             pyTime(n.CreatedAt),
		"updated_at":             pyTime(n.UpdatedAt),
		"automated_clean":        nil,
		"bios_interface":         "fake",
		"boot_interface":         "fake",
		"boot_mode":              nil,
		"clean_step":             map[string]any{},
		"conductor_group":        n.ConductorGroup,
		"console_enabled":        false,
		"console_interface":      "fake",
		"deploy_interface":       "fake",
		"deploy_step":            map[string]any{},
		"description":            strOrNil(n.Description),
		"driver":                 n.Driver,
		"driver_info":            mapOrEmpty(n.DriverInfo),
		"driver_internal_info":   map[string]any{},
		"extra":                  mapOrEmpty(n.Extra),
		"fault":                  strOrNil(n.Fault),
		"inspection_finished_at": pyTime(n.InspectionFinishedAt),
		"inspection_started_at":  nil,
		"inspect_interface":      "fake",
		"instance_info":          mapOrEmpty(n.InstanceInfo),
		"instance_uuid":          strOrNil(n.InstanceUUID),
		"last_error":             strOrNil(n.LastError),
		"lessee":                 strOrNil(n.Lessee),
		"maintenance":            n.Maintenance,
		"maintenance_reason":     strOrNil(n.MaintenanceReason),
		"management_interface":   "fake",
		"name":                   strOrNil(n.Name),
		"network_data":           map[string]any{},
		"network_interface":      "noop",
		"owner":                  strOrNil(n.Owner),
		"power_interface":        "fake",
		"power_state":            strOrNil(n.PowerState),
		"properties":             mapOrEmpty(n.Properties),
		"protected":              false,
		"protected_reason":       nil,
		"provision_state":        strOrNil(n.ProvisionState),
		"provision_updated_at":   pyTime(n.ProvisionUpdatedAt),
		"raid_config":            map[string]any{},
		"raid_interface":         "fake",
		"rescue_interface":       "fake",
		"reservation":            strOrNil(n.Reservation),
		"resource_class":         strOrNil(n.ResourceClass),
		"retired":                n.Retired,
		"retired_reason":         strOrNil(n.RetiredReason),
		"secure_boot":            nil,
		"shard":                  nil,
		"storage_interface":      "noop",
		"target_power_state":     strOrNil(n.TargetPowerState),
		"target_provision_state": strOrNil(n.TargetProvisionState),
		"target_raid_config":     map[string]any{},
		"traits":                 slices.Clone(traits),
		"vendor_interface":       "fake",
		"links": []any{
			ironicLink("self", public, "nodes", n.UUID, false),
			ironicLink("bookmark", public, "nodes", n.UUID, true),
		},
	}
}

// addNodeSubresourceLinks adds the links of the node's sub-resources that
// microversion ver has.
func addNodeSubresourceLinks(out map[string]any, uuid string, ver int, public string) {
	sub := func(name string) []any {
		return []any{
			ironicLink("self", public, "nodes", uuid+"/"+name, false),
			ironicLink("bookmark", public, "nodes", uuid+"/"+name, true),
		}
	}
	out["ports"] = sub("ports")
	for _, r := range []struct {
		name  string
		minor int
	}{{"states", 14}, {"portgroups", 24}, {"volume", 32}} {
		if ver >= r.minor {
			out[r.name] = sub(r.name)
		}
	}
}

// writeErrorMessage wraps inner (a JSON document) the way Ironic's
// ParsableErrorMiddleware does: {"error_message": "<inner as a string>"}.
func writeErrorMessage(w http.ResponseWriter, status int, inner string) {
	body := `{"error_message": ` + pyQuote(inner) + `}`
	writeBody(w, status, "application/json", []byte(body))
}

// ironicError answers an API error the way method.format_exception renders
// an Ironic exception: faultcode "Client" for 4xx, "Server" otherwise.
func ironicError(w http.ResponseWriter, status int, faultstring string) {
	code := "Client"
	if status >= 500 || status < 400 {
		code = "Server"
	}
	writeErrorMessage(w, status, `{"faultcode": "`+code+`", "faultstring": `+pyQuote(faultstring)+`, "debuginfo": null}`)
}

// pecanError answers a routing error (pecan.abort, webob exceptions raised
// outside the controllers): {"code": N, "title": ..., "description": ...}.
func pecanError(w http.ResponseWriter, status int, description string) {
	writeErrorMessage(w, status, fmt.Sprintf(`{"code": %d, "title": %s, "description": %s}`, status, pyQuote(http.StatusText(status)), pyQuote(description)))
}
