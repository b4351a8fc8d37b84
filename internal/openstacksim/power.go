package openstacksim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// powerTargets maps each power target of PUT /v1/nodes/{id}/states/power
// to the power_state it ends in, with the microversion it needs (Ironic
// API reference "Change Node Power State": soft targets since 1.27).
var powerTargets = map[string]struct {
	final string
	since int
}{
	"power on":       {"power on", 0},
	"power off":      {"power off", 0},
	"rebooting":      {"power on", 0},
	"soft power off": {"power off", 27},
	"soft rebooting": {"power on", 27},
}

// ironicPower is PUT /v1/nodes/{id}/states/power. As Ironic's conductor
// does, it answers 202 with target_power_state set and the node reserved,
// then after one [Options.ProvisionStep] sets power_state and frees the
// node; meanwhile another power request (or any write) answers 409
// NodeLocked. timeout (1.27+) must be a positive integer.
func (c *Cloud) ironicPower(w http.ResponseWriter, r *http.Request, ver int, ident string) {
	raw, _ := readJSONBody(r)
	var body struct {
		Target  string `json:"target"`
		Timeout *int   `json:"timeout"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		ironicError(w, http.StatusBadRequest, "The request body is not valid JSON.")
		return
	}
	t, ok := powerTargets[body.Target]
	if !ok {
		ironicError(w, http.StatusBadRequest, fmt.Sprintf("Invalid power state %s.", body.Target))
		return
	}
	if ver < t.since || (body.Timeout != nil && ver < 27) {
		ironicError(w, http.StatusNotAcceptable, "Request not acceptable.")
		return
	}
	if body.Timeout != nil && *body.Timeout < 1 {
		ironicError(w, http.StatusBadRequest, fmt.Sprintf("Invalid timeout value %d. Timeout must be a positive integer.", *body.Timeout))
		return
	}
	c.withReservedNode(w, ver, ident, func(rec *nodeRec) {
		if rec.n.TargetPowerState != "" {
			ironicError(w, http.StatusConflict, fmt.Sprintf("Node %s is locked by host %s, please retry after the current operation is completed.", rec.n.UUID, simConductor))
			return
		}
		rec.n.TargetPowerState, rec.n.Reservation = t.final, simConductor
		rec.n.LastError = ""
		uuid := rec.n.UUID
		time.AfterFunc(c.provisionStep(), func() { c.settlePower(uuid, t.final) })
		w.Header().Set("Location", c.ironicPublic()+"/v1/nodes/"+uuid+"/states")
		w.WriteHeader(http.StatusAccepted)
	})
}

// settlePower ends a power change: power_state reaches final and the node
// is free again.
func (c *Cloud) settlePower(uuid, final string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, ok := c.nodes[uuid]
	if !ok || rec.n.TargetPowerState != final {
		return
	}
	rec.n.PowerState, rec.n.TargetPowerState = final, ""
	if rec.n.Reservation == simConductor {
		rec.n.Reservation = ""
	}
	rec.n.UpdatedAt = c.now()
}
