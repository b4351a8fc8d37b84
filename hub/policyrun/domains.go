package policyrun

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/store"
)

// domainView is what one pass knows for the per-label guards
// (policy.DomainGuard): each site's recent policy quarantines with their
// devices' labels, the devices per label value, and the candidates'
// labels. nil when no policy in force has a per-label guard.
type domainView struct {
	recent map[string][]policy.RecentAction
	counts map[string]map[string]map[string]int
	labels map[string]map[string]string
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
	return v, nil
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
}

// record counts a recorded decision: a quarantine joins its site's recent
// actions, so the next candidate of the pass sees it.
func (v *domainView) record(c store.PolicyCandidate, out store.PolicyDecision, now time.Time) {
	if v == nil || out.Action != string(policy.ActionQuarantine) {
		return
	}
	v.recent[c.Site] = append(v.recent[c.Site], policy.RecentAction{At: now, DryRun: out.DryRun, Labels: v.labels[c.DeviceID]})
}
