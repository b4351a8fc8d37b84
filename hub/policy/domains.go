package policy

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ironlink/ironlink/internal/labels"
)

// DomainGuard is the blast-radius guard of one label (a failure domain:
// rack, switch, power feed; docs/reference/labels.md): within the site
// guard's window, policy quarantines at most MaxDevices devices carrying
// the same value of Label, and (MaxPercent > 0) at most MaxPercent percent
// of the devices not removed that carry it. A device without the label is
// not limited by it.
type DomainGuard struct {
	// Label is the label key, e.g. "rack".
	Label string `json:"label"`
	// MaxDevices is N per value (≥ 1).
	MaxDevices int `json:"max_devices"`
	// MaxPercent is P per value, in percent (0: no percent bound; else
	// 0 < P ≤ 100).
	MaxPercent float64 `json:"max_percent"`
}

// domainYAML is one entry of a guard's `perLabel:` list.
type domainYAML struct {
	Label      string  `yaml:"label"`
	MaxDevices int     `yaml:"maxDevices"`
	MaxPercent float64 `yaml:"maxPercent"`
}

// convertDomains checks and converts a guard's perLabel list (at where):
// a valid label key given once, maxDevices ≥ 1, maxPercent in [0, 100].
func convertDomains(where string, ys []domainYAML) ([]DomainGuard, []error) {
	var errs []error
	out := make([]DomainGuard, 0, len(ys))
	seen := map[string]bool{}
	for i, y := range ys {
		w := fmt.Sprintf("%s.guard.perLabel[%d]", where, i)
		if !labels.ValidKey(y.Label) {
			errs = append(errs, fmt.Errorf("%s.label %q: not a label key (1 to %d of [A-Za-z0-9._-])", w, y.Label, labels.MaxBytes))
		}
		if seen[y.Label] {
			errs = append(errs, fmt.Errorf("%s.label %q: given twice", w, y.Label))
		}
		seen[y.Label] = true
		if y.MaxDevices < 1 {
			errs = append(errs, fmt.Errorf("%s.maxDevices %d: must be at least 1", w, y.MaxDevices))
		}
		if y.MaxPercent < 0 || y.MaxPercent > 100 {
			errs = append(errs, fmt.Errorf("%s.maxPercent %g: must be in [0, 100] (0: no percent bound)", w, y.MaxPercent))
		}
		out = append(out, DomainGuard(y))
	}
	return out, errs
}

// convertRuleLabels checks a rule's labels selector (at where.labels).
func convertRuleLabels(where string, set map[string]string) (map[string]string, []error) {
	if len(set) == 0 {
		return nil, nil
	}
	if err := labels.Check(where+".labels", set); err != nil {
		return nil, []error{err}
	}
	return set, nil
}

// Domain is one value of one label: a failure domain (rack=r12).
type Domain struct {
	Label, Value string
}

// String is "label=value".
func (d Domain) String() string { return d.Label + "=" + d.Value }

// domainHeld applies the per-label guards of in's policy to its trigger
// (d is the decision so far, the site guard passed): the first guard whose
// label the device carries and whose value is tripped (live decisions
// only), or would get one quarantine too many in the window, holds the
// trigger, PENDING HeldByGuard; the latter trips that value's guard
// (TripsDomain) unless dry-run. The site's guard is not tripped: the
// devices of other values go on. held is false when every guard allows it.
func domainHeld(in Input, d Decision) (Decision, bool) {
	for _, g := range in.Policy.Domains {
		v, ok := in.Trigger.Labels[g.Label]
		if !ok {
			continue
		}
		if in.Site.TrippedDomains[g.Label][v] && !d.DryRun {
			d.Action, d.Reason = ActionPending, ReasonHeldByGuard
			d.Detail = fmt.Sprintf("the guard of %s=%s is tripped (%d quarantined by policy in %s)",
				g.Label, v, domainCount(in, g.Label, v, false), in.Policy.Guard.Window)
			return d, true
		}
		a := domainCount(in, g.Label, v, d.DryRun)
		n := in.Site.DomainDevices[g.Label][v]
		if fitsDomain(g, a, n) {
			continue
		}
		d.Action, d.Reason = ActionPending, ReasonHeldByGuard
		if !d.DryRun {
			d.TripsDomain = &Domain{Label: g.Label, Value: v}
		}
		d.Detail = fmt.Sprintf("quarantine %d in %s of %s=%s would exceed its guard (%s)",
			a+1, in.Policy.Guard.Window, g.Label, v, domainLimits(g, n))
		return d, true
	}
	return d, false
}

// domainCount counts the site's recent actions in the window of in on
// devices carrying label = value (dry-run ones too for a dry-run).
func domainCount(in Input, label, value string, dryRun bool) int {
	a := 0
	for _, act := range in.Site.RecentActions {
		if act.Labels[label] == value && inWindow(act, in, dryRun) {
			a++
		}
	}
	return a
}

// domainLimits says g's limits for a value that n devices carry: "2
// devices, 25% of 16", or without a percentage "1 device of 8" (not "0%").
func domainLimits(g DomainGuard, n int) string {
	dev := fmt.Sprintf("%d devices", g.MaxDevices)
	if g.MaxDevices == 1 {
		dev = "1 device"
	}
	if g.MaxPercent == 0 {
		return fmt.Sprintf("%s of %d", dev, n)
	}
	return fmt.Sprintf("%s, %g%% of %d", dev, g.MaxPercent, n)
}

// fitsDomain reports whether one more quarantine fits g when a were made
// in the window among the n devices carrying the value.
func fitsDomain(g DomainGuard, a, n int) bool {
	return a+1 <= g.MaxDevices && (g.MaxPercent == 0 || float64(a+1)*100 <= g.MaxPercent*float64(n))
}

// RearmDomain reports whether the tripped per-label guard of dom re-arms
// under p: p has no guard for its label any more, or no action it held is
// pending (openHeld: an operator approved or rejected each, or it expired)
// and one more quarantine of a device carrying it would fit now. site
// gives the recent actions (with labels) and the devices per value.
func RearmDomain(p SitePolicy, dom Domain, site SiteState, openHeld int, now time.Time) bool {
	i := slices.IndexFunc(p.Domains, func(g DomainGuard) bool { return g.Label == dom.Label })
	if i < 0 {
		return true
	}
	if openHeld > 0 {
		return false
	}
	in := Input{Policy: p, Site: site, Now: now}
	return fitsDomain(p.Domains[i], domainCount(in, dom.Label, dom.Value, false), site.DomainDevices[dom.Label][dom.Value])
}

// inWindow reports whether act counts in the guard window of in (as
// windowCount counts).
func inWindow(act RecentAction, in Input, dryRun bool) bool {
	if act.DryRun && !dryRun {
		return false
	}
	return act.At.After(in.Now.Add(-in.Policy.Guard.Window)) && !act.At.After(in.Now)
}

// Share is one label value that faults share.
type Share struct {
	Label, Value string
	// Count is how many of the faults carry it.
	Count int
}

// Cause is what a set of faults has in common (CommonCause).
type Cause struct {
	// Faults is the number of faults looked at.
	Faults int
	// Shares are the label values at least half of them (and at least 2)
	// carry, most shared first (then by label).
	Shares []Share
	// Together is how many faults carry every value of Shares.
	Together int
	// Summary is the one-line text, e.g. "14 of 16 new faults are in rack
	// r12, switch s3"; "" when the faults share nothing.
	Summary string
}

// CommonCause says what the faults (each a device's labels) have in
// common: every label value carried by at least half of them and by at
// least two. Pure.
func CommonCause(faults []map[string]string) Cause {
	c := Cause{Faults: len(faults)}
	counts := map[[2]string]int{}
	for _, f := range faults {
		for k, v := range f {
			counts[[2]string{k, v}]++
		}
	}
	for kv, n := range counts {
		if n >= 2 && 2*n >= len(faults) {
			c.Shares = append(c.Shares, Share{Label: kv[0], Value: kv[1], Count: n})
		}
	}
	slices.SortFunc(c.Shares, func(a, b Share) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Label, b.Label), cmp.Compare(a.Value, b.Value))
	})
	if len(c.Shares) == 0 {
		return c
	}
	all := map[string]string{}
	for _, s := range c.Shares {
		if _, dup := all[s.Label]; !dup { // two values of one key cannot both be "every"
			all[s.Label] = s.Value
		}
	}
	for _, f := range faults {
		if labels.Matches(f, all) {
			c.Together++
		}
	}
	parts := make([]string, 0, len(all))
	for _, k := range slices.Sorted(maps.Keys(all)) {
		parts = append(parts, k+" "+all[k])
	}
	if c.Together >= 2 {
		c.Summary = fmt.Sprintf("%d of %d new faults are in %s", c.Together, c.Faults, strings.Join(parts, ", "))
	} else {
		top := c.Shares[0]
		c.Summary = fmt.Sprintf("%d of %d new faults are in %s %s", top.Count, c.Faults, top.Label, top.Value)
	}
	return c
}
