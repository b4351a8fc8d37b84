package policy

import (
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/status"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const dev = "6f1c9e4e-2b7a-4c1e-9d3e-0a1b2c3d4e5f"

func basePolicy() SitePolicy {
	return SitePolicy{
		Enabled: true,
		Rules: []Rule{
			{Name: "power", From: OfferedStatuses, To: []status.Status{status.Maintenance}, Reasons: []string{"PowerFailure"}, HoldDown: time.Minute, AutoReleaseAfter: 10 * time.Minute},
			{Name: "faulted", From: OfferedStatuses, To: []status.Status{status.Faulted}, HoldDown: 30 * time.Second},
		},
		Guard: Guard{MaxDevices: 5, MaxPercent: 10, Window: time.Hour},
		MaintenanceWindows: []Window{
			{Name: "nightly", Start: t0.Add(-24 * time.Hour), End: t0.Add(-22 * time.Hour), Every: 24 * time.Hour},
		},
	}
}

// faulted is a device that turned FAULTED 40 s before t0 (past the 30 s hold-down).
func faulted() Trigger {
	return Trigger{DeviceID: dev, HistoryID: 7, From: status.Available, To: status.Faulted,
		CauseType: "ProvisioningHealthy", CauseReason: "DeployFailed", CauseSince: t0.Add(-40 * time.Second), ChangedAt: t0.Add(-39 * time.Second)}
}

func maint(since time.Time) Trigger {
	return Trigger{DeviceID: dev, HistoryID: 8, From: status.InService, To: status.Maintenance,
		CauseType: "MaintenanceClear", CauseReason: "PowerFailure", CauseSince: since, ChangedAt: since.Add(time.Second)}
}

func acts(n int, at time.Time) []RecentAction {
	out := make([]RecentAction, n)
	for i := range out {
		out[i] = RecentAction{At: at}
	}
	return out
}

func site(devices int, recent []RecentAction) SiteState {
	return SiteState{Evidence: fresh(), Devices: devices, RecentActions: recent}
}

// fresh is evidence fresh at t0: link up for an hour, the last poll (at
// t0) succeeded without hazards, bound 3 min.
func fresh() Evidence {
	return Evidence{Reachable: true, LinkUp: true, LinkSince: t0.Add(-time.Hour), LastSeen: t0,
		Polled: &SiteMark{Status: "True", Reason: "PollSucceeded", At: t0, Received: t0}, Listing: &SiteMark{Status: "True", Reason: "NoHazards", At: t0},
		FreshFor: 3 * time.Minute}
}

func TestDecide(t *testing.T) {
	dry := basePolicy()
	dry.DryRun = true
	ruleDry := basePolicy()
	ruleDry.Rules[1].DryRun = true
	off := basePolicy()
	off.Enabled = false
	devWin := basePolicy()
	devWin.MaintenanceWindows = []Window{{Name: "rack-7", Start: t0.Add(-time.Hour), End: t0.Add(time.Hour), Devices: []string{"00000000-0000-0000-0000-000000000001"}}}

	type tc struct {
		name   string
		in     Input
		action Action
		reason string
		rule   string
		trips  bool
		dryRun bool
	}
	with := func(f func(*Input)) Input {
		in := Input{Policy: basePolicy(), Trigger: faulted(), Site: site(100, nil), Now: t0}
		f(&in)
		return in
	}
	cases := []tc{
		{"faulted past hold-down quarantines", with(func(*Input) {}), ActionQuarantine, ReasonRuleMatched, "faulted", false, false},
		{"hold-down not elapsed waits", with(func(in *Input) { in.Trigger.CauseSince = t0.Add(-29 * time.Second) }), ActionWait, ReasonHoldDown, "faulted", false, false},
		{"hold-down exactly elapsed acts", with(func(in *Input) { in.Trigger.CauseSince = t0.Add(-30 * time.Second) }), ActionQuarantine, ReasonRuleMatched, "faulted", false, false},
		{"hold-down from ChangedAt when the cause time is unknown", with(func(in *Input) {
			in.Trigger.CauseSince = time.Time{}
			in.Trigger.ChangedAt = t0.Add(-10 * time.Second)
		}), ActionWait, ReasonHoldDown, "faulted", false, false},
		{"policy off skips", with(func(in *Input) { in.Policy = off }), ActionSkip, ReasonPolicyDisabled, "", false, false},
		{"removed device skips", with(func(in *Input) { in.Trigger.Removed = true }), ActionSkip, ReasonDeviceRemoved, "", false, false},
		{"already quarantined skips", with(func(in *Input) { in.Trigger.AlreadyQuarantined = true }), ActionSkip, ReasonAlreadyImpaired, "", false, false},
		{"HELD before is not offered", with(func(in *Input) { in.Trigger.From = status.Held }), ActionSkip, ReasonNotOffered, "", false, false},
		{"QUARANTINED before is not offered", with(func(in *Input) { in.Trigger.From = status.Quarantined }), ActionSkip, ReasonNotOffered, "", false, false},
		{"reason filter: maintenance with another reason matches no rule", with(func(in *Input) {
			in.Trigger = maint(t0.Add(-2 * time.Minute))
			in.Trigger.CauseReason = "Manual"
		}), ActionSkip, ReasonNoRuleMatched, "", false, false},
		{"reason filter: PowerFailure matches the power rule", with(func(in *Input) { in.Trigger = maint(t0.Add(-2 * time.Minute)) }), ActionQuarantine, ReasonRuleMatched, "power", false, false},
		{"power rule hold-down one minute", with(func(in *Input) { in.Trigger = maint(t0.Add(-59 * time.Second)) }), ActionWait, ReasonHoldDown, "power", false, false},
		{"excluded device skips", with(func(in *Input) { in.Excluded = &Exclusion{Reason: "burn-in", Author: "alice"} }), ActionSkip, ReasonExcluded, "", false, false},
		{"exclusion ended does not skip", with(func(in *Input) { in.Excluded = &Exclusion{Reason: "burn-in", End: t0} }), ActionQuarantine, ReasonRuleMatched, "faulted", false, false},
		{"exclusion not yet started does not skip", with(func(in *Input) { in.Excluded = &Exclusion{Start: t0.Add(time.Second)} }), ActionQuarantine, ReasonRuleMatched, "faulted", false, false},
		// Maintenance windows: nightly 12:00-14:00 (from yesterday, daily).
		{"maintenance at window start is skipped", with(func(in *Input) {
			in.Trigger = maint(t0)
			in.Now = t0.Add(2 * time.Minute)
		}), ActionSkip, ReasonMaintenanceWin, "power", false, false},
		{"maintenance just before window end is skipped", with(func(in *Input) {
			in.Trigger = maint(t0.Add(2*time.Hour - time.Nanosecond))
			in.Now = t0.Add(3 * time.Hour)
		}), ActionSkip, ReasonMaintenanceWin, "power", false, false},
		{"maintenance at window end is acted on", with(func(in *Input) {
			in.Trigger = maint(t0.Add(2 * time.Hour))
			in.Now = t0.Add(3 * time.Hour)
			in.Site.Evidence.Polled.At = in.Now
		}), ActionQuarantine, ReasonRuleMatched, "power", false, false},
		{"maintenance just before window start is acted on", with(func(in *Input) {
			in.Trigger = maint(t0.Add(-time.Nanosecond))
			in.Now = t0.Add(2 * time.Minute)
		}), ActionQuarantine, ReasonRuleMatched, "power", false, false},
		{"FAULTED inside a maintenance window is acted on", with(func(in *Input) {
			in.Trigger.CauseSince, in.Trigger.ChangedAt = t0.Add(time.Minute), t0.Add(time.Minute)
			in.Now = t0.Add(2 * time.Minute)
		}), ActionQuarantine, ReasonRuleMatched, "faulted", false, false},
		{"device-set window covers only its devices", with(func(in *Input) {
			in.Policy = devWin
			in.Trigger = maint(t0.Add(-2 * time.Minute))
		}), ActionQuarantine, ReasonRuleMatched, "power", false, false},
		{"device-set window covers its device", with(func(in *Input) {
			in.Policy = devWin
			in.Trigger = maint(t0.Add(-2 * time.Minute))
			in.Trigger.DeviceID = "00000000-0000-0000-0000-000000000001"
		}), ActionSkip, ReasonMaintenanceWin, "power", false, false},
		{"planned maintenance skips maintenance", with(func(in *Input) {
			in.Trigger = maint(t0.Add(-2 * time.Minute))
			in.Planned = &Exclusion{Reason: "BMC firmware", Author: "bob", Start: t0.Add(-time.Hour), End: t0.Add(time.Hour)}
		}), ActionSkip, ReasonPlannedMaint, "power", false, false},
		{"planned maintenance does not cover FAULTED", with(func(in *Input) {
			in.Planned = &Exclusion{Reason: "BMC firmware", End: t0.Add(time.Hour)}
		}), ActionQuarantine, ReasonRuleMatched, "faulted", false, false},
		// Stale triggers.
		{"site unreachable: awaiting fresh evidence, never acted on", with(func(in *Input) { in.Site.Evidence.Reachable = false }), ActionPending, ReasonAwaitingFreshEvidence, "faulted", false, false},
		{"link ended before the site is unreachable: awaiting", with(func(in *Input) { in.Site.Evidence.LinkUp = false }), ActionPending, ReasonAwaitingFreshEvidence, "faulted", false, false},
		{"last poll failed: awaiting", with(func(in *Input) { in.Site.Evidence.Polled.Status = "False" }), ActionPending, ReasonAwaitingFreshEvidence, "faulted", false, false},
		{"a restarted satellite's snapshot not applied yet, fresh poll mark or not: awaiting", with(func(in *Input) { in.Site.Evidence.SnapshotDue = true }), ActionPending, ReasonAwaitingFreshEvidence, "faulted", false, false},
		{"no poll mark at all: awaiting", with(func(in *Input) { in.Site.Evidence.Polled = nil }), ActionPending, ReasonAwaitingFreshEvidence, "faulted", false, false},
		{"last poll received before the link came up: awaiting", with(func(in *Input) { in.Site.Evidence.LinkSince = t0.Add(time.Second) }), ActionPending, ReasonAwaitingFreshEvidence, "faulted", false, false},
		{"last poll older than the freshness bound: awaiting", with(func(in *Input) {
			in.Site.Evidence.Polled.At = t0.Add(-3*time.Minute - time.Millisecond)
		}), ActionPending, ReasonAwaitingFreshEvidence, "faulted", false, false},
		{"last poll exactly the freshness bound old acts", with(func(in *Input) { in.Site.Evidence.Polled.At = t0.Add(-3 * time.Minute) }), ActionQuarantine, ReasonRuleMatched, "faulted", false, false},
		{"listing hazards: awaiting", with(func(in *Input) {
			in.Site.Evidence.Listing = &SiteMark{Status: "False", Reason: "FieldsUnsent", At: t0}
		}), ActionPending, ReasonAwaitingFreshEvidence, "faulted", false, false},
		{"cause began while the site was unreachable", with(func(in *Input) { in.Trigger.UnreachableUntil = t0.Add(-39 * time.Second) }), ActionPending, ReasonStaleTrigger, "faulted", false, false},
		{"cause began after the site came back", with(func(in *Input) { in.Trigger.UnreachableUntil = t0.Add(-41 * time.Second) }), ActionQuarantine, ReasonRuleMatched, "faulted", false, false},
		{"cause older than the window when first seen", with(func(in *Input) {
			in.Trigger.CauseSince = t0.Add(-2 * time.Hour)
			in.Trigger.ChangedAt = t0.Add(-time.Hour + time.Second)
		}), ActionPending, ReasonStaleTrigger, "faulted", false, false},
		{"cause exactly the window old when first seen is not stale", with(func(in *Input) {
			in.Trigger.CauseSince = t0.Add(-time.Hour)
			in.Trigger.ChangedAt = t0
		}), ActionQuarantine, ReasonRuleMatched, "faulted", false, false},
		{"trigger the policy sees later than hold-down + window is stale", with(func(in *Input) {
			in.Now = t0.Add(time.Hour)
		}), ActionPending, ReasonStaleTrigger, "faulted", false, false},
		{"trigger seen exactly at hold-down + window is not stale", with(func(in *Input) {
			in.Now = in.Trigger.CauseSince.Add(30*time.Second + time.Hour)
			in.Site.Evidence.Polled.At = in.Now
		}), ActionQuarantine, ReasonRuleMatched, "faulted", false, false},
		{"stale trigger in dry-run is a dry-run pending", with(func(in *Input) {
			in.Policy = dry
			in.Trigger.UnreachableUntil = t0.Add(-39 * time.Second)
		}), ActionPending, ReasonStaleTrigger, "faulted", false, true},
		// The guard: N = 5, P = 10 %.
		{"guard: 4 in window, 5th allowed (exactly N)", with(func(in *Input) { in.Site = site(100, acts(4, t0.Add(-time.Minute))) }), ActionQuarantine, ReasonRuleMatched, "faulted", false, false},
		{"guard: 5 in window, 6th held and trips", with(func(in *Input) { in.Site = site(100, acts(5, t0.Add(-time.Minute))) }), ActionPending, ReasonHeldByGuard, "faulted", true, false},
		{"guard: exactly P %: 4 of 50 → 5th (10 %) allowed", with(func(in *Input) {
			in.Policy.Guard.MaxDevices = 100
			in.Site = site(50, acts(4, t0.Add(-time.Minute)))
		}), ActionQuarantine, ReasonRuleMatched, "faulted", false, false},
		{"guard: over P %: 5 of 50 → 6th (12 %) held", with(func(in *Input) {
			in.Policy.Guard.MaxDevices = 100
			in.Site = site(50, acts(5, t0.Add(-time.Minute)))
		}), ActionPending, ReasonHeldByGuard, "faulted", true, false},
		{"guard: removed devices leave the denominator: 49 devices, 5th is 10.2 %", with(func(in *Input) {
			in.Policy.Guard.MaxDevices = 100
			in.Site = site(49, acts(4, t0.Add(-time.Minute)))
		}), ActionPending, ReasonHeldByGuard, "faulted", true, false},
		{"guard: small site: 1 of 9 devices is 11 % > 10 %", with(func(in *Input) { in.Site = site(9, nil) }), ActionPending, ReasonHeldByGuard, "faulted", true, false},
		{"guard: actions older than the window do not count", with(func(in *Input) { in.Site = site(100, acts(5, t0.Add(-time.Hour))) }), ActionQuarantine, ReasonRuleMatched, "faulted", false, false},
		{"guard: an action just inside the window counts", with(func(in *Input) {
			in.Site = site(100, acts(5, t0.Add(-time.Hour+time.Nanosecond)))
		}), ActionPending, ReasonHeldByGuard, "faulted", true, false},
		{"guard tripped: held even with room, does not trip again", with(func(in *Input) {
			in.Site = site(100, nil)
			in.Site.Tripped = true
		}), ActionPending, ReasonHeldByGuard, "faulted", false, false},
		{"guard: live decisions ignore dry-run actions", with(func(in *Input) {
			in.Site = site(100, []RecentAction{{At: t0, DryRun: true}, {At: t0, DryRun: true}, {At: t0, DryRun: true}, {At: t0, DryRun: true}, {At: t0, DryRun: true}})
		}), ActionQuarantine, ReasonRuleMatched, "faulted", false, false},
		// Dry-run.
		{"dry-run site: would quarantine", with(func(in *Input) { in.Policy = dry }), ActionQuarantine, ReasonRuleMatched, "faulted", false, true},
		{"dry-run rule: would quarantine", with(func(in *Input) { in.Policy = ruleDry }), ActionQuarantine, ReasonRuleMatched, "faulted", false, true},
		{"dry-run: counts its own would-be actions, held, never trips", with(func(in *Input) {
			in.Policy = dry
			in.Site = site(100, []RecentAction{{At: t0, DryRun: true}, {At: t0, DryRun: true}, {At: t0, DryRun: true}, {At: t0}, {At: t0}})
		}), ActionPending, ReasonHeldByGuard, "faulted", false, true},
		{"dry-run: ignores a tripped live guard", with(func(in *Input) {
			in.Policy = dry
			in.Site.Tripped = true
		}), ActionQuarantine, ReasonRuleMatched, "faulted", false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.in)
			if d.Action != c.action || d.Reason != c.reason || d.Rule != c.rule || d.Trips != c.trips || d.DryRun != c.dryRun {
				t.Fatalf("Decide = %s %s rule=%q trips=%t dry=%t (%s); want %s %s rule=%q trips=%t dry=%t",
					d.Action, d.Reason, d.Rule, d.Trips, d.DryRun, d.Detail, c.action, c.reason, c.rule, c.trips, c.dryRun)
			}
			if d.Detail == "" {
				t.Errorf("decision %s has no detail", d.Action)
			}
		})
	}
}

// A device's first status has no previous one: the detail says it was never
// offered rather than quoting an empty status.
func TestDecideFirstStatusIsNeverOffered(t *testing.T) {
	in := Input{Policy: basePolicy(), Trigger: faulted(), Site: site(100, nil), Now: t0}
	in.Trigger.From = ""
	d := Decide(in)
	if d.Action != ActionSkip || d.Reason != ReasonNotOffered || d.Detail != "first seen FAULTED: it was never offered to customers" {
		t.Fatalf("Decide = %s %s %q; want SKIP %s, detail naming the first status", d.Action, d.Reason, d.Detail, ReasonNotOffered)
	}
}

func TestDecideRelease(t *testing.T) {
	p := basePolicy()
	q := func(st status.Status, cleared time.Time, rule string) Quarantine {
		return Quarantine{DeviceID: dev, Generation: 3, Rule: rule, Status: st, ClearedSince: cleared}
	}
	cases := []struct {
		name    string
		p       SitePolicy
		q       Quarantine
		reach   bool
		exclude *Exclusion
		action  Action
		reason  string
	}{
		{"cleared long enough releases", p, q(status.Quarantined, t0.Add(-10*time.Minute), "power"), true, nil, ActionRelease, ReasonCauseCleared},
		{"cleared not long enough waits", p, q(status.Quarantined, t0.Add(-10*time.Minute+time.Second), "power"), true, nil, ActionWait, ReasonCauseNotCleared},
		{"still faulted waits", p, q(status.Maintenance, time.Time{}, "power"), true, nil, ActionWait, ReasonCauseNotCleared},
		{"site unreachable waits", p, q(status.Quarantined, t0.Add(-time.Hour), "power"), false, nil, ActionWait, ReasonCauseNotCleared},
		{"rule without auto-release skips", p, q(status.Quarantined, t0.Add(-time.Hour), "faulted"), true, nil, ActionSkip, ReasonNoAutoRelease},
		{"rule gone from the policy skips", p, q(status.Quarantined, t0.Add(-time.Hour), "gone"), true, nil, ActionSkip, ReasonNoAutoRelease},
		{"excluded waits", p, q(status.Quarantined, t0.Add(-time.Hour), "power"), true, &Exclusion{Reason: "x"}, ActionWait, ReasonExcluded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := DecideRelease(c.p, c.q, c.reach, c.exclude, t0)
			if d.Action != c.action || d.Reason != c.reason {
				t.Fatalf("DecideRelease = %s %s (%s); want %s %s", d.Action, d.Reason, d.Detail, c.action, c.reason)
			}
		})
	}
}

// Releases are never blocked by the guard: DecideRelease takes no guard
// state at all, and a tripped site with a full window still releases.
func TestReleaseWhileTripped(t *testing.T) {
	p := basePolicy()
	in := Input{Policy: p, Trigger: faulted(), Site: SiteState{Evidence: fresh(), Devices: 10, RecentActions: acts(5, t0), Tripped: true}, Now: t0}
	if d := Decide(in); d.Action != ActionPending {
		t.Fatalf("quarantine while tripped = %s, want PENDING", d.Action)
	}
	d := DecideRelease(p, Quarantine{DeviceID: dev, Rule: "power", Status: status.Quarantined, ClearedSince: t0.Add(-time.Hour)}, true, nil, t0)
	if d.Action != ActionRelease {
		t.Fatalf("release while tripped = %s %s, want RELEASE", d.Action, d.Reason)
	}
}

func TestRearm(t *testing.T) {
	g := Guard{MaxDevices: 5, MaxPercent: 10, Window: time.Hour}
	if Rearm(g, site(100, nil), 1, t0) {
		t.Error("re-armed with a pending action held by the guard left")
	}
	if Rearm(g, site(100, acts(5, t0.Add(-time.Minute))), 0, t0) {
		t.Error("re-armed with the window full")
	}
	if !Rearm(g, site(100, acts(5, t0.Add(-time.Hour))), 0, t0) {
		t.Error("did not re-arm once the window slid past and nothing is pending")
	}
}

func TestWindowRecurrence(t *testing.T) {
	w := Window{Start: t0, End: t0.Add(time.Hour), Every: 7 * 24 * time.Hour}
	for _, c := range []struct {
		at   time.Time
		want bool
	}{
		{t0.Add(-time.Second), false}, {t0, true}, {t0.Add(time.Hour - 1), true}, {t0.Add(time.Hour), false},
		{t0.Add(7 * 24 * time.Hour), true}, {t0.Add(7*24*time.Hour + 59*time.Minute), true}, {t0.Add(24 * time.Hour), false},
	} {
		if got := w.In(dev, c.at); got != c.want {
			t.Errorf("In(%s) = %t, want %t", c.at, got, c.want)
		}
	}
	once := Window{Start: t0, End: t0.Add(time.Hour)}
	if once.In(dev, t0.Add(7*24*time.Hour)) {
		t.Error("a one-off window recurred")
	}
}
