package openstacksim

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"
)

// This file models what operations need (OPENSTACK.md §1.2 and §9): Ironic
// drivers and ports, the provision state machine behind PUT
// /v1/nodes/{id}/states/provision (enrol/manage, inspect, manual and
// automated cleaning, deploy, undeploy, abort from the "* wait" states) and
// power actions, and Nova's server create and delete on a chosen node.
// Transitions run in the background one step every [Options.ProvisionStep]
// (default 100 ms), as the conductor would: the node is reserved (409
// NodeLocked for writes) in the working states (verifying, inspecting,
// cleaning, deploying, deleting) and free in the wait states (inspect wait,
// clean wait, wait call-back), from which "abort" is accepted.
// [Cloud.HoldWaitStates] keeps transitions in a wait state until released,
// so a test can cancel there.

// opsState is the part of a Cloud only operations use.
type opsState struct {
	ports    []*simPort
	plans    map[string]*plan // node UUID → running transition
	hold     bool
	released chan struct{}     // closed when hold is turned off
	faults   map[string]string // server ID → fault message
}

type simPort struct {
	UUID, NodeUUID, Address string
	PXE                     bool
	CreatedAt               time.Time
}

// plan is a running transition of one node.
type plan struct {
	stop chan struct{}
}

// pstep is one state a transition passes through.
type pstep struct {
	state, target string
	locked        bool
	apply         func(n *Node)
}

func (c *Cloud) opsLocked() *opsState {
	if c.ops == nil {
		c.ops = &opsState{plans: map[string]*plan{}, faults: map[string]string{}, released: make(chan struct{})}
	}
	return c.ops
}

func (c *Cloud) provisionStep() time.Duration {
	if c.opts.ProvisionStep > 0 {
		return c.opts.ProvisionStep
	}
	return 100 * time.Millisecond
}

// HoldWaitStates, when on, stops every transition that reaches a wait state
// (clean wait, inspect wait, wait call-back) there until it is turned off
// again or the node is aborted.
func (c *Cloud) HoldWaitStates(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.opsLocked()
	if o.hold && !on {
		close(o.released)
		o.released = make(chan struct{})
	}
	o.hold = on
}

func isWaitState(s string) bool {
	return s == "clean wait" || s == "inspect wait" || s == "wait call-back" || s == "rescue wait"
}

// startPlanLocked sets the first step now and runs the others in the
// background.
func (c *Cloud) startPlanLocked(uuid string, steps []pstep) {
	o := c.opsLocked()
	if p := o.plans[uuid]; p != nil {
		close(p.stop)
	}
	p := &plan{stop: make(chan struct{})}
	o.plans[uuid] = p
	c.applyStepLocked(uuid, steps[0])
	go c.runPlan(uuid, p, steps[1:], isWaitState(steps[0].state))
}

func (c *Cloud) applyStepLocked(uuid string, st pstep) {
	rec, ok := c.nodes[uuid]
	if !ok {
		return
	}
	n := &rec.n
	now := c.now()
	n.ProvisionState, n.TargetProvisionState = st.state, st.target
	n.Reservation = ""
	if st.locked {
		n.Reservation = simConductor
	}
	n.ProvisionUpdatedAt, n.UpdatedAt = now, now
	if st.apply != nil {
		st.apply(n)
	}
	if st.state == "available" && st.target == "" && !c.opts.NoNova && !c.opts.NoPlacement {
		c.registerProviderLocked(n)
	}
}

// registerProviderLocked does what nova-compute's Ironic driver does for a
// node it can schedule to: it creates the node's resource provider (named
// and identified by the node's UUID) with the node's traits, once. A node
// enrolled through the API (not seeded with AddProvider) would otherwise
// stay without one and show ResourceProviderMissing for ever.
func (c *Cloud) registerProviderLocked(n *Node) {
	if _, ok := c.providers[n.UUID]; ok {
		return
	}
	now := c.now()
	c.provSeq++
	p := &provider{uuid: n.UUID, name: n.UUID, created: now, updated: now, traits: []string{}, seq: c.provSeq}
	c.providers[n.UUID] = p
	if len(n.Traits) > 0 {
		c.setProviderTraitsLocked(p, n.Traits, false)
	}
}

func (c *Cloud) runPlan(uuid string, p *plan, steps []pstep, inWait bool) {
	for i, st := range steps {
		t := time.NewTimer(c.provisionStep())
		select {
		case <-p.stop:
			t.Stop()
			return
		case <-t.C:
		}
		if inWait {
			for {
				c.mu.Lock()
				hold, rel := c.opsLocked().hold, c.opsLocked().released
				c.mu.Unlock()
				if !hold {
					break
				}
				select {
				case <-p.stop:
					return
				case <-rel:
				}
			}
		}
		c.mu.Lock()
		select {
		case <-p.stop:
			c.mu.Unlock()
			return
		default:
		}
		c.applyStepLocked(uuid, st)
		if c.ops.plans[uuid] == p && i == len(steps)-1 {
			delete(c.ops.plans, uuid)
		}
		c.mu.Unlock()
		inWait = isWaitState(st.state)
	}
	c.mu.Lock()
	if c.ops.plans[uuid] == p {
		delete(c.ops.plans, uuid)
	}
	c.mu.Unlock()
}

// simCleanSteps are the manual clean steps the simulated fake-hardware
// driver has (interface.step).
var simCleanSteps = []string{"bios.factory_reset", "bios.apply_configuration", "bios.cache_bios_settings",
	"deploy.erase_devices_metadata", "deploy.erase_devices", "raid.create_configuration", "raid.delete_configuration"}

func pyRepr(v any) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, "'"+k+"': "+pyRepr(x[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case string:
		return "'" + x + "'"
	case nil:
		return "None"
	default:
		return fmt.Sprint(x)
	}
}

func (c *Cloud) invalidState(w http.ResponseWriter, action string, n *Node) {
	ironicError(w, http.StatusBadRequest, fmt.Sprintf("The requested action \"%s\" can not be performed on node \"%s\" while it is in state \"%s\".", action, n.UUID, n.ProvisionState))
}

// ironicProvision is PUT /v1/nodes/{id}/states/provision.
func (c *Cloud) ironicProvision(w http.ResponseWriter, r *http.Request, ver int, ident string) {
	raw, _ := readJSONBody(r)
	var body struct {
		Target      string           `json:"target"`
		CleanSteps  []map[string]any `json:"clean_steps"`
		Configdrive any              `json:"configdrive"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		ironicError(w, http.StatusBadRequest, "The request body is not valid JSON.")
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.lookupNodeLocked(w, ver, ident)
	if rec == nil || !c.lockLocked(w, rec) {
		return
	}
	n := &rec.n
	ps := n.ProvisionState
	clearErr := func(n *Node) { n.LastError = "" }
	switch body.Target {
	case "manage":
		switch ps {
		case "enroll":
			c.startPlanLocked(n.UUID, []pstep{
				{state: "verifying", target: "manageable", locked: true, apply: clearErr},
				{state: "manageable", apply: func(n *Node) {
					if n.PowerState == "" {
						n.PowerState = "power off" // verification reads the BMC's power state
					}
				}},
			})
		case "clean failed", "inspect failed", "available", "adopt failed":
			c.applyStepLocked(n.UUID, pstep{state: "manageable"})
		default:
			c.invalidState(w, "manage", n)
			return
		}
	case "inspect":
		if ps != "manageable" && ps != "inspect failed" {
			c.invalidState(w, "inspect", n)
			return
		}
		c.startPlanLocked(n.UUID, []pstep{
			{state: "inspecting", target: "manageable", locked: true, apply: clearErr},
			{state: "inspect wait", target: "manageable"},
			{state: "inspecting", target: "manageable", locked: true},
			{state: "manageable", apply: func(n *Node) {
				if n.Properties == nil {
					n.Properties = map[string]any{}
				}
				for k, v := range map[string]any{"cpus": 64, "memory_mb": 524288, "local_gb": 1800, "cpu_arch": "x86_64"} {
					if _, ok := n.Properties[k]; !ok {
						n.Properties[k] = v
					}
				}
			}},
		})
	case "clean":
		if ver < 15 {
			ironicError(w, http.StatusNotAcceptable, "Request not acceptable.")
			return
		}
		if len(body.CleanSteps) == 0 {
			ironicError(w, http.StatusBadRequest, "\"clean_steps\" is required when setting target provision state to clean")
			return
		}
		if ps != "manageable" {
			c.invalidState(w, "clean", n)
			return
		}
		var unknown map[string]any
		for _, s := range body.CleanSteps {
			if s["args"] == nil {
				s["args"] = map[string]any{}
			}
			if !slices.Contains(simCleanSteps, fmt.Sprint(s["interface"])+"."+fmt.Sprint(s["step"])) && unknown == nil {
				unknown = s
			}
		}
		if unknown != nil {
			msg := fmt.Sprintf("Cannot clean node %s: node does not support this clean step: %s", n.UUID, pyRepr(unknown))
			c.startPlanLocked(n.UUID, []pstep{
				{state: "cleaning", target: "manageable", locked: true, apply: clearErr},
				{state: "clean failed", apply: func(n *Node) { n.LastError = msg }},
			})
			break
		}
		c.startPlanLocked(n.UUID, cleanSteps("manageable"))
	case "provide":
		if ps != "manageable" {
			c.invalidState(w, "provide", n)
			return
		}
		c.startPlanLocked(n.UUID, cleanSteps("available"))
	case "active":
		if ps != "available" && ps != "deploy failed" {
			c.invalidState(w, "deploy", n)
			return
		}
		if s, _ := n.InstanceInfo["image_source"].(string); s == "" {
			ironicError(w, http.StatusBadRequest, fmt.Sprintf("Cannot validate image information for node %s because one or more parameters are missing from its instance_info and insufficent information is present to boot from a remote volume. Missing are: ['image_source']", n.UUID))
			return
		}
		c.startPlanLocked(n.UUID, deploySteps())
	case "deleted":
		switch ps {
		case "active", "deploy failed", "error", "wait call-back":
		default:
			c.invalidState(w, "deleted", n)
			return
		}
		c.startPlanLocked(n.UUID, undeploySteps())
	case "abort":
		var to, msg string
		switch ps {
		case "clean wait":
			to, msg = "clean failed", "Clean operation aborted for node "+n.UUID+"."
		case "inspect wait":
			to, msg = "inspect failed", "Inspection was aborted by request."
		case "wait call-back":
			to, msg = "deploy failed", "Deploy aborted by request."
		default:
			c.invalidState(w, "abort", n)
			return
		}
		if p := c.opsLocked().plans[n.UUID]; p != nil {
			close(p.stop)
			delete(c.ops.plans, n.UUID)
		}
		c.applyStepLocked(n.UUID, pstep{state: to, apply: func(n *Node) { n.LastError = msg }})
	default:
		ironicError(w, http.StatusBadRequest, fmt.Sprintf("The requested action \"%s\" can not be performed on node \"%s\" while it is in state \"%s\".", body.Target, n.UUID, ps))
		return
	}
	w.Header().Set("Location", c.ironicPublic()+"/v1/nodes/"+n.UUID+"/states")
	w.WriteHeader(http.StatusAccepted)
}

func cleanSteps(to string) []pstep {
	return []pstep{
		{state: "cleaning", target: to, locked: true, apply: func(n *Node) { n.LastError = "" }},
		{state: "clean wait", target: to},
		{state: "cleaning", target: to, locked: true},
		{state: to},
	}
}

func deploySteps() []pstep {
	return []pstep{
		{state: "deploying", target: "active", locked: true, apply: func(n *Node) { n.LastError = "" }},
		{state: "wait call-back", target: "active"},
		{state: "deploying", target: "active", locked: true},
		{state: "active", apply: func(n *Node) { n.PowerState = "power on" }},
	}
}

func undeploySteps() []pstep {
	return []pstep{
		{state: "deleting", target: "available", locked: true, apply: func(n *Node) { n.LastError = "" }},
		{state: "cleaning", target: "available", locked: true, apply: func(n *Node) {
			n.InstanceInfo = map[string]any{}
			n.InstanceUUID = ""
			n.PowerState = "power off"
		}},
		{state: "clean wait", target: "available"},
		{state: "cleaning", target: "available", locked: true},
		{state: "available"},
	}
}

// ironicPower is PUT /v1/nodes/{id}/states/power (done at once).
func (c *Cloud) ironicPower(w http.ResponseWriter, r *http.Request, ver int, ident string) {
	raw, _ := readJSONBody(r)
	var body struct {
		Target string `json:"target"`
	}
	_ = json.Unmarshal(raw, &body)
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.lookupNodeLocked(w, ver, ident)
	if rec == nil || !c.lockLocked(w, rec) {
		return
	}
	switch body.Target {
	case "power on", "power off":
		rec.n.PowerState = body.Target
	case "rebooting":
		rec.n.PowerState = "power on"
	default:
		ironicError(w, http.StatusBadRequest, fmt.Sprintf("Invalid power state %s.", body.Target))
		return
	}
	rec.n.UpdatedAt = c.now()
	w.Header().Set("Location", c.ironicPublic()+"/v1/nodes/"+rec.n.UUID+"/states")
	w.WriteHeader(http.StatusAccepted)
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
		out := []any{}
		for _, p := range o.ports {
			if node == "" || p.NodeUUID == node {
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

// simFlavor renders the one flavor the simulated Nova has.
func simFlavor(minor int) map[string]any {
	f := map[string]any{"id": simFlavorID, "name": simFlavorName, "vcpus": 1, "ram": 1024, "disk": 10,
		"OS-FLV-EXT-DATA:ephemeral": 0, "swap": "", "rxtx_factor": 1.0, "os-flavor-access:is_public": true, "OS-FLV-DISABLED:disabled": false}
	if minor >= 55 {
		f["description"] = nil
	}
	if minor >= 61 {
		f["extra_specs"] = map[string]any{"resources:CUSTOM_GPU_H100": "1", "resources:VCPU": "0", "resources:MEMORY_MB": "0", "resources:DISK_GB": "0"}
	}
	return f
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
	srv, err := c.addServerLocked(Server{Name: str("name"), Status: ServerBuild, TaskState: "scheduling", VMState: "building"})
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
