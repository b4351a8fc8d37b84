package openstacksim

// Ironic's node adoption (PUT /v1/nodes/{id}/states/provision target
// "adopt", API 1.17; ironic/conductor/manager.py do_provisioning_action and
// _do_adoption): from manageable or adopt failed, the conductor moves the
// node to adopting (reserved) and takes it over without deploying, then to
// active. The test bed's fake-hardware interfaces validate nothing and take
// over without error, so an adoption succeeds whatever instance_info holds;
// [Cloud.FailNextAdoption] makes one fail as a real driver's boot
// validation or takeover would: the node goes to "adopt failed" with
// last_error "Error while attempting to adopt node UUID: ERR." and its
// power state wiped (Ironic sets power_state to None, since it is likely
// invalid).

// FailNextAdoption makes node uuid's next adoption fail with err.
func (c *Cloud) FailNextAdoption(uuid, err string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.opsLocked()
	if o.adoptErr == nil {
		o.adoptErr = map[string]string{}
	}
	o.adoptErr[uuid] = err
}

// startAdoptionLocked starts the adoption of n, or returns why Ironic
// refuses it.
func (c *Cloud) startAdoptionLocked(n *Node, ver int) *apiErr {
	if ver < 17 {
		return notAcceptable("Request not acceptable.")
	}
	if n.ProvisionState != "manageable" && n.ProvisionState != "adopt failed" {
		return invalidState("adopt", n)
	}
	o := c.opsLocked()
	last := pstep{state: "active"}
	if msg, ok := o.adoptErr[n.UUID]; ok {
		delete(o.adoptErr, n.UUID)
		text := "Error while attempting to adopt node " + n.UUID + ": " + msg + "."
		last = pstep{state: "adopt failed", apply: func(n *Node) {
			n.LastError = text
			n.PowerState = ""
		}}
	}
	c.startPlanLocked(n.UUID, []pstep{{state: "adopting", target: "active", locked: true, apply: clearLastError}, last})
	return nil
}
