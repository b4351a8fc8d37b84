package openstacksim

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
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
		c.ironicV1Doc(w, c.ironicPublic(), ver)
		return
	}
	c.routeIronicV1(w, r, ver, strings.Split(strings.TrimPrefix(p, "/v1/"), "/"))
}

// routeIronicV1 routes an authenticated /v1/... request; segs are the path
// elements below /v1.
func (c *Cloud) routeIronicV1(w http.ResponseWriter, r *http.Request, ver int, segs []string) {
	switch { // ironic_ports.go
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
	c.routeIronicNode(w, r, ver, ident, segs[2:])
}

// routeIronicNode routes /v1/nodes/{ident}/...; sub are the path elements
// after the identifier.
func (c *Cloud) routeIronicNode(w http.ResponseWriter, r *http.Request, ver int, ident string, sub []string) {
	switch {
	case len(sub) == 0:
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
	case sub[0] == "maintenance" && len(sub) == 1:
		switch r.Method {
		case http.MethodPut:
			c.ironicMaintenance(w, r, ver, ident, true)
		case http.MethodDelete:
			c.ironicMaintenance(w, r, ver, ident, false)
		default:
			routingError(w, http.StatusMethodNotAllowed, "", "DELETE, PUT")
		}
	case (sub[0] == "inventory" || sub[0] == "bios") && len(sub) == 1:
		c.ironicHardware(w, r, ver, ident, sub[0])
	case sub[0] == "traits" && len(sub) <= 2:
		c.routeIronicTraits(w, r, ver, ident, sub[1:])
	case sub[0] == "states" && len(sub) == 2 && sub[1] == "provision" && r.Method == http.MethodPut:
		c.ironicProvision(w, r, ver, ident)
	case sub[0] == "states" && len(sub) == 2 && sub[1] == "power" && r.Method == http.MethodPut:
		c.ironicPower(w, r, ver, ident)
	case sub[0] == "states" && len(sub) == 1 && r.Method == http.MethodGet:
		c.ironicStates(w, r, ver, ident)
	default:
		routingError(w, http.StatusNotFound, "", "")
	}
}

// routeIronicTraits routes /v1/nodes/{ident}/traits[/{trait}]; rest holds
// the trait, if any.
func (c *Cloud) routeIronicTraits(w http.ResponseWriter, r *http.Request, ver int, ident string, rest []string) {
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
	if len(rest) == 1 {
		trait = rest[0]
	}
	switch r.Method {
	case http.MethodGet:
		if trait != "" {
			routingError(w, http.StatusMethodNotAllowed, "", "DELETE, GET, PUT")
			return
		}
		c.ironicTraitsGet(w, r, ver, ident)
	case http.MethodPut:
		c.ironicTraitsPut(w, r, ver, ident, trait, len(rest) == 1)
	case http.MethodDelete:
		c.ironicTraitsDelete(w, r, ver, ident, trait)
	default:
		routingError(w, http.StatusMethodNotAllowed, "", "DELETE, GET, PUT")
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
