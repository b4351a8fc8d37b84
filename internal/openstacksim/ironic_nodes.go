package openstacksim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Ironic single-node endpoints: GET, states, create, delete, maintenance.

// ironicGet is GET /v1/nodes/{ident}[?fields=...].
func (c *Cloud) ironicGet(w http.ResponseWriter, r *http.Request, ver int, ident string) {
	q := r.URL.Query()
	if msg := unexpected(q, "fields"); msg != "" {
		ironicError(w, http.StatusBadRequest, msg)
		return
	}
	a := &ironicArgs{q: q}
	fields := a.stringList("fields")
	c.withNode(w, ver, ident, func(rec *nodeRec) {
		if fieldsNotAcceptable(fields, ver) {
			ironicError(w, http.StatusNotAcceptable, "Request not acceptable.")
			return
		}
		if f := invalidNodeField(fields); f != "" {
			ironicError(w, http.StatusBadRequest, fmt.Sprintf("Field %s is not a valid field.", f))
			return
		}
		item := renderNode(rec, ver, fields, c.ironicPublic())
		if c.fieldLoss.SingleNode {
			c.fieldLoss.strip(item)
		}
		writeJSON(w, http.StatusOK, item)
	})
}

// FieldLoss makes Ironic leave fields out of node answers although they
// were asked for with ?fields=, as Ironic versions that drop fields from
// later pages, a proxy in front of Ironic, or a microversion mismatch do
// (issue: conditions flipped on nodes of pages 2+). The zero value loses
// nothing.
type FieldLoss struct {
	// LaterPages: list pages requested with a marker (page 2 onwards) lose
	// the fields.
	LaterPages bool
	// SingleNode: GET /v1/nodes/{ident} loses them too.
	SingleNode bool
	// Drop names the keys removed; empty means every key outside Ironic's
	// default field set (uuid, name, instance_uuid, power_state,
	// provision_state, maintenance) and links, as if fields were ignored.
	// With RepeatMarker alone (Drop empty, LaterPages and SingleNode
	// false) no field is lost.
	Drop []string
	// RepeatMarker: a list page asked for with a marker starts with the
	// marker's node again, so that node is listed on two pages (the
	// duplicate-node hazard of a listing whose marker Ironic resolved to the
	// row before it). Pages of limit 1 are left alone (they would repeat
	// forever).
	RepeatMarker bool
}

// strip removes the lost keys from a rendered node.
func (l FieldLoss) strip(node map[string]any) {
	if len(l.Drop) > 0 {
		for _, k := range l.Drop {
			delete(node, k)
		}
		return
	}
	for k := range node {
		if k != "links" && !slices.Contains(ironicDefaultFields, k) {
			delete(node, k)
		}
	}
}

// SetFieldLoss sets which node answers lose fields from now on (see
// FieldLoss); SetFieldLoss(FieldLoss{}) restores complete answers.
func (c *Cloud) SetFieldLoss(l FieldLoss) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l.Drop = slices.Clone(l.Drop)
	c.fieldLoss = l
}

// ironicStates is GET /v1/nodes/{ident}/states.
func (c *Cloud) ironicStates(w http.ResponseWriter, _ *http.Request, ver int, ident string) {
	c.withNode(w, ver, ident, func(rec *nodeRec) {
		n := rec.n
		out := map[string]any{
			"console_enabled":        false,
			"last_error":             strOrNil(n.LastError),
			"power_state":            strOrNil(n.PowerState),
			"provision_state":        strOrNil(n.ProvisionState),
			"provision_updated_at":   pyTime(n.ProvisionUpdatedAt),
			"target_power_state":     strOrNil(n.TargetPowerState),
			"target_provision_state": strOrNil(n.TargetProvisionState),
		}
		if ver >= 12 {
			out["raid_config"] = map[string]any{}
			out["target_raid_config"] = map[string]any{}
		}
		if ver >= 75 {
			out["boot_mode"] = nil
			out["secure_boot"] = nil
		}
		writeJSON(w, http.StatusOK, out)
	})
}

// nodeCreateFields are the properties of Ironic's node_schema().
var nodeCreateFields = []string{"automated_clean", "bios_interface", "boot_interface", "boot_mode",
	"chassis_uuid", "conductor_group", "console_enabled", "console_interface", "deploy_interface",
	"description", "driver", "driver_info", "extra", "inspect_interface", "instance_info",
	"instance_uuid", "lessee", "management_interface", "maintenance", "name", "network_data",
	"network_interface", "owner", "power_interface", "properties", "raid_interface",
	"rescue_interface", "resource_class", "retired", "retired_reason", "secure_boot", "shard",
	"storage_interface", "uuid", "vendor_interface"}

// readOptionalJSONObject reads a request body that may be empty; it
// answers 400 and returns false for one that is not a JSON object.
func readOptionalJSONObject(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	raw, _ := readJSONBody(r)
	var body map[string]any
	if len(strings.TrimSpace(string(raw))) > 0 {
		if err := json.Unmarshal(raw, &body); err != nil {
			ironicError(w, http.StatusBadRequest, "The request body is not valid JSON.")
			return nil, false
		}
	}
	return body, true
}

// ironicCreate is POST /v1/nodes.
func (c *Cloud) ironicCreate(w http.ResponseWriter, r *http.Request, ver int) {
	raw, _ := readJSONBody(r)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil || body == nil {
		ironicError(w, http.StatusBadRequest, "Schema error for node: None is not of type 'object'")
		return
	}
	n, e := nodeFromCreateBody(body, ver)
	if e != nil {
		ironicError(w, e.status, e.msg)
		return
	}
	out, e := c.createNode(n, ver)
	if e != nil {
		ironicError(w, e.status, e.msg)
		return
	}
	w.Header().Set("Location", c.ironicPublic()+"/v1/nodes/"+n.UUID)
	writeJSON(w, http.StatusCreated, out)
}

// createNode stores n (createNodeLocked) and renders it at microversion
// ver.
func (c *Cloud) createNode(n Node, ver int) (map[string]any, *apiErr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, e := c.createNodeLocked(n)
	if e != nil {
		return nil, e
	}
	return renderNode(rec, ver, nil, c.ironicPublic()), nil
}

// nodeFromCreateBody validates a POST /v1/nodes body against node_schema()
// and the microversion and builds the node it asks for.
func nodeFromCreateBody(body map[string]any, ver int) (Node, *apiErr) {
	var extra []string
	for k := range body {
		if !slices.Contains(nodeCreateFields, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		return Node{}, apiErrf(http.StatusBadRequest, "Schema error for node: %s", additionalProperties(extra))
	}
	str := func(k string) string { s, _ := body[k].(string); return s }
	obj := func(k string) map[string]any { m, _ := body[k].(map[string]any); return m }
	if _, ok := body["driver"].(string); !ok {
		return Node{}, apiErrf(http.StatusBadRequest, "Schema error for node: 'driver' is a required property")
	}
	// reject_fields_in_newer_versions
	for f, minor := range ironicVersionedFields {
		v, ok := body[f]
		if !ok || v == nil || ver >= minor {
			continue
		}
		if f == "conductor_group" && v == "" {
			continue
		}
		return Node{}, notAcceptable("Request not acceptable.")
	}
	n := Node{
		UUID:           str("uuid"),
		Name:           str("name"),
		Driver:         str("driver"),
		ResourceClass:  str("resource_class"),
		ConductorGroup: strings.ToLower(str("conductor_group")),
		Owner:          str("owner"),
		Lessee:         str("lessee"),
		InstanceUUID:   str("instance_uuid"),
		Description:    str("description"),
		RetiredReason:  str("retired_reason"),
		Properties:     obj("properties"),
		Extra:          obj("extra"),
		DriverInfo:     obj("driver_info"),
		InstanceInfo:   obj("instance_info"),
	}
	n.Maintenance, _ = body["maintenance"].(bool)
	n.Retired, _ = body["retired"].(bool)
	if n.UUID == "" {
		n.UUID = newUUID()
	}
	if _, ok := body["name"]; ok && body["name"] != nil {
		if e := checkNewNodeName(n.Name, ver); e != nil {
			return Node{}, e
		}
	}
	n.ProvisionState = "enroll"
	if ver < 11 {
		n.ProvisionState = "available"
	}
	if n.Driver != "fake-hardware" || n.ConductorGroup != "" {
		return Node{}, apiErrf(http.StatusBadRequest, "No valid host was found. Reason: No conductor service registered which supports driver %s for conductor group \"%s\".", n.Driver, n.ConductorGroup)
	}
	return n, nil
}

// checkNewNodeName checks the name of a node to create: names need 1.5, a
// valid logical name, and not one of the reserved words.
func checkNewNodeName(name string, ver int) *apiErr {
	if ver < 5 {
		return notAcceptable("Request not acceptable.")
	}
	if !validLogicalName(name) {
		return apiErrf(http.StatusBadRequest, "Cannot create node with invalid name '%s'", name)
	}
	if name == "detail" || name == "validate" {
		return apiErrf(http.StatusBadRequest, "The word \"%s\" is reserved and can not be used as a node name. Reserved words are: detail, validate.", name)
	}
	return nil
}

// createNodeLocked stores a new node unless its UUID or name is taken,
// with the defaults the conductor fills in.
func (c *Cloud) createNodeLocked(n Node) (*nodeRec, *apiErr) {
	if _, dup := c.nodes[n.UUID]; dup {
		return nil, apiErrf(http.StatusConflict, "A node with UUID %s already exists.", n.UUID)
	}
	if n.Name != "" && c.nodeNamedLocked(n.Name, nil) != nil {
		return nil, apiErrf(http.StatusConflict, "A node with name %s already exists.", n.Name)
	}
	if n.Owner == "" {
		// A project-scoped admin creates nodes it owns
		// ([api]project_admin_can_manage_own_nodes), as on the test bed.
		n.Owner = c.projectID
	}
	// the API sets neither conductor, created_at nor traits: the defaults
	c.fillNodeDefaults(&n)
	return c.putNodeLocked(n), nil
}

// nodeNamedLocked returns the node called name other than except, or nil.
func (c *Cloud) nodeNamedLocked(name string, except *nodeRec) *nodeRec {
	for _, rec := range c.nodeOrder {
		if rec != except && rec.n.Name == name {
			return rec
		}
	}
	return nil
}

// deleteAllowedStates is states.DELETE_ALLOWED_STATES plus "available"
// ([conductor]allow_deleting_available_nodes defaults to True).
const deleteAllowedStates = "('manageable', 'enroll', 'adopt failed', 'available')"

// ironicDelete is DELETE /v1/nodes/{ident}.
func (c *Cloud) ironicDelete(w http.ResponseWriter, _ *http.Request, ver int, ident string) {
	c.withReservedNode(w, ver, ident, func(rec *nodeRec) {
		n := &rec.n
		if !n.Maintenance && n.InstanceUUID != "" {
			ironicError(w, http.StatusConflict, fmt.Sprintf("Node %s is associated with instance %s.", n.UUID, n.InstanceUUID))
			return
		}
		switch n.ProvisionState {
		case "manageable", "enroll", "adopt failed", "available":
		default:
			if !n.Maintenance {
				ironicError(w, http.StatusConflict, fmt.Sprintf("Can not delete node \"%s\" while it is in provision state \"%s\". Valid provision states to perform deletion are: \"%s\", or set the node into maintenance mode", n.UUID, n.ProvisionState, deleteAllowedStates))
				return
			}
		}
		c.deleteNodeLocked(n.UUID)
		w.WriteHeader(http.StatusNoContent)
	})
}

// ironicMaintenance is PUT (on) and DELETE (off) /v1/nodes/{ident}/maintenance.
func (c *Cloud) ironicMaintenance(w http.ResponseWriter, r *http.Request, ver int, ident string, on bool) {
	q := r.URL.Query()
	body, ok := readOptionalJSONObject(w, r)
	if !ok {
		return
	}
	allowed := []string{}
	if on {
		allowed = append(allowed, "reason")
	}
	for k, v := range body {
		q.Set(k, fmt.Sprint(v))
	}
	if msg := unexpected(q, allowed...); msg != "" {
		ironicError(w, http.StatusBadRequest, msg)
		return
	}
	reason := q.Get("reason")
	if s, ok := body["reason"].(string); ok {
		reason = s
	}
	c.withReservedNode(w, ver, ident, func(rec *nodeRec) {
		rec.n.Maintenance = on
		rec.n.MaintenanceReason = reason
		if !on {
			rec.n.MaintenanceReason = ""
			rec.n.Fault = ""
		}
		w.WriteHeader(http.StatusAccepted)
	})
}
