package openstacksim

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
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

// novaLimitRe is the query schema's pattern for limit.
var novaLimitRe = regexp.MustCompile(`^[0-9]*$`)

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
	v, _ := lastValue(q, k)
	return v
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
