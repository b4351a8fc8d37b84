package ctl

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// newGetDecisions builds `get decisions`: the quarantine policy's decision log.
func (a *app) newGetDecisions() *cobra.Command {
	var f listFlags
	var site string
	var dryRun bool
	var limit int
	cmd := &cobra.Command{
		Use:     "decisions",
		Aliases: []string{"decision"},
		Short:   "List the quarantine policy's decisions, newest first (dry-run ones included)",
		Long: `List what the quarantine policy decided (PolicyService.ListPolicyDecisions):
for each device and triggering status change, the ACTION (QUARANTINE, PENDING,
SKIP, RELEASE), its REASON (RuleMatched, HeldByGuard, StaleTrigger, ...), the
RULE, the triggering condition, and DRY-RUN when it only logged.`,
		Example: `  ironlink get decisions --site demo
  ironlink get decisions --dry-run -o wide`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if limit < 1 || limit > 10000 {
				return usageErrf("--limit %d: want 1-10000", limit)
			}
			return a.runListing(cmd, &f, func(ctx context.Context) (*listing, error) {
				return a.fetchDecisions(ctx, site, dryRun, limit)
			}, "No policy decisions.")
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&site, "site", "", "only this site")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only dry-run decisions")
	cmd.Flags().IntVar(&limit, "limit", 200, "at most this many (newest first)")
	return cmd
}

func (a *app) fetchDecisions(ctx context.Context, site string, dryRun bool, limit int) (*listing, error) {
	c := a.cl
	l := &listing{
		header:     []string{"ID", "DEVICE", "SITE", "ACTION", "REASON", "RULE", "CAUSE", "DRY-RUN", "AGE"},
		wideHeader: []string{"ID", "DEVICE", "DEVICE-ID", "SITE", "ACTION", "REASON", "RULE", "CAUSE", "DRY-RUN", "GUARD", "COMMAND", "DETAIL", "AGE"},
	}
	all := &ironlinkv1.ListPolicyDecisionsResponse{}
	tok := ""
	for len(all.Decisions) < limit {
		cctx, cancel := c.call(ctx)
		r, err := c.policy.ListPolicyDecisions(cctx, &ironlinkv1.ListPolicyDecisionsRequest{Site: site, DryRunOnly: dryRun,
			PageSize: int32(min(limit-len(all.Decisions), listPageSize)), PageToken: tok})
		cancel()
		if err != nil {
			return nil, err
		}
		all.Decisions = append(all.Decisions, r.GetDecisions()...)
		if tok = r.GetNextPageToken(); tok == "" {
			break
		}
	}
	for _, d := range all.Decisions {
		id := strconv.FormatInt(d.GetId(), 10)
		action := strings.TrimPrefix(d.GetAction().String(), "POLICY_ACTION_")
		cause := ""
		if d.GetCauseType() != "" {
			cause = causeText(d.GetCauseType(), d.GetCauseReason())
		}
		dry := ""
		if d.GetDryRun() {
			dry = "yes"
		}
		age := a.age(d.GetDecideTime())
		guard := fmt.Sprintf("%d/%d", d.GetWindowCount(), d.GetSiteDeviceCount())
		name := d.GetDeviceName()
		if name == "" {
			name = d.GetDeviceId()
		}
		l.items = append(l.items, item{key: id,
			cells: []string{id, name, d.GetSite(), action, d.GetReason(), d.GetRule(), cause, dry, age},
			wide:  []string{id, name, d.GetDeviceId(), d.GetSite(), action, d.GetReason(), d.GetRule(), cause, dry, guard, d.GetCommandId(), d.GetDetail(), age},
			name:  id, msg: d, goneMarker: "(gone)", sig: signature(d.GetId()),
		})
	}
	l.msg = all
	return l, nil
}

// newGetPending builds `get pending`: automatic quarantines waiting for an operator.
func (a *app) newGetPending() *cobra.Command {
	var f listFlags
	var site string
	cmd := &cobra.Command{
		Use:   "pending",
		Short: "List the quarantine policy's pending actions (held by the guard, stale triggers)",
		Long: `List the automatic quarantines waiting for an operator
(PolicyService.ListPendingActions): REASON is HeldByGuard (the site's
blast-radius guard is tripped) or StaleTrigger (seen while or after the site
was unreachable: never acted on automatically). Approve or reject them with
` + "`ironlink approve ID...` / `ironlink reject ID...`.",
		Example: `  ironlink get pending --site demo
  ironlink approve $(ironlink get pending --site demo -o name) --reason "confirmed"`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return a.runListing(cmd, &f, func(ctx context.Context) (*listing, error) {
				return a.fetchPending(ctx, site)
			}, "No pending actions.")
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&site, "site", "", "only this site")
	return cmd
}

func (a *app) fetchPending(ctx context.Context, site string) (*listing, error) {
	c := a.cl
	l := &listing{
		header:     []string{"ID", "DEVICE", "SITE", "REASON", "RULE", "CAUSE", "AGE"},
		wideHeader: []string{"ID", "DEVICE", "DEVICE-ID", "SITE", "REASON", "RULE", "CAUSE", "DETAIL", "AGE"},
	}
	all := &ironlinkv1.ListPendingActionsResponse{}
	tok := ""
	for {
		cctx, cancel := c.call(ctx)
		r, err := c.policy.ListPendingActions(cctx, &ironlinkv1.ListPendingActionsRequest{Site: site, PageSize: listPageSize, PageToken: tok})
		cancel()
		if err != nil {
			return nil, err
		}
		all.Actions = append(all.Actions, r.GetActions()...)
		if tok = r.GetNextPageToken(); tok == "" {
			break
		}
	}
	for _, p := range all.Actions {
		id := strconv.FormatInt(p.GetId(), 10)
		cause := causeText(p.GetCauseType(), p.GetCauseReason())
		age := a.age(p.GetCreateTime())
		l.items = append(l.items, item{key: id,
			cells: []string{id, p.GetDeviceName(), p.GetSite(), p.GetReason(), p.GetRule(), cause, age},
			wide:  []string{id, p.GetDeviceName(), p.GetDeviceId(), p.GetSite(), p.GetReason(), p.GetRule(), cause, p.GetDetail(), age},
			name:  id, msg: p, goneMarker: "(resolved)", sig: signature(p.GetId(), p.GetState()),
		})
	}
	l.msg = all
	return l, nil
}

// newResolveCommand builds `approve` (approve true) or `reject`.
func (a *app) newResolveCommand(approve bool) *cobra.Command {
	var reason string
	verb, done, effect := "reject", "rejected", "the devices are left alone"
	if approve {
		verb, done, effect = "approve", "approved", "each device is quarantined, with you as the actor"
	}
	cmd := &cobra.Command{
		Use:   verb + " ID... --reason TEXT",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " pending actions of the quarantine policy (all or nothing)",
		Long: `Resolve pending actions by id (see ` + "`ironlink get pending`" + `): ` + effect + `.
All ids are resolved in one transaction: an unknown id or one no longer
pending changes nothing.`,
		Example:           "  ironlink " + verb + " 12 13 14 --reason \"confirmed: deploys fail\"",
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: a.completePending,
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageErrf("--reason is required: say why (it is kept with the action)")
			}
			ids := make([]int64, len(args))
			for i, s := range args {
				id, err := strconv.ParseInt(s, 10, 64)
				if err != nil || id <= 0 {
					return usageErrf("%q is not a pending action id (see `ironlink get pending`)", s)
				}
				ids[i] = id
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			cctx, cancel := c.call(cmd.Context())
			defer cancel()
			var got []*ironlinkv1.PendingAction
			if approve {
				r, err := c.policy.ApprovePendingActions(cctx, &ironlinkv1.ApprovePendingActionsRequest{Ids: ids, Reason: reason})
				if err != nil {
					return c.explain(err)
				}
				got = r.GetActions()
			} else {
				r, err := c.policy.RejectPendingActions(cctx, &ironlinkv1.RejectPendingActionsRequest{Ids: ids, Reason: reason})
				if err != nil {
					return c.explain(err)
				}
				got = r.GetActions()
			}
			for _, p := range got {
				line := fmt.Sprintf("pending action %d (%s/%s): %s", p.GetId(), p.GetSite(), p.GetDeviceName(), done)
				if p.GetCommandId() != "" {
					line += " (command " + p.GetCommandId() + ")"
				}
				fmt.Fprintln(a.opts.Stdout, line)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (required)")
	return cmd
}

// completePending completes the ids of pending actions, with their device
// and rule as the description.
func (a *app) completePending(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	c, err := a.connect()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	r, err := c.policy.ListPendingActions(ctx, &ironlinkv1.ListPendingActionsRequest{PageSize: 1000})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, p := range r.GetActions() {
		if id := strconv.FormatInt(p.GetId(), 10); strings.HasPrefix(id, toComplete) {
			out = append(out, id+"\t"+p.GetSite()+"/"+p.GetDeviceName()+" "+p.GetRule())
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// causeText writes a decision's cause, the condition that was False:
// "Type=False(Reason)", or "Type=False" without a reason.
func causeText(typ, reason string) string {
	if reason == "" {
		return typ + "=False"
	}
	return typ + "=False(" + reason + ")"
}
