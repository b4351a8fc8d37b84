package policyrun

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/logkey"
)

// domainView is what one pass knows for the per-label guards
// (policy.DomainGuard): each site's recent policy quarantines with their
// devices' labels, the devices per label value, the candidates' labels
// and the tripped per-label guards. nil when no policy in force has a
// per-label guard.
type domainView struct {
	recent map[string][]policy.RecentAction
	counts map[string]map[string]map[string]int
	labels map[string]map[string]string
	// trips are the tripped per-label guards as read; tripped indexes
	// them (and the ones this pass trips) by site, label and value.
	trips   []store.DomainTrip
	tripped map[string]map[string]map[string]bool
}

// domainKeys returns the label keys of every per-label guard and rule
// label selector in force (the default's and each site's), sorted.
func domainKeys(file *policy.File) []string {
	keys := map[string]bool{}
	add := func(p policy.SitePolicy) {
		for _, g := range p.Domains {
			keys[g.Label] = true
		}
		for _, r := range p.Rules {
			for k := range r.Labels {
				keys[k] = true
			}
		}
	}
	add(file.Default)
	for _, name := range file.SiteNames() {
		add(file.Effective(name))
	}
	return slices.Sorted(maps.Keys(keys))
}

// loadDomains reads the pass's domain view (quarantines after since);
// nil without per-label guards.
func (e *Evaluator) loadDomains(ctx context.Context, file *policy.File, cands []store.PolicyCandidate, since time.Time) (*domainView, error) {
	keys := domainKeys(file)
	if len(keys) == 0 {
		return nil, nil
	}
	v := &domainView{recent: map[string][]policy.RecentAction{}}
	acts, err := e.st.RecentPolicyQuarantines(ctx, since)
	if err != nil {
		return nil, err
	}
	for _, a := range acts {
		v.recent[a.Site] = append(v.recent[a.Site], policy.RecentAction{At: a.At, DryRun: a.DryRun, Labels: a.Labels})
	}
	if v.counts, err = e.st.LabelCounts(ctx, keys); err != nil {
		return nil, err
	}
	ids := make([]string, len(cands))
	for i, c := range cands {
		ids[i] = c.DeviceID
	}
	if v.labels, err = e.st.DeviceLabels(ctx, ids); err != nil {
		return nil, err
	}
	if v.trips, err = e.st.DomainTrips(ctx, ""); err != nil {
		return nil, err
	}
	v.tripped = map[string]map[string]map[string]bool{}
	for _, t := range v.trips {
		v.trip(t.Site, policy.Domain{Label: t.Label, Value: t.Value})
	}
	return v, nil
}

// trip marks dom of site tripped in the view.
func (v *domainView) trip(site string, dom policy.Domain) {
	if v.tripped[site] == nil {
		v.tripped[site] = map[string]map[string]bool{}
	}
	if v.tripped[site][dom.Label] == nil {
		v.tripped[site][dom.Label] = map[string]bool{}
	}
	v.tripped[site][dom.Label][dom.Value] = true
}

// apply gives in the trigger's labels, the site's recent quarantines with
// labels and its devices per label value.
func (v *domainView) apply(in *policy.Input, c store.PolicyCandidate) {
	if v == nil {
		return
	}
	in.Trigger.Labels = v.labels[c.DeviceID]
	in.Site.RecentActions = v.recent[c.Site]
	in.Site.DomainDevices = v.counts[c.Site]
	in.Site.TrippedDomains = v.tripped[c.Site]
}

// record counts a recorded decision: a quarantine joins its site's recent
// actions, a per-label trip its tripped guards, so the next candidate of
// the pass sees them.
func (v *domainView) record(c store.PolicyCandidate, out store.PolicyDecision, now time.Time) {
	if v == nil {
		return
	}
	if out.TripsLabel != "" {
		v.trip(c.Site, policy.Domain{Label: out.TripsLabel, Value: out.TripsValue})
	}
	if out.Action != string(policy.ActionQuarantine) {
		return
	}
	v.recent[c.Site] = append(v.recent[c.Site], policy.RecentAction{At: now, DryRun: out.DryRun, Labels: v.labels[c.DeviceID]})
}

// rearmDomains re-arms the tripped per-label guards (as read at the start
// of the pass) once an operator has dealt with what they held and one
// more quarantine fits (policy.RearmDomain), or their guard is gone from
// the policy in force; counted in stats.Rearmed. A trip without a view (no
// per-label guard in force any more) is read and re-armed here.
func (e *Evaluator) rearmDomains(ctx context.Context, file *policy.File, v *domainView, bySite map[string]*store.PolicySite, now time.Time, stats *Stats) error {
	trips := []store.DomainTrip(nil)
	if v != nil {
		trips = v.trips
	} else {
		var err error
		if trips, err = e.st.DomainTrips(ctx, ""); err != nil {
			return err
		}
	}
	for _, t := range trips {
		p := file.Effective(t.Site)
		st := policy.SiteState{}
		if s := bySite[t.Site]; s != nil {
			st = e.siteState(s)
		}
		if v != nil {
			st.RecentActions, st.DomainDevices = v.recent[t.Site], v.counts[t.Site]
		}
		dom := policy.Domain{Label: t.Label, Value: t.Value}
		if !policy.RearmDomain(p, dom, st, t.OpenHeld, now) {
			continue
		}
		ok, err := e.st.RearmDomain(ctx, t.Site, t.Label, t.Value)
		if err != nil {
			return err
		}
		if ok {
			stats.Rearmed++
			e.log.Info("policy guard re-armed", logkey.Site, t.Site, "domain", dom.String())
		}
	}
	return nil
}
