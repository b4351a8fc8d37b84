package operations

import (
	"context"
	"net/http"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/site"
)

// The node actions (docs/reference/operations.md "Node actions"): power on,
// power off, reboot, set and clear maintenance, reprovision. Like the
// provision kinds, each pass reads the node and takes at most one step:
//
//   - POWER_ON and POWER_OFF ask for the power target unless power_state
//     is already there; Ironic's conductor records target_power_state
//     before it answers 202, so a pass after a restart sees the change in
//     progress (and waits) or done, and never asks twice.
//   - REBOOT is a power off (soft with params.soft) then a power on. The
//     two halves look alike to a reader of the node, so the operation
//     marker (extra/ironlink_operation) says which half was asked for:
//     "reboot-off" is written before the power off, "reboot-on" once the
//     node is seen off, before the power on; a satellite killed anywhere
//     in between resumes at the half the marker names.
//   - SET_MAINTENANCE and CLEAR_MAINTENANCE are idempotent writes, done
//     when the node shows the flag (and reason) asked for.
//   - REPROVISION undeploys a deployed node, then cleans and provides it
//     (reprovision.go).

// Marker actions of REBOOT's two halves.
const (
	actRebootOff = "reboot-off"
	actRebootOn  = "reboot-on"
)

// maxPowerRequests bounds the power requests one process sends for one
// goal without seeing it reached (Ironic failed the change and left no
// last_error): the operation then fails.
const maxPowerRequests = 3

// nodeAction reconciles the node action kinds; handled false for any other
// kind.
func (u *run) nodeAction(ctx context.Context, n *node) (site.Result, bool) {
	switch u.req.GetKind() {
	case ironlinkv1.OperationKind_OPERATION_KIND_POWER_ON:
		return u.power(ctx, n, ironic.PowerOn, "power-on"), true
	case ironlinkv1.OperationKind_OPERATION_KIND_POWER_OFF:
		return u.power(ctx, n, ironic.PowerOff, "power-off"), true
	case ironlinkv1.OperationKind_OPERATION_KIND_REBOOT:
		return u.reboot(ctx, n), true
	case ironlinkv1.OperationKind_OPERATION_KIND_SET_MAINTENANCE:
		return u.setMaintenance(ctx, n), true
	case ironlinkv1.OperationKind_OPERATION_KIND_CLEAR_MAINTENANCE:
		return u.clearMaintenance(ctx, n), true
	case ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION:
		return u.reprovision(ctx, n), true
	}
	return site.Result{}, false
}

// power takes the node to goal (ironic.PowerOn or ironic.PowerOff) in step
// name: wait while a power change is in progress, done when power_state is
// goal, else ask for it.
func (u *run) power(ctx context.Context, n *node, goal, name string) site.Result {
	switch {
	case n.TargetPowerState != "":
		u.step("wait-"+name, n.ProvisionState, "power_state "+powerText(n.PowerState)+", target "+n.TargetPowerState)
		return u.waiting()
	case n.PowerState == goal:
		u.step("wait-"+name, n.ProvisionState, goal)
		return site.Done()
	}
	if u.powerRequests >= maxPowerRequests {
		msg := "Ironic did not reach " + goal + " after " + itoa(u.powerRequests) + " power requests; power_state is " + powerText(n.PowerState)
		if n.LastError != "" {
			msg += ": " + n.LastError
		}
		return site.Failed("PowerFailed", "%s", msg)
	}
	if u.powerRequests > 0 && n.LastError != "" {
		return site.Failed("PowerFailed", "%s", n.LastError)
	}
	target := goal
	if goal == ironic.PowerOff && u.req.GetParams().GetSoft() {
		target = ironic.SoftPowerOff
	}
	u.step(name, n.ProvisionState, "power_state "+powerText(n.PowerState)+" → "+target)
	u.powerRequests++
	if err := u.changePower(ctx, n.UUID, target); err != nil {
		switch {
		case openstack.StatusCode(err) == http.StatusConflict:
			// A power change began meanwhile (someone else's, or Ironic's
			// own sync): wait for it and look again.
			return u.waiting()
		case openstack.StatusCode(err) == http.StatusBadRequest:
			return site.Failed("IronicRejected", "%s", ironic.Message(err))
		}
		return stop(err)
	}
	return retryNow
}

// reboot reconciles REBOOT: the marker names the half asked for.
func (u *run) reboot(ctx context.Context, n *node) site.Result {
	m := markerOf(n)
	mine := m.OperationID == u.req.GetOperationId()
	switch {
	case mine && m.Action == actRebootOn:
		return u.power(ctx, n, ironic.PowerOn, "reboot-on")
	case mine && m.Action == actRebootOff && n.TargetPowerState == "" && n.PowerState == ironic.PowerOff:
		// The off half is done: say so before asking for on.
		u.step("reboot-on", n.ProvisionState, "node is off; powering on")
		if err := u.mark(ctx, n, actRebootOn); err != nil {
			return stop(err)
		}
		u.powerRequests = 0
		return retryNow
	case mine && m.Action == actRebootOff:
		return u.power(ctx, n, ironic.PowerOff, "reboot-off")
	}
	u.step("reboot-off", n.ProvisionState, "power_state "+powerText(n.PowerState))
	if err := u.mark(ctx, n, actRebootOff); err != nil {
		return stop(err)
	}
	return retryNow
}

// setMaintenance reconciles SET_MAINTENANCE.
func (u *run) setMaintenance(ctx context.Context, n *node) site.Result {
	reason := u.req.GetParams().GetMaintenanceReason()
	if n.Maintenance && n.MaintenanceReason == reason {
		u.step("wait-maintenance", n.ProvisionState, "in maintenance: "+reason)
		return site.Done()
	}
	if u.maintenanceSent {
		// Set, but the node shows another reason: someone else wrote it
		// after us; theirs stands.
		if n.Maintenance {
			u.step("wait-maintenance", n.ProvisionState, "in maintenance, reason since changed to: "+n.MaintenanceReason)
			return site.Done()
		}
		return site.Failed("InvalidState", "node %s left maintenance right after it was set (someone cleared it)", n.UUID)
	}
	u.step("set-maintenance", n.ProvisionState, "")
	u.maintenanceSent = true
	if err := u.maintenance(ctx, n.UUID, true, reason); err != nil {
		return stop(err)
	}
	return retryNow
}

// clearMaintenance reconciles CLEAR_MAINTENANCE.
func (u *run) clearMaintenance(ctx context.Context, n *node) site.Result {
	if !n.Maintenance {
		u.step("wait-maintenance-clear", n.ProvisionState, "not in maintenance")
		return site.Done()
	}
	if u.maintenanceSent {
		return site.Failed("InvalidState", "node %s is in maintenance again right after it was cleared (%s)", n.UUID, n.MaintenanceReason)
	}
	u.step("clear-maintenance", n.ProvisionState, "maintenance reason was: "+n.MaintenanceReason)
	u.maintenanceSent = true
	if err := u.maintenance(ctx, n.UUID, false, ""); err != nil {
		return stop(err)
	}
	return retryNow
}

func powerText(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
