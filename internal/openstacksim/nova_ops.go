package openstacksim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// What operations need from Nova: the one flavor, server create (booting
// onto a chosen node through Ironic's deploy) and server delete.

// simFlavor renders the one flavor the simulated Nova has.
func simFlavor(minor int) map[string]any {
	f := map[string]any{"id": simFlavorID, "name": simFlavorName, "vcpus": 1, "ram": 1024, "disk": 10,
		"OS-FLV-EXT-DATA:ephemeral": 0, "swap": "", "rxtx_factor": 1.0, "os-flavor-access:is_public": true, "OS-FLV-DISABLED:disabled": false}
	if minor >= 55 {
		f["description"] = nil
	}
	if minor >= 61 {
		f["extra_specs"] = simFlavorExtraSpecs()
	}
	return f
}

// simFlavorExtraSpecs are the flavor's extra specs: one whole node of the
// GPU resource class, no VCPU, memory or disk.
func simFlavorExtraSpecs() map[string]any {
	return map[string]any{"resources:CUSTOM_GPU_H100": "1", "resources:VCPU": "0", "resources:MEMORY_MB": "0", "resources:DISK_GB": "0"}
}

// serveComputeOps answers what operations need from Nova: flavors, server
// create and delete. It returns false for requests it does not serve.
func (c *Cloud) serveComputeOps(w http.ResponseWriter, r *http.Request, minor int, segs []string) bool {
	switch {
	case segs[0] == "flavors" && r.Method == http.MethodGet && len(segs) == 2 && segs[1] == "detail":
		writeNovaJSON(w, http.StatusOK, map[string]any{"flavors": []any{simFlavor(minor)}})
	case segs[0] == "flavors" && r.Method == http.MethodGet && len(segs) == 2:
		if segs[1] != simFlavorID {
			novaError(w, http.StatusNotFound, fmt.Sprintf("Flavor %s could not be found.", segs[1]))
			return true
		}
		writeNovaJSON(w, http.StatusOK, map[string]any{"flavor": simFlavor(minor)})
	case segs[0] == "servers" && len(segs) == 1 && r.Method == http.MethodPost:
		c.novaCreate(w, r, minor)
	case segs[0] == "servers" && len(segs) == 2 && r.Method == http.MethodDelete:
		c.novaDelete(w, segs[1])
	default:
		return false
	}
	return true
}

// novaCreate is POST /v2.1/servers: a BUILD server, scheduled in the
// background (scheduleServer).
func (c *Cloud) novaCreate(w http.ResponseWriter, r *http.Request, minor int) {
	raw, _ := readJSONBody(r)
	var body struct {
		Server map[string]any `json:"server"`
	}
	if err := json.Unmarshal(raw, &body); err != nil || body.Server == nil {
		novaError(w, http.StatusBadRequest, "Invalid input for field/attribute server.")
		return
	}
	s := body.Server
	str := func(k string) string { v, _ := s[k].(string); return v }
	if minor < 74 {
		for _, k := range []string{"host", "hypervisor_hostname"} {
			if _, ok := s[k]; ok {
				novaError(w, http.StatusBadRequest, fmt.Sprintf("Invalid input for field/attribute server. Value: %s. Additional properties are not allowed ('%s' was unexpected)", pyRepr(s), k))
				return
			}
		}
	}
	if str("name") == "" {
		novaError(w, http.StatusBadRequest, "Invalid input for field/attribute server. Value: "+pyRepr(s)+". 'name' is a required property")
		return
	}
	if _, ok := s["networks"]; !ok && minor >= 37 {
		novaError(w, http.StatusBadRequest, "Invalid input for field/attribute server. Value: "+pyRepr(s)+". 'networks' is a required property")
		return
	}
	if f := str("flavorRef"); f != simFlavorID {
		novaError(w, http.StatusBadRequest, fmt.Sprintf("Flavor %s could not be found.", f))
		return
	}
	if str("imageRef") == "" {
		novaError(w, http.StatusBadRequest, "Can not find requested image")
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	target := str("hypervisor_hostname")
	if target != "" {
		if _, ok := c.nodes[target]; !ok {
			novaError(w, http.StatusBadRequest, fmt.Sprintf("Compute host %s could not be found.", target))
			return
		}
	}
	md := map[string]string{}
	if m, ok := s["metadata"].(map[string]any); ok {
		for k, v := range m {
			md[k], _ = v.(string)
		}
	}
	srv, err := c.addServerLocked(Server{Name: str("name"), Status: ServerBuild, TaskState: "scheduling", VMState: "building", Metadata: md})
	if err != nil {
		novaError(w, http.StatusInternalServerError, err.Error())
		return
	}
	go c.scheduleServer(srv.ID, target)
	w.Header().Set("Location", c.novaPublic()+"/servers/"+srv.ID)
	writeNovaJSON(w, http.StatusAccepted, map[string]any{"server": map[string]any{"id": srv.ID, "links": c.serverLinks(srv.ID),
		"OS-DCF:diskConfig": "MANUAL", "security_groups": []any{map[string]any{"name": "default"}}, "adminPass": randomHex(6)}})
}

// scheduleServer places a new server on its node (or fails it with No
// valid host) and lets Ironic deploy the node, one step at a time.
func (c *Cloud) scheduleServer(id, target string) {
	time.Sleep(c.provisionStep())
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, ok := c.servers[id]
	if !ok || rec.deleted {
		return
	}
	var node *nodeRec
	for _, nr := range c.nodeOrder {
		n := nr.n
		if (target == "" || n.UUID == target) && n.ProvisionState == "available" && !n.Maintenance && n.InstanceUUID == "" &&
			n.PowerState != "" && n.ResourceClass == "gpu-h100" {
			node = nr
			break
		}
	}
	if node == nil {
		rec.s.Status, rec.s.VMState, rec.s.TaskState, rec.s.Updated = ServerError, "error", "", c.now()
		c.opsLocked().faults[id] = "No valid host was found. "
		return
	}
	rec.s.HypervisorHostname, rec.s.Host, rec.s.TaskState, rec.s.Updated = node.n.UUID, SimComputeHost, "spawning", c.now()
	node.n.InstanceUUID = id
	node.n.InstanceInfo = map[string]any{"display_name": rec.s.Name, "image_source": "nova-image"}
	steps := deploySteps()
	last := steps[len(steps)-1].apply
	steps[len(steps)-1].apply = func(n *Node) {
		last(n)
		if r, ok := c.servers[id]; ok && !r.deleted {
			now := c.now()
			r.s.Status, r.s.VMState, r.s.TaskState, r.s.PowerState, r.s.LaunchedAt, r.s.Updated = ServerActive, "active", "", 1, now, now
		}
	}
	c.startPlanLocked(node.n.UUID, steps)
}

// novaDelete is DELETE /v2.1/servers/{id}: the node is torn down and the
// server deleted one step later.
func (c *Cloud) novaDelete(w http.ResponseWriter, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, ok := c.servers[id]
	if !ok || rec.deleted {
		novaError(w, http.StatusNotFound, fmt.Sprintf("Instance %s could not be found.", id))
		return
	}
	rec.s.TaskState, rec.s.Updated = "deleting", c.now()
	node := rec.s.HypervisorHostname
	go func() {
		time.Sleep(c.provisionStep())
		c.mu.Lock()
		defer c.mu.Unlock()
		if nr, ok := c.nodes[node]; ok && nr.n.InstanceUUID == id {
			c.startPlanLocked(node, undeploySteps())
		}
		c.deleteServerLocked(id)
	}()
	w.WriteHeader(http.StatusNoContent)
}

// serverFault returns the fault of a server in ERROR, or "".
func (c *Cloud) serverFaultLocked(id string) string {
	if c.ops == nil {
		return ""
	}
	return c.ops.faults[id]
}
