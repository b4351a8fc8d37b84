package site

import (
	"context"
	"fmt"
	"net/http"

	"github.com/ironlink/ironlink/satellite/ironic"
)

// This file is the Fixture's power changes and maintenance flag (Ironic API
// reference "Change Node Power State", "Set Maintenance Flag"), for the
// operations runner's node actions. A power change accepted (202) shows
// target_power_state on the next NodeDetail and reaches power_state on the
// one after, as Ironic's conductor does asynchronously; a change asked for
// while one is in progress answers 409, a locked node 409 NodeLocked.

// Method names of the node actions' calls, recorded in Call.Method and
// matched by Fixture.Fail.
const (
	MethodChangePowerState     = "ChangePowerState"
	MethodSetMaintenanceFlag   = "SetMaintenanceFlag"
	MethodClearMaintenanceFlag = "ClearMaintenanceFlag"
)

// settlePowerLocked moves a power change in progress along: the first
// read after the change shows the target, the next one the new state.
func (f *Fixture) settlePowerLocked(id string) {
	p := f.provLocked(id)
	if p.powerTarget == "" {
		return
	}
	if !p.powerSeen {
		p.powerSeen = true
		return
	}
	n := f.nodes[id]
	n.PowerState = p.powerTarget
	f.nodes[id] = n
	p.powerTarget, p.powerSeen = "", false
	f.changedLocked(id)
}

// ChangePowerState implements IronicProvisioning.
func (f *Fixture) ChangePowerState(_ context.Context, id, target string, _ int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: MethodChangePowerState, ID: id, Trait: target}); err != nil {
		return err
	}
	if _, ok := f.nodes[id]; !ok {
		return f.endLocked(fmt.Errorf("%w: %s", ironic.ErrNodeNotFound, id))
	}
	url := "/v1/nodes/" + id + "/states/power"
	if err := f.writableLocked(id, "PUT", url); err != nil {
		return f.endLocked(err)
	}
	p := f.provLocked(id)
	if p.powerTarget != "" {
		return f.endLocked(httpError(http.StatusConflict, "PUT", url,
			fmt.Sprintf("Node %s is already in a power transition to %q.", id, p.powerTarget)))
	}
	switch target {
	case ironic.PowerOn:
		p.powerTarget = ironic.PowerOn
	case ironic.PowerOff, ironic.SoftPowerOff:
		p.powerTarget = ironic.PowerOff
	default:
		return f.endLocked(httpError(http.StatusBadRequest, "PUT", url, fmt.Sprintf("Invalid power target %q.", target)))
	}
	p.powerSeen = false
	f.changedLocked(id)
	return nil
}

// SetMaintenanceFlag implements IronicProvisioning.
func (f *Fixture) SetMaintenanceFlag(_ context.Context, id, reason string) error {
	return f.maintenanceCall(MethodSetMaintenanceFlag, id, true, reason)
}

// ClearMaintenanceFlag implements IronicProvisioning.
func (f *Fixture) ClearMaintenanceFlag(_ context.Context, id string) error {
	return f.maintenanceCall(MethodClearMaintenanceFlag, id, false, "")
}

func (f *Fixture) maintenanceCall(method, id string, on bool, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.beginLocked(Call{Method: method, ID: id, Trait: reason}); err != nil {
		return err
	}
	n, ok := f.nodes[id]
	if !ok {
		return f.endLocked(fmt.Errorf("%w: %s", ironic.ErrNodeNotFound, id))
	}
	if err := f.writableLocked(id, "PUT", "/v1/nodes/"+id+"/maintenance"); err != nil {
		return f.endLocked(err)
	}
	n.Maintenance, n.MaintenanceReason = on, reason
	if !on {
		n.Fault = ""
	}
	f.nodes[id] = n
	f.changedLocked(id)
	return nil
}
