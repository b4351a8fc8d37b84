package openstacksim

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
)

// ironicHardware is GET /v1/nodes/{ident}/inventory (API 1.81+) and GET
// /v1/nodes/{ident}/bios (API 1.40+), as Ironic 21.4 answers them (checked
// against the test bed by test/e2e TestHardwareEndpointsRealCloud): below
// the microversion the route does not exist, a routing error (404, pecan's
// {"code": 404, "title": "Not Found", "description": ""}, no microversion
// headers); a node without an inventory answers 404 "Node inventory record
// for node N could not be found.", N being the node's internal id, not its
// UUID; a node without BIOS settings an empty list.
func (c *Cloud) ironicHardware(w http.ResponseWriter, r *http.Request, ver int, ident, what string) {
	if r.Method != http.MethodGet {
		routingError(w, http.StatusMethodNotAllowed, "", "GET")
		return
	}
	if (what == "inventory" && ver < 81) || (what == "bios" && ver < 40) {
		routingError(w, http.StatusNotFound, "", "")
		return
	}
	c.withNode(w, ver, ident, func(rec *nodeRec) {
		if what == "bios" {
			out := make([]any, 0, len(rec.n.BIOS))
			for _, k := range slices.Sorted(maps.Keys(rec.n.BIOS)) {
				out = append(out, map[string]any{"name": k, "value": rec.n.BIOS[k],
					"links": []any{ironicLink("self", c.ironicPublic(), "nodes", rec.n.UUID+"/bios/"+k, false)}})
			}
			writeJSON(w, http.StatusOK, map[string]any{"bios": out})
			return
		}
		if rec.n.Inventory == nil {
			ironicError(w, http.StatusNotFound, fmt.Sprintf("Node inventory record for node %d could not be found.", rec.id))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"inventory": rec.n.Inventory, "plugin_data": mapOrEmpty(rec.n.PluginData)})
	})
}
