package openstacksim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ironlink/ironlink/internal/periodic"
)

// churnStep is one pending state change of a multi-step transition, applied
// on a later churn tick.
type churnStep struct {
	desc  string
	apply func(n *Node)
}

// Churn changes the fleet the way a live site does, for the demo: every
// interval it first advances transitions started earlier (one step per node
// per tick), then starts changes on 1–3 random nodes that are not busy:
// Ironic's power-failure maintenance (fault "power failure", power state
// null) that clears itself a few ticks later, operator maintenance on/off,
// deploys (instance_uuid set, deploying → active or → deploy failed with
// last_error, then torn down through deleting → cleaning → available),
// undeploys of active nodes, cleaning that fails (clean failed, fault
// "clean failure") and is recovered, enrolment (enroll → verifying →
// manageable) and power flips through target_power_state. Transient states
// hold the node's reservation like a conductor, so writes meanwhile get 409
// NodeLocked; the node's resource provider generation is bumped when
// Nova would update its inventory. Nova's servers follow the nodes (unless
// the site has no Nova): a deploy creates a BUILD server on the node
// (task_state spawning) that turns ACTIVE or ERROR with the deploy, a
// tear-down sets task_state deleting, and clearing instance_uuid deletes
// the server, so churn alone makes no orphans. r may be nil (then a random seed is
// used). Churn blocks until ctx is done; an interval ≤ 0 returns at once.
func (c *Cloud) Churn(ctx context.Context, interval time.Duration, r *rand.Rand) {
	if interval <= 0 {
		return
	}
	if r == nil {
		r = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	periodic.Every(ctx, interval, func() { c.ChurnOnce(r) })
}

// KeepFromChurn makes Churn start no new change on the nodes with these
// UUIDs (a change already under way on one still runs to its end): a test
// that runs an operation on a node keeps it in the state the operation
// starts from. Unknown UUIDs are ignored.
func (c *Cloud) KeepFromChurn(uuids ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.noChurn == nil {
		c.noChurn = map[string]bool{}
	}
	for _, id := range uuids {
		c.noChurn[id] = true
	}
}

// ChurnOnce performs one tick of [Cloud.Churn] at once (for tests and
// deterministic demos) and returns a description of each change made.
func (c *Cloud) ChurnOnce(r *rand.Rand) []string {
	if r == nil {
		r = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var changes []string
	// advance transitions in flight
	for _, rec := range c.nodeOrder {
		steps := c.churn[rec.n.UUID]
		if len(steps) == 0 {
			continue
		}
		st := steps[0]
		if len(steps) == 1 {
			delete(c.churn, rec.n.UUID)
		} else {
			c.churn[rec.n.UUID] = steps[1:]
		}
		changes = append(changes, c.applyChurnLocked(rec, st))
	}
	// start new changes
	var idle []*nodeRec
	for _, rec := range c.nodeOrder {
		if len(c.churn[rec.n.UUID]) == 0 && rec.n.Reservation == "" && !c.noChurn[rec.n.UUID] {
			idle = append(idle, rec)
		}
	}
	r.Shuffle(len(idle), func(i, j int) { idle[i], idle[j] = idle[j], idle[i] })
	for _, rec := range idle[:min(len(idle), 1+r.IntN(3))] {
		plan := c.planChurn(rec, r)
		if len(plan) == 0 {
			continue
		}
		changes = append(changes, c.applyChurnLocked(rec, plan[0]))
		if len(plan) > 1 {
			c.churn[rec.n.UUID] = plan[1:]
		}
	}
	return changes
}

func (c *Cloud) applyChurnLocked(rec *nodeRec, st churnStep) string {
	before := rec.n
	st.apply(&rec.n)
	// Nova follows: a deploy boots a server, a tear-down deletes it
	c.syncServerForChurnLocked(&before, &rec.n)
	now := c.now()
	rec.n.UpdatedAt = now
	if rec.n.ProvisionState != before.ProvisionState {
		rec.n.ProvisionUpdatedAt = now
	}
	// nova-compute's resource tracker rewrites the inventory (reserved)
	if pr, ok := c.providers[rec.n.UUID]; ok {
		if novaReserved(&before) != novaReserved(&rec.n) {
			for rc, inv := range pr.inventory {
				inv.Reserved = novaReserved(&rec.n)
				pr.inventory[rc] = inv
			}
			pr.generation++
			pr.updated = now
		}
	}
	name := rec.n.Name
	if name == "" {
		name = rec.n.UUID
	}
	msg := fmt.Sprintf("%s: %s", name, st.desc)
	c.log.Info("openstacksim churn", "node", name, "uuid", rec.n.UUID, "change", st.desc,
		"provision_state", rec.n.ProvisionState, "power_state", rec.n.PowerState, "maintenance", rec.n.Maintenance)
	return msg
}

func step(desc string, f func(n *Node)) churnStep { return churnStep{desc: desc, apply: f} }

// planChurn picks a realistic change for the node's current state.
func (c *Cloud) planChurn(rec *nodeRec, r *rand.Rand) []churnStep {
	n := rec.n
	var options [][]churnStep
	// Ironic's power sync gives up on a flaky BMC, then recovers by itself.
	if !n.Maintenance && n.PowerState != "" && n.ProvisionState != "enroll" {
		options = append(options, powerFailureChurn(n, r))
	}
	options = append(options, maintenanceChurn(n)...)
	if n.Maintenance {
		return options[r.IntN(len(options))]
	}
	switch n.ProvisionState {
	case "available":
		options = append(options, deployChurn(r), powerFlip(n))
	case "active", "deploy failed":
		options = append(options, undeployChurn("undeploy: deleting", "available"))
	case "manageable":
		options = append(options, provideChurn(r), powerFlip(n))
	case "clean failed":
		options = append(options, []churnStep{step("manage: back to manageable", func(n *Node) {
			n.ProvisionState, n.TargetProvisionState = "manageable", ""
		})})
	case "enroll":
		options = append(options, []churnStep{
			step("manage: verifying", func(n *Node) {
				n.ProvisionState, n.TargetProvisionState = "verifying", "manageable"
				reserve(n)
			}),
			step("verified: manageable", func(n *Node) {
				n.ProvisionState, n.TargetProvisionState, n.PowerState = "manageable", "", "power off"
				release(n)
			}),
		})
	}
	return options[r.IntN(len(options))]
}

// reserve takes the conductor's reservation.
func reserve(n *Node) { n.Reservation = simConductor }

// release drops the conductor's reservation.
func release(n *Node) { n.Reservation = "" }

// powerFailureChurn is a power-sync failure: maintenance with fault "power
// failure" for a few ticks, then recovery.
func powerFailureChurn(n Node, r *rand.Rand) []churnStep {
	prev := n.PowerState
	reason := fmt.Sprintf("During sync_power_state, max retries exceeded for node %s, node state None does not match expected state '%s'. Updating DB state to 'None' Switching node to maintenance mode. Error: IPMI call failed: power status.", n.UUID, prev)
	p := []churnStep{step("power failure: maintenance on", func(n *Node) {
		n.Maintenance, n.Fault, n.MaintenanceReason, n.PowerState = true, "power failure", reason, ""
	})}
	for range r.IntN(3) {
		p = append(p, step("BMC still unreachable", func(*Node) {}))
	}
	return append(p, step("power failure recovered: maintenance off", func(n *Node) {
		n.Maintenance, n.Fault, n.MaintenanceReason, n.PowerState = false, "", "", prev
	}))
}

// maintenanceChurn is what an operator does about maintenance: clear it
// (after a clean failure, also back to manageable) or set it.
func maintenanceChurn(n Node) [][]churnStep {
	switch {
	case n.Maintenance && n.Fault == "":
		return [][]churnStep{{step("operator cleared maintenance", func(n *Node) {
			n.Maintenance, n.MaintenanceReason = false, ""
		})}}
	case n.Maintenance && n.Fault == "clean failure":
		return [][]churnStep{{
			step("operator cleared maintenance", func(n *Node) { n.Maintenance, n.MaintenanceReason, n.Fault = false, "", "" }),
			step("manage: back to manageable", func(n *Node) { n.ProvisionState, n.TargetProvisionState = "manageable", "" }),
		}}
	case !n.Maintenance:
		return [][]churnStep{{step("operator set maintenance", func(n *Node) {
			n.Maintenance, n.MaintenanceReason = true, "sim: scheduled hardware check"
		})}}
	}
	return nil
}

// deployChurn deploys an instance: active, or (one in three) deploy failed
// and torn down again.
func deployChurn(r *rand.Rand) []churnStep {
	inst := newUUID()
	deploy := []churnStep{step("deploy started", func(n *Node) {
		n.InstanceUUID = inst
		n.InstanceInfo = map[string]any{"display_name": "server-" + inst[:8]}
		n.ProvisionState, n.TargetProvisionState, n.LastError = "deploying", "active", ""
		reserve(n)
	})}
	if r.IntN(3) == 0 {
		deploy = append(deploy, step("deploy failed", func(n *Node) {
			n.ProvisionState = "deploy failed"
			n.LastError = "Failed to prepare the configdrive: Unable to connect to the object store (sim)."
			release(n)
		}))
		return append(deploy, undeployChurn("undeploy after failure", "available again")...)
	}
	return append(deploy, step("deployed: active", func(n *Node) {
		n.ProvisionState, n.TargetProvisionState, n.PowerState = "active", "", "power on"
		release(n)
	}))
}

// undeployChurn tears a node down: deleting → cleaning → available, with
// the first and last steps described as given.
func undeployChurn(first, last string) []churnStep {
	return []churnStep{
		step(first, func(n *Node) {
			n.ProvisionState, n.TargetProvisionState = "deleting", "available"
			reserve(n)
		}),
		step("cleaning", func(n *Node) {
			n.ProvisionState = "cleaning"
			n.InstanceUUID, n.InstanceInfo = "", map[string]any{}
		}),
		step(last, func(n *Node) {
			n.ProvisionState, n.TargetProvisionState, n.LastError, n.PowerState = "available", "", "", "power off"
			release(n)
		}),
	}
}

// provideChurn provides a manageable node: cleaning → available, or (one in
// three) a failed clean step that sets maintenance.
func provideChurn(r *rand.Rand) []churnStep {
	provide := []churnStep{step("provide: cleaning", func(n *Node) {
		n.ProvisionState, n.TargetProvisionState, n.LastError = "cleaning", "available", ""
		reserve(n)
	})}
	if r.IntN(3) == 0 {
		return append(provide, step("clean step failed", func(n *Node) {
			msg := "Clean step erase_devices failed on node: Device /dev/nvme1n1 did not respond (sim)."
			n.ProvisionState, n.LastError = "clean failed", msg
			n.Maintenance, n.Fault, n.MaintenanceReason = true, "clean failure", msg
			release(n)
		}))
	}
	return append(provide, step("available", func(n *Node) {
		n.ProvisionState, n.TargetProvisionState, n.PowerState = "available", "", "power off"
		release(n)
	}))
}

func powerFlip(n Node) []churnStep {
	target := "power on"
	if n.PowerState == "power on" {
		target = "power off"
	}
	return []churnStep{
		step("power action: "+target, func(n *Node) { n.TargetPowerState = target; n.Reservation = simConductor }),
		step(target, func(n *Node) { n.PowerState, n.TargetPowerState, n.Reservation = target, "", "" }),
	}
}
