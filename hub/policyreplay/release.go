package policyreplay

import (
	"sort"
	"time"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/status"
)

// AutoRelease is a release the replay's policy makes by itself: a
// quarantine by a rule with autoReleaseAfter whose cause has been cleared
// that long (hub/policy.DecideRelease).
type AutoRelease struct {
	// DeviceID, Site and Rule name the device and the quarantining rule;
	// TriggerID is the trigger of the quarantine released.
	DeviceID, Site, Rule string
	TriggerID            int64
	// At is when the replay releases it; ClearedSince when its cause
	// cleared (the device's status left FAULTED and MAINTENANCE).
	At, ClearedSince time.Time
}

// autoRelease returns when policy p releases hold hd by itself before to,
// reading the device's recorded status history after the quarantine: the
// first time DecideRelease answers RELEASE (the rule's autoReleaseAfter
// since the status left FAULTED/MAINTENANCE, not back in one meanwhile,
// the device not excluded from automation then; a dry-run release does
// nothing). ok=false: never in the period, or the history shows the
// device released by someone else first.
func autoRelease(p policy.SitePolicy, hd hold, h *history, to time.Time) (AutoRelease, bool) {
	var rule *policy.Rule
	for i := range p.Rules {
		if p.Rules[i].Name == hd.rule {
			rule = &p.Rules[i]
		}
	}
	if rule == nil || rule.AutoReleaseAfter == 0 {
		return AutoRelease{}, false
	}
	excl := h.holds[hd.dev].excl
	var cur status.Status
	var cleared time.Time
	// try reports the first release time in [cleared+delay, until) (the
	// device's status cur meanwhile).
	try := func(until time.Time, last bool) (time.Time, bool) {
		if cleared.IsZero() {
			return time.Time{}, false
		}
		cands := []time.Time{cleared.Add(rule.AutoReleaseAfter)}
		if excl != nil && !excl.End.IsZero() && excl.End.After(cands[0]) {
			cands = append(cands, excl.End)
		}
		sort.Slice(cands, func(i, j int) bool { return cands[i].Before(cands[j]) })
		for _, at := range cands {
			if at.After(to) || (!last && !at.Before(until)) {
				break
			}
			d := policy.DecideRelease(p, policy.Quarantine{DeviceID: hd.dev, Rule: hd.rule, Status: cur, ClearedSince: cleared}, true, excl, at)
			if d.Action == policy.ActionRelease && !d.DryRun {
				return at, true
			}
		}
		return time.Time{}, false
	}
	for _, r := range h.statuses[hd.dev] {
		if !r.at.After(hd.at) {
			cur = r.st
			continue
		}
		if cleared.IsZero() && !impaired(cur) && cur != status.Unreachable && cur != "" {
			cleared = hd.at // healthy already when quarantined (an approval's quarantine)
		}
		if at, ok := try(r.at, false); ok {
			return AutoRelease{DeviceID: hd.dev, Site: hd.site, Rule: hd.rule, TriggerID: hd.trigger, At: at, ClearedSince: cleared}, true
		}
		if r.at.After(to) {
			return AutoRelease{}, false
		}
		if !impaired(r.st) && r.st != status.Unreachable && r.st != status.Quarantined {
			return AutoRelease{}, false // released by someone else first
		}
		cur = r.st
		switch {
		case impaired(r.st) || r.st == status.Unreachable:
			cleared = time.Time{}
		case cleared.IsZero():
			cleared = r.at
		}
	}
	if cleared.IsZero() && !impaired(cur) && cur != status.Unreachable && cur != "" {
		cleared = hd.at
	}
	if at, ok := try(to, true); ok {
		return AutoRelease{DeviceID: hd.dev, Site: hd.site, Rule: hd.rule, TriggerID: hd.trigger, At: at, ClearedSince: cleared}, true
	}
	return AutoRelease{}, false
}
