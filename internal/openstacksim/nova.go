package openstacksim

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// Nova (compute) API 2.1 with microversions up to 2.93 (Nova 26 / Zed).
const (
	novaMaxMinor      = 93
	novaVersionHeader = "X-Openstack-Nova-Api-Version"
)

// novaVersionRe is APIVersionRequest's format check
// (nova/api/openstack/api_version_request.py).
var novaVersionRe = regexp.MustCompile(`^([1-9]\d*)\.([1-9]\d*|0)$`)

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
	writeBody(w, status, "application/json; charset=UTF-8", pyJSON(map[string]any{name: map[string]any{"code": status, "message": msg}}))
}

// writeNovaJSON writes a Nova success body (Content-Type application/json).
func writeNovaJSON(w http.ResponseWriter, status int, v any) {
	writeBody(w, status, "application/json", pyJSON(v))
}

// novaRoutingNotFound is WebOb's HTML 404 for a path no route matches.
func novaRoutingNotFound(w http.ResponseWriter) {
	body := "<html>\n <head>\n  <title>404 Not Found</title>\n </head>\n <body>\n  <h1>404 Not Found</h1>\n  The resource could not be found.<br /><br />\n\n\n\n </body>\n</html>"
	writeBody(w, http.StatusNotFound, "text/html; charset=UTF-8", []byte(body))
}

// novaVersion is nova's Request.set_api_version_request over
// microversion_parse.get_version: "OpenStack-API-Version: compute X" wins
// over X-OpenStack-Nova-API-Version; none means 2.1; "latest" the maximum.
// It returns the minor, or the requested string and a status (400 bad
// format, 406 out of range) with Nova's message.
func novaVersion(h http.Header) (minor int, requested string, status int, msg string) {
	found := apiVersionHeader(h, "compute")
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

// regexpMatch is Nova's name filter (a regular expression search); an
// invalid expression matches nothing.
func regexpMatch(expr, s string) bool {
	re, err := regexp.Compile(expr)
	return err == nil && re.MatchString(s)
}

// novaLimitRe is the query schema's pattern for limit.
var novaLimitRe = regexp.MustCompile(`^[0-9]*$`)
