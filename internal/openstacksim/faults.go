package openstacksim

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Fault injection: failing or slow answers in front of the services.

// Fault makes matching requests fail (or slow down) before the simulated
// service sees them; see [Cloud.InjectFault].
type Fault struct {
	// Service is "identity", "baremetal", "placement" or "compute"; ""
	// matches any.
	Service string
	// Method is the HTTP method to match; "" matches any.
	Method string
	// PathContains must be a substring of the request path relative to the
	// service root plus "?"+query when there is one (e.g. "/v1/nodes",
	// "marker=", "/traits/CUSTOM_CUSTOMER_READY"); "" matches any.
	PathContains string
	// Status is the HTTP status to answer. 0 means no error: after Before
	// and Delay the request is served normally (useful for slow responses).
	Status int
	// Body is sent as the response body (Content-Type application/json).
	// "" gives a realistic body for that service and status: Ironic's
	// error_message envelope (409 → NodeLocked for the node in the path),
	// Placement's errors[] (409 → placement.concurrent_update), Nova's
	// {"<faultName>": {"code", "message"}} (with microversion headers on
	// /v2.1), Keystone's {"error": ...}.
	Body string
	// Times is how many matching requests fail; 0 means 1, a negative value
	// means every matching request until [Cloud.ClearFaults].
	Times int
	// Before, when set, runs (without the Cloud's lock held) before the
	// fault answers, e.g. to bump a provider generation like a concurrent
	// writer.
	Before func()
	// Delay is waited before answering (cut short when the client goes
	// away).
	Delay time.Duration
}

// InjectFault adds a fault. Faults are checked in the order added; the first
// matching one with uses left answers the request. Faults apply before
// authentication, like a failing proxy or service in front of the API.
func (c *Cloud) InjectFault(f Fault) {
	if f.Times == 0 {
		f.Times = 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, &f)
}

// ClearFaults removes every injected fault, used up or not.
func (c *Cloud) ClearFaults() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = nil
}

// takeFault returns a copy of the first fault matching the request and uses
// it up once, or nil.
func (c *Cloud) takeFault(service, method, rel string) *Fault {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, f := range c.faults {
		if f.Service != "" && f.Service != service {
			continue
		}
		if f.Method != "" && !strings.EqualFold(f.Method, method) {
			continue
		}
		if f.PathContains != "" && !strings.Contains(rel, f.PathContains) {
			continue
		}
		cp := *f
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				c.faults = append(c.faults[:i:i], c.faults[i+1:]...)
			}
		}
		return &cp
	}
	return nil
}

// writeFault answers an injected fault with realistic headers and body.
func (c *Cloud) writeFault(w http.ResponseWriter, r *http.Request, service, rel string, f *Fault) {
	var answer func()
	switch service {
	case ServiceBaremetal:
		answer = c.ironicFaultAnswer(w, r, rel, f.Status)
	case ServicePlacement:
		answer = c.placementFaultAnswer(w, r, f.Status)
	case ServiceCompute:
		answer = c.novaFaultAnswer(w, r, rel, f.Status)
	default:
		answer = func() { keystoneError(w, f.Status, defaultText(f.Status), c.URL()+identityPrefix) }
	}
	if f.Body != "" {
		writeRaw(w, f.Status, f.Body)
		return
	}
	answer()
}

// ironicFaultAnswer sets Ironic's headers for a fault and returns the writer of
// its default body: NodeLocked for the node in the path on a 409.
func (c *Cloud) ironicFaultAnswer(w http.ResponseWriter, r *http.Request, rel string, status int) func() {
	if strings.HasPrefix(rel, "/v1") {
		if v, msg, _ := parseIronicVersion(r.Header, c.ironicMax); msg == "" {
			c.setIronicVersionHeaders(w, v)
		}
	}
	w.Header().Set("Openstack-Request-Id", requestID())
	return func() {
		if status == http.StatusConflict {
			ident := "unknown"
			if parts := strings.Split(strings.TrimPrefix(rel, "/v1/nodes/"), "/"); strings.HasPrefix(rel, "/v1/nodes/") && parts[0] != "" {
				ident = parts[0]
			}
			ironicError(w, status, fmt.Sprintf("Node %s is locked by host %s, please retry after the current operation is completed.", ident, simConductor))
			return
		}
		ironicError(w, status, defaultText(status))
	}
}

// placementFaultAnswer sets Placement's headers for a fault and returns the
// writer of its default body: placement.concurrent_update on a 409.
func (c *Cloud) placementFaultAnswer(w http.ResponseWriter, r *http.Request, status int) func() {
	ver, verr := c.placementVersion(r)
	if verr == nil {
		w.Header().Set("Openstack-Api-Version", "placement "+ver.String())
		w.Header().Add("Vary", "openstack-api-version")
	}
	rid := requestID()
	w.Header().Set("X-Openstack-Request-Id", rid)
	return func() {
		msg, code := defaultText(status), ""
		if status == http.StatusConflict {
			msg, code = "Resource provider's generation already changed. Please update the generation and try again.", "placement.concurrent_update"
		}
		var vp *pVersion
		if verr == nil {
			vp = &ver
		}
		c.placementError(w, r, status, msg, code, vp, rid)
	}
}

// novaFaultAnswer sets Nova's headers for a fault and returns the writer of its
// default body (keystonemiddleware's on a 401, FaultWrapper's on a 500).
func (c *Cloud) novaFaultAnswer(w http.ResponseWriter, r *http.Request, rel string, status int) func() {
	setNovaRequestID(w)
	if strings.HasPrefix(rel, "/v2.1/") {
		if minor, _, st, _ := novaVersion(r.Header); st == 0 {
			setNovaVersionHeaders(w, fmt.Sprintf("2.%d", minor))
		}
	}
	return func() {
		switch status {
		case http.StatusUnauthorized:
			c.middleware401(w)
		case http.StatusInternalServerError:
			// FaultWrapper's text for an unexpected exception
			novaError(w, status, "Unexpected API Error. Please report this at http://bugs.launchpad.net/nova/ and attach the Nova API log if possible.\n<class 'Exception'>")
		default:
			novaError(w, status, defaultText(status))
		}
	}
}

func defaultText(status int) string {
	switch status {
	case http.StatusServiceUnavailable:
		return "The server is currently unavailable. Please try again at a later time."
	case http.StatusInternalServerError:
		return "The server has either erred or is incapable of performing the requested operation."
	case http.StatusUnauthorized:
		return "The request you have made requires authentication."
	}
	if t := http.StatusText(status); t != "" {
		return t + "."
	}
	return "Error."
}
