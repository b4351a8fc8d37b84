package ctl

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// newExplainCommand builds `ironlink explain DEVICE`
// (RemediationService.GetDeviceRemediation): the device's remediation
// ladder, the step in progress, attempts used and left, the next step and
// when, and its repair handoffs.
func (a *app) newExplainCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "explain NAME|SITE/NAME|UUID",
		Short: "Show a device's remediation: its ladder, the step in progress, attempts left, the next step and when",
		Long: `Explain what the quarantine policy's remediation ladder does about a device
(RemediationService.GetDeviceRemediation): the ladder of the rule holding it
(steps with their timeouts, settle time, release after a fix), the ladder in
progress or the latest (each step with its operation and outcome), the
attempts used and left in the budget window, what happens next and when, and
the device's repair handoffs (close one with ` + "`ironlink handoffs close`" + `).`,
		Example:           "  ironlink explain node-007\n  ironlink explain site-a/node-007",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeDevices,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			if args, err = c.expandDevicePrefixes(cmd.Context(), args, ""); err != nil {
				return err
			}
			ctx, cancel := c.call(cmd.Context())
			defer cancel()
			r, err := c.remediation.GetDeviceRemediation(ctx, &ironlinkv1.GetDeviceRemediationRequest{Device: args[0]})
			if err != nil {
				return c.explain(err)
			}
			a.printRemediation(a.opts.Stdout, r)
			return nil
		},
	}
}

// printRemediation prints GetDeviceRemediation's answer, one field a line.
func (a *app) printRemediation(w io.Writer, r *ironlinkv1.GetDeviceRemediationResponse) {
	if r.GetDeviceName() != "" {
		field(w, "Device", r.GetSite()+"/"+r.GetDeviceName()+" ("+r.GetDeviceId()+")")
	} else {
		field(w, "Device", r.GetSite()+"/"+r.GetDeviceId())
	}
	if r.GetRule() == "" {
		field(w, "Rule", "none: no policy rule holds the device and no ladder ran")
		return
	}
	field(w, "Rule", r.GetRule())
	if len(r.GetLadder()) == 0 {
		field(w, "Ladder", "none (the rule has no remediation ladder in the policy in force)")
	} else {
		steps := make([]string, len(r.GetLadder()))
		for i, s := range r.GetLadder() {
			cont := ""
			if s.GetContinues() {
				cont = ", continues"
			}
			steps[i] = fmt.Sprintf("%d. %s (timeout %s%s)", i+1, s.GetKind(), s.GetTimeout().AsDuration(), cont)
		}
		mode := ""
		if r.GetDryRun() {
			mode = "; DRY-RUN (plans only)"
		}
		field(w, "Ladder", fmt.Sprintf("%s; settle %s; after a fix: %s release%s", strings.Join(steps, ", "),
			r.GetSettle().AsDuration(), r.GetRelease(), mode))
		field(w, "Attempts", fmt.Sprintf("%d used, %d left in %s", r.GetAttemptsUsed(), r.GetAttemptsLeft(), r.GetBudgetWindow().AsDuration()))
	}
	if l := r.GetLadderRun(); l != nil {
		line := fmt.Sprintf("#%d %s, step %d of %d, started %s ago", l.GetId(), l.GetState(), l.GetPosition(), l.GetStepsTotal(), a.age(l.GetStartTime()))
		if l.GetFixedStep() > 0 {
			line += fmt.Sprintf("; fixed by step %d (%s)", l.GetFixedStep(), l.GetFixedKind())
		}
		if l.GetWaiting() != "" {
			line += "; waiting: " + l.GetWaiting()
		}
		field(w, "Ladder run", line)
		for _, s := range l.GetSteps() {
			field(w, fmt.Sprintf("  Step %d", s.GetStep()), fmt.Sprintf("%s %s (operation %s, %s ago): %s", s.GetKind(), s.GetState(),
				shortID(s.GetOperationId()), a.age(s.GetStartTime()), truncate(s.GetDetail(), 120)))
		}
	}
	if r.GetPlan() != "" {
		next := r.GetPlan()
		if t := r.GetNextTime(); t != nil {
			next += fmt.Sprintf(" (in %s)", time.Until(t.AsTime()).Truncate(time.Second))
		}
		field(w, "Next", next)
	}
	for _, h := range r.GetHandoffs() {
		field(w, "Handoff", fmt.Sprintf("#%d %s %s: %s (webhook %s, %d attempts)", h.GetId(), h.GetState(), h.GetReason(),
			truncate(h.GetDetail(), 100), h.GetWebhookState(), h.GetWebhookAttempts()))
		for _, at := range h.GetWebhookAttemptLog() {
			field(w, fmt.Sprintf("  Attempt %d", at.GetAttempt()), fmt.Sprintf("%s, %s ago", attemptText(at), a.age(at.GetAttemptTime())))
		}
	}
}

// attemptText is a webhook attempt's outcome: "204 in 3ms", "500 Internal
// Server Error in 12ms", "no answer in 10s: context deadline exceeded".
func attemptText(at *ironlinkv1.HandoffWebhookAttempt) string {
	d := at.GetDuration().AsDuration()
	switch {
	case at.GetStatusCode() == 0:
		return fmt.Sprintf("no answer in %s: %s", d, truncate(at.GetError(), 100))
	case at.GetError() != "":
		return fmt.Sprintf("%s in %s", truncate(at.GetError(), 60), d)
	}
	return fmt.Sprintf("%d in %s", at.GetStatusCode(), d)
}

// lastAttempt is the LAST ATTEMPT cell of a handoff: "2: 204 in 3ms" ("-"
// when none was made).
func lastAttempt(h *ironlinkv1.Handoff) string {
	log := h.GetWebhookAttemptLog()
	if len(log) == 0 {
		return "-"
	}
	at := log[len(log)-1]
	return fmt.Sprintf("%d: %s", at.GetAttempt(), attemptText(at))
}

// newHandoffsCommand builds `ironlink handoffs` (ListHandoffs) and
// `ironlink handoffs close` (CloseHandoff).
func (a *app) newHandoffsCommand() *cobra.Command {
	var site, device string
	var open bool
	cmd := &cobra.Command{
		Use:     "handoffs [--site SITE] [--device DEVICE] [--open]",
		Aliases: []string{"handoff"},
		Short:   "List repair handoffs of the remediation ladders (close one with `handoffs close`)",
		Long: `List the repair handoffs (RemediationService.ListHandoffs), newest first: a
device its ladder could not fix (ladder exhausted, budget spent, or the fault
recommends contacting support) is held for repair (quarantine hold "repair")
and announced by the hub's handoff webhook.`,
		Example: "  ironlink handoffs --open\n  ironlink handoffs close 12 --note \"replaced GPU 3\"",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			if device != "" {
				d, err := c.expandDevicePrefixes(cmd.Context(), []string{device}, site)
				if err != nil {
					return err
				}
				device = d[0]
			}
			ctx, cancel := c.call(cmd.Context())
			defer cancel()
			r, err := c.remediation.ListHandoffs(ctx, &ironlinkv1.ListHandoffsRequest{Site: site, Device: device, OpenOnly: open})
			if err != nil {
				return c.explain(err)
			}
			if len(r.GetHandoffs()) == 0 {
				fmt.Fprintln(a.opts.Stdout, "No handoffs.")
				return nil
			}
			tw := tabwriter.NewWriter(a.opts.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tDEVICE\tSITE\tRULE\tREASON\tSTATE\tWEBHOOK\tLAST ATTEMPT\tAGE")
			for _, h := range r.GetHandoffs() {
				name := h.GetDeviceName()
				if name == "" {
					name = h.GetDeviceId()
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.GetId(), name, h.GetSite(), h.GetRule(), h.GetReason(),
					h.GetState(), h.GetWebhookState(), lastAttempt(h), a.age(h.GetCreateTime()))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "only handoffs of this site")
	cmd.Flags().StringVar(&device, "device", "", "only handoffs of this device (NAME, SITE/NAME or UUID)")
	cmd.Flags().BoolVar(&open, "open", false, "only open handoffs")
	cmd.AddCommand(a.newHandoffCloseCommand())
	return cmd
}

func (a *app) newHandoffCloseCommand() *cobra.Command {
	var note string
	cmd := &cobra.Command{
		Use:   "close ID --note TEXT",
		Short: "Close a repair handoff as repaired: the device goes to validation, not to customers",
		Long: `Close an open repair handoff (RemediationService.CloseHandoff): every quarantine
hold of its device is released and the device comes back not offered to
customers (HELD), ready for validation; ` + "`ironlink offer`" + ` offers it once validated.`,
		Example: "  ironlink handoffs close 12 --note \"replaced DIMM B2, burn-in passed\"",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return usageErrf("handoff id %q: want a positive number (as `ironlink handoffs` shows it)", args[0])
			}
			if note == "" {
				return usageErrf("--note is required: say what was repaired")
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			ctx, cancel := c.call(cmd.Context())
			defer cancel()
			r, err := c.remediation.CloseHandoff(ctx, &ironlinkv1.CloseHandoffRequest{Id: id, Note: note})
			if err != nil {
				return c.explain(err)
			}
			h := r.GetHandoff()
			fmt.Fprintf(a.opts.Stdout, "handoff %d closed: %s/%s released to validation (not offered to customers)\n", h.GetId(), h.GetSite(), first(h.GetDeviceName(), h.GetDeviceId()))
			return nil
		},
	}
	cmd.Flags().StringVar(&note, "note", "", "what was repaired (required)")
	return cmd
}
