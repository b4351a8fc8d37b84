package remediation

import (
	"fmt"
	"slices"
	"time"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
)

// Wait reasons: why a ladder does not start its next step now (stored in
// the ladder's waiting column and shown by explain).
const (
	WaitMaxInFlight       = "MaxInFlight"
	WaitDomainInFlight    = "MaxInFlightPerLabel"
	WaitExcluded          = "ExcludedFromAutomation"
	WaitMaintenanceWindow = "MaintenanceWindow"
	WaitGuardTripped      = "GuardTripped"
	WaitSiteUnreachable   = "SiteUnreachable"
	WaitCustomerInstance  = "CustomerInstance"
	WaitOperationActive   = "OperationActive"
	// WaitPrecondition: the step's operation would be refused by the
	// operations' checks (hub/operations' precondition table, the
	// customer-instance guard); the detail names the refusal.
	WaitPrecondition = "Precondition"
	// WaitPolicyDisabled: the site's policy is disabled (enabled: false);
	// the open ladder is paused where it is (Engine.pause).
	WaitPolicyDisabled = "PolicyDisabled"
)

// Safety is what the safety check of a step start reads besides the
// policy and the device.
type Safety struct {
	// Excluded is the device's exclusion from automation (nil: none).
	Excluded *policy.Exclusion
	// Tripped: the site's quarantine guard is tripped (policy paused
	// there until an operator re-arms it).
	Tripped bool
	// CustomerAllowed: the ladder acts on a device with a customer
	// instance (its policy's actOnCustomerInstances).
	CustomerAllowed bool
	// InFlight counts the site's ladders with a step in flight now.
	InFlight int
	// DomainInFlight counts, per label key of the policy's
	// remediation.perLabel that the device carries, the site's ladders
	// with a step in flight on devices carrying the device's value.
	DomainInFlight map[string]int
}

// Blocked says why a step of device d may not start now under policy p
// ("" when it may): an exclusion, a maintenance window, a tripped guard,
// an unreachable site, a customer instance (unless s.CustomerAllowed), K = p.Remediation.MaxInFlight
// steps in flight at the site already, or a per-label limit of
// p.Remediation.PerLabel reached in the device's failure domain (its value
// of that label). A pure function.
func Blocked(p policy.SitePolicy, d store.RemediationDevice, s Safety, now time.Time) (reason, detail string) {
	switch {
	case s.Excluded != nil && s.Excluded.Covers(now):
		return WaitExcluded, fmt.Sprintf("excluded from automation by %s: %s", s.Excluded.Author, s.Excluded.Reason)
	case len(policy.ActiveWindows(p.MaintenanceWindows, d.DeviceID, now)) > 0:
		return WaitMaintenanceWindow, fmt.Sprintf("maintenance window %q in force", policy.ActiveWindows(p.MaintenanceWindows, d.DeviceID, now)[0].Name)
	case s.Tripped:
		return WaitGuardTripped, "the site's quarantine guard is tripped: remediation waits until an operator re-arms it"
	case d.SiteStale:
		return WaitSiteUnreachable, "the site is unreachable"
	case d.CustomerAllocated && !s.CustomerAllowed:
		return WaitCustomerInstance, "the device has a customer instance (CustomerAllocated=True)"
	case s.InFlight >= p.Remediation.MaxInFlight:
		return WaitMaxInFlight, fmt.Sprintf("%s in flight at site %s (at most %d)", remediations(s.InFlight), d.Site, p.Remediation.MaxInFlight)
	}
	for _, g := range p.Remediation.PerLabel {
		v, ok := d.Labels[g.Label]
		if n := s.DomainInFlight[g.Label]; ok && n >= g.MaxInFlight {
			return WaitDomainInFlight, fmt.Sprintf("%s in flight in %s=%s at site %s (at most %d per %s)",
				remediations(n), g.Label, v, d.Site, g.MaxInFlight, g.Label)
		}
	}
	return "", ""
}

// remediations is "1 remediation" or "n remediations".
func remediations(n int) string {
	if n == 1 {
		return "1 remediation"
	}
	return fmt.Sprintf("%d remediations", n)
}

// Faulty reports whether a device in status st shows the fault a ladder
// remediates: FAULTED or MAINTENANCE.
func Faulty(st status.Status) bool { return st == status.Faulted || st == status.Maintenance }

// Good is the success test of a step: the device, still quarantined, has
// good conditions again (status QUARANTINED: nothing worse shows through
// the quarantine; UNKNOWN, UNREACHABLE, ONBOARDING, FAULTED and
// MAINTENANCE are not good).
func Good(st status.Status) bool { return st == status.Quarantined }

// HandoffAction returns the first recommended action of rec that the
// ladder hands off on (ok=false when none).
func HandoffAction(l *policy.Ladder, rec []int32) (int32, bool) {
	for _, a := range rec {
		if slices.Contains(l.HandoffOn, a) {
			return a, true
		}
	}
	return 0, false
}

// actionName is NVSentinel's name of recommended action a, or its number.
func actionName(a int32) string {
	for name, n := range policy.RecommendedActions {
		if n == a {
			return name
		}
	}
	return fmt.Sprint(a)
}

// Plan is what the ladder engine does, or would do, next for one device.
type Plan struct {
	DeviceID, Site, Rule string
	// Text is the plan in words: "would reboot node-7 now, step 1 of 3".
	Text string
	// Step is the next step (1-based; 0 when none) and At when it is due
	// (zero: now, or not known).
	Step int
	At   time.Time
}

// name is how plans name a device: its name, else its UUID.
func name(d store.RemediationDevice) string {
	if d.Name != "" {
		return d.Name
	}
	return d.DeviceID
}

// StartPlan is the plan for device d, held by rule r with ladder l and no
// open ladder: a handoff (recommended action or budget spent, used ladders
// in the budget window), a wait (blocked says why) or the first step now.
func StartPlan(l *policy.Ladder, d store.RemediationDevice, used int, blocked string) Plan {
	p := Plan{DeviceID: d.DeviceID, Site: d.Site, Rule: d.Rule}
	if a, ok := HandoffAction(l, d.Recommended); ok {
		p.Text = fmt.Sprintf("would hand %s off for repair now: its fault recommends %s", name(d), actionName(a))
		return p
	}
	if used >= l.Budget.Ladders {
		p.Text = fmt.Sprintf("would hand %s off for repair now: budget spent (%d of %d ladders in %s)", name(d), used, l.Budget.Ladders, l.Budget.Window)
		return p
	}
	p.Step = 1
	if blocked != "" {
		p.Text = fmt.Sprintf("would %s %s, step 1 of %d, once no longer blocked (%s)", l.Steps[0].Verb(), name(d), len(l.Steps), blocked)
		return p
	}
	p.Text = fmt.Sprintf("would %s %s now, step 1 of %d", l.Steps[0].Verb(), name(d), len(l.Steps))
	return p
}

// RunningPlan is the plan of device d's open ladder lr under ladder l:
// what the step in progress waits for and when the next step is due.
func RunningPlan(l *policy.Ladder, d store.RemediationDevice, lr store.RemediationLadder) Plan {
	p := Plan{DeviceID: d.DeviceID, Site: d.Site, Rule: lr.Rule}
	cur, started := lr.Current()
	if !started {
		if lr.Position >= len(l.Steps) {
			p.Text = fmt.Sprintf("ladder exhausted: %s is handed off for repair", name(d))
			return p
		}
		p.Step = lr.Position + 1
		p.Text = fmt.Sprintf("%s %s next, step %d of %d", l.Steps[lr.Position].Verb(), name(d), lr.Position+1, len(l.Steps))
		if lr.Waiting != "" {
			p.Text += ", waiting: " + lr.Waiting + " (" + lr.Detail + ")"
		}
		return p
	}
	step := l.Steps[min(lr.Position, len(l.Steps)-1)]
	deadline := cur.StartedAt.Add(step.Timeout)
	if cur.GoodSince != nil {
		p.At = cur.GoodSince.Add(l.Settle)
		p.Text = fmt.Sprintf("step %d of %d (%s) %s: good since %s, fixed at %s if it stays good", lr.Position+1, len(l.Steps),
			cur.Kind, cur.State, cur.GoodSince.UTC().Format(time.RFC3339), p.At.UTC().Format(time.RFC3339))
		return p
	}
	p.At = deadline
	next := "hand off for repair"
	if lr.Position+1 < len(l.Steps) {
		p.Step = lr.Position + 2
		next = fmt.Sprintf("step %d (%s)", lr.Position+2, l.Steps[lr.Position+1].Kind)
	}
	p.Text = fmt.Sprintf("step %d of %d (%s) %s; if the fault persists, %s at %s", lr.Position+1, len(l.Steps), cur.Kind, cur.State,
		next, deadline.UTC().Format(time.RFC3339))
	if lr.Waiting != "" {
		p.Text += "; waiting: " + lr.Waiting + " (" + lr.Detail + ")"
	}
	return p
}
