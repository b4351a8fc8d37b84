package ctl

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// newRetryCommand builds `ironlink retry COMMAND-ID...`
// (FleetService.RetryCommand): a FAILED quarantine, release or offer sent
// again as a new generation.
func (a *app) newRetryCommand() *cobra.Command {
	var reason string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "retry COMMAND-ID... [--reason TEXT]",
		Short: "Send FAILED quarantine, release or offer commands again (after fixing their cause)",
		Long: `Retry FAILED commands (FleetService.RetryCommand).
Each command's desired state is issued again as a new generation, exactly as repeating the quarantine,
release or offer would, recorded in the quarantine history as "retry of
command <id>" with your reason. A PERMANENT failure is never resent by the
hub by itself: this is how it goes out again once its cause is fixed.
Commands are named by id or a unique prefix of at least 4 characters (as
` + "`ironlink get commands --state failed`" + ` shows them). A command that is not
FAILED is refused (exit 8).`,
		Example: `  ironlink get commands --state failed
  ironlink retry 0b6c7a52 --reason "BMC password fixed" --wait`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: a.completeIDs(commandIDKind),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return usageErrf("--timeout %s: want a positive duration", timeout)
			}
			ctx := cmd.Context()
			c, err := a.connect()
			if err != nil {
				return err
			}
			ids, err := c.resolveIDs(ctx, commandIDKind, args)
			if err != nil {
				return err
			}
			var devs []*ironlinkv1.Device
			var cmds []*ironlinkv1.OperatorCommand
			for _, id := range ids {
				cctx, cancel := c.call(ctx)
				r, err := c.fleet.RetryCommand(cctx, &ironlinkv1.RetryCommandRequest{CommandId: id, Reason: reason})
				cancel()
				if err != nil {
					err = c.explain(err)
					if len(cmds) > 0 {
						return &Error{Code: exitOf(err), Msg: fmt.Sprintf("%v (the retries before it were recorded: %s)", err, commandIDs(cmds))}
					}
					return err
				}
				cm := r.GetCommand()
				d := &ironlinkv1.Device{DeviceId: cm.GetDeviceId(), Site: cm.GetSite()}
				if g, err := c.getDevice(ctx, deviceArg{id: cm.GetDeviceId()}, 1); err == nil {
					d = g.GetDevice()
				}
				devs, cmds = append(devs, d), append(cmds, cm)
				fmt.Fprintf(a.opts.Stdout, "%s: %s retried as command %s (generation %d)\n", qualifiedName(d),
					commandAction(cm.GetAction(), cm.GetDesired()), cm.GetCommandId(), cm.GetGeneration())
			}
			if !wait {
				return nil
			}
			return a.waitCommands(ctx, c, devs, cmds, timeout)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (optional; kept in the quarantine history)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until every new command SUCCEEDED (exit 6 when one FAILED, 7 on --timeout)")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long --wait waits")
	return cmd
}

// newOpRetryCommand builds `op retry OPERATION-ID`: a FAILED or CANCELLED
// operation started again (OperationService.StartOperation) with the same
// kind, device and parameters. ENROL is not retried this way: the hub
// keeps its node spec with the BMC credentials redacted.
func (a *app) newOpRetryCommand() *cobra.Command {
	var reason string
	var force, wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "retry OPERATION-ID --reason TEXT",
		Short: "Start a FAILED or CANCELLED operation again: same kind, device and parameters",
		Long: `Start an operation that ended FAILED or CANCELLED again.
A new operation (OperationService.StartOperation) of the same kind on the same device with
the same parameters, with your reason. The old one stays as it ended. enrol
is not retried this way (the hub keeps no BMC credentials): start it again
with ` + "`ironlink op start enrol --nodes FILE`" + `. The id may be a unique prefix.`,
		Example:           `  ironlink op retry 7f3c2a10 --reason "cleaning network fixed" --wait`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeIDs(operationIDKind),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageErrf("--reason is required: say why")
			}
			ctx := cmd.Context()
			c, err := a.connect()
			if err != nil {
				return err
			}
			id, err := c.resolveID(ctx, operationIDKind, args[0])
			if err != nil {
				return err
			}
			cctx, cancel := c.call(ctx)
			r, err := c.ops.GetOperation(cctx, &ironlinkv1.GetOperationRequest{OperationId: id})
			cancel()
			if err != nil {
				return c.explain(err)
			}
			o := r.GetOperation()
			switch {
			case o.GetKind() == ironlinkv1.OperationKind_OPERATION_KIND_ENROL:
				return usageErrf("operation %s is an enrol: start it again with `ironlink op start enrol --site %s --nodes FILE` (the hub keeps no BMC credentials to resend)", id, o.GetSite())
			case o.GetState() != ironlinkv1.OperationState_OPERATION_STATE_FAILED && o.GetState() != ironlinkv1.OperationState_OPERATION_STATE_CANCELLED:
				return &Error{Code: ExitRefused, Msg: fmt.Sprintf("operation %s is %s: only a FAILED or CANCELLED operation is retried", id, opStateName(o.GetState()))}
			}
			req := &ironlinkv1.StartOperationRequest{Kind: o.GetKind(), Site: o.GetSite(), Devices: []string{o.GetSite() + "/" + o.GetDeviceId()},
				Params: o.GetParams(), Reason: reason, Force: force}
			return a.startOperations(ctx, req, wait, timeout)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (required; kept with the new operation)")
	cmd.Flags().BoolVar(&force, "force", false, "override the quarantine guard (recorded), as op start --force")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the new operation to its end (exit 6 when it FAILED or was CANCELLED)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "how long --wait waits")
	return cmd
}
