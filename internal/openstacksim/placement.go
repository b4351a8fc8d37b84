package openstacksim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
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
	found := apiVersionHeader(r.Header, "placement")
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

// The indexes of placementRoutes.
const (
	routeProviders = iota
	routeProvider
	routeProviderTraits
	routeInventories
	routeUsages
	routeAggregates
	routeAllocations
	routeTraits
	routeTrait
)

// placementRoutes is ROUTE_DECLARATIONS (the methods, for 405 and its allow
// header) of the routes the simulator knows, in the order of the route
// constants.
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

// servePlacement answers /placement/...: version document, token and
// microversion checks, then the route table.
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

// dispatch calls the handler of placementRoutes[route] for the method.
func (p *placementCtx) dispatch(route int, arg string) {
	m := p.r.Method
	// Trait routes exist from 1.6 (microversion.version_handler: 404).
	if (route == routeProviderTraits || route == routeTraits || route == routeTrait) && p.ver.minor < 6 {
		p.fail(http.StatusNotFound, "", "")
		return
	}
	switch route {
	case routeProviders:
		if m == http.MethodGet {
			p.listProviders()
		} else {
			p.createProvider()
		}
	case routeProvider:
		switch m {
		case http.MethodGet:
			p.getProvider(arg)
		case http.MethodDelete:
			p.deleteProvider(arg)
		default:
			p.updateProvider(arg)
		}
	case routeProviderTraits:
		switch m {
		case http.MethodGet:
			p.getProviderTraits(arg)
		case http.MethodPut:
			p.putProviderTraits(arg)
		default:
			p.deleteProviderTraits(arg)
		}
	case routeInventories, routeUsages, routeAggregates, routeAllocations:
		if m != http.MethodGet {
			p.fail(http.StatusMethodNotAllowed, "The simulator serves this resource read-only.", "")
			return
		}
		p.providerSubresource(route, arg)
	case routeTraits:
		p.listTraits()
	case routeTrait:
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

// readJSON decodes a JSON request body into dst; it answers 415 for
// another media type and 400 for malformed JSON.
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
