package openstacksim

import (
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Nova server lists: GET /v2.1/servers and /v2.1/servers/detail (filters,
// policy, paging).

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

// last returns the last value of a query parameter (WebOb's GET[key]).
func last(q url.Values, k string) string {
	v, _ := lastValue(q, k)
	return v
}

// novaListQuery is a parsed GET /v2.1/servers[/detail] request.
type novaListQuery struct {
	detail, admin bool
	search        url.Values // the filters remove_invalid_options keeps
	statuses      []string   // known statuses asked for; nil: any
	noStatus      bool       // only unknown statuses (before 2.38: empty list)
	showDeleted   bool
	allTenants    bool
	tenant        string // project filter; "" for all
	limit         int
	marker        string
	hasMarker     bool
}

// novaList implements GET /v2.1/servers and /v2.1/servers/detail in the
// order servers.py _get_servers checks: query schema (limit), filter
// stripping for non-admins, invalid filters, status, deleted, all_tenants
// (value, then policy), marker; then the newest first (created_at desc, id
// desc), limit capped at [Options.NovaMaxLimit], and servers_links "next"
// only when the page is full.
func (c *Cloud) novaList(w http.ResponseWriter, r *http.Request, minor int, detail bool) {
	nq, e := c.parseNovaListQuery(r.URL.Query(), minor, detail)
	if e != nil {
		novaError(w, e.status, e.msg)
		return
	}
	if nq.noStatus {
		writeNovaJSON(w, http.StatusOK, map[string]any{"servers": []any{}})
		return
	}
	items, lastID, e := c.serverPage(nq, minor)
	if e != nil {
		novaError(w, e.status, e.msg)
		return
	}
	body := map[string]any{"servers": items}
	if nq.limit > 0 && len(items) == nq.limit {
		coll := "servers"
		if detail {
			coll = "servers/detail"
		}
		body["servers_links"] = []any{map[string]any{"rel": "next", "href": c.novaNextLink(r, coll, lastID)}}
	}
	writeNovaJSON(w, http.StatusOK, body)
}

// serverPage selects the page (selectServerPageLocked) and renders it, as
// the index or the detail view; lastID is the page's last server.
func (c *Cloud) serverPage(nq *novaListQuery, minor int) (items []any, lastID string, e *apiErr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	recs, e := c.selectServerPageLocked(nq)
	if e != nil {
		return nil, "", e
	}
	items = make([]any, 0, len(recs))
	for _, rec := range recs {
		if nq.detail {
			items = append(items, c.renderServer(rec, minor, nq.admin))
		} else {
			items = append(items, c.renderServerIndex(rec))
		}
	}
	if len(recs) > 0 {
		lastID = recs[len(recs)-1].s.ID
	}
	return items, lastID, nil
}

// parseNovaListQuery checks and parses the list's query in Nova's order.
func (c *Cloud) parseNovaListQuery(q url.Values, minor int, detail bool) (*novaListQuery, *apiErr) {
	nq := &novaListQuery{detail: detail, admin: !c.opts.NovaNonAdmin, limit: c.opts.NovaMaxLimit}
	if e := checkNovaLimitSchema(q); e != nil {
		return nil, e
	}
	search, e := novaSearchOptions(q, nq.admin, minor)
	if e != nil {
		return nil, e
	}
	nq.search = search
	if e := nq.parseStatusAndDeleted(minor); e != nil || nq.noStatus {
		return nq, e
	}
	if e := nq.parseAllTenants(); e != nil {
		return nil, e
	}
	if _, ok := q["limit"]; ok {
		n, err := strconv.Atoi(last(q, "limit"))
		if err != nil {
			return nil, apiErrf(http.StatusBadRequest, "limit param must be an integer")
		}
		nq.limit = min(nq.limit, n)
	}
	if _, ok := q["marker"]; ok {
		nq.marker, nq.hasMarker = last(q, "marker"), true
	}
	if nq.allTenants {
		nq.tenant = last(search, "tenant_id")
		if nq.tenant == "" {
			nq.tenant = last(search, "project_id")
		}
	} else {
		nq.tenant = c.projectID
	}
	return nq, nil
}

// checkNovaLimitSchema is the query schema's check of every limit value.
func checkNovaLimitSchema(q url.Values) *apiErr {
	for _, v := range q["limit"] {
		if v == "" {
			return apiErrf(http.StatusBadRequest, "Invalid input for query parameters limit. Value: . '' is too short")
		}
		if !novaLimitRe.MatchString(v) {
			return apiErrf(http.StatusBadRequest, "Invalid input for query parameters limit. Value: %s. '%s' does not match '^[0-9]*$'", v, v)
		}
	}
	return nil
}

// novaSearchOptions is remove_invalid_options (an admin keeps every filter,
// paging and sorting are handled separately, others lose the unknown ones)
// followed by the check for filters on joined tables.
func novaSearchOptions(q url.Values, admin bool, minor int) (url.Values, *apiErr) {
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
			return nil, apiErrf(http.StatusBadRequest, "Invalid filter field: %s.", k)
		}
	}
	return search, nil
}

// parseStatusAndDeleted reads status (case-insensitive; unknown values
// are dropped, and a list of only unknown ones is a 400 from 2.38, an empty
// result before) and deleted (only DELETED needs admin).
func (nq *novaListQuery) parseStatusAndDeleted(minor int) *apiErr {
	if _, ok := nq.search["status"]; ok {
		for _, st := range nq.search["status"] {
			st = strings.ToUpper(st)
			if _, known := serverStates[st]; known {
				nq.statuses = append(nq.statuses, st)
			}
		}
		if len(nq.statuses) == 0 {
			if minor >= 38 {
				return apiErrf(http.StatusBadRequest, "Invalid status value")
			}
			nq.noStatus = true
			return nil
		}
	}
	if _, ok := nq.search["deleted"]; ok {
		if b, err := pyBool(last(nq.search, "deleted")); err == nil {
			nq.showDeleted = b
		}
	}
	if slices.Equal(nq.statuses, []string{ServerDeleted}) {
		if !nq.admin {
			return apiErrf(http.StatusForbidden, "Only administrators may list deleted instances")
		}
		nq.showDeleted = true
	}
	return nil
}

// parseAllTenants reads all_tenants (bool_from_string; present without a
// value means true), then applies the policy: 403 for a non-admin.
func (nq *novaListQuery) parseAllTenants() *apiErr {
	if v, ok := nq.search["all_tenants"]; ok {
		val := v[0]
		if val == "" {
			nq.allTenants = true
		} else {
			b, err := pyBool(val)
			if err != nil {
				return &apiErr{http.StatusBadRequest, err.Error()}
			}
			nq.allTenants = b
		}
	}
	if nq.allTenants && !nq.admin {
		action := "index"
		if nq.detail {
			action = "detail"
		}
		return apiErrf(http.StatusForbidden, "Policy doesn't allow os_compute_api:servers:%s:get_all_tenants to be performed.", action)
	}
	return nil
}

// selectServerPageLocked filters the servers, sorts them newest first
// (created_at desc, id desc) and cuts the page after the marker.
func (c *Cloud) selectServerPageLocked(nq *novaListQuery) ([]*serverRec, *apiErr) {
	recs := make([]*serverRec, 0, len(c.serverOrder))
	for _, rec := range c.serverOrder {
		if nq.matches(rec) {
			recs = append(recs, rec)
		}
	}
	sort.SliceStable(recs, func(i, j int) bool {
		if !recs[i].s.Created.Equal(recs[j].s.Created) {
			return recs[i].s.Created.After(recs[j].s.Created)
		}
		return recs[i].id > recs[j].id
	})
	if nq.hasMarker {
		mrec, ok := c.servers[nq.marker]
		if !ok {
			return nil, apiErrf(http.StatusBadRequest, "marker [%s] not found", nq.marker)
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
	if len(recs) > nq.limit {
		recs = recs[:nq.limit]
	}
	return recs, nil
}

// matches applies the list's filters to one server.
func (nq *novaListQuery) matches(rec *serverRec) bool {
	s, search := &rec.s, nq.search
	switch {
	case (rec.deleted || s.VMState == "soft-delete") != nq.showDeleted:
		// the DB filter: deleted=false (the default) hides deleted
		// rows and soft-deleted servers, deleted=true shows only them
		return false
	case nq.tenant != "" && s.TenantID != nq.tenant,
		nq.statuses != nil && !slices.Contains(nq.statuses, s.Status),
		search.Has("node") && last(search, "node") != s.HypervisorHostname,
		search.Has("host") && last(search, "host") != s.Host,
		search.Has("name") && !regexpMatch(last(search, "name"), s.Name):
		return false
	}
	return true
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
