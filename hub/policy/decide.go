package policy

import (
	"fmt"
	"slices"
	"time"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/labels"
)

// Action is what the policy does about one trigger.
type Action string

// Actions. Every one but Wait is final for its trigger: it is recorded once
// per (device, triggering status change) and never decided again; a
// PENDING AwaitingFreshEvidence is recorded once too, and its pending
// action is resolved by the policy itself when the evidence is fresh.
const (
	// ActionQuarantine: quarantine the device now (a desired state with
	// source "policy").
	ActionQuarantine Action = "QUARANTINE"
	// ActionPending: do not act; list a pending action for an operator to
	// approve or reject (Reason says why: guard or stale trigger).
	ActionPending Action = "PENDING"
	// ActionSkip: do nothing (Reason says why).
	ActionSkip Action = "SKIP"
	// ActionRelease: release a device the policy quarantined.
	ActionRelease Action = "RELEASE"
	// ActionWait: nothing yet (hold-down or auto-release delay still
	// running); ask again later. Never recorded.
	ActionWait Action = "WAIT"
)

// Reasons of decisions (CamelCase, as condition reasons).
const (
	ReasonRuleMatched     = "RuleMatched"
	ReasonHeldByGuard     = "HeldByGuard"
	ReasonStaleTrigger    = "StaleTrigger"
	ReasonPolicyDisabled  = "PolicyDisabled"
	ReasonNoRuleMatched   = "NoRuleMatched"
	ReasonNotOffered      = "NotOfferedToCustomers"
	ReasonDeviceRemoved   = "DeviceRemoved"
	ReasonExcluded        = "ExcludedFromAutomation"
	ReasonMaintenanceWin  = "MaintenanceWindow"
	ReasonPlannedMaint    = "PlannedMaintenance"
	ReasonAlreadyImpaired = "AlreadyQuarantined"
	ReasonHoldDown        = "HoldDown"
	ReasonCauseCleared    = "CauseCleared"
	ReasonCauseNotCleared = "CauseNotCleared"
	ReasonNoAutoRelease   = "NoAutoRelease"
)

// Trigger is a device's status change into FAULTED or MAINTENANCE, as the
// evaluator reads it from the status history.
type Trigger struct {
	// DeviceID is the node UUID.
	DeviceID string
	// HistoryID is the status_history row of the change (the idempotency key).
	HistoryID int64
	// From is the status before the change, UNREACHABLE periods skipped
	// (the last status the device had while its site reported).
	From status.Status
	// To is FAULTED or MAINTENANCE.
	To status.Status
	// CauseType, CauseReason and CauseMessage are the condition behind To
	// (ProvisioningHealthy for FAULTED, MaintenanceClear for MAINTENANCE).
	CauseType, CauseReason, CauseMessage string
	// CauseHealth is the cause's health details when the cause is a health
	// condition (the fatal one that made the device FAULTED); nil otherwise.
	CauseHealth *condition.Health
	// CauseSince is the condition's last_transition_time (the satellite's
	// time the cause began); zero when unknown (then ChangedAt is used).
	CauseSince time.Time
	// ChangedAt is when the hub committed the status change (first seen).
	ChangedAt time.Time
	// UnreachableUntil is when the device last left UNREACHABLE before the
	// change (its site reconnected); zero when there was no such period.
	UnreachableUntil time.Time
	// Removed is true when the device is marked removed.
	Removed bool
	// AlreadyQuarantined is true when the device's desired state is
	// already QUARANTINED (by an operator or an earlier decision).
	AlreadyQuarantined bool
	// Labels are the device's labels (the per-label guards read them).
	Labels map[string]string
}

// Since returns when the cause began: CauseSince, or ChangedAt when unknown.
func (t Trigger) Since() time.Time {
	if t.CauseSince.IsZero() {
		return t.ChangedAt
	}
	return t.CauseSince
}

// Exclusion is an operator's per-device "exclude from automation" or
// planned maintenance, in force from Start (zero = always) until End (zero
// = until cleared).
type Exclusion struct {
	Reason, Author string
	Start, End     time.Time
}

// Covers reports whether t lies in [Start, End).
func (e Exclusion) Covers(t time.Time) bool {
	return (e.Start.IsZero() || !t.Before(e.Start)) && (e.End.IsZero() || t.Before(e.End))
}

// SiteState is what the decision needs to know about the site.
type SiteState struct {
	// Evidence is how fresh the hub's view of the site is: a decision
	// that would act waits (PENDING AwaitingFreshEvidence) unless
	// Evidence.Check passes.
	Evidence Evidence
	// Devices counts the site's devices not removed, now (the guard's
	// denominator).
	Devices int
	// RecentActions are the times of the site's policy quarantines (each
	// executed automatic QUARANTINE decision; DryRun marks the ones a
	// dry-run only logged), at least those within the guard window.
	RecentActions []RecentAction
	// Tripped is true while the site's guard is tripped: every further
	// automatic quarantine is pending until it re-arms.
	Tripped bool
	// DomainDevices counts the site's devices not removed per label key
	// and value (the per-label guards' denominators).
	DomainDevices map[string]map[string]int
	// TrippedDomains are the site's tripped per-label guards: label key →
	// value → true. A tripped one holds the quarantines of the devices
	// carrying that value only, until it re-arms (RearmDomain).
	TrippedDomains map[string]map[string]bool
}

// RecentAction is one automatic quarantine of the site.
type RecentAction struct {
	At     time.Time
	DryRun bool
	// Labels are the quarantined device's labels (per-label guards).
	Labels map[string]string
}

// Input is everything one quarantine decision depends on.
type Input struct {
	Policy  SitePolicy
	Trigger Trigger
	Site    SiteState
	// Excluded and Planned are the device's exclusion and planned
	// maintenance, nil when none.
	Excluded, Planned *Exclusion
	// Now is the decision time.
	Now time.Time
}

// Decision is the outcome of Decide or DecideRelease.
type Decision struct {
	Action Action
	// Reason is one of the Reason* constants; Detail is human text.
	Reason, Detail string
	// Rule is the rule that matched ("" when none did).
	Rule string
	// DryRun: the decision is only logged (site or rule in dry-run).
	DryRun bool
	// Trips is true when this decision trips the site's guard (the first
	// one the guard holds).
	Trips bool
	// TripsDomain, when set, is the per-label guard this decision trips
	// (the first one it holds); the site's guard stays armed.
	TripsDomain *Domain
	// WindowCount is the number of automatic quarantines in the window
	// before this decision; Devices the denominator used.
	WindowCount, Devices int
}

// Decide is the policy's quarantine decision for one trigger: a pure
// function of in. In order:
//
//  1. policy disabled → SKIP; device removed → SKIP; already quarantined → SKIP;
//  2. excluded from automation (in force now) → SKIP;
//  3. the first rule whose from/to/reasons match, none → SKIP
//     (a From that is not offered to customers → SKIP NotOfferedToCustomers);
//  4. MAINTENANCE that began inside a maintenance window of the device or
//     inside its planned maintenance → SKIP;
//  5. hold-down not yet elapsed (Now − Since < HoldDown) → WAIT;
//  6. stale trigger → PENDING StaleTrigger: the cause began before the
//     site's last reconnection
//     (Since < UnreachableUntil), the cause was older than the guard
//     window when the hub first saw it (ChangedAt − Since > Window), or the
//     policy sees it only now, later than hold-down + window (Now − Since >
//     HoldDown + Window: the policy was off or no evaluator ran);
//  7. evidence not fresh (SiteState.Evidence.Check: site unreachable, its
//     link ended, its last poll failed or had listing hazards, no poll
//     since the link came up or within the freshness bound) → PENDING
//     AwaitingFreshEvidence: not final, the evaluator decides the trigger
//     again once the evidence is fresh (docs/reference/policy.md);
//  8. the guard: with A automatic quarantines in (Now − Window, Now] and D
//     devices not removed, the quarantine is allowed when the guard is not
//     tripped, A+1 ≤ MaxDevices and (A+1)·100 ≤ MaxPercent·D; otherwise
//     PENDING HeldByGuard (and it trips the guard if it was not tripped);
//     then each per-label guard the same way over the device's value of
//     its label, tripping (and, once tripped, holding) that value only,
//     not the site (domains.go);
//  9. QUARANTINE.
//
// DryRun (site or rule) is set on the decision from step 3 on; a dry-run
// decision counts dry-run actions too in the guard (so it says what a live
// policy would have done), a live one only live actions, and a dry-run
// never trips the guard.
func Decide(in Input) Decision {
	p, t := in.Policy, in.Trigger
	d := Decision{Devices: in.Site.Devices}
	skip := func(reason, format string, args ...any) Decision {
		d.Action, d.Reason, d.Detail = ActionSkip, reason, fmt.Sprintf(format, args...)
		return d
	}
	if !p.Enabled {
		return skip(ReasonPolicyDisabled, "automatic quarantine is off for this site")
	}
	if t.Removed {
		return skip(ReasonDeviceRemoved, "the device is removed")
	}
	if t.AlreadyQuarantined {
		return skip(ReasonAlreadyImpaired, "the device is already quarantined")
	}
	if e := in.Excluded; e != nil && e.Covers(in.Now) {
		return skip(ReasonExcluded, "excluded from automation by %s: %s", e.Author, e.Reason)
	}
	if !slices.Contains(OfferedStatuses, t.From) {
		if t.From == "" { // the device's first status: it never was offered
			return skip(ReasonNotOffered, "first seen %s: it was never offered to customers", t.To)
		}
		return skip(ReasonNotOffered, "previous status %s was not offered to customers", t.From)
	}
	rule, ok := matchRule(p.Rules, t)
	if !ok {
		return skip(ReasonNoRuleMatched, "no rule matches %s → %s (%s %s)", t.From, t.To, t.CauseType, t.CauseReason)
	}
	d.Rule, d.DryRun = rule.Name, p.DryRun || rule.DryRun
	since := t.Since()
	if t.To == status.Maintenance {
		if w, ok := windowAt(p.MaintenanceWindows, t.DeviceID, since); ok {
			return skip(ReasonMaintenanceWin, "maintenance began inside window %q", w.Name)
		}
		if e := in.Planned; e != nil && e.Covers(since) {
			return skip(ReasonPlannedMaint, "planned maintenance declared by %s: %s", e.Author, e.Reason)
		}
	}
	if held := in.Now.Sub(since); held < rule.HoldDown {
		d.Action, d.Reason = ActionWait, ReasonHoldDown
		d.Detail = fmt.Sprintf("cause held %s of hold-down %s", held.Truncate(time.Millisecond), rule.HoldDown)
		return d
	}
	pending := func(reason, format string, args ...any) Decision {
		d.Action, d.Reason, d.Detail = ActionPending, reason, fmt.Sprintf(format, args...)
		return d
	}
	switch {
	case !t.UnreachableUntil.IsZero() && since.Before(t.UnreachableUntil):
		return pending(ReasonStaleTrigger, "the cause began (%s) while the site was unreachable (until %s)",
			since.UTC().Format(time.RFC3339), t.UnreachableUntil.UTC().Format(time.RFC3339))
	case t.ChangedAt.Sub(since) > p.Guard.Window:
		return pending(ReasonStaleTrigger, "the cause was %s old when the hub first saw it, older than the guard window %s",
			t.ChangedAt.Sub(since).Truncate(time.Second), p.Guard.Window)
	case in.Now.Sub(since) > rule.HoldDown+p.Guard.Window:
		return pending(ReasonStaleTrigger, "the cause is %s old, older than hold-down %s + guard window %s: a backlog (policy off or not evaluated meanwhile)",
			in.Now.Sub(since).Truncate(time.Second), rule.HoldDown, p.Guard.Window)
	}
	if why := in.Site.Evidence.Check(in.Now); why != "" {
		return pending(ReasonAwaitingFreshEvidence, "%s; waiting for a fresh poll to confirm or clear %s=%s", why, t.CauseType, t.CauseReason)
	}
	a := windowCount(in.Site.RecentActions, in.Now, p.Guard.Window, d.DryRun)
	d.WindowCount = a
	allowed := a+1 <= p.Guard.MaxDevices && float64(a+1)*100 <= p.Guard.MaxPercent*float64(in.Site.Devices)
	if in.Site.Tripped && !d.DryRun {
		return pending(ReasonHeldByGuard, "the site's guard is tripped (%d quarantined by policy in %s)", a, p.Guard.Window)
	}
	if !allowed {
		d.Trips = !d.DryRun
		return pending(ReasonHeldByGuard, "quarantine %d in %s would exceed the guard (%d devices, %g%% of %d)",
			a+1, p.Guard.Window, p.Guard.MaxDevices, p.Guard.MaxPercent, in.Site.Devices)
	}
	if held, ok := domainHeld(in, d); ok {
		return held
	}
	d.Action, d.Reason = ActionQuarantine, ReasonRuleMatched
	d.Detail = fmt.Sprintf("rule %s: %s → %s, %s=%s since %s", rule.Name, t.From, t.To, t.CauseType, t.CauseReason,
		since.UTC().Format(time.RFC3339))
	return d
}

// windowCount counts the actions in (now − window, now]; live decisions
// count live actions only, dry-run decisions count both.
func windowCount(acts []RecentAction, now time.Time, window time.Duration, dryRun bool) int {
	n := 0
	for _, a := range acts {
		if a.DryRun && !dryRun {
			continue
		}
		if a.At.After(now.Add(-window)) && !a.At.After(now) {
			n++
		}
	}
	return n
}

func matchRule(rules []Rule, t Trigger) (Rule, bool) {
	for _, r := range rules {
		if r.Validation != nil {
			continue // matches failed validation runs only
		}
		if !slices.Contains(r.From, t.From) || !slices.Contains(r.To, t.To) {
			continue
		}
		if len(r.Reasons) > 0 && !slices.Contains(r.Reasons, t.CauseReason) {
			continue
		}
		if r.Health != nil && !r.Health.Matches(t.CauseHealth) {
			continue
		}
		if !labels.Matches(t.Labels, r.Labels) {
			continue
		}
		return r, true
	}
	return Rule{}, false
}

// Rearm reports whether a tripped guard re-arms: no pending action held by
// the guard is left at the site (an operator approved or rejected every
// one) and one more automatic quarantine would fit the guard now.
func Rearm(g Guard, site SiteState, openHeld int, now time.Time) bool {
	if openHeld > 0 {
		return false
	}
	a := windowCount(site.RecentActions, now, g.Window, false)
	return a+1 <= g.MaxDevices && float64(a+1)*100 <= g.MaxPercent*float64(site.Devices)
}

// Quarantine is a device the policy quarantined, for the release decision.
type Quarantine struct {
	DeviceID string
	// Generation is the desired generation of the quarantine (the
	// idempotency key of the release).
	Generation int64
	// Rule is the rule that quarantined it.
	Rule string
	// Status is the device's current status; ClearedSince is when it left
	// FAULTED/MAINTENANCE (zero while it is still in one).
	Status       status.Status
	ClearedSince time.Time
}

// DecideRelease decides whether the policy releases q: the rule has an
// auto-release delay, the device is not excluded, its cause (FAULTED or
// MAINTENANCE) has been cleared for at least that delay and its site is
// reachable → RELEASE; still faulted or the delay running → WAIT; no
// auto-release → SKIP. The guard never blocks a release.
func DecideRelease(p SitePolicy, q Quarantine, reachable bool, excluded *Exclusion, now time.Time) Decision {
	d := Decision{Rule: q.Rule}
	var rule Rule
	found := false
	for _, r := range p.Rules {
		if r.Name == q.Rule {
			rule, found = r, true
		}
	}
	if !p.Enabled || !found || rule.AutoReleaseAfter == 0 {
		d.Action, d.Reason, d.Detail = ActionSkip, ReasonNoAutoRelease, "the rule has no auto-release: an operator releases it"
		return d
	}
	d.DryRun = p.DryRun || rule.DryRun
	if excluded != nil && excluded.Covers(now) {
		d.Action, d.Reason, d.Detail = ActionWait, ReasonExcluded, "excluded from automation"
		return d
	}
	if slices.Contains(TriggerStatuses, q.Status) || q.ClearedSince.IsZero() || !reachable || q.Status == status.Unreachable {
		d.Action, d.Reason, d.Detail = ActionWait, ReasonCauseNotCleared, fmt.Sprintf("status %s", q.Status)
		return d
	}
	if cleared := now.Sub(q.ClearedSince); cleared < rule.AutoReleaseAfter {
		d.Action, d.Reason = ActionWait, ReasonCauseNotCleared
		d.Detail = fmt.Sprintf("cause cleared %s of %s", cleared.Truncate(time.Millisecond), rule.AutoReleaseAfter)
		return d
	}
	d.Action, d.Reason = ActionRelease, ReasonCauseCleared
	d.Detail = fmt.Sprintf("rule %s: cause cleared since %s (auto-release after %s)", rule.Name,
		q.ClearedSince.UTC().Format(time.RFC3339), rule.AutoReleaseAfter)
	return d
}

// ReasonHealedWithinHoldDown is the reason of the SKIP decision recorded
// for a trigger whose cause cleared before the policy decided it (inside
// its rule's hold-down, or between two passes): no action.
const ReasonHealedWithinHoldDown = "HealedWithinHoldDown"

// DecideHealed is the decision for a trigger (from → to at changedAt)
// whose device left FAULTED/MAINTENANCE for healedTo at healedAt before
// the policy decided it: SKIP NotOfferedToCustomers when from was not
// offered to customers (as Decide would have said), else SKIP
// HealedWithinHoldDown. Always a SKIP: nothing is done for it.
func DecideHealed(p SitePolicy, from, to, healedTo status.Status, changedAt, healedAt time.Time) Decision {
	d := Decision{Action: ActionSkip, DryRun: p.DryRun}
	if !slices.Contains(OfferedStatuses, from) {
		d.Reason = ReasonNotOffered
		d.Detail = fmt.Sprintf("previous status %q was not offered to customers; healed to %s before a decision", from, healedTo)
		return d
	}
	d.Reason = ReasonHealedWithinHoldDown
	d.Detail = fmt.Sprintf("%s → %s at %s healed to %s after %s, before the policy acted (hold-down or between passes): no action",
		from, to, changedAt.UTC().Format(time.RFC3339), healedTo, healedAt.Sub(changedAt).Truncate(time.Millisecond))
	return d
}
