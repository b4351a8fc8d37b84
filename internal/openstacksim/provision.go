package openstacksim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// This file models what operations need (docs/design/openstack.md §1.2 and §9): Ironic
// drivers and ports, the provision state machine behind PUT
// /v1/nodes/{id}/states/provision (enrol/manage, inspect, manual and
// automated cleaning, deploy, rebuild, undeploy, adoption (adopt.go),
// abort from the "* wait" states) and power actions (power.go), and Nova's server create and delete on a chosen node.
// Transitions run in the background one step every [Options.ProvisionStep]
// (default 100 ms), as the conductor would: the node is reserved (409
// NodeLocked for writes) in the working states (verifying, inspecting,
// cleaning, deploying, deleting) and free in the wait states (inspect wait,
// clean wait, wait call-back), from which "abort" is accepted.
// [Cloud.HoldWaitStates] keeps transitions in a wait state until released,
// so a test can cancel there.
//
// (Drivers and ports are served by ironic_ports.go, Nova's server create
// and delete by nova_ops.go.)

// opsState is the part of a Cloud only operations use.
type opsState struct {
	ports    []*simPort
	plans    map[string]*plan // node UUID → running transition
	hold     bool
	released chan struct{}     // closed when hold is turned off
	faults   map[string]string // server ID → fault message
	adoptErr map[string]string // node UUID → the error its next adoption fails with
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
	p := c.newProviderLocked(n.UUID, n.UUID, now, now)
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

// invalidState is Ironic's 400 InvalidStateRequested.
func invalidState(action string, n *Node) *apiErr {
	return apiErrf(http.StatusBadRequest, "The requested action \"%s\" can not be performed on node \"%s\" while it is in state \"%s\".", action, n.UUID, n.ProvisionState)
}

// provisionRequest is the body of PUT /v1/nodes/{id}/states/provision.
type provisionRequest struct {
	Target      string           `json:"target"`
	CleanSteps  []map[string]any `json:"clean_steps"`
	Configdrive any              `json:"configdrive"`
}

// ironicProvision is PUT /v1/nodes/{id}/states/provision.
func (c *Cloud) ironicProvision(w http.ResponseWriter, r *http.Request, ver int, ident string) {
	raw, _ := readJSONBody(r)
	var body provisionRequest
	if err := json.Unmarshal(raw, &body); err != nil {
		ironicError(w, http.StatusBadRequest, "The request body is not valid JSON.")
		return
	}
	c.withReservedNode(w, ver, ident, func(rec *nodeRec) {
		if e := c.startProvisionLocked(&rec.n, body, ver); e != nil {
			ironicError(w, e.status, e.msg)
			return
		}
		w.Header().Set("Location", c.ironicPublic()+"/v1/nodes/"+rec.n.UUID+"/states")
		w.WriteHeader(http.StatusAccepted)
	})
}

// startProvisionLocked starts the transition to the requested target from
// the node's provision state, or returns why it cannot.
func (c *Cloud) startProvisionLocked(n *Node, req provisionRequest, ver int) *apiErr {
	ps := n.ProvisionState
	switch req.Target {
	case "manage":
		switch ps {
		case "enroll":
			c.startPlanLocked(n.UUID, manageSteps())
		case "clean failed", "inspect failed", "available", "adopt failed":
			c.applyStepLocked(n.UUID, pstep{state: "manageable"})
		default:
			return invalidState("manage", n)
		}
	case "inspect":
		if ps != "manageable" && ps != "inspect failed" {
			return invalidState("inspect", n)
		}
		c.startPlanLocked(n.UUID, inspectSteps(c.now))
	case "clean":
		return c.startManualCleanLocked(n, req.CleanSteps, ver)
	case "provide":
		if ps != "manageable" {
			return invalidState("provide", n)
		}
		c.startPlanLocked(n.UUID, cleanSteps("available"))
	case "active":
		if ps != "available" && ps != "deploy failed" {
			return invalidState("deploy", n)
		}
		if s, _ := n.InstanceInfo["image_source"].(string); s == "" {
			return apiErrf(http.StatusBadRequest, "Cannot validate image information for node %s because one or more parameters are missing from its instance_info and insufficent information is present to boot from a remote volume. Missing are: ['image_source']", n.UUID)
		}
		c.startPlanLocked(n.UUID, deploySteps())
	case "rebuild":
		// Ironic's rebuild: active (or deploy failed) → deploying → active
		// with the node's instance_info (ironic/common/states.py).
		if ps != "active" && ps != "deploy failed" {
			return invalidState("rebuild", n)
		}
		if s, _ := n.InstanceInfo["image_source"].(string); s == "" {
			return apiErrf(http.StatusBadRequest, "Cannot validate image information for node %s because one or more parameters are missing from its instance_info and insufficent information is present to boot from a remote volume. Missing are: ['image_source']", n.UUID)
		}
		c.startPlanLocked(n.UUID, deploySteps())
	case "deleted":
		switch ps {
		case "active", "deploy failed", "error", "wait call-back":
		default:
			return invalidState("deleted", n)
		}
		c.startPlanLocked(n.UUID, undeploySteps())
	case "adopt":
		return c.startAdoptionLocked(n, ver)
	case "abort":
		return c.abortLocked(n)
	default:
		return invalidState(req.Target, n)
	}
	return nil
}

// startManualCleanLocked starts manual cleaning (1.15+) of a manageable
// node; an unknown step fails the cleaning with Ironic's last_error.
func (c *Cloud) startManualCleanLocked(n *Node, steps []map[string]any, ver int) *apiErr {
	if ver < 15 {
		return notAcceptable("Request not acceptable.")
	}
	if len(steps) == 0 {
		return apiErrf(http.StatusBadRequest, "\"clean_steps\" is required when setting target provision state to clean")
	}
	if n.ProvisionState != "manageable" {
		return invalidState("clean", n)
	}
	var unknown map[string]any
	for _, s := range steps {
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
			{state: "cleaning", target: "manageable", locked: true, apply: clearLastError},
			{state: "clean failed", apply: func(n *Node) { n.LastError = msg }},
		})
		return nil
	}
	c.startPlanLocked(n.UUID, cleanSteps("manageable"))
	return nil
}

// abortLocked aborts a transition waiting in clean wait, inspect wait or
// wait call-back: the node goes to the matching failed state.
func (c *Cloud) abortLocked(n *Node) *apiErr {
	var to, msg string
	switch n.ProvisionState {
	case "clean wait":
		to, msg = "clean failed", "Clean operation aborted for node "+n.UUID+"."
	case "inspect wait":
		to, msg = "inspect failed", "Inspection was aborted by request."
	case "wait call-back":
		to, msg = "deploy failed", "Deploy aborted by request."
	default:
		return invalidState("abort", n)
	}
	if p := c.opsLocked().plans[n.UUID]; p != nil {
		close(p.stop)
		delete(c.ops.plans, n.UUID)
	}
	c.applyStepLocked(n.UUID, pstep{state: to, apply: func(n *Node) { n.LastError = msg }})
	return nil
}

// clearLastError is the first step of every transition.
func clearLastError(n *Node) { n.LastError = "" }

// manageSteps is enrol → verifying → manageable.
func manageSteps() []pstep {
	return []pstep{
		{state: "verifying", target: "manageable", locked: true, apply: clearLastError},
		{state: "manageable", apply: func(n *Node) {
			if n.PowerState == "" {
				n.PowerState = "power off" // verification reads the BMC's power state
			}
		}},
	}
}

// inspectSteps is inspection: inspecting ↔ inspect wait → manageable, with
// the hardware properties filled in and inspection_finished_at set (now),
// as Ironic's fake inspect interface does: the stored inventory is left as
// it is (none stays none; SetHardware stores one, as seed-inventory does).
func inspectSteps(now func() time.Time) []pstep {
	return []pstep{
		{state: "inspecting", target: "manageable", locked: true, apply: clearLastError},
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
			n.InspectionFinishedAt = now().UTC()
		}},
	}
}

func cleanSteps(to string) []pstep {
	return []pstep{
		{state: "cleaning", target: to, locked: true, apply: clearLastError},
		{state: "clean wait", target: to},
		{state: "cleaning", target: to, locked: true},
		{state: to},
	}
}

func deploySteps() []pstep {
	return []pstep{
		{state: "deploying", target: "active", locked: true, apply: clearLastError},
		{state: "wait call-back", target: "active"},
		{state: "deploying", target: "active", locked: true},
		{state: "active", apply: func(n *Node) { n.PowerState = "power on" }},
	}
}

func undeploySteps() []pstep {
	return []pstep{
		{state: "deleting", target: "available", locked: true, apply: clearLastError},
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
