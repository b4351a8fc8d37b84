package openstacksim

import (
	"crypto/sha256"
	"encoding/hex"
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

// Nova (compute) API 2.1 with microversions up to 2.93 (Nova 26 / Zed).
const (
	novaMaxMinor      = 93
	novaVersionHeader = "X-Openstack-Nova-Api-Version"
)

// novaVersionRe is APIVersionRequest's format check
// (nova/api/openstack/api_version_request.py).
var novaVersionRe = regexp.MustCompile(`^([1-9]\d*)\.([1-9]\d*|0)$`)

// novaLimitRe is the query schema's pattern for limit.
var novaLimitRe = regexp.MustCompile(`^[0-9]*$`)

// novaPublic is the compute root as clients see it (the catalog URL without
// /v2.1).
func (c *Cloud) novaPublic() string { return c.URL() + computePrefix }

// novaError writes Nova's fault body, {"<name>": {"code": N, "message": M}}
// (nova/api/openstack/wsgi.py Fault._fault_names).
func novaError(w http.ResponseWriter, status int, msg string) {
	name := map[int]string{400: "badRequest", 401: "unauthorized", 403: "forbidden", 404: "itemNotFound",
		405: "badMethod", 409: "conflictingRequest", 413: "overLimit", 415: "badMediaType", 429: "overLimit",
		501: "notImplemented", 503: "serviceUnavailable"}[status]
	if name == "" {
		name = "computeFault"
	}
	b := pyJSON(map[string]any{name: map[string]any{"code": status, "message": msg}})
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// pyJSON encodes like Python's json.dumps with its default separators
// (", " and ": "), as Nova's bodies are; keys are sorted.
func pyJSON(v any) []byte {
	b, err := marshalJSON(v)
	if err != nil {
		return []byte(`{}`)
	}
	out := make([]byte, 0, len(b)+len(b)/8)
	inStr, esc := false, false
	for _, ch := range b {
		out = append(out, ch)
		switch {
		case inStr && esc:
			esc = false
		case inStr && ch == '\\':
			esc = true
		case ch == '"':
			inStr = !inStr
		case !inStr && (ch == ',' || ch == ':'):
			out = append(out, ' ')
		}
	}
	return out
}

// writeNovaJSON writes a Nova success body (Content-Type application/json).
func writeNovaJSON(w http.ResponseWriter, status int, v any) {
	b := pyJSON(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// novaRoutingNotFound is WebOb's HTML 404 for a path no route matches.
func novaRoutingNotFound(w http.ResponseWriter) {
	body := "<html>\n <head>\n  <title>404 Not Found</title>\n </head>\n <body>\n  <h1>404 Not Found</h1>\n  The resource could not be found.<br /><br />\n\n\n\n </body>\n</html>"
	w.Header().Set("Content-Type", "text/html; charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, body)
}

// novaVersion is nova's Request.set_api_version_request over
// microversion_parse.get_version: "OpenStack-API-Version: compute X" wins
// over X-OpenStack-Nova-API-Version; none means 2.1; "latest" the maximum.
// It returns the minor, or the requested string and a status (400 bad
// format, 406 out of range) with Nova's message.
func novaVersion(h http.Header) (minor int, requested string, status int, msg string) {
	found := ""
	vals := strings.Split(strings.Join(h.Values("Openstack-Api-Version"), ","), ",")
	for i := len(vals) - 1; i >= 0 && found == ""; i-- {
		f := strings.Fields(vals[i])
		if len(f) >= 2 && strings.EqualFold(f[0], "compute") {
			found = strings.TrimSpace(strings.Join(f[1:], " "))
		}
	}
	if found == "" {
		if legacy := h.Values(novaVersionHeader); len(legacy) > 0 {
			parts := strings.Split(strings.Join(legacy, ","), ",")
			found = strings.TrimSpace(parts[len(parts)-1])
		}
	}
	switch found {
	case "":
		return 1, "", 0, ""
	case "latest":
		return novaMaxMinor, "", 0, ""
	}
	m := novaVersionRe.FindStringSubmatch(found)
	if m == nil {
		return 0, "", http.StatusBadRequest, fmt.Sprintf("API Version String %s is of invalid format. Must be of format MajorNum.MinorNum.", found)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	requested = fmt.Sprintf("%d.%d", major, minor)
	if major != 2 || minor < 1 || minor > novaMaxMinor {
		return 0, requested, http.StatusNotAcceptable, fmt.Sprintf("Version %s is not supported by the API. Minimum is 2.1 and maximum is 2.%d.", requested, novaMaxMinor)
	}
	return minor, requested, 0, ""
}

// setNovaVersionHeaders adds the microversion response headers, spelled as
// Nova sends them (non-canonical keys are written as given).
func setNovaVersionHeaders(w http.ResponseWriter, v string) {
	h := w.Header()
	h["OpenStack-API-Version"] = []string{"compute " + v}
	h["X-OpenStack-Nova-API-Version"] = []string{v}
	h["Vary"] = append(h["Vary"], "OpenStack-API-Version", "X-OpenStack-Nova-API-Version")
}

// setNovaRequestID adds the request id under both of Nova's names.
func setNovaRequestID(w http.ResponseWriter) {
	rid := requestID()
	w.Header()["x-openstack-request-id"] = []string{rid}
	w.Header()["x-compute-request-id"] = []string{rid}
}

// novaVersionEntry is one entry of Nova's version documents
// (nova/api/openstack/compute/versions.py).
func (c *Cloud) novaVersionEntry(v21, full bool) map[string]any {
	id, status, version, minVersion, updated, path, media := "v2.0", "SUPPORTED", "", "", "2011-01-21T11:33:21Z", "/v2/", "2"
	if v21 {
		id, status, version, minVersion, updated, path, media = "v2.1", "CURRENT", fmt.Sprintf("2.%d", novaMaxMinor), "2.1", "2013-07-23T11:33:21Z", "/v2.1/", "2.1"
	}
	links := []any{map[string]any{"rel": "self", "href": c.novaPublic() + path}}
	e := map[string]any{"id": id, "status": status, "version": version, "min_version": minVersion, "updated": updated}
	if full {
		links = append(links, map[string]any{"rel": "describedby", "type": "text/html", "href": "http://docs.openstack.org/"})
		e["media-types"] = []any{map[string]any{"base": "application/json", "type": "application/vnd.openstack.compute+json;version=" + media}}
	}
	e["links"] = links
	return e
}

// serveCompute answers /compute/…: the version documents (no token, as
// Nova's paste pipeline serves them) and, under /v2.1, the servers API.
func (c *Cloud) serveCompute(w http.ResponseWriter, r *http.Request, rel string) {
	p := strings.TrimSuffix(rel, "/")
	switch p {
	case "":
		// nova's versions app answers every method, without request ids
		writeNovaJSON(w, http.StatusOK, map[string]any{"versions": []any{c.novaVersionEntry(false, false), c.novaVersionEntry(true, false)}})
		return
	case "/v2":
		setNovaRequestID(w)
		writeNovaJSON(w, http.StatusOK, map[string]any{"version": c.novaVersionEntry(false, true)})
		return
	}
	if p != "/v2.1" && !strings.HasPrefix(p, "/v2.1/") {
		setNovaRequestID(w)
		novaRoutingNotFound(w)
		return
	}
	if p != "/v2.1" && !c.validToken(r) {
		c.middleware401(w)
		return
	}
	setNovaRequestID(w)
	minor, requested, status, msg := novaVersion(r.Header)
	if status != 0 {
		if status == http.StatusNotAcceptable {
			setNovaVersionHeaders(w, requested)
		}
		novaError(w, status, msg)
		return
	}
	setNovaVersionHeaders(w, fmt.Sprintf("2.%d", minor))
	if p == "/v2.1" {
		writeNovaJSON(w, http.StatusOK, map[string]any{"version": c.novaVersionEntry(true, true)})
		return
	}
	segs := strings.Split(strings.TrimPrefix(p, "/v2.1/"), "/")
	if c.serveComputeOps(w, r, minor, segs) { // nova_ops.go
		return
	}
	if segs[0] != "servers" || len(segs) > 2 {
		novaRoutingNotFound(w)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		novaError(w, http.StatusMethodNotAllowed, "The simulated Nova only answers GET on servers.")
		return
	}
	switch {
	case len(segs) == 1:
		c.novaList(w, r, minor, false)
	case segs[1] == "detail":
		c.novaList(w, r, minor, true)
	default:
		c.novaShow(w, r, minor, segs[1])
	}
}

// novaNonAdminFilters are the list filters a caller without
// os_compute_api:servers:allow_all_filters keeps (servers.py
// _get_server_search_options at 2.1, plus what later microversions add).
func novaNonAdminFilters(minor int) []string {
	opts := []string{"reservation_id", "name", "status", "image", "flavor", "ip", "changes-since", "all_tenants"}
	if minor >= 5 {
		opts = append(opts, "ip6")
	}
	if minor >= 26 {
		opts = append(opts, "tags", "tags-any", "not-tags", "not-tags-any")
	}
	if minor >= 66 {
		opts = append(opts, "changes-before")
	}
	if minor >= 73 {
		opts = append(opts, "locked")
	}
	if minor >= 83 {
		opts = append(opts, "availability_zone", "config_drive", "key_name", "created_at", "launched_at",
			"terminated_at", "power_state", "task_state", "vm_state", "progress", "user_id")
	}
	if minor >= 90 {
		opts = append(opts, "hostname")
	}
	return opts
}

// novaJoinedTableFilters are rejected with 400 "Invalid filter field"
// (schemas/servers.py JOINED_TABLE_QUERY_PARAMS_SERVERS).
var novaJoinedTableFilters = []string{"block_device_mapping", "services", "metadata", "system_metadata",
	"info_cache", "security_groups", "pci_devices"}

// pyBool is oslo strutils.bool_from_string(strict=True).
func pyBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "t", "true", "on", "y", "yes":
		return true, nil
	case "0", "f", "false", "off", "n", "no":
		return false, nil
	}
	//lint:ignore ST1005 Nova's own message, word for word
	return false, fmt.Errorf("Unrecognized value '%s', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'", s)
}

// last returns the last value of a query parameter (WebOb's GET[key]).
func last(q url.Values, k string) string {
	v := q[k]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// novaList implements GET /v2.1/servers and /v2.1/servers/detail in the
// order servers.py _get_servers checks: query schema (limit), filter
// stripping for non-admins, invalid filters, status, deleted, all_tenants
// (value, then policy), marker; then the newest first (created_at desc, id
// desc), limit capped at [Options.NovaMaxLimit], and servers_links "next"
// only when the page is full.
func (c *Cloud) novaList(w http.ResponseWriter, r *http.Request, minor int, detail bool) {
	q := r.URL.Query()
	admin := !c.opts.NovaNonAdmin
	if _, ok := q["limit"]; ok {
		for _, v := range q["limit"] {
			if v == "" {
				novaError(w, http.StatusBadRequest, "Invalid input for query parameters limit. Value: . '' is too short")
				return
			}
			if !novaLimitRe.MatchString(v) {
				novaError(w, http.StatusBadRequest, fmt.Sprintf("Invalid input for query parameters limit. Value: %s. '%s' does not match '^[0-9]*$'", v, v))
				return
			}
		}
	}
	// remove_invalid_options: an admin keeps every filter (paging and
	// sorting are handled separately); others lose the unknown ones.
	search := url.Values{}
	for k, v := range q {
		switch {
		case slices.Contains([]string{"sort_key", "sort_dir", "limit", "marker"}, k):
		case admin, slices.Contains(novaNonAdminFilters(minor), k):
			search[k] = v
		}
	}
	keys := make([]string, 0, len(search))
	for k := range search {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if slices.Contains(novaJoinedTableFilters, k) || strings.HasPrefix(k, "_") {
			novaError(w, http.StatusBadRequest, fmt.Sprintf("Invalid filter field: %s.", k))
			return
		}
	}
	var statuses []string
	if _, ok := search["status"]; ok {
		for _, st := range search["status"] {
			st = strings.ToUpper(st)
			if _, known := serverStates[st]; known {
				statuses = append(statuses, st)
			}
		}
		if len(statuses) == 0 {
			if minor >= 38 {
				novaError(w, http.StatusBadRequest, "Invalid status value")
				return
			}
			writeNovaJSON(w, http.StatusOK, map[string]any{"servers": []any{}})
			return
		}
	}
	showDeleted := false
	if _, ok := search["deleted"]; ok {
		if b, err := pyBool(last(search, "deleted")); err == nil {
			showDeleted = b
		}
	}
	if slices.Equal(statuses, []string{ServerDeleted}) {
		if !admin {
			novaError(w, http.StatusForbidden, "Only administrators may list deleted instances")
			return
		}
		showDeleted = true
	}
	allTenants := false
	if v, ok := search["all_tenants"]; ok {
		val := v[0]
		if val == "" {
			allTenants = true
		} else {
			b, err := pyBool(val)
			if err != nil {
				novaError(w, http.StatusBadRequest, err.Error())
				return
			}
			allTenants = b
		}
	}
	if allTenants && !admin {
		action := "index"
		if detail {
			action = "detail"
		}
		novaError(w, http.StatusForbidden, fmt.Sprintf("Policy doesn't allow os_compute_api:servers:%s:get_all_tenants to be performed.", action))
		return
	}
	limit := c.opts.NovaMaxLimit
	if _, ok := q["limit"]; ok {
		n, err := strconv.Atoi(last(q, "limit"))
		if err != nil {
			novaError(w, http.StatusBadRequest, "limit param must be an integer")
			return
		}
		limit = min(limit, n)
	}
	marker, hasMarker := "", false
	if _, ok := q["marker"]; ok {
		marker, hasMarker = last(q, "marker"), true
	}
	tenant := ""
	if allTenants {
		tenant = last(search, "tenant_id")
		if tenant == "" {
			tenant = last(search, "project_id")
		}
	} else {
		tenant = c.projectID
	}

	c.mu.Lock()
	recs := make([]*serverRec, 0, len(c.serverOrder))
	for _, rec := range c.serverOrder {
		s := &rec.s
		switch {
		case (rec.deleted || s.VMState == "soft-delete") != showDeleted:
			// the DB filter: deleted=false (the default) hides deleted
			// rows and soft-deleted servers, deleted=true shows only them
			continue
		case tenant != "" && s.TenantID != tenant:
			continue
		case statuses != nil && !slices.Contains(statuses, s.Status):
			continue
		case search.Has("node") && last(search, "node") != s.HypervisorHostname:
			continue
		case search.Has("host") && last(search, "host") != s.Host:
			continue
		case search.Has("name") && !regexpMatch(last(search, "name"), s.Name):
			continue
		}
		recs = append(recs, rec)
	}
	// default sort: created_at desc, id desc
	sort.SliceStable(recs, func(i, j int) bool {
		if !recs[i].s.Created.Equal(recs[j].s.Created) {
			return recs[i].s.Created.After(recs[j].s.Created)
		}
		return recs[i].id > recs[j].id
	})
	if hasMarker {
		mrec, ok := c.servers[marker]
		if !ok {
			c.mu.Unlock()
			novaError(w, http.StatusBadRequest, fmt.Sprintf("marker [%s] not found", marker))
			return
		}
		// rows strictly after the marker's sort values
		after := recs[:0:0]
		for _, rec := range recs {
			if rec.s.Created.Before(mrec.s.Created) || (rec.s.Created.Equal(mrec.s.Created) && rec.id < mrec.id) {
				after = append(after, rec)
			}
		}
		recs = after
	}
	if len(recs) > limit {
		recs = recs[:limit]
	}
	items := make([]any, 0, len(recs))
	for _, rec := range recs {
		if detail {
			items = append(items, c.renderServer(rec, minor, admin))
		} else {
			items = append(items, c.renderServerIndex(rec))
		}
	}
	c.mu.Unlock()

	body := map[string]any{"servers": items}
	if limit > 0 && len(recs) == limit {
		coll := "servers"
		if detail {
			coll = "servers/detail"
		}
		body["servers_links"] = []any{map[string]any{"rel": "next", "href": c.novaNextLink(r, coll, recs[len(recs)-1].s.ID)}}
	}
	writeNovaJSON(w, http.StatusOK, body)
}

// regexpMatch is Nova's name filter (a regular expression search); an
// invalid expression matches nothing.
func regexpMatch(expr, s string) bool {
	re, err := regexp.Compile(expr)
	return err == nil && re.MatchString(s)
}

// novaNextLink is ViewBuilder._get_next_link: the request's parameters
// sorted by name (one value each, the last), marker replaced or appended,
// url-encoded like Python's urlencode.
func (c *Cloud) novaNextLink(r *http.Request, coll, markerID string) string {
	q := r.URL.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if !slices.Contains(keys, "marker") {
		keys = append(keys, "marker")
	}
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := last(q, k)
		if k == "marker" {
			v = markerID
		}
		parts = append(parts, url.QueryEscape(k)+"="+url.QueryEscape(v))
	}
	return c.novaPublic() + "/v2.1/" + coll + "?" + strings.Join(parts, "&")
}

// novaShow implements GET /v2.1/servers/{id}: 404 itemNotFound for an
// unknown or deleted server and, for a caller without admin, for another
// project's server (the DB lookup is project-scoped).
func (c *Cloud) novaShow(w http.ResponseWriter, _ *http.Request, minor int, id string) {
	admin := !c.opts.NovaNonAdmin
	c.mu.Lock()
	rec, ok := c.servers[id]
	if !ok || rec.deleted || (!admin && rec.s.TenantID != c.projectID) {
		c.mu.Unlock()
		novaError(w, http.StatusNotFound, fmt.Sprintf("Instance %s could not be found.", id))
		return
	}
	s := c.renderServer(rec, minor, admin)
	if minor >= 71 {
		s["server_groups"] = []any{}
	}
	c.mu.Unlock()
	writeNovaJSON(w, http.StatusOK, map[string]any{"server": s})
}

// novaTime is nova.utils.isotime: seconds, "Z".
func novaTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// novaUsageTime is the OS-SRV-USG timestamps: a naive datetime through
// oslo jsonutils (microseconds, no zone; the stored value has whole seconds,
// as seen on the test bed); zero → null.
func novaUsageTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format("2006-01-02T15:04:05") + ".000000"
}

func (c *Cloud) serverLinks(id string) []any {
	return []any{
		map[string]any{"rel": "self", "href": c.novaPublic() + "/v2.1/servers/" + id},
		map[string]any{"rel": "bookmark", "href": c.novaPublic() + "/servers/" + id},
	}
}

func (c *Cloud) renderServerIndex(rec *serverRec) map[string]any {
	return map[string]any{"id": rec.s.ID, "name": rec.s.Name, "links": c.serverLinks(rec.s.ID)}
}

// renderServer is views/servers.py ViewBuilder.show for the detail list and
// GET of one server at microversion 2.minor; admin decides the
// os-extended-server-attributes policy.
func (c *Cloud) renderServer(rec *serverRec, minor int, admin bool) map[string]any {
	s := &rec.s
	hostID := ""
	if s.Host != "" {
		sum := sha256.Sum224([]byte(s.TenantID + s.Host))
		hostID = hex.EncodeToString(sum[:])
	}
	m := map[string]any{
		"id":        s.ID,
		"name":      s.Name,
		"status":    s.Status,
		"tenant_id": s.TenantID,
		"user_id":   s.UserID,
		"metadata":  s.Metadata,
		"hostId":    hostID,
		"image": map[string]any{"id": simImageID, "links": []any{
			map[string]any{"rel": "bookmark", "href": c.novaPublic() + "/images/" + simImageID}}},
		"created":                              novaTime(s.Created),
		"updated":                              novaTime(s.Updated),
		"addresses":                            map[string]any{},
		"accessIPv4":                           "",
		"accessIPv6":                           "",
		"links":                                c.serverLinks(s.ID),
		"OS-DCF:diskConfig":                    "MANUAL",
		"OS-EXT-AZ:availability_zone":          "nova",
		"config_drive":                         "",
		"key_name":                             nil,
		"OS-SRV-USG:launched_at":               novaUsageTime(s.LaunchedAt),
		"OS-SRV-USG:terminated_at":             nil,
		"OS-EXT-STS:task_state":                strOrNil(s.TaskState),
		"OS-EXT-STS:vm_state":                  s.VMState,
		"OS-EXT-STS:power_state":               s.PowerState,
		"os-extended-volumes:volumes_attached": []any{},
	}
	if rec.deleted {
		m["OS-SRV-USG:terminated_at"] = novaUsageTime(rec.deletedAt)
	}
	if s.Status == ServerBuild {
		m["OS-EXT-AZ:availability_zone"] = ""
	}
	if f := c.serverFaultLocked(s.ID); f != "" && s.Status == ServerError {
		m["fault"] = map[string]any{"code": 500, "message": f, "created": novaTime(s.Updated)}
	}
	switch s.Status {
	case "ACTIVE", "BUILD", "REBUILD", "RESIZE", "VERIFY_RESIZE", "MIGRATING":
		m["progress"] = 0
	}
	if minor >= 47 {
		flavor := map[string]any{"vcpus": 1, "ram": 1024, "disk": 10, "ephemeral": 0, "swap": 0, "original_name": simFlavorName}
		if admin {
			flavor["extra_specs"] = map[string]any{"resources:CUSTOM_GPU_H100": "1", "resources:VCPU": "0",
				"resources:MEMORY_MB": "0", "resources:DISK_GB": "0"}
		}
		m["flavor"] = flavor
	} else {
		m["flavor"] = map[string]any{"id": simFlavorID, "links": []any{
			map[string]any{"rel": "bookmark", "href": c.novaPublic() + "/flavors/" + simFlavorID}}}
	}
	if admin {
		m["OS-EXT-SRV-ATTR:host"] = strOrNil(s.Host)
		m["OS-EXT-SRV-ATTR:instance_name"] = s.InstanceName
		m["OS-EXT-SRV-ATTR:hypervisor_hostname"] = strOrNil(s.HypervisorHostname)
		if minor >= 3 {
			m["OS-EXT-SRV-ATTR:reservation_id"] = "r-" + s.ID[:min(8, len(s.ID))]
			m["OS-EXT-SRV-ATTR:launch_index"] = 0
			m["OS-EXT-SRV-ATTR:hostname"] = s.Name
			m["OS-EXT-SRV-ATTR:kernel_id"] = ""
			m["OS-EXT-SRV-ATTR:ramdisk_id"] = ""
			m["OS-EXT-SRV-ATTR:root_device_name"] = nil
			if !s.LaunchedAt.IsZero() {
				m["OS-EXT-SRV-ATTR:root_device_name"] = "/dev/sda"
			}
			m["OS-EXT-SRV-ATTR:user_data"] = nil
		}
		if minor >= 16 {
			hs := ""
			if s.Host != "" {
				hs = "UP"
			}
			m["host_status"] = hs
		}
	} else if minor >= 90 {
		m["OS-EXT-SRV-ATTR:hostname"] = s.Name
	}
	if minor >= 9 {
		m["locked"] = false
	}
	if minor >= 19 {
		m["description"] = nil
	}
	if minor >= 26 {
		m["tags"] = []any{}
	}
	if minor >= 63 {
		m["trusted_image_certificates"] = nil
	}
	if minor >= 73 {
		m["locked_reason"] = nil
	}
	return m
}
