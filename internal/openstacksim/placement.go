package openstacksim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// pVersion is a Placement microversion 1.minor.
type pVersion struct{ minor int }

// String renders "1.N".
func (v pVersion) String() string { return fmt.Sprintf("1.%d", v.minor) }

// verErr is a microversion parsing failure: 406 (unacceptable) or 400
// (malformed).
type verErr struct {
	status int
	msg    string
}

// placementVersion is microversion_parse.extract_version for
// "OpenStack-API-Version: placement X" (no header: 1.0; "latest": max).
func (c *Cloud) placementVersion(r *http.Request) (pVersion, *verErr) {
	found := ""
	vals := strings.Split(strings.Join(r.Header.Values("Openstack-Api-Version"), ","), ",")
	for i := len(vals) - 1; i >= 0 && found == ""; i-- {
		f := strings.Fields(vals[i])
		if len(f) >= 2 && strings.EqualFold(f[0], "placement") {
			found = strings.TrimSpace(strings.Join(f[1:], " "))
		}
	}
	if found == "" {
		found = "1.0"
	}
	if found == "latest" {
		found = fmt.Sprintf("1.%d", c.placementMax)
	}
	// parse_version_string: Version(*(int(v) for v in s.split('.', 1)))
	parts := strings.SplitN(found, ".", 2)
	nums := make([]int, 0, 2)
	for _, part := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return pVersion{}, &verErr{http.StatusBadRequest, fmt.Sprintf("Invalid microversion: invalid version string: %s; invalid literal for int() with base 10: '%s'", found, part)}
		}
		nums = append(nums, n)
	}
	if len(nums) != 2 {
		return pVersion{}, &verErr{http.StatusBadRequest, fmt.Sprintf("Invalid microversion: invalid version string: %s; Version.__new__() missing 1 required positional argument: 'minor'", found)}
	}
	major, minor := nums[0], nums[1]
	if major != 1 || minor < 0 || minor > c.placementMax {
		return pVersion{}, &verErr{http.StatusNotAcceptable, "Invalid microversion: Unacceptable version header: " + found}
	}
	return pVersion{minor}, nil
}

// webobExplanation is WebOb's explanation text per status, as it appears at
// the start of Placement's error "detail".
var webobExplanation = map[int]string{
	400: "The server could not comply with the request since it is either malformed or otherwise incorrect.",
	401: "This server could not verify that you are authorized to access the document you requested. Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand how to supply the credentials required.",
	403: "Access was denied to this resource.",
	404: "The resource could not be found.",
	409: "There was a conflict when trying to complete your request.",
	429: "The client has sent too many requests in a given amount of time",
	500: "The server has either erred or is incapable of performing the requested operation.",
	502: "Bad gateway.",
	503: "The server is currently unavailable. Please try again at a later time.",
	504: "The gateway has timed out.",
}

// placementError writes Placement's error document (util.json_error_formatter
// over a WebOb exception): {"errors": [{status, title, detail, code (1.23+),
// request_id, and min/max_version when the microversion was not parsed}]}.
// ver is nil when the microversion could not be parsed. An empty code means
// placement.undefined_code.
func (c *Cloud) placementError(w http.ResponseWriter, r *http.Request, status int, msg, code string, ver *pVersion, rid string) {
	var detail string
	switch status {
	case 405:
		detail = fmt.Sprintf("The method %s is not allowed for this resource. \n\n %s", r.Method, msg)
	case 406:
		accept := r.Header.Get("Accept")
		if accept == "" {
			accept = "application/json"
		}
		detail = fmt.Sprintf("The resource could not be generated that was acceptable to your browser (content of type %s. \n\n %s", accept, msg)
	case 415:
		ct := r.Header.Get("Content-Type")
		if ct == "" {
			ct = "None"
		}
		detail = fmt.Sprintf("The request media type %s is not supported by this server. \n\n %s", ct, msg)
	default:
		exp, ok := webobExplanation[status]
		if !ok {
			exp = http.StatusText(status)
		}
		detail = exp + "\n\n " + msg + "  "
	}
	e := map[string]any{"status": status, "title": http.StatusText(status), "detail": detail, "request_id": rid}
	if ver != nil && ver.minor >= 23 {
		if code == "" {
			code = "placement.undefined_code"
		}
		e["code"] = code
	}
	if ver == nil && status == http.StatusNotAcceptable {
		e["max_version"] = fmt.Sprintf("1.%d", c.placementMax)
		e["min_version"] = "1.0"
	}
	writeJSON(w, status, map[string]any{"errors": []any{e}})
}

// placementCtx carries one Placement request.
type placementCtx struct {
	c   *Cloud
	w   http.ResponseWriter
	r   *http.Request
	ver pVersion
	rid string
}

// fail answers an error raised inside a handler: PlacementWsgify turns it
// into a response, so the microversion middleware adds "vary" as well.
func (p *placementCtx) fail(status int, msg, code string) {
	p.w.Header().Add("Vary", "openstack-api-version")
	p.c.placementError(p.w, p.r, status, msg, code, &p.ver, p.rid)
}

// failOuter answers an error raised outside the handlers (routing, the
// content-type check, NotFound from an object lookup): only the
// microversion header is added.
func (p *placementCtx) failOuter(status int, msg, code string) {
	p.c.placementError(p.w, p.r, status, msg, code, &p.ver, p.rid)
}

// ok writes a success response: the "vary" header, and from 1.15 the
// last-modified/cache-control pair for the documents that carry it.
func (p *placementCtx) ok(status int, body any, lastModified time.Time) {
	p.w.Header().Add("Vary", "openstack-api-version")
	if !lastModified.IsZero() && p.ver.minor >= 15 {
		p.w.Header().Set("Last-Modified", lastModified.UTC().Format(http.TimeFormat))
		p.w.Header().Set("Cache-Control", "no-cache")
	}
	if body == nil {
		p.w.WriteHeader(status)
		return
	}
	writeJSON(p.w, status, body)
}

// placementRoutes is ROUTE_DECLARATIONS (the methods, for 405 and its allow
// header) of the routes the simulator knows.
var placementRoutes = []struct {
	pattern *regexp.Regexp
	methods string
}{
	{regexp.MustCompile(`^/resource_providers$`), "GET, POST"},
	{regexp.MustCompile(`^/resource_providers/([^/]+)$`), "GET, DELETE, PUT"},
	{regexp.MustCompile(`^/resource_providers/([^/]+)/traits$`), "GET, PUT, DELETE"},
	{regexp.MustCompile(`^/resource_providers/([^/]+)/inventories$`), "GET, POST, PUT, DELETE"},
	{regexp.MustCompile(`^/resource_providers/([^/]+)/usages$`), "GET"},
	{regexp.MustCompile(`^/resource_providers/([^/]+)/aggregates$`), "GET, PUT"},
	{regexp.MustCompile(`^/resource_providers/([^/]+)/allocations$`), "GET"},
	{regexp.MustCompile(`^/traits$`), "GET"},
	{regexp.MustCompile(`^/traits/([^/]+)$`), "GET, PUT, DELETE"},
}

func (c *Cloud) servePlacement(w http.ResponseWriter, r *http.Request, rel string) {
	rid := requestID()
	w.Header().Set("X-Openstack-Request-Id", rid)
	root := rel == "" || rel == "/"
	if !root && !c.validToken(r) {
		c.middleware401(w)
		return
	}
	ver, verr := c.placementVersion(r)
	if verr != nil {
		c.placementError(w, r, verr.status, verr.msg, "", nil, rid)
		return
	}
	w.Header().Set("Openstack-Api-Version", "placement "+ver.String())
	p := &placementCtx{c: c, w: w, r: r, ver: ver, rid: rid}
	if root {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			p.fail(http.StatusMethodNotAllowed, "The method specified is not allowed for this resource.", "")
			return
		}
		p.ok(http.StatusOK, map[string]any{"versions": []any{map[string]any{
			"id":          "v1.0",
			"max_version": fmt.Sprintf("1.%d", c.placementMax),
			"min_version": "1.0",
			"status":      "CURRENT",
			"links":       []any{map[string]any{"rel": "self", "href": ""}},
		}}}, c.now())
		return
	}
	if cl := r.ContentLength; cl > 0 && r.Header.Get("Content-Type") == "" {
		p.failOuter(http.StatusBadRequest, "content-type header required when content-length > 0", "")
		return
	}
	for i, rt := range placementRoutes {
		m := rt.pattern.FindStringSubmatch(rel)
		if m == nil {
			continue
		}
		if !slices.Contains(strings.Split(rt.methods, ", "), r.Method) {
			w.Header().Set("Allow", rt.methods)
			p.fail(http.StatusMethodNotAllowed, "The method specified is not allowed for this resource.", "")
			return
		}
		arg := ""
		if len(m) > 1 {
			arg = m[1]
		}
		p.dispatch(i, arg)
		return
	}
	p.failOuter(http.StatusNotFound, "", "")
}

func (p *placementCtx) dispatch(route int, arg string) {
	m := p.r.Method
	// Trait routes exist from 1.6 (microversion.version_handler: 404).
	if (route == 2 || route == 7 || route == 8) && p.ver.minor < 6 {
		p.fail(http.StatusNotFound, "", "")
		return
	}
	switch route {
	case 0:
		if m == http.MethodGet {
			p.listProviders()
		} else {
			p.createProvider()
		}
	case 1:
		switch m {
		case http.MethodGet:
			p.getProvider(arg)
		case http.MethodDelete:
			p.deleteProvider(arg)
		default:
			p.updateProvider(arg)
		}
	case 2:
		switch m {
		case http.MethodGet:
			p.getProviderTraits(arg)
		case http.MethodPut:
			p.putProviderTraits(arg)
		default:
			p.deleteProviderTraits(arg)
		}
	case 3, 4, 5, 6:
		if m != http.MethodGet {
			p.fail(http.StatusMethodNotAllowed, "The simulator serves this resource read-only.", "")
			return
		}
		p.providerSubresource(route, arg)
	case 7:
		p.listTraits()
	case 8:
		switch m {
		case http.MethodGet:
			p.getTrait(arg)
		case http.MethodPut:
			p.putTrait(arg)
		default:
			p.deleteTrait(arg)
		}
	}
}

func (p *placementCtx) renderProvider(pr *provider) map[string]any {
	url := placementPrefix + "/resource_providers/" + pr.uuid
	links := []any{map[string]any{"rel": "self", "href": url}}
	rels := []string{"inventories", "usages"}
	if p.ver.minor >= 1 {
		rels = append(rels, "aggregates")
	}
	if p.ver.minor >= 6 {
		rels = append(rels, "traits")
	}
	if p.ver.minor >= 11 {
		rels = append(rels, "allocations")
	}
	for _, rel := range rels {
		links = append(links, map[string]any{"rel": rel, "href": url + "/" + rel})
	}
	out := map[string]any{"uuid": pr.uuid, "name": pr.name, "generation": pr.generation, "links": links}
	if p.ver.minor >= 14 {
		out["parent_provider_uuid"] = nil
		out["root_provider_uuid"] = pr.uuid
	}
	return out
}

// notFoundProvider is the NotFound of ResourceProvider.get_by_uuid, turned
// into a 404 by PlacementHandler (outside the handler).
func (p *placementCtx) notFoundProvider(uuid string) {
	p.failOuter(http.StatusNotFound, fmt.Sprintf("No resource provider with uuid %s found", uuid), "")
}

var uuidFormatRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)

func (p *placementCtx) listProviders() {
	q := p.r.URL.Query()
	allowed := []string{"name", "uuid"}
	if p.ver.minor >= 3 {
		allowed = append(allowed, "member_of")
	}
	if p.ver.minor >= 4 {
		allowed = append(allowed, "resources")
	}
	if p.ver.minor >= 14 {
		allowed = append(allowed, "in_tree")
	}
	if p.ver.minor >= 18 {
		allowed = append(allowed, "required")
	}
	var extra []string
	for k := range q {
		if !slices.Contains(allowed, k) {
			extra = append(extra, "'"+k+"'")
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		verb := "was"
		if len(extra) > 1 {
			verb = "were"
		}
		p.fail(http.StatusBadRequest, fmt.Sprintf("Invalid query string parameters: Additional properties are not allowed (%s %s unexpected)", strings.Join(extra, ", "), verb), "")
		return
	}
	last := func(k string) (string, bool) {
		v, ok := q[k]
		if !ok || len(v) == 0 {
			return "", false
		}
		return v[len(v)-1], true
	}
	for _, k := range []string{"uuid", "in_tree"} {
		if v, ok := last(k); ok && !uuidFormatRe.MatchString(v) {
			p.fail(http.StatusBadRequest, fmt.Sprintf("Invalid query string parameters: '%s' is not a 'uuid'", v), "")
			return
		}
	}
	// required=: a list of any-of sets (AND between them) and forbidden
	var required [][]string
	forbidden := map[string]bool{}
	if vals, ok := q["required"]; ok {
		if p.ver.minor < 39 {
			vals = vals[len(vals)-1:]
		}
		for _, val := range vals {
			if strings.HasPrefix(val, "in:") {
				if p.ver.minor < 39 {
					p.fail(http.StatusBadRequest, "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion 1.39. Got: "+val, "")
					return
				}
				var any []string
				for _, t := range strings.Split(val[3:], ",") {
					t = strings.TrimSpace(t)
					if t == "" {
						p.fail(http.StatusBadRequest, "Invalid query string parameters: Expected 'required' parameter value of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: "+val, "")
						return
					}
					if strings.HasPrefix(t, "!") {
						p.fail(http.StatusBadRequest, "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support forbidden traits. Got: "+val, "")
						return
					}
					any = append(any, t)
				}
				required = append(required, any)
				continue
			}
			form := "HW_CPU_X86_VMX,CUSTOM_MAGIC"
			if p.ver.minor >= 22 {
				form = "HW_CPU_X86_VMX,!CUSTOM_MAGIC"
			}
			for _, t := range strings.Split(val, ",") {
				t = strings.TrimSpace(t)
				name := strings.TrimLeft(t, "!")
				if name == "" {
					p.fail(http.StatusBadRequest, fmt.Sprintf("Invalid query string parameters: Expected 'required' parameter value of the form: %s. Got an empty trait in: %s", form, val), "")
					return
				}
				if strings.HasPrefix(t, "!") {
					if p.ver.minor < 22 {
						p.fail(http.StatusBadRequest, "Invalid query string parameters: Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: "+val, "")
						return
					}
					forbidden[name] = true
				} else {
					required = append(required, []string{t})
				}
			}
		}
	}
	c := p.c
	c.mu.Lock()
	for _, set := range required {
		for _, t := range set {
			if _, ok := c.traits[t]; !ok {
				c.mu.Unlock()
				p.fail(http.StatusBadRequest, fmt.Sprintf("Invalid trait(s) in \"required\" parameter: No such trait(s): %s.", t), "")
				return
			}
		}
	}
	for t := range forbidden {
		if _, ok := c.traits[t]; !ok {
			c.mu.Unlock()
			p.fail(http.StatusBadRequest, fmt.Sprintf("Invalid trait(s) in \"required\" parameter: No such trait(s): %s.", t), "")
			return
		}
	}
	name, hasName := last("name")
	uuid, hasUUID := last("uuid")
	inTree, hasTree := last("in_tree")
	_, hasMember := q["member_of"]
	list := c.providerListLocked()
	out := []any{}
	var lm time.Time
	for _, pr := range list {
		if hasName && pr.name != name || hasUUID && pr.uuid != uuid || hasTree && pr.uuid != inTree || hasMember {
			continue
		}
		okTraits := true
		for _, set := range required {
			if !slices.ContainsFunc(set, func(t string) bool { return slices.Contains(pr.traits, t) }) {
				okTraits = false
			}
		}
		for t := range forbidden {
			if slices.Contains(pr.traits, t) {
				okTraits = false
			}
		}
		if !okTraits {
			continue
		}
		if pr.updated.After(lm) {
			lm = pr.updated
		}
		out = append(out, p.renderProvider(pr))
	}
	c.mu.Unlock()
	if lm.IsZero() {
		lm = c.now()
	}
	p.ok(http.StatusOK, map[string]any{"resource_providers": out}, lm)
}

// providerListLocked returns the providers in creation order.
func (c *Cloud) providerListLocked() []*provider {
	list := make([]*provider, 0, len(c.providers))
	for _, pr := range c.providers {
		list = append(list, pr)
	}
	sort.Slice(list, func(i, j int) bool {
		if !list[i].created.Equal(list[j].created) {
			return list[i].created.Before(list[j].created)
		}
		return list[i].seq < list[j].seq
	})
	return list
}

func (p *placementCtx) getProvider(uuid string) {
	c := p.c
	c.mu.Lock()
	pr, ok := c.providers[uuid]
	if !ok {
		c.mu.Unlock()
		p.notFoundProvider(uuid)
		return
	}
	body, lm := p.renderProvider(pr), pr.updated
	c.mu.Unlock()
	p.ok(http.StatusOK, body, lm)
}

func (p *placementCtx) readJSON(dst any) bool {
	ct := p.r.Header.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	if strings.TrimSpace(ct) != "application/json" {
		bad := ct
		if bad == "" {
			bad = "None"
		}
		p.fail(http.StatusUnsupportedMediaType, fmt.Sprintf("The media type %s is not supported, use application/json", bad), "")
		return false
	}
	raw, _ := readJSONBody(p.r)
	if err := json.Unmarshal(raw, dst); err != nil {
		p.fail(http.StatusBadRequest, "Malformed JSON: "+err.Error(), "")
		return false
	}
	return true
}

func (p *placementCtx) createProvider() {
	var body map[string]any
	if !p.readJSON(&body) {
		return
	}
	name, _ := body["name"].(string)
	if name == "" {
		p.fail(http.StatusBadRequest, "JSON does not validate: 'name' is a required property", "")
		return
	}
	uuid, _ := body["uuid"].(string)
	if uuid == "" {
		uuid = newUUID()
	}
	c := p.c
	c.mu.Lock()
	for _, pr := range c.providers {
		if pr.uuid == uuid || pr.name == name {
			c.mu.Unlock()
			dup := "name: " + name
			if pr.uuid == uuid {
				dup = "uuid: " + uuid
			}
			p.fail(http.StatusConflict, fmt.Sprintf("Conflicting resource provider %s already exists.", dup), "placement.duplicate_name")
			return
		}
	}
	now := c.now()
	c.provSeq++
	pr := &provider{uuid: uuid, name: name, created: now, updated: now, traits: []string{}, seq: c.provSeq}
	c.providers[uuid] = pr
	out := p.renderProvider(pr)
	c.mu.Unlock()
	p.w.Header().Set("Location", "http://"+p.r.Host+placementPrefix+"/resource_providers/"+uuid)
	if p.ver.minor >= 20 {
		p.ok(http.StatusOK, out, now)
		return
	}
	p.ok(http.StatusCreated, nil, time.Time{})
}

func (p *placementCtx) updateProvider(uuid string) {
	var body map[string]any
	if !p.readJSON(&body) {
		return
	}
	name, _ := body["name"].(string)
	c := p.c
	c.mu.Lock()
	pr, ok := c.providers[uuid]
	if !ok {
		c.mu.Unlock()
		p.notFoundProvider(uuid)
		return
	}
	if name != "" {
		pr.name = name
		pr.generation++
		pr.updated = c.now()
	}
	out := p.renderProvider(pr)
	c.mu.Unlock()
	p.ok(http.StatusOK, out, pr.updated)
}

func (p *placementCtx) deleteProvider(uuid string) {
	c := p.c
	c.mu.Lock()
	if _, ok := c.providers[uuid]; !ok {
		c.mu.Unlock()
		p.fail(http.StatusNotFound, fmt.Sprintf("No resource provider with uuid %s found for delete", uuid), "")
		return
	}
	delete(c.providers, uuid)
	c.mu.Unlock()
	p.ok(http.StatusNoContent, nil, time.Time{})
}

func (p *placementCtx) getProviderTraits(uuid string) {
	c := p.c
	c.mu.Lock()
	pr, ok := c.providers[uuid]
	if !ok {
		c.mu.Unlock()
		p.fail(http.StatusNotFound, fmt.Sprintf("No resource provider with uuid %s found: No resource provider with uuid %s found", uuid, uuid), "")
		return
	}
	body := map[string]any{"traits": slices.Clone(pr.traits), "resource_provider_generation": pr.generation}
	lm := c.traitsModifiedLocked(pr.traits)
	c.mu.Unlock()
	p.ok(http.StatusOK, body, lm)
}

// traitsModifiedLocked is _serialize_traits' last-modified: the newest
// trait's created_at, or now when there are none.
func (c *Cloud) traitsModifiedLocked(names []string) time.Time {
	var lm time.Time
	for _, t := range names {
		if ct := c.traits[t]; ct.After(lm) {
			lm = ct
		}
	}
	if lm.IsZero() {
		lm = c.now()
	}
	return lm
}

var traitNameRe = regexp.MustCompile(`^CUSTOM_[A-Z0-9_]+$`)

func (p *placementCtx) putProviderTraits(uuid string) {
	var raw map[string]json.RawMessage
	if !p.readJSON(&raw) {
		return
	}
	for k := range raw {
		if k != "traits" && k != "resource_provider_generation" {
			p.fail(http.StatusBadRequest, fmt.Sprintf("JSON does not validate: Additional properties are not allowed ('%s' was unexpected)", k), "")
			return
		}
	}
	for _, k := range []string{"traits", "resource_provider_generation"} {
		if _, ok := raw[k]; !ok {
			p.fail(http.StatusBadRequest, fmt.Sprintf("JSON does not validate: '%s' is a required property", k), "")
			return
		}
	}
	var traits []string
	if err := json.Unmarshal(raw["traits"], &traits); err != nil {
		p.fail(http.StatusBadRequest, fmt.Sprintf("JSON does not validate: %s is not of type 'array'", string(raw["traits"])), "")
		return
	}
	for _, t := range traits {
		if len(t) < 1 || len(t) > 255 {
			p.fail(http.StatusBadRequest, fmt.Sprintf("JSON does not validate: '%s' is too long", t), "")
			return
		}
	}
	var gen int64
	if err := json.Unmarshal(raw["resource_provider_generation"], &gen); err != nil {
		p.fail(http.StatusBadRequest, fmt.Sprintf("JSON does not validate: %s is not of type 'integer'", string(raw["resource_provider_generation"])), "")
		return
	}
	c := p.c
	c.mu.Lock()
	pr, ok := c.providers[uuid]
	if !ok {
		c.mu.Unlock()
		p.notFoundProvider(uuid)
		return
	}
	if pr.generation != gen {
		c.mu.Unlock()
		p.fail(http.StatusConflict, "Resource provider's generation already changed. Please update the generation and try again.", "placement.concurrent_update")
		return
	}
	var missing []string
	for _, t := range traits {
		if _, ok := c.traits[t]; !ok && !slices.Contains(missing, t) {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		c.mu.Unlock()
		p.fail(http.StatusBadRequest, "No such trait "+strings.Join(missing, ", "), "")
		return
	}
	c.setProviderTraitsLocked(pr, traits, false)
	body := map[string]any{"traits": slices.Clone(pr.traits), "resource_provider_generation": pr.generation}
	lm := c.traitsModifiedLocked(pr.traits)
	c.mu.Unlock()
	p.ok(http.StatusOK, body, lm)
}

func (p *placementCtx) deleteProviderTraits(uuid string) {
	c := p.c
	c.mu.Lock()
	pr, ok := c.providers[uuid]
	if !ok {
		c.mu.Unlock()
		p.notFoundProvider(uuid)
		return
	}
	c.setProviderTraitsLocked(pr, nil, false)
	c.mu.Unlock()
	p.ok(http.StatusNoContent, nil, time.Time{})
}

func (p *placementCtx) providerSubresource(route int, uuid string) {
	c := p.c
	c.mu.Lock()
	pr, ok := c.providers[uuid]
	if !ok {
		c.mu.Unlock()
		p.fail(http.StatusNotFound, fmt.Sprintf("No resource provider with uuid %s found", uuid), "")
		return
	}
	var body map[string]any
	switch route {
	case 3:
		inv := map[string]any{}
		for rc, i := range pr.inventory {
			inv[rc] = map[string]any{"allocation_ratio": json.Number("1.0"), "max_unit": 1, "min_unit": 1, "reserved": i.Reserved, "step_size": 1, "total": i.Total}
		}
		body = map[string]any{"inventories": inv, "resource_provider_generation": pr.generation}
	case 4:
		usages := map[string]any{}
		used := 0
		if rec, ok := c.nodes[pr.uuid]; ok && rec.n.InstanceUUID != "" {
			used = 1
		}
		for rc := range pr.inventory {
			usages[rc] = used
		}
		body = map[string]any{"usages": usages, "resource_provider_generation": pr.generation}
	case 5:
		body = map[string]any{"aggregates": []any{}}
		if p.ver.minor >= 19 {
			body["resource_provider_generation"] = pr.generation
		}
	case 6:
		body = map[string]any{"allocations": map[string]any{}, "resource_provider_generation": pr.generation}
	}
	lm := pr.updated
	c.mu.Unlock()
	p.ok(http.StatusOK, body, lm)
}

func (p *placementCtx) listTraits() {
	q := p.r.URL.Query()
	for k := range q {
		if k != "name" && k != "associated" {
			p.fail(http.StatusBadRequest, fmt.Sprintf("Invalid query string parameters: Additional properties are not allowed ('%s' was unexpected)", k), "")
			return
		}
	}
	var in []string
	prefix := ""
	if v, ok := q["name"]; ok {
		op, val, found := strings.Cut(v[len(v)-1], ":")
		if !found {
			p.fail(http.StatusBadRequest, fmt.Sprintf("Badly formatted name parameter. Expected name query string parameter in form: ?name=[in|startswith]:[name1,name2|prefix]. Got: \"%s\"", v[len(v)-1]), "")
			return
		}
		switch op {
		case "in":
			in = strings.Split(val, ",")
		case "startswith":
			prefix = val
		}
	}
	var assoc *bool
	if v, ok := q["associated"]; ok {
		switch strings.ToLower(v[len(v)-1]) {
		case "true":
			b := true
			assoc = &b
		case "false":
			b := false
			assoc = &b
		default:
			p.fail(http.StatusBadRequest, `The query parameter "associated" only accepts "true" or "false"`, "")
			return
		}
	}
	c := p.c
	c.mu.Lock()
	used := map[string]bool{}
	for _, pr := range c.providers {
		for _, t := range pr.traits {
			used[t] = true
		}
	}
	var names []string
	for t := range c.traits {
		if in != nil && !slices.Contains(in, t) || !strings.HasPrefix(t, prefix) || assoc != nil && used[t] != *assoc {
			continue
		}
		names = append(names, t)
	}
	sort.Strings(names)
	lm := c.traitsModifiedLocked(names)
	c.mu.Unlock()
	if names == nil {
		names = []string{}
	}
	p.ok(http.StatusOK, map[string]any{"traits": names}, lm)
}

func (p *placementCtx) getTrait(name string) {
	c := p.c
	c.mu.Lock()
	created, ok := c.traits[name]
	c.mu.Unlock()
	if !ok {
		p.fail(http.StatusNotFound, fmt.Sprintf("No such trait(s): %s.", name), "")
		return
	}
	p.ok(http.StatusNoContent, nil, created)
}

func (p *placementCtx) putTrait(name string) {
	if len(name) > 255 || !traitNameRe.MatchString(name) {
		p.fail(http.StatusBadRequest, `The trait is invalid. A valid trait must be no longer than 255 characters, start with the prefix "CUSTOM_" and use following characters: "A"-"Z", "0"-"9" and "_"`, "")
		return
	}
	c := p.c
	c.mu.Lock()
	created, ok := c.traits[name]
	status := http.StatusNoContent
	if !ok {
		created = c.now()
		c.traits[name] = created
		status = http.StatusCreated
	}
	c.mu.Unlock()
	p.w.Header().Set("Location", "http://"+p.r.Host+placementPrefix+"/traits/"+name)
	p.ok(status, nil, created)
}

func (p *placementCtx) deleteTrait(name string) {
	c := p.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.traits[name]; !ok {
		p.fail(http.StatusNotFound, fmt.Sprintf("No such trait(s): %s.", name), "")
		return
	}
	if !strings.HasPrefix(name, "CUSTOM_") {
		p.fail(http.StatusBadRequest, fmt.Sprintf("Cannot delete standard trait %s.", name), "")
		return
	}
	for _, pr := range c.providers {
		if slices.Contains(pr.traits, name) {
			p.fail(http.StatusConflict, fmt.Sprintf("The trait %s is in use by a resource provider.", name), "")
			return
		}
	}
	delete(c.traits, name)
	p.ok(http.StatusNoContent, nil, time.Time{})
}
