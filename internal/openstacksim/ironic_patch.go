package openstacksim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Ironic PATCH /v1/nodes/{ident} (JSON patch on the simple node fields).

// ironicPatch is PATCH /v1/nodes/{ident}: a JSON patch checked against
// PATCH_ALLOWED_FIELDS, applied to a copy, then the instance and name checks.
func (c *Cloud) ironicPatch(w http.ResponseWriter, r *http.Request, ver int, ident string) {
	raw, _ := readJSONBody(r)
	var ops []struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	if err := json.Unmarshal(raw, &ops); err != nil {
		ironicError(w, http.StatusBadRequest, "Invalid patch: the request body must be a JSON list of patch operations")
		return
	}
	for _, op := range ops {
		root := strings.SplitN(strings.TrimPrefix(op.Path, "/"), "/", 2)[0]
		if !slices.Contains(patchAllowedFields, root) {
			ironicError(w, http.StatusBadRequest, fmt.Sprintf("Cannot patch %s. Only the following can be updated: %s", op.Path, strings.Join(patchAllowedFields, ", ")))
			return
		}
	}
	c.withNode(w, ver, ident, func(rec *nodeRec) {
		n := cloneNode(rec.n)
		for _, op := range ops {
			if msg := applyPatch(&n, op.Op, op.Path, op.Value); msg != "" {
				ironicError(w, http.StatusBadRequest, msg)
				return
			}
		}
		if rec.n.InstanceUUID != "" && n.InstanceUUID != "" && n.InstanceUUID != rec.n.InstanceUUID {
			ironicError(w, http.StatusConflict, fmt.Sprintf("Node %s is associated with instance %s.", rec.n.UUID, rec.n.InstanceUUID))
			return
		}
		if n.Name != rec.n.Name && n.Name != "" {
			if !validLogicalName(n.Name) {
				ironicError(w, http.StatusBadRequest, fmt.Sprintf("Node %s can not be updated with invalid name %s", rec.n.UUID, n.Name))
				return
			}
			if c.nodeNamedLocked(n.Name, rec) != nil {
				ironicError(w, http.StatusConflict, fmt.Sprintf("A node with name %s already exists.", n.Name))
				return
			}
		}
		if !c.lockLocked(w, rec) {
			return
		}
		if !n.Maintenance {
			n.MaintenanceReason, n.Fault = "", ""
		}
		n.UpdatedAt = rec.n.UpdatedAt
		rec.n = n
		writeJSON(w, http.StatusOK, renderNode(rec, ver, nil, c.ironicPublic()))
	})
}

// patchAllowedFields is PATCH_ALLOWED_FIELDS of Ironic 21.4 (sorted, as its
// error message lists them).
var patchAllowedFields = []string{"automated_clean", "bios_interface", "boot_interface",
	"chassis_uuid", "conductor_group", "console_interface", "deploy_interface", "description",
	"driver", "driver_info", "extra", "inspect_interface", "instance_info", "instance_uuid",
	"lessee", "maintenance", "management_interface", "name", "network_data",
	"network_interface", "owner", "power_interface", "properties", "protected",
	"protected_reason", "raid_interface", "rescue_interface", "resource_class", "retired",
	"retired_reason", "shard", "storage_interface", "vendor_interface"}

// applyPatch applies one JSON-patch operation to the fields the simulator
// stores; it returns a 400 message or "".
func applyPatch(n *Node, op, path string, value any) string {
	if op != "add" && op != "replace" && op != "remove" {
		return fmt.Sprintf("Invalid patch: operation %q is not supported", op)
	}
	if op == "remove" {
		value = nil
	}
	parts := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 2)
	if field, ok := patchDictFields[parts[0]]; ok {
		dst := field(n)
		if len(parts) == 2 {
			return patchDictKey(dst, parts[1], value)
		}
		return patchDict(dst, path, value)
	}
	if len(parts) == 2 {
		return fmt.Sprintf("Cannot patch %s: the simulator does not model this field.", path)
	}
	if field, ok := patchStringFields[parts[0]]; ok {
		return patchString(field(n), path, value)
	}
	if field, ok := patchBoolFields[parts[0]]; ok {
		b, ok := value.(bool)
		if !ok && value != nil {
			return fmt.Sprintf("Invalid patch: %s must be a boolean", path)
		}
		*field(n) = b
		return ""
	}
	return fmt.Sprintf("Cannot patch %s: the simulator does not model this field.", path)
}

// patchDictFields, patchStringFields and patchBoolFields are the node
// fields a patch can change, by type.
var (
	patchDictFields = map[string]func(*Node) *map[string]any{
		"extra":         func(n *Node) *map[string]any { return &n.Extra },
		"properties":    func(n *Node) *map[string]any { return &n.Properties },
		"driver_info":   func(n *Node) *map[string]any { return &n.DriverInfo },
		"instance_info": func(n *Node) *map[string]any { return &n.InstanceInfo },
	}
	patchStringFields = map[string]func(*Node) *string{
		"name":           func(n *Node) *string { return &n.Name },
		"description":    func(n *Node) *string { return &n.Description },
		"resource_class": func(n *Node) *string { return &n.ResourceClass },
		"owner":          func(n *Node) *string { return &n.Owner },
		"lessee":         func(n *Node) *string { return &n.Lessee },
		"instance_uuid":  func(n *Node) *string { return &n.InstanceUUID },
		"retired_reason": func(n *Node) *string { return &n.RetiredReason },
	}
	patchBoolFields = map[string]func(*Node) *bool{
		"maintenance": func(n *Node) *bool { return &n.Maintenance },
		"retired":     func(n *Node) *bool { return &n.Retired },
	}
)

// patchString sets a string field; null (or remove) clears it.
func patchString(dst *string, path string, value any) string {
	if value == nil {
		*dst = ""
		return ""
	}
	s, ok := value.(string)
	if !ok {
		return fmt.Sprintf("Invalid patch: %s must be a string", path)
	}
	*dst = s
	return ""
}

// patchDictKey sets or (value nil) removes one key of a dictionary field.
func patchDictKey(dst *map[string]any, key string, value any) string {
	if *dst == nil {
		*dst = map[string]any{}
	}
	if value == nil {
		if _, ok := (*dst)[key]; !ok {
			return fmt.Sprintf("can't remove non-existent object '%s'", key)
		}
		delete(*dst, key)
		return ""
	}
	(*dst)[key] = value
	return ""
}

// patchDict replaces a whole dictionary field; null (or remove) empties it.
func patchDict(dst *map[string]any, path string, value any) string {
	m, ok := value.(map[string]any)
	if !ok && value != nil {
		return fmt.Sprintf("Invalid patch: %s must be an object", path)
	}
	*dst = m
	if *dst == nil {
		*dst = map[string]any{}
	}
	return ""
}
