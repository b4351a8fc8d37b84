package ironic

import (
	"context"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// The node actions of the operations credential (satellite/operations
// POWER_ON, POWER_OFF, REBOOT, SET_MAINTENANCE, CLEAR_MAINTENANCE): power
// changes and the maintenance flag, through gophercloud's baremetal nodes
// package. Like the provisioning calls, each runs under WriteRetry with
// provisionRetryable (409 NodeLocked, 502/503/504) and returns OpenStack's
// error unwrapped.

// Ironic power states and power targets (Ironic API reference "Change Node
// Power State"; ironic/common/states.py).
const (
	// PowerOn is the power state (and target) "power on".
	PowerOn = string(nodes.PowerOn)
	// PowerOff is the power state (and target) "power off".
	PowerOff = string(nodes.PowerOff)
	// SoftPowerOff is the target "soft power off" (ACPI shutdown; API
	// 1.27); the node ends "power off".
	SoftPowerOff = string(nodes.SoftPowerOff)
)

// ChangePowerState asks Ironic for a power change (Ironic API reference
// "Change Node Power State": PUT /v1/nodes/{id}/states/power, 202) with
// target PowerOn, PowerOff or SoftPowerOff and timeoutSeconds (0: Ironic's
// default; sent only when set, API 1.27). Ironic answers 409 while the
// node is locked or already in a power transition (retried when
// NodeLocked) and 400 for a target the driver cannot do.
func (c *Client) ChangePowerState(ctx context.Context, id, target string, timeoutSeconds int) error {
	_, err := provisionCall(ctx, c, "ironic: power "+target, func(ctx context.Context) (struct{}, error) {
		r := nodes.ChangePowerState(ctx, c.sc, id, nodes.PowerStateOpts{Target: nodes.TargetPowerState(target), Timeout: timeoutSeconds})
		return struct{}{}, r.Err
	})
	return err
}

// SetMaintenanceFlag sets the node's maintenance flag with reason (Ironic API
// reference "Set Maintenance Flag": PUT /v1/nodes/{id}/maintenance, 202).
// Idempotent: a node already in maintenance takes the new reason.
func (c *Client) SetMaintenanceFlag(ctx context.Context, id, reason string) error {
	_, err := provisionCall(ctx, c, "ironic: set maintenance", func(ctx context.Context) (struct{}, error) {
		r := nodes.SetMaintenance(ctx, c.sc, id, nodes.MaintenanceOpts{Reason: reason})
		return struct{}{}, r.Err
	})
	return err
}

// ClearMaintenanceFlag clears the node's maintenance flag and reason (Ironic
// API reference "Clear Maintenance Flag": DELETE
// /v1/nodes/{id}/maintenance, 202). Idempotent.
func (c *Client) ClearMaintenanceFlag(ctx context.Context, id string) error {
	_, err := provisionCall(ctx, c, "ironic: unset maintenance", func(ctx context.Context) (struct{}, error) {
		r := nodes.UnsetMaintenance(ctx, c.sc, id)
		return struct{}{}, r.Err
	})
	return err
}
