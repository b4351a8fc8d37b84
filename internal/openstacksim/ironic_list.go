package openstacksim

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Ironic node lists: GET /v1/nodes and /v1/nodes/detail (filters, sorting,
// paging, field selection).

// listArgs are the query parameters of GET /v1/nodes (the detail endpoint
// takes neither fields nor detail).
var listArgs = []string{"chassis_uuid", "instance_uuid", "associated", "maintenance", "retired",
	"provision_state", "marker", "limit", "sort_key", "sort_dir", "driver", "fields",
	"resource_class", "fault", "conductor_group", "detail", "conductor", "owner",
	"description_contains", "lessee", "project", "shard", "sharded"}

// invalidSortKeys are the node columns Ironic refuses to sort by.
var invalidSortKeys = []string{"properties", "driver_info", "extra", "instance_info",
	"driver_internal_info", "clean_step", "deploy_step", "raid_config", "target_raid_config",
	"traits", "network_data"}

// nodeListQuery is a parsed GET /v1/nodes or /v1/nodes/detail request.
type nodeListQuery struct {
	detailEndpoint bool

	chassisUUID, instanceUUID        *string
	associated, maintenance, retired *bool
	provisionState, driver           *string
	resourceClass, fault             *string
	conductorGroup, conductor        *string
	owner, lessee, project           *string
	descContains                     *string
	shard                            []string
	sharded                          *bool

	marker           *string
	limitArg         *int
	sortKey, sortDir string
	fields           []string
	detail           *bool

	limit int                // page size after checkPaging
	keyFn func(*nodeRec) any // sort column after checkPaging
}

// ironicList is GET /v1/nodes (detailEndpoint false) and /v1/nodes/detail.
func (c *Cloud) ironicList(w http.ResponseWriter, r *http.Request, ver int, detailEndpoint bool) {
	nq, e := parseNodeListQuery(r.URL.Query(), detailEndpoint)
	if e == nil {
		e = nq.checkMicroversion(ver)
	}
	if e == nil {
		e = nq.resolveFields(ver)
	}
	if e == nil {
		e = nq.checkPaging(c.opts.IronicMaxLimit)
	}
	if e != nil {
		ironicError(w, e.status, e.msg)
		return
	}
	c.mu.Lock()
	page, e := c.selectNodePageLocked(nq)
	var items []any
	if e == nil {
		items, e = c.renderNodePageLocked(nq, page, ver)
	}
	c.mu.Unlock()
	if e != nil {
		ironicError(w, e.status, e.msg)
		return
	}
	body := map[string]any{"nodes": items}
	if nq.instanceUUID == nil && len(page) > 0 && len(page) == nq.limit {
		body["next"] = nq.nextLink(c.ironicPublic(), page[len(page)-1].n.UUID)
	}
	writeJSON(w, http.StatusOK, body)
}

// parseNodeListQuery checks the query's parameter names and parses their
// values (args.py validators); the detail endpoint takes neither fields nor
// detail.
func parseNodeListQuery(q url.Values, detailEndpoint bool) (*nodeListQuery, *apiErr) {
	allowed := listArgs
	if detailEndpoint {
		allowed = slices.DeleteFunc(slices.Clone(listArgs), func(s string) bool { return s == "fields" || s == "detail" })
	}
	if msg := unexpected(q, allowed...); msg != "" {
		return nil, &apiErr{http.StatusBadRequest, msg}
	}
	a := &ironicArgs{q: q}
	nq := &nodeListQuery{detailEndpoint: detailEndpoint, sortKey: "id", sortDir: "asc"}
	// the validated arguments, in Ironic's order (the first bad one is
	// reported)
	nq.chassisUUID, nq.instanceUUID = a.uuid("chassis_uuid"), a.uuid("instance_uuid")
	nq.associated, nq.maintenance, nq.retired = a.boolean("associated"), a.boolean("maintenance"), a.boolean("retired")
	nq.marker, nq.limitArg = a.uuid("marker"), a.integer("limit")
	if !detailEndpoint {
		nq.fields, nq.detail = a.stringList("fields"), a.boolean("detail")
	}
	nq.shard, nq.sharded = a.stringList("shard"), a.boolean("sharded")
	// the plain strings
	for _, arg := range []struct {
		name string
		dst  **string
	}{{"provision_state", &nq.provisionState}, {"driver", &nq.driver}, {"resource_class", &nq.resourceClass},
		{"fault", &nq.fault}, {"conductor_group", &nq.conductorGroup}, {"conductor", &nq.conductor},
		{"owner", &nq.owner}, {"description_contains", &nq.descContains}, {"lessee", &nq.lessee},
		{"project", &nq.project}} {
		*arg.dst = a.str(arg.name)
	}
	if s := a.str("sort_key"); s != nil {
		nq.sortKey = *s
	}
	if s := a.str("sort_dir"); s != nil {
		nq.sortDir = *s
	}
	if a.err != "" {
		return nil, &apiErr{http.StatusBadRequest, a.err}
	}
	return nq, nil
}

// fieldsNotAcceptable reports whether fields= (1.8+) or one of the fields
// is newer than microversion ver (406 "Request not acceptable.").
func fieldsNotAcceptable(fields []string, ver int) bool {
	if fields != nil && ver < 8 {
		return true
	}
	return slices.ContainsFunc(fields, func(f string) bool { return fieldTooNew(f, ver) })
}

// fieldTooNew reports whether node field f came after microversion ver.
func fieldTooNew(f string, ver int) bool {
	m, ok := ironicVersionedFields[f]
	return ok && ver < m
}

// invalidNodeField returns the first of fields that is not a node field
// ("Field X is not a valid field."), or "".
func invalidNodeField(fields []string) string {
	for _, f := range fields {
		if !ironicNodeFields[f] {
			return f
		}
	}
	return ""
}

// checkMicroversion rejects filters newer than ver (406) and invalid
// provision_state and fault values (400), in Ironic's order.
func (nq *nodeListQuery) checkMicroversion(ver int) *apiErr {
	if fieldsNotAcceptable(nq.fields, ver) || fieldTooNew(nq.sortKey, ver) {
		return notAcceptable("Request not acceptable.")
	}
	if nq.provisionState != nil {
		if ver < 9 {
			return notAcceptable("Request not acceptable.")
		}
		if !ironicStates[*nq.provisionState] {
			return apiErrf(http.StatusBadRequest, "Provision state %q is not valid", *nq.provisionState)
		}
	}
	if e := minimalVersions(ver, filterMinor{nq.driver != nil, 16}, filterMinor{nq.resourceClass != nil, 21}); e != nil {
		return e
	}
	if nq.fault != nil {
		if ver < 42 {
			return notAcceptable(minimalVersionMsg(42))
		}
		if !slices.Contains(validFaults, *nq.fault) {
			return apiErrf(http.StatusBadRequest, "Unrecognized fault %q is specified, allowed faults are ('power failure', 'clean failure', 'rescue abort failure')", *nq.fault)
		}
	}
	return minimalVersions(ver, filterMinor{nq.conductorGroup != nil, 46}, filterMinor{nq.conductor != nil, 49},
		filterMinor{nq.owner != nil, 50}, filterMinor{nq.lessee != nil, 65}, filterMinor{nq.shard != nil, 82},
		filterMinor{nq.sharded != nil, 82})
}

// filterMinor is a filter that was given (set) and the microversion that
// introduced it.
type filterMinor struct {
	set   bool
	minor int
}

// minimalVersions answers 406 with the minimal version of the first given
// filter that ver is too old for.
func minimalVersions(ver int, filters ...filterMinor) *apiErr {
	for _, g := range filters {
		if g.set && ver < g.minor {
			return notAcceptable(minimalVersionMsg(g.minor))
		}
	}
	return nil
}

// resolveFields is get_request_return_fields: detail= (1.43+) and fields
// exclude each other, and the plain list returns the default fields.
func (nq *nodeListQuery) resolveFields(ver int) *apiErr {
	if nq.detail != nil && ver < 43 {
		return apiErrf(http.StatusBadRequest, "Invalid query parameter ?detail=%s received.", boolRepr(*nq.detail))
	}
	if nq.fields != nil && nq.detail != nil && *nq.detail {
		return apiErrf(http.StatusBadRequest, "Can not specify ?detail=True and fields in the same request.")
	}
	if !nq.detailEndpoint && nq.fields == nil && (nq.detail == nil || !*nq.detail) {
		nq.fields = slices.Clone(ironicDefaultFields)
	}
	return nil
}

// checkPaging is _get_nodes_collection's check of limit (capped at
// maxLimit), sort_dir and sort_key.
func (nq *nodeListQuery) checkPaging(maxLimit int) *apiErr {
	nq.limit = maxLimit
	if nq.limitArg != nil {
		if *nq.limitArg <= 0 {
			return apiErrf(http.StatusBadRequest, "Limit must be positive")
		}
		nq.limit = min(nq.limit, *nq.limitArg)
	}
	if nq.sortDir != "asc" && nq.sortDir != "desc" {
		return apiErrf(http.StatusBadRequest, "Invalid sort direction: %s. Acceptable values are 'asc' or 'desc'", nq.sortDir)
	}
	if slices.Contains(invalidSortKeys, nq.sortKey) {
		return apiErrf(http.StatusBadRequest, "The sort_key value %s is an invalid field for sorting", nq.sortKey)
	}
	keyFn, ok := nodeSortKeys[nq.sortKey]
	if !ok {
		return apiErrf(http.StatusBadRequest, "The sort_key value %q is an invalid field for sorting", nq.sortKey)
	}
	nq.keyFn = keyFn
	return nil
}

// selectNodePageLocked finds the marker, filters and sorts the nodes and
// cuts the page after the marker; the conductor filter applies to the page
// (as Ironic filters by conductor after the query).
func (c *Cloud) selectNodePageLocked(nq *nodeListQuery) ([]*nodeRec, *apiErr) {
	var markerRec *nodeRec
	if nq.marker != nil {
		markerRec = c.nodes[*nq.marker]
		if markerRec == nil {
			return nil, apiErrf(http.StatusNotFound, "Node %s could not be found.", *nq.marker)
		}
	}
	if nq.chassisUUID != nil {
		return nil, apiErrf(http.StatusNotFound, "Chassis %s could not be found.", *nq.chassisUUID)
	}
	for _, f := range nq.fields {
		if !nodeDBColumns[f] {
			return nil, apiErrf(http.StatusInternalServerError, "type object 'Node' has no attribute '%s'", f)
		}
	}
	var all []*nodeRec
	for _, rec := range c.nodeOrder {
		if nq.matches(&rec.n) {
			all = append(all, rec)
		}
	}
	if nq.sortKey != "id" {
		slices.SortStableFunc(all, nq.compare)
	} else if nq.sortDir == "desc" {
		slices.Reverse(all)
	}
	start := 0
	if markerRec != nil {
		start = len(all)
		for i, rec := range all {
			if nq.compare(rec, markerRec) > 0 {
				start = i
				break
			}
		}
		if c.fieldLoss.RepeatMarker && nq.limit > 1 && start > 0 && all[start-1] == markerRec {
			start--
		}
	}
	page := all[start:]
	if len(page) > nq.limit {
		page = page[:nq.limit]
	}
	if nq.conductor != nil {
		page = slices.DeleteFunc(slices.Clone(page), func(rec *nodeRec) bool { return rec.n.Conductor != *nq.conductor })
	}
	return page, nil
}

// matches applies the query's filters to one node.
func (nq *nodeListQuery) matches(n *Node) bool {
	switch {
	case nq.instanceUUID != nil && n.InstanceUUID != *nq.instanceUUID,
		nq.associated != nil && (n.InstanceUUID != "") != *nq.associated,
		nq.maintenance != nil && n.Maintenance != *nq.maintenance,
		nq.retired != nil && n.Retired != *nq.retired,
		nq.provisionState != nil && n.ProvisionState != *nq.provisionState,
		nq.driver != nil && n.Driver != *nq.driver,
		nq.resourceClass != nil && n.ResourceClass != *nq.resourceClass,
		nq.fault != nil && n.Fault != *nq.fault,
		nq.conductorGroup != nil && n.ConductorGroup != *nq.conductorGroup,
		nq.owner != nil && n.Owner != *nq.owner,
		nq.lessee != nil && n.Lessee != *nq.lessee,
		nq.project != nil && n.Owner != *nq.project && n.Lessee != *nq.project,
		nq.descContains != nil && (n.Description == "" || !strings.Contains(n.Description, *nq.descContains)),
		nq.shard != nil, // no node has a shard
		nq.sharded != nil && *nq.sharded:
		return false
	}
	return true
}

// compare orders two nodes by the sort key, then by id, in the sort
// direction.
func (nq *nodeListQuery) compare(x, y *nodeRec) int {
	d := compareKeys(nq.keyFn(x), nq.keyFn(y))
	if d == 0 {
		d = compareKeys(x.id, y.id)
	}
	if nq.sortDir == "desc" {
		d = -d
	}
	return d
}

// renderNodePageLocked renders the page's nodes with the requested fields;
// pages after the first lose fields under [FieldLoss.LaterPages].
func (c *Cloud) renderNodePageLocked(nq *nodeListQuery, page []*nodeRec, ver int) ([]any, *apiErr) {
	if f := invalidNodeField(nq.fields); f != "" && len(page) > 0 {
		return nil, apiErrf(http.StatusBadRequest, "Field %s is not a valid field.", f)
	}
	public := c.ironicPublic()
	items := make([]any, 0, len(page))
	for _, rec := range page {
		item := renderNode(rec, ver, nq.fields, public)
		if nq.marker != nil && c.fieldLoss.LaterPages {
			c.fieldLoss.strip(item)
		}
		items = append(items, item)
	}
	return items, nil
}

// nextLink is the "next" URL of a full page: only sort_key, sort_dir, the
// truthy associated/maintenance/retired, detail and fields survive, then
// limit and the marker.
func (nq *nodeListQuery) nextLink(public, lastUUID string) string {
	var qs strings.Builder
	fmt.Fprintf(&qs, "sort_key=%s&sort_dir=%s&", nq.sortKey, nq.sortDir)
	for _, f := range []struct {
		name string
		v    *bool
	}{{"associated", nq.associated}, {"maintenance", nq.maintenance}, {"retired", nq.retired}} {
		if f.v != nil && *f.v {
			qs.WriteString(f.name + "=True&")
		}
	}
	if nq.detail != nil {
		fmt.Fprintf(&qs, "detail=%s&", boolRepr(*nq.detail))
	}
	if len(nq.fields) > 0 {
		fmt.Fprintf(&qs, "fields=%s&", strings.Join(nq.fields, ","))
	}
	fmt.Fprintf(&qs, "limit=%d&marker=%s", nq.limit, lastUUID)
	resource := "nodes"
	if nq.detailEndpoint {
		resource = "nodes/detail"
	}
	return public + "/v1/" + resource + "?" + qs.String()
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

// compareKeys orders two sort-key values of the same column.
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
