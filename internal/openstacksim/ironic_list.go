package openstacksim

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Ironic node lists: GET /v1/nodes and /v1/nodes/detail (filters, sorting,
// paging, field selection).

var listArgs = []string{"chassis_uuid", "instance_uuid", "associated", "maintenance", "retired",
	"provision_state", "marker", "limit", "sort_key", "sort_dir", "driver", "fields",
	"resource_class", "fault", "conductor_group", "detail", "conductor", "owner",
	"description_contains", "lessee", "project", "shard", "sharded"}

var invalidSortKeys = []string{"properties", "driver_info", "extra", "instance_info",
	"driver_internal_info", "clean_step", "deploy_step", "raid_config", "target_raid_config",
	"traits", "network_data"}

func (c *Cloud) ironicList(w http.ResponseWriter, r *http.Request, ver int, detailEndpoint bool) {
	q := r.URL.Query()
	allowed := listArgs
	if detailEndpoint {
		allowed = slices.DeleteFunc(slices.Clone(listArgs), func(s string) bool { return s == "fields" || s == "detail" })
	}
	if msg := unexpected(q, allowed...); msg != "" {
		ironicError(w, http.StatusBadRequest, msg)
		return
	}
	a := &ironicArgs{q: q}
	chassisUUID := a.uuid("chassis_uuid")
	instanceUUID := a.uuid("instance_uuid")
	associated := a.boolean("associated")
	maintenance := a.boolean("maintenance")
	retired := a.boolean("retired")
	provisionState := a.str("provision_state")
	marker := a.uuid("marker")
	limitArg := a.integer("limit")
	sortKey := "id"
	if s := a.str("sort_key"); s != nil {
		sortKey = *s
	}
	sortDir := "asc"
	if s := a.str("sort_dir"); s != nil {
		sortDir = *s
	}
	driver := a.str("driver")
	var fields []string
	if !detailEndpoint {
		fields = a.stringList("fields")
	}
	resourceClass := a.str("resource_class")
	fault := a.str("fault")
	conductorGroup := a.str("conductor_group")
	var detail *bool
	if !detailEndpoint {
		detail = a.boolean("detail")
	}
	conductor := a.str("conductor")
	owner := a.str("owner")
	descContains := a.str("description_contains")
	lessee := a.str("lessee")
	project := a.str("project")
	shard := a.stringList("shard")
	sharded := a.boolean("sharded")
	if a.err != "" {
		ironicError(w, http.StatusBadRequest, a.err)
		return
	}

	notAcceptable := func(msg string) { ironicError(w, http.StatusNotAcceptable, msg) }
	if fields != nil && ver < 8 {
		notAcceptable("Request not acceptable.")
		return
	}
	for _, f := range append(slices.Clone(fields), sortKey) {
		if m, ok := ironicVersionedFields[f]; ok && ver < m {
			notAcceptable("Request not acceptable.")
			return
		}
	}
	if provisionState != nil {
		if ver < 9 {
			notAcceptable("Request not acceptable.")
			return
		}
		if !ironicStates[*provisionState] {
			ironicError(w, http.StatusBadRequest, fmt.Sprintf("Provision state %q is not valid", *provisionState))
			return
		}
	}
	for _, g := range []struct {
		set   bool
		minor int
	}{{driver != nil, 16}, {resourceClass != nil, 21}} {
		if g.set && ver < g.minor {
			notAcceptable(minimalVersionMsg(g.minor))
			return
		}
	}
	if fault != nil {
		if ver < 42 {
			notAcceptable(minimalVersionMsg(42))
			return
		}
		if !slices.Contains(validFaults, *fault) {
			ironicError(w, http.StatusBadRequest, fmt.Sprintf("Unrecognized fault %q is specified, allowed faults are ('power failure', 'clean failure', 'rescue abort failure')", *fault))
			return
		}
	}
	for _, g := range []struct {
		set   bool
		minor int
	}{{conductorGroup != nil, 46}, {conductor != nil, 49}, {owner != nil, 50}, {lessee != nil, 65}, {shard != nil, 82}, {sharded != nil, 82}} {
		if g.set && ver < g.minor {
			notAcceptable(minimalVersionMsg(g.minor))
			return
		}
	}
	// get_request_return_fields
	if detail != nil && ver < 43 {
		ironicError(w, http.StatusBadRequest, fmt.Sprintf("Invalid query parameter ?detail=%s received.", boolRepr(*detail)))
		return
	}
	if fields != nil && detail != nil && *detail {
		ironicError(w, http.StatusBadRequest, "Can not specify ?detail=True and fields in the same request.")
		return
	}
	if !detailEndpoint && fields == nil && (detail == nil || !*detail) {
		fields = slices.Clone(ironicDefaultFields)
	}
	// _get_nodes_collection
	limit := c.opts.IronicMaxLimit
	if limitArg != nil {
		if *limitArg <= 0 {
			ironicError(w, http.StatusBadRequest, "Limit must be positive")
			return
		}
		limit = min(limit, *limitArg)
	}
	if sortDir != "asc" && sortDir != "desc" {
		ironicError(w, http.StatusBadRequest, fmt.Sprintf("Invalid sort direction: %s. Acceptable values are 'asc' or 'desc'", sortDir))
		return
	}
	if slices.Contains(invalidSortKeys, sortKey) {
		ironicError(w, http.StatusBadRequest, fmt.Sprintf("The sort_key value %s is an invalid field for sorting", sortKey))
		return
	}
	keyFn, ok := nodeSortKeys[sortKey]
	if !ok {
		ironicError(w, http.StatusBadRequest, fmt.Sprintf("The sort_key value %q is an invalid field for sorting", sortKey))
		return
	}

	c.mu.Lock()
	var markerRec *nodeRec
	if marker != nil {
		markerRec = c.nodes[*marker]
		if markerRec == nil {
			c.mu.Unlock()
			ironicError(w, http.StatusNotFound, fmt.Sprintf("Node %s could not be found.", *marker))
			return
		}
	}
	if chassisUUID != nil {
		c.mu.Unlock()
		ironicError(w, http.StatusNotFound, fmt.Sprintf("Chassis %s could not be found.", *chassisUUID))
		return
	}
	for _, f := range fields {
		if !nodeDBColumns[f] {
			c.mu.Unlock()
			ironicError(w, http.StatusInternalServerError, fmt.Sprintf("type object 'Node' has no attribute '%s'", f))
			return
		}
	}
	match := func(n *Node) bool {
		switch {
		case instanceUUID != nil && n.InstanceUUID != *instanceUUID,
			associated != nil && (n.InstanceUUID != "") != *associated,
			maintenance != nil && n.Maintenance != *maintenance,
			retired != nil && n.Retired != *retired,
			provisionState != nil && n.ProvisionState != *provisionState,
			driver != nil && n.Driver != *driver,
			resourceClass != nil && n.ResourceClass != *resourceClass,
			fault != nil && n.Fault != *fault,
			conductorGroup != nil && n.ConductorGroup != *conductorGroup,
			owner != nil && n.Owner != *owner,
			lessee != nil && n.Lessee != *lessee,
			project != nil && n.Owner != *project && n.Lessee != *project,
			descContains != nil && (n.Description == "" || !strings.Contains(n.Description, *descContains)),
			shard != nil, // no node has a shard
			sharded != nil && *sharded:
			return false
		}
		return true
	}
	var all []*nodeRec
	for _, rec := range c.nodeOrder {
		if match(&rec.n) {
			all = append(all, rec)
		}
	}
	less := func(x, y *nodeRec) int {
		d := compareKeys(keyFn(x), keyFn(y))
		if d == 0 {
			d = compareKeys(x.id, y.id)
		}
		if sortDir == "desc" {
			d = -d
		}
		return d
	}
	if sortKey != "id" {
		slices.SortStableFunc(all, less)
	} else if sortDir == "desc" {
		slices.Reverse(all)
	}
	start := 0
	if markerRec != nil {
		start = len(all)
		for i, rec := range all {
			if less(rec, markerRec) > 0 {
				start = i
				break
			}
		}
	}
	page := all[start:]
	if len(page) > limit {
		page = page[:limit]
	}
	if conductor != nil {
		page = slices.DeleteFunc(slices.Clone(page), func(rec *nodeRec) bool { return rec.n.Conductor != *conductor })
	}
	public := c.ironicPublic()
	items := make([]any, 0, len(page))
	for _, rec := range page {
		for _, f := range fields {
			if !ironicNodeFields[f] {
				c.mu.Unlock()
				ironicError(w, http.StatusBadRequest, fmt.Sprintf("Field %s is not a valid field.", f))
				return
			}
		}
		item := renderNode(rec, ver, fields, public)
		if marker != nil && c.fieldLoss.LaterPages {
			c.fieldLoss.strip(item)
		}
		items = append(items, item)
	}
	c.mu.Unlock()

	body := map[string]any{"nodes": items}
	if instanceUUID == nil && len(page) > 0 && len(page) == limit {
		var qs strings.Builder
		fmt.Fprintf(&qs, "sort_key=%s&sort_dir=%s&", sortKey, sortDir)
		if associated != nil && *associated {
			qs.WriteString("associated=True&")
		}
		if maintenance != nil && *maintenance {
			qs.WriteString("maintenance=True&")
		}
		if retired != nil && *retired {
			qs.WriteString("retired=True&")
		}
		if detail != nil {
			fmt.Fprintf(&qs, "detail=%s&", boolRepr(*detail))
		}
		if len(fields) > 0 {
			fmt.Fprintf(&qs, "fields=%s&", strings.Join(fields, ","))
		}
		fmt.Fprintf(&qs, "limit=%d&marker=%s", limit, page[len(page)-1].n.UUID)
		resource := "nodes"
		if detailEndpoint {
			resource = "nodes/detail"
		}
		body["next"] = public + "/v1/" + resource + "?" + qs.String()
	}
	writeJSON(w, http.StatusOK, body)
}

// nodeSortKeys are the node columns the simulator can sort by.
var nodeSortKeys = map[string]func(*nodeRec) any{
	"id":                     func(r *nodeRec) any { return r.id },
	"uuid":                   func(r *nodeRec) any { return r.n.UUID },
	"name":                   func(r *nodeRec) any { return nullStr(r.n.Name) },
	"created_at":             func(r *nodeRec) any { return r.n.CreatedAt },
	"updated_at":             func(r *nodeRec) any { return r.n.UpdatedAt },
	"provision_updated_at":   func(r *nodeRec) any { return r.n.ProvisionUpdatedAt },
	"provision_state":        func(r *nodeRec) any { return nullStr(r.n.ProvisionState) },
	"target_provision_state": func(r *nodeRec) any { return nullStr(r.n.TargetProvisionState) },
	"power_state":            func(r *nodeRec) any { return nullStr(r.n.PowerState) },
	"target_power_state":     func(r *nodeRec) any { return nullStr(r.n.TargetPowerState) },
	"maintenance":            func(r *nodeRec) any { return r.n.Maintenance },
	"maintenance_reason":     func(r *nodeRec) any { return nullStr(r.n.MaintenanceReason) },
	"retired":                func(r *nodeRec) any { return r.n.Retired },
	"driver":                 func(r *nodeRec) any { return nullStr(r.n.Driver) },
	"resource_class":         func(r *nodeRec) any { return nullStr(r.n.ResourceClass) },
	"conductor_group":        func(r *nodeRec) any { return r.n.ConductorGroup },
	"owner":                  func(r *nodeRec) any { return nullStr(r.n.Owner) },
	"lessee":                 func(r *nodeRec) any { return nullStr(r.n.Lessee) },
	"instance_uuid":          func(r *nodeRec) any { return nullStr(r.n.InstanceUUID) },
	"fault":                  func(r *nodeRec) any { return nullStr(r.n.Fault) },
	"last_error":             func(r *nodeRec) any { return nullStr(r.n.LastError) },
	"reservation":            func(r *nodeRec) any { return nullStr(r.n.Reservation) },
	"description":            func(r *nodeRec) any { return nullStr(r.n.Description) },
}

// nullStr marks "" as SQL NULL for ordering (NULLs sort first ascending, as
// in SQLite).
type nullStr string

func compareKeys(a, b any) int {
	switch x := a.(type) {
	case int64:
		return cmpOrdered(x, b.(int64))
	case nullStr:
		y := b.(nullStr)
		switch {
		case x == "" && y == "":
			return 0
		case x == "":
			return -1
		case y == "":
			return 1
		}
		return strings.Compare(string(x), string(y))
	case string:
		return strings.Compare(x, b.(string))
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case time.Time:
		return x.Compare(b.(time.Time))
	}
	return 0
}

func cmpOrdered[T int64 | int](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
