package ctl

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// newPolicyCommand builds `ironlink policy show|states|guard`: the
// quarantine policy in force, per site (PolicyService.GetEffectivePolicy,
// ListSitePolicyStates).
func (a *app) newPolicyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy (show|states|guard|replay)",
		Short: "The quarantine policy: the policy in force at a site, the sites' policy states, the blast-radius guard",
		Long: `The quarantine policy of the hub (docs/reference/policy.md).
Its decisions and pending actions are listed by ` + "`ironlink get decisions` and `ironlink get pending`" + `;
exclusions and planned maintenance by ` + "`ironlink holds`" + `.`,
		Example: `  ironlink policy show demo
  ironlink policy states
  ironlink policy guard demo
  ironlink policy replay --from 168h --policy candidate.yaml`,
	}
	cmd.AddCommand(a.newPolicyShow(), a.newPolicyStates(false), a.newPolicyStates(true), a.newPolicyReplay())
	return cmd
}

func (a *app) newPolicyShow() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:               "show SITE",
		Aliases:           []string{"effective"},
		Short:             "The policy in force at a site: rules, guard, maintenance windows (the fleet default with the site's overrides)",
		Example:           "  ironlink policy show demo\n  ironlink policy show demo -o yaml",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeSites,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connectFor(output, outTable, outJSON, outYAML)
			if err != nil {
				return err
			}
			cctx, cancel := c.call(cmd.Context())
			defer cancel()
			r, err := c.policy.GetEffectivePolicy(cctx, &ironlinkv1.GetEffectivePolicyRequest{Site: args[0]})
			if err != nil {
				return c.explain(err)
			}
			if output != outTable {
				return writeProto(a.opts.Stdout, output, r)
			}
			a.printPolicy(r)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml: the GetEffectivePolicy answer")
	return cmd
}

// printPolicy prints the effective policy of one site.
func (a *app) printPolicy(r *ironlinkv1.GetEffectivePolicyResponse) {
	w, p := a.opts.Stdout, r.GetPolicy()
	field(w, "Site", p.GetSite())
	mode := "off (automatic quarantine disabled)"
	switch {
	case p.GetEnabled() && p.GetDryRun():
		mode = "dry-run (decisions are logged, nothing is quarantined)"
	case p.GetEnabled():
		mode = "on"
	}
	field(w, "Automatic", mode)
	src := "the fleet default"
	if p.GetOverridden() {
		src = "the fleet default with the site's own entry"
	}
	field(w, "From", src)
	if r.GetReloadError() != "" {
		field(w, "Reload error", r.GetReloadError()+" (the last good policy file is in force)")
	}
	field(w, "Guard", guardLine(p.GetGuard()))
	fmt.Fprintln(w, "Rules (tried in order):")
	if len(p.GetRules()) == 0 {
		fmt.Fprintln(w, "  none")
	} else {
		t := newTable(w, "  ", "NAME", "FROM", "TO", "REASONS", "HEALTH", "HOLD-DOWN", "AUTO-RELEASE", "DRY-RUN")
		for _, ru := range p.GetRules() {
			dry := ""
			if ru.GetDryRun() {
				dry = "yes"
			}
			t.row(ru.GetName(), strings.Join(ru.GetFromStatuses(), ","), strings.Join(ru.GetToStatuses(), ","), strings.Join(ru.GetReasons(), ","),
				healthMatchText(ru.GetHealth()), dur(ru.GetHoldDown()), dur(ru.GetAutoReleaseAfter()), dry)
		}
		t.flush()
	}
	fmt.Fprintln(w, "Maintenance windows:")
	if len(p.GetMaintenanceWindows()) == 0 {
		fmt.Fprintln(w, "  none")
		return
	}
	t := newTable(w, "  ", "NAME", "START", "END", "EVERY", "DEVICES", "ACTIVE")
	for _, mw := range p.GetMaintenanceWindows() {
		devs := "whole site"
		if n := len(mw.GetDeviceIds()); n > 0 {
			devs = plural(n, "device", "devices")
		}
		t.row(mw.GetName(), mw.GetStartTime().AsTime().UTC().Format(time.RFC3339), mw.GetEndTime().AsTime().UTC().Format(time.RFC3339),
			dur(mw.GetEvery()), devs, strconv.FormatBool(mw.GetActive()))
	}
	t.flush()
}

// guardLine says the guard's limits in one line.
func guardLine(g *ironlinkv1.PolicyGuard) string {
	if g == nil {
		return ""
	}
	return fmt.Sprintf("at most %s and %g%% of the site per %s", plural(int(g.GetMaxDevices()), "device", "devices"), g.GetMaxPercent(), dur(g.GetWindow())) + labelGuardLine(g)
}

func dur(d *durationpb.Duration) string {
	if d == nil {
		return ""
	}
	return d.AsDuration().String()
}

// newPolicyStates builds `policy states` (every site's policy state) or,
// with guard, `policy guard` (the blast-radius guard of each site).
func (a *app) newPolicyStates(guard bool) *cobra.Command {
	var f listFlags
	use, short := "states [SITE...]", "Each site's policy state: on, dry-run, guard tripped, pending actions"
	if guard {
		use, short = "guard [SITE...]", "Each site's blast-radius guard: tripped or armed, by which rule, window count against the limits"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + ` (PolicyService.ListSitePolicyStates).
The guard trips when one more automatic quarantine would exceed its limits
within the window (WINDOW is A/N: automatic quarantines in the window
against max_devices); while tripped, automatic quarantines wait as pending
actions (` + "`ironlink get pending`" + `).`,
		ValidArgsFunction: a.completeSites,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return a.runListing(cmd, &f, func(ctx context.Context) (*listing, error) {
				return a.fetchPolicyStates(ctx, args, guard)
			}, "No sites.")
		},
	}
	f.register(cmd)
	return cmd
}

func (a *app) fetchPolicyStates(ctx context.Context, sites []string, guard bool) (*listing, error) {
	c := a.cl
	all := &ironlinkv1.ListSitePolicyStatesResponse{}
	if len(sites) == 0 {
		sites = []string{""}
	}
	for _, s := range sites {
		cctx, cancel := c.call(ctx)
		r, err := c.policy.ListSitePolicyStates(cctx, &ironlinkv1.ListSitePolicyStatesRequest{Site: s})
		cancel()
		if err != nil {
			return nil, err
		}
		all.States = append(all.States, r.GetStates()...)
	}
	l := &listing{msg: all,
		header:     []string{"SITE", "AUTOMATIC", "GUARD", "PENDING", "WINDOW", "DEVICES"},
		wideHeader: []string{"SITE", "AUTOMATIC", "GUARD", "PENDING", "WINDOW", "DEVICES", "LIMITS", "TRIPPED-BY", "DETAIL", "CAUSE"},
	}
	if guard {
		l.header = []string{"SITE", "GUARD", "SINCE", "RULE", "WINDOW", "LIMITS", "HELD", "CAUSE"}
		l.wideHeader = []string{"SITE", "GUARD", "SINCE", "RULE", "WINDOW", "DEVICES", "LIMITS", "HELD", "DETAIL", "CAUSE"}
	}
	for _, st := range all.GetStates() {
		auto := "off"
		switch {
		case st.GetEnabled() && st.GetDryRun():
			auto = "dry-run"
		case st.GetEnabled():
			auto = "on"
		}
		g, since := "armed", ""
		rule, detail := st.GetGuardTrippedRule(), st.GetGuardTrippedDetail()
		if st.GetGuardTripped() {
			g, since = "TRIPPED", a.age(st.GetGuardTrippedTime())
		} else if ds := st.GetTrippedDomains(); len(ds) > 0 {
			// Per-label guards tripped: only their devices wait.
			names := make([]string, len(ds))
			for i, d := range ds {
				names[i] = d.GetLabel() + "=" + d.GetValue()
			}
			g = "armed; TRIPPED " + strings.Join(names, ",")
			since, rule, detail = a.age(ds[0].GetTrippedTime()), ds[0].GetRule(), ds[0].GetDetail()
		}
		window := fmt.Sprintf("%d/%d", st.GetWindowCount(), st.GetGuard().GetMaxDevices())
		pending := fmt.Sprintf("%d held, %d stale, %d awaiting", st.GetPendingHeldCount(), st.GetPendingStaleCount(), st.GetPendingAwaitingCount())
		devs := strconv.Itoa(int(st.GetSiteDeviceCount()))
		cause := st.GetCommonCause().GetSummary()
		it := item{key: st.GetSite(), name: st.GetSite(), msg: st, goneMarker: "(gone)",
			sig: signature(auto, g, rule, window, pending, devs, cause)}
		if guard {
			held := strconv.Itoa(int(st.GetPendingHeldCount()))
			it.cells = []string{st.GetSite(), g, since, rule, window, guardLine(st.GetGuard()), held, cause}
			it.wide = []string{st.GetSite(), g, since, rule, window, devs, guardLine(st.GetGuard()), held, detail, cause}
		} else {
			it.cells = []string{st.GetSite(), auto, g, pending, window, devs}
			it.wide = []string{st.GetSite(), auto, g, pending, window, devs, guardLine(st.GetGuard()), rule, detail, cause}
		}
		l.items = append(l.items, it)
	}
	return l, nil
}

// healthMatchText writes a rule's health filter in its policy file's keys
// (docs/reference/policy.md), e.g. "componentClasses=GPU errorCodes=79,48
// fatal=true"; "any" for an empty filter, "" when the rule has none.
func healthMatchText(h *ironlinkv1.PolicyHealthMatch) string {
	if h == nil {
		return ""
	}
	var parts []string
	add := func(key string, vs []string) {
		if len(vs) > 0 {
			parts = append(parts, key+"="+strings.Join(vs, ","))
		}
	}
	add("componentClasses", h.GetComponentClasses())
	add("checks", h.GetChecks())
	add("errorCodes", h.GetErrorCodes())
	var actions []string
	for _, a := range h.GetRecommendedActions() {
		actions = append(actions, strings.TrimPrefix(a.String(), "HEALTH_RECOMMENDED_ACTION_"))
	}
	add("recommendedActions", actions)
	if h.Fatal != nil {
		parts = append(parts, fmt.Sprintf("fatal=%t", h.GetFatal()))
	}
	if len(parts) == 0 {
		return "any"
	}
	return strings.Join(parts, " ")
}
