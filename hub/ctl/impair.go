package ctl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// newImpairCommand builds `quarantine` (quarantine true) or `release`.
func (a *app) newImpairCommand(quarantine bool) *cobra.Command {
	var reason, site string
	var bf bulkFlags // --selector, --expected-count, --yes (bulk.go)
	var ro releaseOpts
	var wait bool
	var timeout time.Duration
	verb, doing, long := "release", "released", `End the operators' quarantine of devices and give back exactly what it took:
a device that was offered to customers before (CUSTOM_CUSTOMER_READY present)
gets the trait back on its Ironic node and Placement resource provider; one
that was not (HELD) stays not offered — `+"`ironlink offer`"+` offers it. A device
that a policy rule holds too stays quarantined until the rule releases it (or
--all-holds releases every hold, recorded as such). Each line says what the
release does; --dry-run shows it without doing it.`
	example := `  ironlink release node-007 --reason "GPU replaced" --dry-run
  ironlink release node-007 --reason "GPU replaced" --wait
  ironlink release demo/node-007 demo/node-008 --reason "burn-in passed"
  ironlink release node-009 --all-holds --reason "policy rule misfired"`
	if quarantine {
		verb, doing, long = "quarantine", "quarantined", `Take devices away from customers: the hub records the desired state (who,
why, when) at once — the device's status turns QUARANTINED unless a higher rule
holds (ONBOARDING, FAULTED, MAINTENANCE) — and the site's satellite removes
CUSTOM_CUSTOMER_READY from the Ironic node and its Placement resource provider.`
		example = `  # take X away and be sure it happened
  ironlink quarantine node-007 --reason "GPU 3 throws Xid 79" --wait
  ironlink quarantine demo/node-007 node-012 --reason "rack r4 PDU swap" --wait --timeout 5m
  ironlink quarantine $(ironlink get devices --status faulted -o name) --reason "faulted: keep them out"`
	}
	cmd := &cobra.Command{
		Use:   verb + " NAME|SITE/NAME|UUID... --reason TEXT",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " devices, optionally waiting until the site has applied it",
		Long: long + `

Every argument is resolved first: an unknown or ambiguous name changes
nothing. Without --wait the command returns once the hub has recorded it
(state PENDING). With --wait it follows each command — PENDING, SENT,
SUCCEEDED — and fails (exit 6) when one is FAILED (with the site's error) or
SUPERSEDED, or (exit 7) when --timeout passes first.`,
		Example:           example,
		Args:              bf.args,
		ValidArgsFunction: a.completeDevices,
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageErrf("--reason is required: say why the device is %s (it is kept in the quarantine history)", doing)
			}
			if timeout <= 0 {
				return usageErrf("--timeout %s: want a positive duration", timeout)
			}
			if bf.selector != "" {
				return a.runBulk(cmd.Context(), quarantine, &bf, &ro, reason, wait, timeout)
			}
			ctx := cmd.Context()
			c, devs, err := a.connectAndResolve(ctx, args, site)
			if err != nil {
				return err
			}
			if !quarantine {
				devs, cmds, err := a.releaseDevices(ctx, c, devs, &ro, reason)
				if err != nil || len(cmds) == 0 || ro.dryRun {
					return err
				}
				if !wait {
					fmt.Fprintf(a.opts.Stderr, "the site applies it shortly: follow with `ironlink get commands --device %s` or use --wait\n", qualifiedName(devs[0]))
					return nil
				}
				return a.waitCommands(ctx, c, devs, cmds, timeout)
			}
			var cmds []*ironlinkv1.OperatorCommand
			for _, d := range devs {
				cm, err := a.impair(ctx, c, d, quarantine, reason)
				if err != nil {
					if len(cmds) > 0 {
						return &Error{Code: exitOf(err), Msg: fmt.Sprintf("%v (the commands before it were recorded: %s)", err, commandIDs(cmds))}
					}
					return err
				}
				cmds = append(cmds, cm)
				fmt.Fprintf(a.opts.Stdout, "%s: %s requested (command %s, generation %d)\n", qualifiedName(d), verb, cm.GetCommandId(), cm.GetGeneration())
			}
			if !wait {
				fmt.Fprintf(a.opts.Stderr, "the site applies it shortly: follow with `ironlink get commands --device %s` or use --wait\n", qualifiedName(devs[0]))
				return nil
			}
			return a.waitCommands(ctx, c, devs, cmds, timeout)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (required; kept in the quarantine history)")
	cmd.Flags().StringVar(&site, "site", "", "the site of device names used at more than one site")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until every command SUCCEEDED (exit 6 when one FAILED, 7 on --timeout)")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long --wait waits")
	_ = cmd.RegisterFlagCompletionFunc("site", a.completeSites)
	bf.register(cmd, verb)
	if !quarantine {
		ro.register(cmd)
	}
	return cmd
}

func exitOf(err error) int {
	if e, ok := err.(*Error); ok {
		return e.Code
	}
	return ExitError
}

func commandIDs(cmds []*ironlinkv1.OperatorCommand) string {
	var ids []string
	for _, c := range cmds {
		ids = append(ids, c.GetCommandId())
	}
	return strings.Join(ids, ", ")
}

// impair quarantines d (release.go releases and offers).
func (a *app) impair(ctx context.Context, c *client, d *ironlinkv1.Device, _ bool, reason string) (*ironlinkv1.OperatorCommand, error) {
	cctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.fleet.QuarantineDevice(cctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: d.GetDeviceId(), Reason: reason})
	return r.GetCommand(), c.explain(err)
}

// waitCommands polls every command until each is final, printing each state
// change. SUCCEEDED for all: nil; any FAILED or SUPERSEDED: ExitCommandFailed;
// timeout: ExitWaitTimeout, with a hint from the site's link state.
func (a *app) waitCommands(ctx context.Context, c *client, devs []*ironlinkv1.Device, cmds []*ironlinkv1.OperatorCommand, timeout time.Duration) error {
	w := a.opts.Stdout
	deadline := time.Now().Add(timeout)
	last := make([]string, len(cmds))
	done := make([]bool, len(cmds))
	var failed []string
	for {
		pending := 0
		for i, cm := range cmds {
			if done[i] {
				continue
			}
			cctx, cancel := c.call(ctx)
			r, err := c.fleet.GetCommand(cctx, &ironlinkv1.GetCommandRequest{CommandId: cm.GetCommandId()})
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return &Error{Code: ExitError, Msg: "interrupted while waiting; the commands go on: " + commandIDs(cmds)}
				}
				return c.explain(err)
			}
			cm = r.GetCommand()
			cmds[i] = cm
			name := qualifiedName(devs[i])
			state := commandStateName(cm.GetState())
			line := state
			if cm.GetState() == ironlinkv1.CommandState_COMMAND_STATE_SENT {
				line = fmt.Sprintf("%s (attempt %d)", state, cm.GetAttempts())
			}
			if line != last[i] {
				last[i] = line
				switch cm.GetState() {
				case ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED:
					fmt.Fprintf(w, "%s: SUCCEEDED%s\n", name, detail(cm.GetResultDetail()))
				case ironlinkv1.CommandState_COMMAND_STATE_FAILED:
					fmt.Fprintf(w, "%s: FAILED after %s: %s\n", name, plural(int(cm.GetAttempts()), "attempt", "attempts"), cm.GetLastError())
				case ironlinkv1.CommandState_COMMAND_STATE_SUPERSEDED:
					fmt.Fprintf(w, "%s: SUPERSEDED: a newer quarantine or release replaced it\n", name)
				default:
					fmt.Fprintf(w, "%s: %s\n", name, line)
				}
			}
			switch cm.GetState() {
			case ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED:
				done[i] = true
			case ironlinkv1.CommandState_COMMAND_STATE_FAILED:
				done[i] = true
				failed = append(failed, fmt.Sprintf("%s: %s", name, cm.GetLastError()))
			case ironlinkv1.CommandState_COMMAND_STATE_SUPERSEDED:
				done[i] = true
				failed = append(failed, name+": superseded")
			default:
				pending++
			}
		}
		if pending == 0 {
			if len(failed) > 0 {
				return &Error{Code: ExitCommandFailed, Msg: fmt.Sprintf("%s did not succeed: %s (the hub sends a FAILED command again after a backoff; see `ironlink describe device`)",
					plural(len(failed), "command", "commands"), strings.Join(failed, "; "))}
			}
			return nil
		}
		if time.Now().After(deadline) {
			return &Error{Code: ExitWaitTimeout, Msg: fmt.Sprintf("%s still not finished after %s%s (the hub keeps them: `ironlink get commands --state pending,sent`)",
				plural(pending, "command", "commands"), timeout, a.linkHint(ctx, c, devs, done))}
		}
		select {
		case <-ctx.Done():
			return &Error{Code: ExitError, Msg: "interrupted while waiting; the commands go on: " + commandIDs(cmds)}
		case <-time.After(a.opts.PollInterval):
		}
	}
}

func detail(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// linkHint names the sites of unfinished commands whose link is not
// connected: the usual reason a command never gets an answer.
func (a *app) linkHint(ctx context.Context, c *client, devs []*ironlinkv1.Device, done []bool) string {
	cctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.fleet.ListSites(cctx, &ironlinkv1.ListSitesRequest{})
	if err != nil {
		return ""
	}
	state := map[string]*ironlinkv1.Site{}
	for _, s := range r.GetSites() {
		state[s.GetName()] = s
	}
	var hints []string
	seen := map[string]bool{}
	for i, d := range devs {
		s := state[d.GetSite()]
		if done[i] || seen[d.GetSite()] || s == nil || s.GetLinkState() == ironlinkv1.LinkState_LINK_STATE_CONNECTED {
			continue
		}
		seen[d.GetSite()] = true
		hints = append(hints, fmt.Sprintf("site %s is %s, last seen %s ago: is its satellite running?", d.GetSite(), linkStateName(s.GetLinkState()), a.age(s.GetLastSeenTime())))
	}
	if len(hints) == 0 {
		return ""
	}
	return "; " + strings.Join(hints, "; ")
}
