package ctl

import (
	"strings"

	"github.com/spf13/cobra"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// The node actions of `ironlink op start` (docs/reference/cli.md "op
// start"): power-on, power-off, reboot, maintenance-set,
// maintenance-clear, reprovision.

// nodeActionKinds are the node actions' CLI names.
var nodeActionKinds = map[string]ironlinkv1.OperationKind{
	"power-on": ironlinkv1.OperationKind_OPERATION_KIND_POWER_ON, "power-off": ironlinkv1.OperationKind_OPERATION_KIND_POWER_OFF,
	"reboot":          ironlinkv1.OperationKind_OPERATION_KIND_REBOOT,
	"maintenance-set": ironlinkv1.OperationKind_OPERATION_KIND_SET_MAINTENANCE, "maintenance-clear": ironlinkv1.OperationKind_OPERATION_KIND_CLEAR_MAINTENANCE,
	"reprovision": ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION,
}

func init() {
	for k, v := range nodeActionKinds {
		opKinds[k] = v
	}
}

// nodeActionName is the CLI name of a node action kind (ok false for
// another kind): "maintenance-set", not the proto's SET_MAINTENANCE.
func nodeActionName(k ironlinkv1.OperationKind) (string, bool) {
	for n, v := range nodeActionKinds {
		if v == k {
			return n, true
		}
	}
	return "", false
}

// opNodeFlags are the node actions' flags of `op start`.
type opNodeFlags struct {
	soft              bool
	powerTimeout      uint32
	maintenanceReason string
}

func (o *opNodeFlags) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&o.soft, "soft", false, "power-off, reboot: a soft (ACPI) power off instead of a hard one")
	f.Uint32Var(&o.powerTimeout, "power-timeout", 0, "power-on, power-off, reboot: seconds Ironic gives the power change (0: Ironic's default; at most 3600)")
	f.StringVar(&o.maintenanceReason, "maintenance-reason", "", "maintenance-set: the maintenance reason Ironic records (default: --reason)")
}

// params adds the node actions' parameters of kind to p; a flag of another
// kind is a usage error.
func (o *opNodeFlags) params(kind ironlinkv1.OperationKind, reason string, p *ironlinkv1.OperationParams) error {
	switch kind {
	case ironlinkv1.OperationKind_OPERATION_KIND_POWER_OFF, ironlinkv1.OperationKind_OPERATION_KIND_REBOOT:
		p.Soft = o.soft
	default:
		if o.soft {
			return usageErrf("--soft is for power-off and reboot only")
		}
	}
	switch kind {
	case ironlinkv1.OperationKind_OPERATION_KIND_POWER_ON, ironlinkv1.OperationKind_OPERATION_KIND_POWER_OFF, ironlinkv1.OperationKind_OPERATION_KIND_REBOOT:
		p.PowerTimeoutSeconds = o.powerTimeout
	default:
		if o.powerTimeout != 0 {
			return usageErrf("--power-timeout is for power-on, power-off and reboot only")
		}
	}
	if kind == ironlinkv1.OperationKind_OPERATION_KIND_SET_MAINTENANCE {
		p.MaintenanceReason = o.maintenanceReason
		if strings.TrimSpace(p.MaintenanceReason) == "" {
			p.MaintenanceReason = reason
		}
	} else if o.maintenanceReason != "" {
		return usageErrf("--maintenance-reason is for maintenance-set only")
	}
	return nil
}
