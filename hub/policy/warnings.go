package policy

import (
	"fmt"
	"time"
)

// Warnings returns what in f is valid but cannot work as written, each
// naming where it is, for the hub to log at load and on every reload
// (docs/reference/policy.md "Checks at load"):
//
//   - a rule used by an enabled site whose holdDown is shorter than staleAfter
//     (the hub's --stale-after): the hold-down ends before a silent site
//     turns UNREACHABLE, so the hold-down alone does not protect a site
//     that stopped reporting (the fresh-evidence rule does);
//   - a rule used by an enabled site whose health match says fatal: false:
//     only a fatal health condition makes a device FAULTED, so the rule
//     matches no status trigger;
//   - a maintenance window that never opens again (no recurrence, its end
//     not after now).
//
// These are warnings, not errors: a file that was valid must not stop a
// hub from starting or reloading because time passed.
func (f *File) Warnings(staleAfter time.Duration, now time.Time) []string {
	var out []string
	check := func(where string, rules []Rule) {
		for i, r := range rules {
			if staleAfter > 0 && r.HoldDown < staleAfter && r.Validation == nil {
				out = append(out, fmt.Sprintf("%s.rules[%d] (%s): holdDown %s is shorter than --stale-after %s: the rule may act before a silent site turns UNREACHABLE; only the fresh-evidence rule (link up, a fresh poll) keeps it from acting on what it can no longer see",
					where, i, r.Name, r.HoldDown, staleAfter))
			}
			if r.Health != nil && r.Health.Fatal != nil && !*r.Health.Fatal {
				out = append(out, fmt.Sprintf("%s.rules[%d] (%s): health.fatal is false: only a fatal health condition makes a device FAULTED, so the rule matches no status trigger",
					where, i, r.Name))
			}
		}
	}
	windows := func(where string, ws []Window) {
		for i, w := range ws {
			if w.NeverOpens(now) {
				out = append(out, fmt.Sprintf("%s.maintenanceWindows[%d] (%s): ended %s and does not recur: it never opens again",
					where, i, w.Name, w.End.Format(time.RFC3339)))
			}
		}
	}
	// The default's rules are checked when a site using them is enabled
	// (the default itself, or a site without rules of its own).
	defaultUsed := f.Default.Enabled
	for _, name := range f.SiteNames() {
		o := f.Sites[name]
		if o.HasRules {
			if f.Effective(name).Enabled {
				check("sites."+name, o.Rules)
			}
		} else if f.Effective(name).Enabled {
			defaultUsed = true
		}
	}
	if defaultUsed {
		check("default", f.Default.Rules)
	}
	windows("default", f.Default.MaintenanceWindows)
	for _, name := range f.SiteNames() {
		windows("sites."+name, f.Sites[name].MaintenanceWindows)
	}
	return out
}
