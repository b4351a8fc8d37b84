package policyreplay

import (
	"container/heap"
	"sort"
	"time"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
)

// Outcomes of a Remediation.
const (
	// OutcomeRunning: the ladder was still running (or waiting) at the
	// period's end.
	OutcomeRunning = "RUNNING"
	// OutcomeFixed: a step fixed the device (FixedStep says which).
	OutcomeFixed = "FIXED"
	// OutcomeHandedOff: the device was handed off for repair (Handoff
	// says why).
	OutcomeHandedOff = "HANDED_OFF"
	// OutcomeAbandoned: the quarantine was released by someone else (an
	// operator, as the history shows) while the ladder ran.
	OutcomeAbandoned = "ABANDONED"
)

// Step results of a ladder step.
const (
	// StepSucceeded: the device was good again and stayed good for the
	// settle time.
	StepSucceeded = "SUCCEEDED"
	// StepFailed: the step failed or timed out (the recorded FAILED and
	// TIMED_OUT alike).
	StepFailed = "FAILED"
	// StepRunning: the step was in progress at the period's end, or when
	// the ladder ended otherwise.
	StepRunning = "RUNNING"
)

// Step is one step of a ladder, replayed or recorded.
type Step struct {
	// Step is its position (1-based) and Kind its operation kind.
	Step int
	Kind string
	// Result is StepSucceeded, StepFailed or StepRunning.
	Result string
	// StartedAt and EndedAt (zero while running).
	StartedAt, EndedAt time.Time
}

// Remediation is what a rule's ladder did, or would have done, for one
// quarantine: its steps and how it ended, or a handoff without a ladder
// (a spent budget or a recommended action at the start).
type Remediation struct {
	// DeviceID, Site and Rule name the device and the quarantining rule;
	// TriggerID is the trigger whose quarantine it remediates (the key).
	DeviceID, Site, Rule string
	TriggerID            int64
	// StartedAt is when the ladder started (or the device was handed off
	// without one); EndedAt when it ended (zero while running).
	StartedAt, EndedAt time.Time
	// Steps are the steps started, in order.
	Steps []Step
	// Outcome is one of the Outcome constants; FixedStep the step
	// (1-based) that fixed the device; Released: the fix released the
	// quarantine (release: automatic); Handoff the handoff's reason
	// (LadderExhausted, BudgetSpent or RecommendedAction).
	Outcome   string
	FixedStep int
	Released  bool
	Handoff   string
	// Waiting is why the next step waited at the period's end (a
	// hub/remediation Wait reason; replayed only).
	Waiting string
}

// hold is a quarantine the replay made (a decision or an approval) that
// a ladder may remediate.
type hold struct {
	dev, site, rule string
	trigger         int64
	at              time.Time
}

// simDev is one hold's ladder as the replay goes.
type simDev struct {
	hold
	p         policy.SitePolicy
	l         *policy.Ladder
	rem       *Remediation
	done      bool
	pos       int
	stepOn    bool
	stepStart time.Time
	goodSince *time.Time
	handedOff bool
	handoffAt time.Time
}

// sim is the ladder replay: an event-driven run of hub/remediation's
// engine over the history, each "pass" at a time something may change (a
// quarantine, a status or condition change, a step's deadline or the end
// of its settle time, a handoff's close).
type sim struct {
	h           *history
	to          time.Time
	devs        []*simDev
	times       timeHeap
	inFlight    map[string]int
	domains     map[string]int // site, label key and value → steps in flight
	tripAt      map[string]time.Time
	ladders     map[string][]time.Time // device → ladders the replay started
	openHandoff map[string]bool
	out         []*Remediation
}

// ladders replays the ladders of holds under file over h until to.
func ladders(file *policy.File, h *history, holds []hold, tripAt map[string]time.Time, to time.Time) []Remediation {
	s := &sim{h: h, to: to, inFlight: map[string]int{}, domains: map[string]int{}, tripAt: tripAt, ladders: map[string][]time.Time{}, openHandoff: map[string]bool{}}
	sort.SliceStable(holds, func(i, j int) bool {
		if !holds[i].at.Equal(holds[j].at) {
			return holds[i].at.Before(holds[j].at)
		}
		return holds[i].dev < holds[j].dev
	})
	for _, hd := range holds {
		p := file.Effective(hd.site)
		d := &simDev{hold: hd, p: p}
		for _, r := range p.Rules {
			if r.Name == hd.rule && r.Ladder != nil && p.Enabled && !p.DryRun && !r.DryRun && !r.Ladder.DryRun {
				d.l = r.Ladder // a dry-run ladder only plans: nothing to replay
			}
		}
		if d.l == nil {
			continue
		}
		s.devs = append(s.devs, d)
		s.push(hd.at)
		for _, st := range h.statuses[hd.dev] {
			if st.at.After(hd.at) {
				s.push(st.at)
			}
		}
		for _, c := range h.conds[hd.dev] {
			if c.at.After(hd.at) {
				s.push(c.at)
			}
		}
		for _, c := range h.inputs.closes[hd.dev] {
			s.push(c)
		}
	}
	var last time.Time
	for s.times.Len() > 0 {
		now := heap.Pop(&s.times).(time.Time)
		if now.After(to) {
			break
		}
		if now.Equal(last) {
			continue
		}
		last = now
		// One pass; again while something changed (a step that ended frees
		// a slot another ladder's waiting step may take at once).
		for range 20 {
			changed := false
			for _, d := range s.devs {
				if s.step(d, now) {
					changed = true
				}
			}
			if !changed {
				break
			}
		}
	}
	res := make([]Remediation, len(s.out))
	for i, r := range s.out {
		res[i] = *r
	}
	return res
}

func (s *sim) push(t time.Time) {
	if !t.After(s.to) {
		heap.Push(&s.times, t)
	}
}

// step advances d's ladder at now, as hub/remediation's engine does in a
// pass (operations taken to succeed at once: a step's fate is the
// device's recorded status after it started); it reports a change.
func (s *sim) step(d *simDev, now time.Time) bool {
	if d.done || now.Before(d.at) {
		return false
	}
	if t, ok := s.freed(d.dev, d.at, now); ok {
		// Released by someone else (the history shows it no longer held).
		if d.rem != nil && d.rem.Outcome == OutcomeRunning {
			s.endStep(d, StepRunning, t)
			d.rem.Outcome, d.rem.EndedAt = OutcomeAbandoned, t
		}
		if d.handedOff {
			s.openHandoff[d.dev] = false // closed: the device comes back HELD
		}
		d.done = true
		return true
	}
	if d.handedOff {
		for _, c := range s.h.inputs.closes[d.dev] {
			if c.After(d.handoffAt) && !c.After(now) {
				d.done, s.openHandoff[d.dev] = true, false
				return true
			}
		}
		return false
	}
	st := s.statusAt(d.dev, now)
	rec := s.recommended(d.dev, now)
	changed := false
	if d.rem == nil {
		if !remediation.Faulty(st) || s.openHandoff[d.dev] {
			return false
		}
		d.rem = &Remediation{DeviceID: d.dev, Site: d.site, Rule: d.rule, TriggerID: d.trigger, StartedAt: now, Outcome: OutcomeRunning}
		s.out = append(s.out, d.rem)
		if _, ok := remediation.HandoffAction(d.l, rec); ok {
			s.handoff(d, store.HandoffRecommendedAction, now)
			return true
		}
		if s.used(d.dev, now.Add(-d.l.Budget.Window)) >= d.l.Budget.Ladders {
			s.handoff(d, store.HandoffBudgetSpent, now)
			return true
		}
		s.ladders[d.dev] = append(s.ladders[d.dev], now)
		changed = true
	}
	if _, ok := remediation.HandoffAction(d.l, rec); ok {
		s.handoff(d, store.HandoffRecommendedAction, now)
		return true
	}
	return s.advance(d, st, now) || changed
}

// advance starts, judges and ends d's steps at now (st the device's
// status then); it reports a change.
func (s *sim) advance(d *simDev, st status.Status, now time.Time) bool {
	changed := false
	for {
		if !d.stepOn {
			if d.pos >= len(d.l.Steps) {
				s.handoff(d, store.HandoffLadderExhausted, now)
				return true
			}
			rd := store.RemediationDevice{DeviceID: d.dev, Site: d.site, CustomerAllocated: s.customer(d.dev, now), Labels: s.h.labels[d.dev]}
			tripped, ok := s.tripAt[d.site]
			safety := remediation.Safety{Excluded: s.h.holds[d.dev].excl, Tripped: ok && !tripped.After(now), InFlight: s.inFlight[d.site],
				DomainInFlight: map[string]int{}, CustomerAllowed: d.l.ActOnCustomerInstances}
			for k, v := range rd.Labels {
				safety.DomainInFlight[k] = s.domains[domainKey(d.site, k, v)]
			}
			if reason, _ := remediation.Blocked(d.p, rd, safety, now); reason != "" {
				if d.rem.Waiting != reason {
					d.rem.Waiting = reason
				}
				return changed
			}
			step := d.l.Steps[d.pos]
			d.rem.Waiting = ""
			d.stepOn, d.stepStart, d.goodSince = true, now, nil
			s.inFlight[d.site]++
			s.countDomains(d, 1)
			d.rem.Steps = append(d.rem.Steps, Step{Step: d.pos + 1, Kind: step.Kind, Result: StepRunning, StartedAt: now})
			s.push(now.Add(step.Timeout + time.Nanosecond))
			changed = true
		}
		step := d.l.Steps[d.pos]
		if step.Continue { // its operation taken to succeed: the next step, no success test
			s.endStep(d, StepSucceeded, now)
			d.pos++
			changed = true
			continue
		}
		if !remediation.Good(st) {
			if now.Sub(d.stepStart) > step.Timeout {
				s.endStep(d, StepFailed, now)
				d.pos++
				changed = true
				continue
			}
			if d.goodSince != nil {
				d.goodSince = nil
				changed = true
			}
			return changed
		}
		if d.goodSince == nil {
			g := now
			d.goodSince = &g
			s.push(now.Add(d.l.Settle))
			changed = true
		}
		if now.Sub(*d.goodSince) < d.l.Settle {
			return changed
		}
		fixed := d.pos + 1
		s.endStep(d, StepSucceeded, now)
		d.rem.Outcome, d.rem.FixedStep, d.rem.EndedAt = OutcomeFixed, fixed, now
		d.rem.Released = d.l.Release == policy.ReleaseAutomatic
		d.done = true // one ladder per quarantine; a release is the replay's own
		return true
	}
}

// endStep ends d's step in progress (if any) with result at.
func (s *sim) endStep(d *simDev, result string, at time.Time) {
	if !d.stepOn {
		return
	}
	d.stepOn = false
	s.inFlight[d.site]--
	s.countDomains(d, -1)
	last := &d.rem.Steps[len(d.rem.Steps)-1]
	last.Result = result
	if result != StepRunning {
		last.EndedAt = at
	}
}

// domainKey keys sim.domains: a site's label value.
func domainKey(site, label, value string) string { return site + "\x00" + label + "\x00" + value }

// countDomains adds n to the in-flight counts of every label value d's
// device carries (only the policy's remediation.perLabel keys are read).
func (s *sim) countDomains(d *simDev, n int) {
	for k, v := range s.h.labels[d.dev] {
		s.domains[domainKey(d.site, k, v)] += n
	}
}

// handoff hands d off for repair at now for reason.
func (s *sim) handoff(d *simDev, reason string, now time.Time) {
	s.endStep(d, StepRunning, now)
	d.rem.Outcome, d.rem.Handoff, d.rem.EndedAt, d.rem.Waiting = OutcomeHandedOff, reason, now, ""
	d.handedOff, d.handoffAt = true, now
	s.openHandoff[d.dev] = true
}

// used counts d's ladders started after since: recorded before the
// period, and the replay's own.
func (s *sim) used(dev string, since time.Time) int {
	n := 0
	for _, ts := range [][]time.Time{s.h.inputs.priorLadders[dev], s.ladders[dev]} {
		for _, t := range ts {
			if t.After(since) {
				n++
			}
		}
	}
	return n
}

// statusAt is dev's recorded status at t.
func (s *sim) statusAt(dev string, t time.Time) status.Status {
	var st status.Status
	for _, r := range s.h.statuses[dev] {
		if r.at.After(t) {
			break
		}
		st = r.st
	}
	return st
}

// freed returns when dev's history first shows it out of quarantine in
// (from, to]: a status neither impaired, UNREACHABLE nor QUARANTINED.
func (s *sim) freed(dev string, from, to time.Time) (time.Time, bool) {
	for _, r := range s.h.statuses[dev] {
		if r.at.After(from) && !r.at.After(to) && !impaired(r.st) && r.st != status.Unreachable && r.st != status.Quarantined {
			return r.at, true
		}
	}
	return time.Time{}, false
}

// latestConds is dev's newest condition row of each type at t.
func (s *sim) latestConds(dev string, t time.Time) map[string]condRow {
	out := map[string]condRow{}
	for _, r := range s.h.conds[dev] {
		if !r.at.After(t) {
			out[r.typ] = r
		}
	}
	return out
}

// customer reports whether dev had a customer instance at t.
func (s *sim) customer(dev string, t time.Time) bool {
	r, ok := s.latestConds(dev, t)["CustomerAllocated"]
	return ok && r.status == "True"
}

// recommended are the recommended actions of dev's fatal health faults at
// t (as the store's RemediationDevices reads them).
func (s *sim) recommended(dev string, t time.Time) []int32 {
	var out []int32
	for _, r := range s.latestConds(dev, t) {
		if r.health != nil && r.status == "False" && r.health.Fatal && r.health.RecommendedAction != 0 {
			out = append(out, r.health.RecommendedAction)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// timeHeap is a min-heap of times.
type timeHeap []time.Time

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *timeHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
