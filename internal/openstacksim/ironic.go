package openstacksim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

const ironicVersionHeader = "X-OpenStack-Ironic-API-Version"

// parseIronicVersion reads the requested microversion like
// ironic.api.controllers.base.Version and v1.Controller._check_version: only
// X-OpenStack-Ironic-API-Version counts (Ironic 21.4 ignores
// OpenStack-API-Version), default 1.1, "latest" = max. On error it returns
// the 406 message and whether the min/max headers accompany it.
func parseIronicVersion(h http.Header, max int) (minor int, errMsg string, rangeHeaders bool) {
	v := h.Get(ironicVersionHeader)
	if v == "" {
		v = "1.1"
	}
	if strings.EqualFold(v, "latest") {
		v = fmt.Sprintf("1.%d", max)
	}
	parts := strings.Split(v, ".")
	if len(parts) != 2 {
		return 0, "Invalid value for " + ironicVersionHeader + " header", false
	}
	major, err1 := strconv.Atoi(strings.TrimSpace(parts[0]))
	mi, err2 := strconv.Atoi(strings.TrimSpace(parts[1]))
	if err1 != nil || err2 != nil {
		return 0, "Invalid value for " + ironicVersionHeader + " header", false
	}
	rng := fmt.Sprintf("[1.1, 1.%d]", max)
	if major != 1 {
		return 0, fmt.Sprintf("Mutually exclusive versions requested. Version %d.%d requested but not supported by this service. The supported version range is: %s.", major, mi, rng), true
	}
	if mi < 1 || mi > max {
		return 0, fmt.Sprintf("Version %d.%d was requested but the minor version is not supported by this service. The supported version range is: %s.", major, mi, rng), true
	}
	return mi, "", true
}

func (c *Cloud) setIronicRangeHeaders(w http.ResponseWriter) {
	w.Header().Set("X-OpenStack-Ironic-API-Minimum-Version", "1.1")
	w.Header().Set("X-OpenStack-Ironic-API-Maximum-Version", fmt.Sprintf("1.%d", c.ironicMax))
}

func (c *Cloud) setIronicVersionHeaders(w http.ResponseWriter, minor int) {
	c.setIronicRangeHeaders(w)
	w.Header().Set(ironicVersionHeader, fmt.Sprintf("1.%d", minor))
}

func (c *Cloud) ironicPublic() string { return c.URL() + baremetalPrefix }

func (c *Cloud) ironicVersionDoc() map[string]any {
	return map[string]any{
		"id":          "v1",
		"links":       []any{ironicLinkBookmark(c.ironicPublic(), "v1")},
		"status":      "CURRENT",
		"min_version": "1.1",
		"version":     fmt.Sprintf("1.%d", c.ironicMax),
	}
}

func ironicLinkBookmark(public, resource string) map[string]any {
	return map[string]any{"href": public + "/" + resource + "/", "rel": "self"}
}

// serveBaremetal routes /baremetal/...; rel is the path below /baremetal.
func (c *Cloud) serveBaremetal(w http.ResponseWriter, r *http.Request, rel string) {
	public := c.ironicPublic()
	p := strings.TrimSuffix(rel, "/")
	if p == "" {
		w.Header().Set("Openstack-Request-Id", requestID())
		writeJSON(w, http.StatusOK, map[string]any{
			"name":            "OpenStack Ironic API",
			"description":     "Ironic is an OpenStack project which enables the provision and management of baremetal machines.",
			"default_version": c.ironicVersionDoc(),
			"versions":        []any{c.ironicVersionDoc()},
		})
		return
	}
	// The root controller sends paths without the version element to v1.
	if p != "/v1" && !strings.HasPrefix(p, "/v1/") {
		p = "/v1" + p
	}
	if p != "/v1" && !c.validToken(r) { // /v1 itself is a public route
		c.middleware401(w)
		return
	}
	w.Header().Set("Openstack-Request-Id", requestID())
	ver, msg, rng := parseIronicVersion(r.Header, c.ironicMax)
	if msg != "" {
		if rng {
			c.setIronicRangeHeaders(w)
		}
		pecanError(w, http.StatusNotAcceptable, msg)
		return
	}
	c.setIronicVersionHeaders(w, ver)
	if p == "/v1" {
		if r.Method != http.MethodGet {
			routingError(w, http.StatusMethodNotAllowed, "", "")
			return
		}
		c.ironicV1Doc(w, public, ver)
		return
	}
	segs := strings.Split(strings.TrimPrefix(p, "/v1/"), "/")
	switch { // provision.go
	case len(segs) == 1 && segs[0] == "drivers" && r.Method == http.MethodGet:
		c.ironicDrivers(w)
		return
	case len(segs) == 1 && segs[0] == "ports":
		c.ironicPorts(w, r)
		return
	}
	if segs[0] != "nodes" {
		routingError(w, http.StatusNotFound, "", "")
		return
	}
	switch {
	case len(segs) == 1:
		switch r.Method {
		case http.MethodGet:
			c.ironicList(w, r, ver, false)
		case http.MethodPost:
			c.ironicCreate(w, r, ver)
		default:
			routingError(w, http.StatusMethodNotAllowed, "", "DELETE, GET, PATCH, POST")
		}
		return
	case len(segs) == 2 && segs[1] == "detail" && r.Method == http.MethodGet:
		c.ironicList(w, r, ver, true)
		return
	}
	ident := segs[1]
	// NodesController._lookup validates the identifier first.
	if !validLogicalName(ident) && !isUUIDLike(ident) {
		routingError(w, http.StatusBadRequest, "Expected UUID or name for node: "+ident, "")
		return
	}
	switch {
	case len(segs) == 2:
		switch r.Method {
		case http.MethodGet:
			c.ironicGet(w, r, ver, ident)
		case http.MethodPatch:
			c.ironicPatch(w, r, ver, ident)
		case http.MethodDelete:
			c.ironicDelete(w, r, ver, ident)
		case http.MethodPost:
			// routed to post() with the identifier as the node body
			ironicError(w, http.StatusBadRequest, fmt.Sprintf("Schema error for node: '%s' is not of type 'object'", ident))
		default:
			routingError(w, http.StatusMethodNotAllowed, "", "DELETE, GET, PATCH, POST")
		}
	case segs[2] == "maintenance" && len(segs) == 3:
		switch r.Method {
		case http.MethodPut:
			c.ironicMaintenance(w, r, ver, ident, true)
		case http.MethodDelete:
			c.ironicMaintenance(w, r, ver, ident, false)
		default:
			routingError(w, http.StatusMethodNotAllowed, "", "DELETE, PUT")
		}
	case segs[2] == "traits" && len(segs) <= 4:
		if ver < 37 {
			// Before 1.37 there is no traits sub-resource: the request
			// falls through to NodesController (seen on the test bed).
			switch r.Method {
			case http.MethodGet:
				ironicError(w, http.StatusNotAcceptable, "Request not acceptable.")
			case http.MethodDelete:
				ironicError(w, http.StatusNotFound, "Resource could not be found.")
			default:
				routingError(w, http.StatusMethodNotAllowed, "", "DELETE, GET, PATCH, POST")
			}
			return
		}
		trait := ""
		if len(segs) == 4 {
			trait = segs[3]
		}
		switch r.Method {
		case http.MethodGet:
			if trait != "" {
				routingError(w, http.StatusMethodNotAllowed, "", "DELETE, GET, PUT")
				return
			}
			c.ironicTraitsGet(w, r, ver, ident)
		case http.MethodPut:
			c.ironicTraitsPut(w, r, ver, ident, trait, len(segs) == 4)
		case http.MethodDelete:
			c.ironicTraitsDelete(w, r, ver, ident, trait)
		default:
			routingError(w, http.StatusMethodNotAllowed, "", "DELETE, GET, PUT")
		}
	case segs[2] == "states" && len(segs) == 4 && segs[3] == "provision" && r.Method == http.MethodPut:
		c.ironicProvision(w, r, ver, ident)
	case segs[2] == "states" && len(segs) == 4 && segs[3] == "power" && r.Method == http.MethodPut:
		c.ironicPower(w, r, ver, ident)
	case segs[2] == "states" && len(segs) == 3 && r.Method == http.MethodGet:
		c.ironicStates(w, r, ver, ident)
	default:
		routingError(w, http.StatusNotFound, "", "")
	}
}

func (c *Cloud) ironicV1Doc(w http.ResponseWriter, public string, ver int) {
	res := func(name string) []any {
		return []any{ironicLink("self", public, name, "", false), ironicLink("bookmark", public, name, "", true)}
	}
	doc := map[string]any{
		"id": "v1",
		"links": []any{
			ironicLinkBookmark(public, "v1"),
			map[string]any{"href": "https://docs.openstack.org//ironic/latest/contributor//webapi.html", "rel": "describedby", "type": "text/html"},
		},
		"media_types": map[string]any{"base": "application/json", "type": "application/vnd.openstack.ironic.v1+json"},
		"chassis":     res("chassis"),
		"nodes":       res("nodes"),
		"ports":       res("ports"),
		"drivers":     res("drivers"),
		"version":     c.ironicVersionDoc(),
	}
	// the resources v1() adds per microversion
	for _, r := range []struct {
		name  string
		minor int
	}{{"portgroups", 23}, {"volume", 32}, {"lookup", 22}, {"heartbeat", 22}, {"conductors", 49},
		{"allocations", 52}, {"events", 54}, {"deploy_templates", 55}, {"shards", 82}} {
		if ver >= r.minor {
			doc[r.name] = res(r.name)
		}
	}
	writeJSON(w, http.StatusOK, doc)
}

// routingError answers an error pecan raises while routing (pecan.abort):
// the webob response replaces the controller's, so the microversion headers
// set so far are not sent.
func routingError(w http.ResponseWriter, status int, description, allow string) {
	for _, h := range []string{ironicVersionHeader, "X-OpenStack-Ironic-API-Minimum-Version", "X-OpenStack-Ironic-API-Maximum-Version"} {
		w.Header().Del(h)
	}
	if allow != "" {
		w.Header().Set("Allow", allow)
	}
	pecanError(w, status, description)
}

// ---------------------------------------------------------------------------
// argument validation (ironic/common/args.py)

type ironicArgs struct {
	q   url.Values
	err string // first validation error (400)
}

func (a *ironicArgs) raw(name string) (string, bool) {
	v, ok := a.q[name]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[0], true
}

func (a *ironicArgs) fail(format string, args ...any) {
	if a.err == "" {
		a.err = fmt.Sprintf(format, args...)
	}
}

func (a *ironicArgs) str(name string) *string {
	v, ok := a.raw(name)
	if !ok {
		return nil
	}
	return &v
}

func (a *ironicArgs) uuid(name string) *string {
	v, ok := a.raw(name)
	if !ok {
		return nil
	}
	if !isUUIDLike(v) {
		a.fail("Expected UUID for %s: %s", name, v)
	}
	return &v
}

func (a *ironicArgs) boolean(name string) *bool {
	v, ok := a.raw(name)
	if !ok {
		return nil
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "t", "true", "on", "y", "yes":
		b := true
		return &b
	case "0", "f", "false", "off", "n", "no":
		b := false
		return &b
	}
	a.fail("Invalid %s: Unrecognized value '%s', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'", name, v)
	return nil
}

func (a *ironicArgs) integer(name string) *int {
	v, ok := a.raw(name)
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		a.fail("Expected an integer for %s: %s", name, v)
		return nil
	}
	return &n
}

// stringList is args.string_list: comma separated, trimmed, lower-cased,
// de-duplicated; an empty value gives an empty (non-nil) list.
func (a *ironicArgs) stringList(name string) []string {
	v, ok := a.raw(name)
	if !ok {
		return nil
	}
	items := []string{}
	for _, s := range strings.Split(v, ",") {
		s = strings.ToLower(strings.TrimSpace(s))
		if s != "" && !slices.Contains(items, s) {
			items = append(items, s)
		}
	}
	return items
}

// unexpected returns Ironic's "Unexpected arguments" message for query
// parameters the method does not take, or "".
func unexpected(q url.Values, allowed ...string) string {
	var extra []string
	for k := range q {
		if !slices.Contains(allowed, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) == 0 {
		return ""
	}
	sort.Strings(extra)
	return "Unexpected arguments: " + strings.Join(extra, ", ")
}

var hexRe = regexp.MustCompile(`^[0-9a-f]{32}$`)

// isUUIDLike is oslo_utils.uuidutils.is_uuid_like.
func isUUIDLike(s string) bool {
	t := strings.ToLower(s)
	t = strings.TrimPrefix(t, "urn:")
	t = strings.TrimPrefix(t, "uuid:")
	t = strings.TrimPrefix(t, "{")
	t = strings.TrimSuffix(t, "}")
	t = strings.ReplaceAll(t, "-", "")
	return hexRe.MatchString(t)
}

var logicalNameRe = regexp.MustCompile(`^[A-Za-z0-9\-._~]+$`)

func validLogicalName(s string) bool { return len(s) <= 255 && logicalNameRe.MatchString(s) }

func boolRepr(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func minimalVersionMsg(minor int) string {
	return fmt.Sprintf("Request not acceptable. The minimal required API version should be 1.%d", minor)
}

// ---------------------------------------------------------------------------
// node lookup and locking

// lookupNodeLocked is api_utils.get_rpc_node: by UUID, else by name (1.5+).
// It returns the record or writes the error.
func (c *Cloud) lookupNodeLocked(w http.ResponseWriter, ver int, ident string) *nodeRec {
	if isUUIDLike(ident) {
		if rec, ok := c.nodes[ident]; ok {
			return rec
		}
	} else if ver >= 5 {
		if !validLogicalName(ident) {
			ironicError(w, http.StatusBadRequest, fmt.Sprintf("Expected a logical name or UUID but received %s.", ident))
			return nil
		}
		for _, rec := range c.nodeOrder {
			if rec.n.Name == ident {
				return rec
			}
		}
	}
	ironicError(w, http.StatusNotFound, fmt.Sprintf("Node %s could not be found.", ident))
	return nil
}

// lockLocked is task_manager.acquire: 409 NodeLocked while a reservation is
// held (the real conductor retries for a few seconds first). On success the
// reservation round trip bumps updated_at.
func (c *Cloud) lockLocked(w http.ResponseWriter, rec *nodeRec) bool {
	if rec.n.Reservation != "" {
		ironicError(w, http.StatusConflict, fmt.Sprintf("Node %s is locked by host %s, please retry after the current operation is completed.", rec.n.UUID, rec.n.Reservation))
		return false
	}
	rec.n.UpdatedAt = c.now()
	return true
}

// ---------------------------------------------------------------------------
// GET /v1/nodes and /v1/nodes/detail

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

// ---------------------------------------------------------------------------
// single node

func (c *Cloud) ironicGet(w http.ResponseWriter, r *http.Request, ver int, ident string) {
	q := r.URL.Query()
	if msg := unexpected(q, "fields"); msg != "" {
		ironicError(w, http.StatusBadRequest, msg)
		return
	}
	a := &ironicArgs{q: q}
	fields := a.stringList("fields")
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.lookupNodeLocked(w, ver, ident)
	if rec == nil {
		return
	}
	if fields != nil && ver < 8 {
		ironicError(w, http.StatusNotAcceptable, "Request not acceptable.")
		return
	}
	for _, f := range fields {
		if m, ok := ironicVersionedFields[f]; ok && ver < m {
			ironicError(w, http.StatusNotAcceptable, "Request not acceptable.")
			return
		}
	}
	for _, f := range fields {
		if !ironicNodeFields[f] {
			ironicError(w, http.StatusBadRequest, fmt.Sprintf("Field %s is not a valid field.", f))
			return
		}
	}
	item := renderNode(rec, ver, fields, c.ironicPublic())
	if c.fieldLoss.SingleNode {
		c.fieldLoss.strip(item)
	}
	writeJSON(w, http.StatusOK, item)
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
	Drop []string
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

func (c *Cloud) ironicStates(w http.ResponseWriter, _ *http.Request, ver int, ident string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.lookupNodeLocked(w, ver, ident)
	if rec == nil {
		return
	}
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
}

// nodeCreateFields are the properties of Ironic's node_schema().
var nodeCreateFields = []string{"automated_clean", "bios_interface", "boot_interface", "boot_mode",
	"chassis_uuid", "conductor_group", "console_enabled", "console_interface", "deploy_interface",
	"description", "driver", "driver_info", "extra", "inspect_interface", "instance_info",
	"instance_uuid", "lessee", "management_interface", "maintenance", "name", "network_data",
	"network_interface", "owner", "power_interface", "properties", "raid_interface",
	"rescue_interface", "resource_class", "retired", "retired_reason", "secure_boot", "shard",
	"storage_interface", "uuid", "vendor_interface"}

func readJSONBody(r *http.Request) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r.Body, 4<<20))
}

func (c *Cloud) ironicCreate(w http.ResponseWriter, r *http.Request, ver int) {
	raw, _ := readJSONBody(r)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil || body == nil {
		ironicError(w, http.StatusBadRequest, "Schema error for node: None is not of type 'object'")
		return
	}
	var extra []string
	for k := range body {
		if !slices.Contains(nodeCreateFields, k) {
			extra = append(extra, "'"+k+"'")
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		verb := "was"
		if len(extra) > 1 {
			verb = "were"
		}
		ironicError(w, http.StatusBadRequest, fmt.Sprintf("Schema error for node: Additional properties are not allowed (%s %s unexpected)", strings.Join(extra, ", "), verb))
		return
	}
	str := func(k string) string { s, _ := body[k].(string); return s }
	obj := func(k string) map[string]any { m, _ := body[k].(map[string]any); return m }
	if _, ok := body["driver"].(string); !ok {
		ironicError(w, http.StatusBadRequest, "Schema error for node: 'driver' is a required property")
		return
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
		ironicError(w, http.StatusNotAcceptable, "Request not acceptable.")
		return
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
		if ver < 5 {
			ironicError(w, http.StatusNotAcceptable, "Request not acceptable.")
			return
		}
		if !validLogicalName(n.Name) {
			ironicError(w, http.StatusBadRequest, fmt.Sprintf("Cannot create node with invalid name '%s'", n.Name))
			return
		}
		if n.Name == "detail" || n.Name == "validate" {
			ironicError(w, http.StatusBadRequest, fmt.Sprintf("The word \"%s\" is reserved and can not be used as a node name. Reserved words are: detail, validate.", n.Name))
			return
		}
	}
	n.ProvisionState = "enroll"
	if ver < 11 {
		n.ProvisionState = "available"
	}
	if n.Driver != "fake-hardware" || n.ConductorGroup != "" {
		ironicError(w, http.StatusBadRequest, fmt.Sprintf("No valid host was found. Reason: No conductor service registered which supports driver %s for conductor group \"%s\".", n.Driver, n.ConductorGroup))
		return
	}
	c.mu.Lock()
	if _, dup := c.nodes[n.UUID]; dup {
		c.mu.Unlock()
		ironicError(w, http.StatusConflict, fmt.Sprintf("A node with UUID %s already exists.", n.UUID))
		return
	}
	if n.Name != "" {
		for _, rec := range c.nodeOrder {
			if rec.n.Name == n.Name {
				c.mu.Unlock()
				ironicError(w, http.StatusConflict, fmt.Sprintf("A node with name %s already exists.", n.Name))
				return
			}
		}
	}
	if n.Owner == "" {
		// A project-scoped admin creates nodes it owns
		// ([api]project_admin_can_manage_own_nodes), as on the test bed.
		n.Owner = c.projectID
	}
	n.Conductor = simConductor
	n.CreatedAt = c.now()
	n.Traits = []string{}
	if n.Properties == nil {
		n.Properties = map[string]any{}
	}
	if n.Extra == nil {
		n.Extra = map[string]any{}
	}
	rec := c.putNodeLocked(n)
	out := renderNode(rec, ver, nil, c.ironicPublic())
	c.mu.Unlock()
	w.Header().Set("Location", c.ironicPublic()+"/v1/nodes/"+n.UUID)
	writeJSON(w, http.StatusCreated, out)
}

// deleteAllowedStates is states.DELETE_ALLOWED_STATES plus "available"
// ([conductor]allow_deleting_available_nodes defaults to True).
const deleteAllowedStates = "('manageable', 'enroll', 'adopt failed', 'available')"

func (c *Cloud) ironicDelete(w http.ResponseWriter, _ *http.Request, ver int, ident string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.lookupNodeLocked(w, ver, ident)
	if rec == nil || !c.lockLocked(w, rec) {
		return
	}
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
}

func (c *Cloud) ironicMaintenance(w http.ResponseWriter, r *http.Request, ver int, ident string, on bool) {
	q := r.URL.Query()
	raw, _ := readJSONBody(r)
	var body map[string]any
	if len(strings.TrimSpace(string(raw))) > 0 {
		if err := json.Unmarshal(raw, &body); err != nil {
			ironicError(w, http.StatusBadRequest, "The request body is not valid JSON.")
			return
		}
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
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.lookupNodeLocked(w, ver, ident)
	if rec == nil || !c.lockLocked(w, rec) {
		return
	}
	rec.n.Maintenance = on
	rec.n.MaintenanceReason = reason
	if !on {
		rec.n.MaintenanceReason = ""
		rec.n.Fault = ""
	}
	w.WriteHeader(http.StatusAccepted)
}

// ---------------------------------------------------------------------------
// node traits

var customTraitRe = regexp.MustCompile(`^CUSTOM_[A-Z0-9_]+$`)

// ironicTraitError validates a trait like TRAITS_SCHEMA and returns the
// args.schema error message, or "".
func ironicTraitError(name, t string) string {
	if len(t) >= 1 && len(t) <= 255 && (customTraitRe.MatchString(t) || slices.Contains(standardTraits, t)) {
		return ""
	}
	if len(t) < 1 {
		return fmt.Sprintf("Schema error for %s: '' is too short", name)
	}
	if len(t) > 255 {
		return fmt.Sprintf("Schema error for %s: '%s' is too long", name, t)
	}
	return fmt.Sprintf("Schema error for %s: '%s' is not valid under any of the given schemas. Possible root cause: '%s' does not match '^CUSTOM_[A-Z0-9_]+$'", name, t, t)
}

const maxTraitsPerNode = 50

func (c *Cloud) ironicTraitsGet(w http.ResponseWriter, _ *http.Request, ver int, ident string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.lookupNodeLocked(w, ver, ident)
	if rec == nil {
		return
	}
	traits := slices.Clone(rec.n.Traits)
	if traits == nil {
		traits = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"traits": traits})
}

func (c *Cloud) ironicTraitsPut(w http.ResponseWriter, r *http.Request, ver int, ident, trait string, single bool) {
	raw, _ := readJSONBody(r)
	var body map[string]any
	if len(strings.TrimSpace(string(raw))) > 0 {
		if err := json.Unmarshal(raw, &body); err != nil {
			ironicError(w, http.StatusBadRequest, "The request body is not valid JSON.")
			return
		}
	}
	if single {
		if msg := ironicTraitError("trait", trait); msg != "" {
			ironicError(w, http.StatusBadRequest, msg)
			return
		}
	}
	var traits []string
	_, hasTraits := body["traits"]
	if body != nil {
		for k := range body {
			if k != "traits" {
				ironicError(w, http.StatusBadRequest, fmt.Sprintf("Schema error for body: Additional properties are not allowed ('%s' was unexpected)", k))
				return
			}
		}
		list, ok := body["traits"].([]any)
		if hasTraits && !ok {
			ironicError(w, http.StatusBadRequest, fmt.Sprintf("Schema error for body: %v is not of type 'array'", body["traits"]))
			return
		}
		for _, v := range list {
			s, _ := v.(string)
			if msg := ironicTraitError("body", s); msg != "" {
				ironicError(w, http.StatusBadRequest, msg)
				return
			}
			traits = append(traits, s)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.lookupNodeLocked(w, ver, ident)
	if rec == nil {
		return
	}
	if (trait != "" && hasTraits) || !(trait != "" || hasTraits) {
		ironicError(w, http.StatusBadRequest, "A single node trait may be added via PUT /v1/nodes/<node identifier>/traits/<trait> with no body, or all node traits may be replaced via PUT /v1/nodes/<node identifier>/traits with the list of traits specified in the request body.")
		return
	}
	if trait != "" && len(body) > 0 {
		ironicError(w, http.StatusBadRequest, "No body should be provided when adding a trait")
		return
	}
	if !c.lockLocked(w, rec) {
		return
	}
	if trait != "" {
		if !slices.Contains(rec.n.Traits, trait) {
			if len(rec.n.Traits)+1 > maxTraitsPerNode {
				ironicError(w, http.StatusBadRequest, fmt.Sprintf("Could not modify traits for node %d as it would exceed the maximum number of traits per node (%d vs. %d)", rec.id, len(rec.n.Traits)+1, maxTraitsPerNode))
				return
			}
			rec.n.Traits = append(rec.n.Traits, trait)
		}
		w.Header().Set("Location", c.ironicPublic()+"/v1/nodes/"+ident+"/traits/"+trait)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	set := map[string]bool{}
	for _, t := range traits {
		set[t] = true
	}
	if len(set) > maxTraitsPerNode {
		ironicError(w, http.StatusBadRequest, fmt.Sprintf("Could not modify traits for node %d as it would exceed the maximum number of traits per node (%d vs. %d)", rec.id, len(set), maxTraitsPerNode))
		return
	}
	rec.n.Traits = sortedKeys(set)
	w.WriteHeader(http.StatusNoContent)
}

func (c *Cloud) ironicTraitsDelete(w http.ResponseWriter, _ *http.Request, ver int, ident, trait string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.lookupNodeLocked(w, ver, ident)
	if rec == nil || !c.lockLocked(w, rec) {
		return
	}
	if trait == "" {
		rec.n.Traits = []string{}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	i := slices.Index(rec.n.Traits, trait)
	if i < 0 {
		ironicError(w, http.StatusNotFound, fmt.Sprintf("Node %s doesn't have a trait '%s'", rec.n.UUID, trait))
		return
	}
	rec.n.Traits = slices.Delete(rec.n.Traits, i, i+1)
	w.WriteHeader(http.StatusNoContent)
}

// ---------------------------------------------------------------------------
// PATCH /v1/nodes/{ident} (JSON patch on the simple node fields)

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
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.lookupNodeLocked(w, ver, ident)
	if rec == nil {
		return
	}
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
		for _, o := range c.nodeOrder {
			if o != rec && o.n.Name == n.Name {
				ironicError(w, http.StatusConflict, fmt.Sprintf("A node with name %s already exists.", n.Name))
				return
			}
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
	str := func(dst *string) string {
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
	boolean := func(dst *bool) string {
		b, ok := value.(bool)
		if !ok && value != nil {
			return fmt.Sprintf("Invalid patch: %s must be a boolean", path)
		}
		*dst = b
		return ""
	}
	dict := func(dst *map[string]any) string {
		if *dst == nil {
			*dst = map[string]any{}
		}
		if len(parts) == 2 {
			if value == nil {
				if _, ok := (*dst)[parts[1]]; !ok {
					return fmt.Sprintf("can't remove non-existent object '%s'", parts[1])
				}
				delete(*dst, parts[1])
			} else {
				(*dst)[parts[1]] = value
			}
			return ""
		}
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
	if len(parts) == 2 {
		switch parts[0] {
		case "extra":
			return dict(&n.Extra)
		case "properties":
			return dict(&n.Properties)
		case "driver_info":
			return dict(&n.DriverInfo)
		case "instance_info":
			return dict(&n.InstanceInfo)
		}
		return fmt.Sprintf("Cannot patch %s: the simulator does not model this field.", path)
	}
	switch parts[0] {
	case "name":
		return str(&n.Name)
	case "description":
		return str(&n.Description)
	case "resource_class":
		return str(&n.ResourceClass)
	case "owner":
		return str(&n.Owner)
	case "lessee":
		return str(&n.Lessee)
	case "instance_uuid":
		return str(&n.InstanceUUID)
	case "retired_reason":
		return str(&n.RetiredReason)
	case "maintenance":
		return boolean(&n.Maintenance)
	case "retired":
		return boolean(&n.Retired)
	case "extra":
		return dict(&n.Extra)
	case "properties":
		return dict(&n.Properties)
	case "driver_info":
		return dict(&n.DriverInfo)
	case "instance_info":
		return dict(&n.InstanceInfo)
	}
	return fmt.Sprintf("Cannot patch %s: the simulator does not model this field.", path)
}
