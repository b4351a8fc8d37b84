package ctl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// releaseOpts are the flags only `release` has.
type releaseOpts struct {
	allHolds, dryRun bool
}

func (o *releaseOpts) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.allHolds, "all-holds", false, "release every quarantine hold of the devices (the policy rules' too), explicitly; recorded as RELEASE_ALL_HOLDS")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "show what the release would do (per device, or counted per outcome with --selector) and change nothing")
}

// releaseDevices releases (or, with --dry-run, plans the release of) devs
// one by one, printing what each release does, and returns the devices
// that got a command and their commands. A refusal (only policy rules hold
// a device) stops there, saying which commands were recorded before.
func (a *app) releaseDevices(ctx context.Context, c *client, devs []*ironlinkv1.Device, o *releaseOpts, reason string) ([]*ironlinkv1.Device, []*ironlinkv1.OperatorCommand, error) {
	var done []*ironlinkv1.Device
	var cmds []*ironlinkv1.OperatorCommand
	for _, d := range devs {
		cctx, cancel := c.call(ctx)
		r, err := c.fleet.ReleaseDevice(cctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: d.GetDeviceId(), Reason: reason,
			AllHolds: o.allHolds, ValidateOnly: o.dryRun})
		cancel()
		if err != nil {
			err = c.explain(err)
			if len(cmds) > 0 {
				return nil, nil, &Error{Code: exitOf(err), Msg: fmt.Sprintf("%v (the commands before it were recorded: %s)", err, commandIDs(cmds))}
			}
			return nil, nil, err
		}
		line := planLine(r.GetPlan())
		switch cm := r.GetCommand(); {
		case o.dryRun:
			fmt.Fprintf(a.opts.Stdout, "%s: would release: %s\n", qualifiedName(d), line)
		case cm == nil:
			fmt.Fprintf(a.opts.Stdout, "%s: %s\n", qualifiedName(d), line)
		default:
			fmt.Fprintf(a.opts.Stdout, "%s: release requested: %s (command %s, generation %d)\n", qualifiedName(d), line, cm.GetCommandId(), cm.GetGeneration())
			done, cmds = append(done, d), append(cmds, cm)
		}
	}
	if o.dryRun {
		fmt.Fprintln(a.opts.Stderr, "dry run: nothing was changed")
	}
	return done, cmds, nil
}

// planLine says in one line what release plan p does.
func planLine(p *ironlinkv1.ReleasePlan) string {
	before := ""
	if st := p.GetStatusBeforeQuarantine(); st != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_UNSPECIFIED {
		before = "; it was " + statusName(st) + " before the quarantine"
	}
	switch p.GetOutcome() {
	case ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_RESTORED_OFFERED:
		return "quarantine ends, offered to customers again (CUSTOM_CUSTOMER_READY restored" + before + ")"
	case ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_RESTORED_NOT_OFFERED:
		why := "not offered before the quarantine"
		if p.OfferedBeforeQuarantine == nil {
			why = "not known to have been offered before the quarantine"
		}
		return "quarantine ends, stays not offered (" + why + before + "; `ironlink offer` offers it)"
	case ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_STILL_HELD:
		return "hold " + strings.Join(p.GetReleasedHolders(), ", ") + " released; still quarantined, held by " + holderNames(p.GetRemainingHolds())
	case ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_HELD_BY_OTHERS:
		return "held only by " + holderNames(p.GetRemainingHolds()) + ": nothing released (--all-holds releases every hold)"
	case ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_NOT_QUARANTINED:
		return "not quarantined: nothing to release"
	}
	return "outcome " + p.GetOutcome().String()
}

func holderNames(hs []*ironlinkv1.QuarantineHold) string {
	names := make([]string, len(hs))
	for i, h := range hs {
		names[i] = h.GetHolder()
	}
	return strings.Join(names, ", ")
}

// countLines prints the devices a bulk release does (or would do) each
// thing to, one line per outcome, e.g. "8 → offered again ...".
func (a *app) countLines(cs []*ironlinkv1.ReleaseOutcomeCount) {
	for _, c := range cs {
		n, hs := c.GetCount(), strings.Join(c.GetHolders(), ", ")
		var what string
		switch c.GetOutcome() {
		case ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_RESTORED_OFFERED:
			what = "→ offered to customers again (CUSTOM_CUSTOMER_READY restored, as before the quarantine)"
		case ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_RESTORED_NOT_OFFERED:
			what = "→ quarantine ends, stay not offered (HELD: not offered before the quarantine)"
		case ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_STILL_HELD:
			what = "→ operator hold released, still quarantined: held by " + hs
		case ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_HELD_BY_OTHERS:
			what = "→ unchanged: held only by " + hs + " (--all-holds releases it)"
		case ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_NOT_QUARANTINED:
			what = "→ unchanged: not quarantined"
		default:
			what = "→ " + c.GetOutcome().String()
		}
		fmt.Fprintf(a.opts.Stdout, "  %d %s\n", n, what)
	}
}

// newOfferCommand builds `offer`.
func (a *app) newOfferCommand() *cobra.Command {
	var reason, site string
	var dryRun, wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "offer NAME|SITE/NAME|UUID... --reason TEXT",
		Short: "Offer devices that are not quarantined to customers (add CUSTOM_CUSTOMER_READY)",
		Long: `Offer devices to customers: the hub records the desired state RELEASED (who,
why, when; action OFFER) and the site's satellite puts CUSTOM_CUSTOMER_READY on
the Ironic node and its Placement resource provider. A release never offers a
device that was not offered before its quarantine: this is the explicit step
that does. A quarantined device is refused (release it first).`,
		Example: `  ironlink offer node-007 --reason "validated after repair" --wait
  ironlink offer node-007 --reason "validated" --dry-run`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: a.completeDevices,
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageErrf("--reason is required: say why the device is offered (it is kept in the quarantine history)")
			}
			if timeout <= 0 {
				return usageErrf("--timeout %s: want a positive duration", timeout)
			}
			ctx := cmd.Context()
			c, devs, err := a.connectAndResolve(ctx, args, site)
			if err != nil {
				return err
			}
			var cmds []*ironlinkv1.OperatorCommand
			for _, d := range devs {
				cctx, cancel := c.call(ctx)
				r, err := c.fleet.OfferDevice(cctx, &ironlinkv1.OfferDeviceRequest{DeviceId: d.GetDeviceId(), Reason: reason, ValidateOnly: dryRun})
				cancel()
				if err != nil {
					err = c.explain(err)
					if len(cmds) > 0 {
						return &Error{Code: exitOf(err), Msg: fmt.Sprintf("%v (the commands before it were recorded: %s)", err, commandIDs(cmds))}
					}
					return err
				}
				if dryRun {
					fmt.Fprintf(a.opts.Stdout, "%s: would offer (add CUSTOM_CUSTOMER_READY)\n", qualifiedName(d))
					continue
				}
				cmds = append(cmds, r.GetCommand())
				fmt.Fprintf(a.opts.Stdout, "%s: offer requested (command %s, generation %d)\n", qualifiedName(d), r.GetCommand().GetCommandId(), r.GetCommand().GetGeneration())
			}
			if dryRun || !wait {
				return nil
			}
			return a.waitCommands(ctx, c, devs, cmds, timeout)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (required; kept in the quarantine history)")
	cmd.Flags().StringVar(&site, "site", "", "the site of device names used at more than one site")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check that the devices can be offered and change nothing")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until every command SUCCEEDED (exit 6 when one FAILED, 7 on --timeout)")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long --wait waits")
	_ = cmd.RegisterFlagCompletionFunc("site", a.completeSites)
	return cmd
}
