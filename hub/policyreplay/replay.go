// Package policyreplay replays a quarantine policy (a candidate file or
// the live one) over the stored status and condition history
// (status_history, condition_history) and reports what it would have
// done: each decision per triggering status change, the quarantines,
// pending approvals and guard trips, and what its remediation ladders
// would have done (steps, fixes, releases, handoffs; ladder.go), per site
// and per day. Operators' approvals, rejections and handoff closes are
// inputs taken from the record (inputs.go). It writes
// nothing: everything is read in one READ ONLY, REPEATABLE READ
// transaction, and the decisions are hub/policy's pure Decide, fed the
// evidence hub/policyrun feeds it (docs/reference/policy.md "Replay").
package policyreplay

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/status"
)

// MaxSpan is the longest period a replay covers.
const MaxSpan = 92 * 24 * time.Hour

// Decision is one quarantine decision, replayed or recorded.
type Decision struct {
	// DeviceID and Site name the device; TriggerID is the status_history
	// row of the triggering change (the decision's key).
	DeviceID, Site string
	TriggerID      int64
	// At is when it was (or would have been) decided.
	At time.Time
	// Action, Reason, Rule and Detail as hub/policy.Decision's.
	Action, Reason, Rule, Detail string
	// DryRun and Trips as hub/policy.Decision's.
	DryRun, Trips bool
}

// Day counts one site's replayed decisions of one UTC day.
type Day struct {
	// Site and Date (YYYY-MM-DD, UTC).
	Site, Date string
	// Quarantines, Pending (approvals an operator would be asked for),
	// Skips and GuardTrips count the decisions.
	Quarantines, Pending, Skips, GuardTrips int
	// LadderSteps counts the ladder steps started; Fixes the ladders a
	// step fixed, Releases those of them that released the device and the
	// releases by a rule's autoReleaseAfter;
	// Handoffs the devices handed off for repair.
	LadderSteps, Fixes, Releases, Handoffs int
	// Approvals and Rejections count the recorded operator resolutions the
	// replay took as inputs.
	Approvals, Rejections int
}

// Report is a replay's outcome.
type Report struct {
	// Decisions in decision order.
	Decisions []Decision
	// Remediations are the ladders (and handoffs without one), by start.
	Remediations []Remediation
	// Approvals are the recorded operator resolutions of the replay's
	// pending approvals, by time.
	Approvals []Approval
	// AutoReleases are the replay's own releases by a rule's
	// autoReleaseAfter (release.go), by time.
	AutoReleases []AutoRelease
	// Days per site and day, sorted.
	Days []Day
}

// Replay replays file over the triggers of [from, to] in pool's history,
// in one read-only transaction.
func Replay(ctx context.Context, pool *pgxpool.Pool, file *policy.File, from, to time.Time) (*Report, error) {
	if !to.After(from) || to.Sub(from) > MaxSpan {
		return nil, fmt.Errorf("replay period %s to %s: want from before to, at most %s", from.Format(time.RFC3339), to.Format(time.RFC3339), MaxSpan)
	}
	var h *history
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var err error
		h, err = readHistory(ctx, tx, from, to)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("replay: read history: %w", err)
	}
	return run(file, h, to), nil
}

// siteRun is a site's state as the replay goes.
type siteRun struct {
	recent  []policy.RecentAction
	tripped bool
	// domains are the per-label guards the replay tripped: label key →
	// value → true (never re-armed: a re-arm needs an operator).
	domains map[string]map[string]bool
}

// run decides every trigger of h in order of decision time (at equal
// times, as one evaluator pass: by site, then device id), each site's
// guard seeing the replay's own earlier quarantines and trips.
func run(file *policy.File, h *history, to time.Time) *Report {
	type due struct {
		t   trigger
		at  time.Time
		dec policy.Decision
	}
	var all []due
	rep := &Report{}
	for _, t := range h.triggers {
		p := file.Effective(t.site)
		at, dec := firstDecision(p, t, h)
		all = append(all, due{t, at, dec})
	}
	sort.SliceStable(all, func(i, j int) bool {
		if !all[i].at.Equal(all[j].at) {
			return all[i].at.Before(all[j].at)
		}
		// One pass decides its candidates by site, then device id
		// (hub/store.PolicyCandidates).
		if all[i].t.site != all[j].t.site {
			return all[i].t.site < all[j].t.site
		}
		return all[i].t.DeviceID < all[j].t.DeviceID
	})
	sites := map[string]*siteRun{}
	quarantined := map[string]time.Time{} // device → when the replay quarantined it
	approved := map[string][]time.Time{}  // device → when an operator approved its quarantine
	released := map[string][]time.Time{}  // device → when the replay's autoReleaseAfter released it
	// releasedBy reports whether the replay released dev by itself after
	// q and by at.
	releasedBy := func(dev string, q, at time.Time) bool {
		for _, r := range released[dev] {
			if r.After(q) && !r.After(at) {
				return true
			}
		}
		return false
	}
	hold1 := func(hd hold) hold {
		if r, ok := autoRelease(file.Effective(hd.site), hd, h, to); ok {
			released[hd.dev] = append(released[hd.dev], r.At)
			rep.AutoReleases = append(rep.AutoReleases, r)
		}
		return hd
	}
	var holds []hold
	tripAt := map[string]time.Time{}
	for _, d := range all {
		s := sites[d.t.site]
		if s == nil {
			s = &siteRun{}
			sites[d.t.site] = s
		}
		t := d.t
		q, ok := quarantined[t.DeviceID]
		t.AlreadyQuarantined = ok && q.After(t.lastFree) && !releasedBy(t.DeviceID, q, d.at)
		for _, a := range approved[t.DeviceID] {
			t.AlreadyQuarantined = t.AlreadyQuarantined || (a.After(t.lastFree) && !a.After(d.at) && !releasedBy(t.DeviceID, a, d.at))
		}
		dec := policy.Decide(input(file.Effective(t.site), t.Trigger, s, h, d.at))
		if dec.Action == policy.ActionWait {
			continue
		}
		if dec.Action == policy.ActionQuarantine {
			s.recent = append(s.recent, policy.RecentAction{At: d.at, DryRun: dec.DryRun, Labels: h.labels[t.DeviceID]})
			if !dec.DryRun {
				quarantined[t.DeviceID] = d.at
				holds = append(holds, hold1(hold{dev: t.DeviceID, site: t.site, rule: dec.Rule, trigger: t.HistoryID, at: d.at}))
			}
		}
		// An operator's recorded answer to the same pending approval is an
		// input: approved, the rule quarantines the device then.
		if a, ok := h.inputs.approvals[triggerKey{t.DeviceID, t.HistoryID}]; ok && dec.Action == policy.ActionPending && !dec.DryRun {
			rep.Approvals = append(rep.Approvals, a)
			if a.Approved {
				approved[t.DeviceID] = append(approved[t.DeviceID], a.At)
				holds = append(holds, hold1(hold{dev: t.DeviceID, site: t.site, rule: dec.Rule, trigger: t.HistoryID, at: a.At}))
			}
		}
		if td := dec.TripsDomain; td != nil {
			s.tripDomain(td.Label, td.Value)
		}
		if dec.Trips {
			s.tripped = true
			if _, ok := tripAt[t.site]; !ok {
				tripAt[t.site] = d.at
			}
		}
		rep.Decisions = append(rep.Decisions, Decision{DeviceID: t.DeviceID, Site: t.site, TriggerID: t.HistoryID, At: d.at,
			Action: string(dec.Action), Reason: dec.Reason, Rule: dec.Rule, Detail: dec.Detail, DryRun: dec.DryRun, Trips: dec.Trips})
	}
	sort.SliceStable(rep.Approvals, func(i, j int) bool { return rep.Approvals[i].At.Before(rep.Approvals[j].At) })
	sort.SliceStable(rep.AutoReleases, func(i, j int) bool { return rep.AutoReleases[i].At.Before(rep.AutoReleases[j].At) })
	rep.Remediations = ladders(file, h, holds, tripAt, to)
	rep.Days = days(rep)
	return rep
}

// tripDomain records that the per-label guard of label tripped for value
// (it holds to the end of the replayed period).
func (s *siteRun) tripDomain(label, value string) {
	if s.domains == nil {
		s.domains = map[string]map[string]bool{}
	}
	if s.domains[label] == nil {
		s.domains[label] = map[string]bool{}
	}
	s.domains[label][value] = true
}

// firstDecision finds when the evaluator would first decide t: at the
// change, or once a rule's hold-down has passed since the cause began.
func firstDecision(p policy.SitePolicy, t trigger, h *history) (time.Time, policy.Decision) {
	at := t.ChangedAt
	times := []time.Time{at}
	for _, r := range p.Rules {
		if w := t.Since().Add(r.HoldDown); w.After(at) {
			times = append(times, w)
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	for _, when := range times {
		d := policy.Decide(input(p, t.Trigger, &siteRun{}, h, when))
		if d.Action != policy.ActionWait {
			return when, d
		}
	}
	return times[len(times)-1], policy.Decision{Action: policy.ActionWait}
}

// input is Decide's input for t at now: fresh evidence (the replay acts
// on what the history says was observed), the site's devices (per label
// value too), the replay's recent quarantines (with the devices' labels)
// and trips (the site's and per-label), the device's labels and holds.
func input(p policy.SitePolicy, t policy.Trigger, s *siteRun, h *history, now time.Time) policy.Input {
	ev := policy.Evidence{Reachable: true, LinkUp: true, Polled: &policy.SiteMark{Status: "True", At: now, Received: now}}
	excl, planned := h.holds[t.DeviceID].excl, h.holds[t.DeviceID].planned
	t.Labels = h.labels[t.DeviceID]
	site := h.siteOf[t.DeviceID]
	return policy.Input{Policy: p, Trigger: t, Site: policy.SiteState{Evidence: ev, Devices: h.devices[site],
		RecentActions: s.recent, Tripped: s.tripped, DomainDevices: h.domainDevices[site], TrippedDomains: s.domains},
		Excluded: excl, Planned: planned, Now: now}
}

// days counts decisions, ladder steps, fixes, releases, handoffs and
// approvals per site and UTC day.
func days(rep *Report) []Day {
	idx := map[[2]string]*Day{}
	var out []*Day
	day := func(site string, at time.Time) *Day {
		k := [2]string{site, at.UTC().Format(time.DateOnly)}
		d := idx[k]
		if d == nil {
			d = &Day{Site: k[0], Date: k[1]}
			idx[k] = d
			out = append(out, d)
		}
		return d
	}
	for _, r := range rep.Remediations {
		for _, st := range r.Steps {
			day(r.Site, st.StartedAt).LadderSteps++
		}
		switch r.Outcome {
		case OutcomeFixed:
			d := day(r.Site, r.EndedAt)
			d.Fixes++
			if r.Released {
				d.Releases++
			}
		case OutcomeHandedOff:
			day(r.Site, r.EndedAt).Handoffs++
		}
	}
	for _, r := range rep.AutoReleases {
		day(r.Site, r.At).Releases++
	}
	for _, a := range rep.Approvals {
		if a.Approved {
			day(a.Site, a.At).Approvals++
		} else {
			day(a.Site, a.At).Rejections++
		}
	}
	for _, d := range rep.Decisions {
		dd := day(d.Site, d.At)
		switch policy.Action(d.Action) {
		case policy.ActionQuarantine:
			dd.Quarantines++
		case policy.ActionPending:
			dd.Pending++
		default:
			dd.Skips++
		}
		if d.Trips {
			dd.GuardTrips++
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Site != out[j].Site {
			return out[i].Site < out[j].Site
		}
		return out[i].Date < out[j].Date
	})
	res := make([]Day, len(out))
	for i, d := range out {
		res[i] = *d
	}
	return res
}

// impaired is a status a policy trigger starts a run of.
func impaired(s status.Status) bool { return s == status.Faulted || s == status.Maintenance }
