package openstacksim

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Ironic drivers (GET /v1/drivers) and ports (GET and POST /v1/ports), as
// far as operations need them.

// simPort is an Ironic port of the simulator.
type simPort struct {
	UUID, NodeUUID, Address string
	PXE                     bool
	CreatedAt               time.Time
}

// ironicDrivers is GET /v1/drivers.
func (c *Cloud) ironicDrivers(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, map[string]any{"drivers": []any{map[string]any{
		"name": "fake-hardware", "hosts": []any{simConductor}, "type": "dynamic",
		"links": []any{ironicLinkBookmark(c.ironicPublic(), "drivers/fake-hardware")},
	}}})
}

// ironicPorts serves GET and POST /v1/ports (ports of deleted nodes are
// gone with them).
func (c *Cloud) ironicPorts(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.opsLocked()
	o.ports = slices.DeleteFunc(o.ports, func(p *simPort) bool { _, ok := c.nodes[p.NodeUUID]; return !ok })
	render := func(p *simPort) map[string]any {
		return map[string]any{"uuid": p.UUID, "address": p.Address, "node_uuid": p.NodeUUID, "pxe_enabled": p.PXE,
			"created_at": pyTime(p.CreatedAt), "links": []any{ironicLinkBookmark(c.ironicPublic(), "ports/"+p.UUID)}}
	}
	switch r.Method {
	case http.MethodGet:
		node := r.URL.Query().Get("node_uuid")
		if node == "" {
			node = r.URL.Query().Get("node")
		}
		addr := strings.ToLower(r.URL.Query().Get("address"))
		out := []any{}
		for _, p := range o.ports {
			if (node == "" || p.NodeUUID == node) && (addr == "" || strings.EqualFold(p.Address, addr)) {
				out = append(out, render(p))
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"ports": out})
	case http.MethodPost:
		raw, _ := readJSONBody(r)
		var body struct {
			NodeUUID string `json:"node_uuid"`
			Address  string `json:"address"`
			PXE      *bool  `json:"pxe_enabled"`
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			ironicError(w, http.StatusBadRequest, "The request body is not valid JSON.")
			return
		}
		hw, err := net.ParseMAC(body.Address)
		if err != nil || len(hw) != 6 {
			ironicError(w, http.StatusBadRequest, fmt.Sprintf("Expected a MAC address but received %s.", body.Address))
			return
		}
		mac := hw.String()
		if _, ok := c.nodes[body.NodeUUID]; !ok {
			ironicError(w, http.StatusBadRequest, fmt.Sprintf("Node %s could not be found.", body.NodeUUID))
			return
		}
		for _, p := range o.ports {
			if p.Address == mac {
				ironicError(w, http.StatusConflict, fmt.Sprintf("A port with MAC address %s already exists.", mac))
				return
			}
		}
		p := &simPort{UUID: newUUID(), NodeUUID: body.NodeUUID, Address: mac, PXE: body.PXE == nil || *body.PXE, CreatedAt: c.now()}
		o.ports = append(o.ports, p)
		w.Header().Set("Location", c.ironicPublic()+"/v1/ports/"+p.UUID)
		writeJSON(w, http.StatusCreated, render(p))
	default:
		routingError(w, http.StatusMethodNotAllowed, "", "GET, POST")
	}
}

// Ports returns the MAC addresses of the node's ports.
func (c *Cloud) Ports(nodeUUID string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, p := range c.opsLocked().ports {
		if p.NodeUUID == nodeUUID {
			out = append(out, p.Address)
		}
	}
	return out
}
