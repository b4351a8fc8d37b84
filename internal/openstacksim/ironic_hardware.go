package openstacksim

import (
	"maps"
	"net/http"
	"slices"
)

// ironicHardware is GET /v1/nodes/{ident}/inventory (API 1.81+) and GET
// /v1/nodes/{ident}/bios (API 1.40+), as Ironic 21.4 answers them: below
// the microversion the route does not exist (404 "Resource could not be
// found."); a node without an inventory answers 404 "Node inventory record
// for node … could not be found."; a node without BIOS settings an empty
// list.
func (c *Cloud) ironicHardware(w http.ResponseWriter, r *http.Request, ver int, ident, what string) {
	if r.Method != http.MethodGet {
		routingError(w, http.StatusMethodNotAllowed, "", "GET")
		return
	}
	if (what == "inventory" && ver < 81) || (what == "bios" && ver < 40) {
		ironicError(w, http.StatusNotFound, "Resource could not be found.")
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
			ironicError(w, http.StatusNotFound, "Node inventory record for node "+rec.n.UUID+" could not be found.")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"inventory": rec.n.Inventory, "plugin_data": mapOrEmpty(rec.n.PluginData)})
	})
}
