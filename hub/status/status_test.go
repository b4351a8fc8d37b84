package status

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ironlink/ironlink/internal/condition"
)

// healthyHeld is a reported device whose conditions match no rule but HELD.
func healthyHeld() Input {
	c := func(t condition.Type, s condition.Status, r string) condition.Condition {
		return condition.Condition{Type: t, Status: s, Reason: r}
	}
	return Input{
		Reported: true,
		Conditions: map[condition.Type]condition.Condition{
			condition.Enrolled:            c(condition.Enrolled, condition.True, "Enrolled"),
			condition.ProvisioningHealthy: c(condition.ProvisioningHealthy, condition.True, "Available"),
			condition.MaintenanceClear:    c(condition.MaintenanceClear, condition.True, "NoMaintenance"),
			condition.InValidationPool:    c(condition.InValidationPool, condition.False, "NotInPool"),
			condition.InstanceAllocated:   c(condition.InstanceAllocated, condition.False, "NoInstance"),
			condition.CustomerAllocated:   c(condition.CustomerAllocated, condition.False, "NotAllocated"),
			condition.CustomerReady:       c(condition.CustomerReady, condition.False, "TraitAbsent"),
		},
	}
}

func set(in *Input, t condition.Type, s condition.Status, reason string) {
	in.Conditions[t] = condition.Condition{Type: t, Status: s, Reason: reason}
}

// rules lists, in SPEC order, each rule with a change that makes it match.
var rules = []struct {
	status  Status
	trigger func(*Input)
	reason  string // expected substring of the reason when this rule wins
}{
	{Unknown, func(in *Input) { in.Reported = false }, "NeverReported"},
	{Unreachable, func(in *Input) { in.SiteStale = true }, "SiteStale"},
	{Onboarding, func(in *Input) { set(in, condition.Enrolled, condition.False, "NotVerified") }, "Enrolled=False: NotVerified"},
	{Faulted, func(in *Input) { set(in, condition.ProvisioningHealthy, condition.False, "CleanFailed") }, "ProvisioningHealthy=False: CleanFailed"},
	{Maintenance, func(in *Input) { set(in, condition.MaintenanceClear, condition.False, "PowerFailure") }, "MaintenanceClear=False: PowerFailure"},
	{Quarantined, func(in *Input) { in.Quarantined = true }, "QuarantinedByHub"},
	{Validating, func(in *Input) { set(in, condition.InValidationPool, condition.True, "MatchesSelector") }, "InValidationPool=True"},
	{InService, func(in *Input) { set(in, condition.CustomerAllocated, condition.True, "CustomerProject") }, "CustomerAllocated=True"},
	{Allocated, func(in *Input) { set(in, condition.InstanceAllocated, condition.True, "InstanceAssociated") }, "InstanceAllocated=True"},
	{Available, func(in *Input) { set(in, condition.CustomerReady, condition.True, "ReadyTraitPresent") }, "CustomerReady=True"},
}

func TestDeriveEachRule(t *testing.T) {
	if got := Derive(healthyHeld()); got.Status != Held || !strings.Contains(got.Reason, "HealthyNotOffered") {
		t.Fatalf("baseline: got %+v, want HELD", got)
	}
	for _, r := range rules {
		t.Run(string(r.status), func(t *testing.T) {
			in := healthyHeld()
			r.trigger(&in)
			got := Derive(in)
			if got.Status != r.status {
				t.Fatalf("got %s (%s), want %s", got.Status, got.Reason, r.status)
			}
			if !strings.Contains(got.Reason, r.reason) {
				t.Fatalf("reason %q does not contain %q", got.Reason, r.reason)
			}
		})
	}
}

// TestDerivePrecedence checks every pair of rules: when both match, the
// earlier one in SPEC order wins; and every rule beats the HELD fallback.
func TestDerivePrecedence(t *testing.T) {
	for i, hi := range rules {
		for _, lo := range rules[i+1:] {
			t.Run(string(hi.status)+">"+string(lo.status), func(t *testing.T) {
				in := healthyHeld()
				lo.trigger(&in)
				hi.trigger(&in)
				if got := Derive(in); got.Status != hi.status {
					t.Fatalf("got %s (%s), want %s", got.Status, got.Reason, hi.status)
				}
			})
		}
	}
}

func TestDeriveEdgeCases(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*Input)
		want  Status
	}{
		{"missing Enrolled counts as not enrolled", func(in *Input) { delete(in.Conditions, condition.Enrolled) }, Onboarding},
		{"Enrolled Unknown is onboarding", func(in *Input) { set(in, condition.Enrolled, condition.Unknown, "IronicUnreachable") }, Onboarding},
		{"ProvisioningHealthy Unknown is not a fault", func(in *Input) {
			set(in, condition.ProvisioningHealthy, condition.Unknown, "UnrecognizedState")
		}, Held},
		{"MaintenanceClear Unknown is not maintenance", func(in *Input) {
			set(in, condition.MaintenanceClear, condition.Unknown, "FieldUnavailable")
		}, Held},
		{"CustomerReady Unknown is held", func(in *Input) {
			set(in, condition.CustomerReady, condition.Unknown, "PlacementUnreachable")
		}, Held},
		{"no conditions at all but reported", func(in *Input) { in.Conditions = nil }, Onboarding},
		{"quarantined and ready trait still present", func(in *Input) {
			in.Quarantined = true
			set(in, condition.CustomerReady, condition.True, "ReadyTraitPresent")
		}, Quarantined},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := healthyHeld()
			tc.setup(&in)
			if got := Derive(in); got.Status != tc.want {
				t.Fatalf("got %s (%s), want %s", got.Status, got.Reason, tc.want)
			}
		})
	}
}

func TestAllStatusesValid(t *testing.T) {
	if len(All) != 11 {
		t.Fatalf("SPEC has 11 statuses, All has %d", len(All))
	}
	for _, s := range All {
		if !s.Valid() {
			t.Fatalf("%s not valid", s)
		}
	}
	if Status("BROKEN").Valid() {
		t.Fatal("unknown status reported valid")
	}
}

// TestDeriveNamesRuleAndCondition checks that every result names the rule
// that matched (the one of its status) and the condition it looked at.
func TestDeriveNamesRuleAndCondition(t *testing.T) {
	behind := map[Status]condition.Type{
		Unknown: "", Unreachable: "", Onboarding: condition.Enrolled, Faulted: condition.ProvisioningHealthy,
		Maintenance: condition.MaintenanceClear, Quarantined: "", Validating: condition.InValidationPool,
		InService: condition.CustomerAllocated, Allocated: condition.InstanceAllocated,
		Available: condition.CustomerReady, Held: condition.CustomerReady,
	}
	check := func(got Result) {
		t.Helper()
		if got.Rule != RuleFor(got.Status) || got.Rule.Status() != got.Status {
			t.Errorf("%s: rule %v, want %v", got.Status, got.Rule, RuleFor(got.Status))
		}
		if got.Because != behind[got.Status] || got.Rule.Condition() != got.Because {
			t.Errorf("%s: because %q, want %q", got.Status, got.Because, behind[got.Status])
		}
		if !strings.HasPrefix(got.Rule.String(), fmt.Sprintf("%d. %s: ", int(got.Rule), got.Status)) {
			t.Errorf("rule text %q", got.Rule.String())
		}
	}
	check(Derive(healthyHeld()))
	for _, r := range rules {
		in := healthyHeld()
		r.trigger(&in)
		check(Derive(in))
	}
	if RuleFor("BOGUS") != 0 || Rule(0).Valid() || Rule(13).Valid() {
		t.Error("invalid statuses and rules must not map to a rule")
	}
}

// healthCond is a health condition of check with status st.
func healthCond(check string, st condition.Status, fatal bool, strategy int32, codes ...string) condition.Condition {
	return condition.Condition{Type: condition.HealthType("GPU", check), Status: st, Reason: "FatalError",
		Health: &condition.Health{ComponentClass: "GPU", CheckName: check, Fatal: fatal, ProcessingStrategy: strategy, ErrorCodes: codes}}
}

// The health rule (4b): a fatal unhealthy acting health condition makes
// the device FAULTED after rule 4 and before MAINTENANCE, naming the check
// and its codes; a non-fatal one is a warning and leaves the status; a
// store-only one, a healthy one and an Unknown (stale) one change nothing.
func TestDeriveHealthConditions(t *testing.T) {
	with := func(cs ...condition.Condition) Input {
		in := healthyHeld()
		for _, c := range cs {
			in.Conditions[c.Type] = c
		}
		return in
	}
	got := Derive(with(healthCond("GpuXidError", condition.False, true, 0, "79")))
	if got.Status != Faulted || got.Rule != RuleHealthFatal || got.Because != "health.GPU/GpuXidError" ||
		got.Reason != "health.GPU/GpuXidError=False: FatalError (79)" || got.Rule.String() != "4b. FAULTED: a fatal health check reports unhealthy" {
		t.Fatalf("fatal: %+v (%s)", got, got.Rule)
	}
	// Rule 4 first; MAINTENANCE and QUARANTINED after.
	in := with(healthCond("GpuXidError", condition.False, true, 0, "79"))
	in.Conditions[condition.ProvisioningHealthy] = condition.Condition{Type: condition.ProvisioningHealthy, Status: condition.False, Reason: "CleanFailed"}
	if got := Derive(in); got.Rule != RuleProvisioningBad {
		t.Errorf("ProvisioningHealthy=False and a fatal health check: rule %v, want 4", got.Rule)
	}
	in = with(healthCond("GpuXidError", condition.False, true, 0, "79"))
	in.Quarantined = true
	in.Conditions[condition.MaintenanceClear] = condition.Condition{Type: condition.MaintenanceClear, Status: condition.False, Reason: "Manual"}
	if got := Derive(in); got.Rule != RuleHealthFatal {
		t.Errorf("fatal health check in maintenance and quarantine: rule %v, want 4b", got.Rule)
	}
	// Two fatal checks: the first by type.
	got = Derive(with(healthCond("B", condition.False, true, 0), healthCond("A", condition.False, true, 0)))
	if got.Because != "health.GPU/A" {
		t.Errorf("two fatal checks: because %s, want health.GPU/A", got.Because)
	}
	for name, c := range map[string]condition.Condition{
		"non-fatal":  healthCond("GpuThermal", condition.False, false, 0),
		"store-only": healthCond("GpuXidError", condition.False, true, condition.StrategyStoreOnly),
		"healthy":    healthCond("GpuXidError", condition.True, true, 0),
		"stale":      healthCond("GpuXidError", condition.Unknown, true, 0),
		"unknown strategy acts only when fatal; non-fatal here": healthCond("GpuPower", condition.False, false, 77),
	} {
		if got := Derive(with(c)); got.Status != Held {
			t.Errorf("%s: status %s, want HELD (unchanged)", name, got.Status)
		}
	}
	got = Derive(with(healthCond("GpuThermal", condition.False, false, 0), healthCond("GpuXidError", condition.False, true, condition.StrategyStoreOnly)))
	if len(got.Warnings) != 1 || got.Warnings[0] != "health.GPU/GpuThermal" {
		t.Errorf("warnings %v, want the non-fatal acting check only", got.Warnings)
	}
	if got := Derive(with(healthCond("GpuXidError", condition.False, true, 77))); got.Status != Faulted {
		t.Errorf("an unknown processing strategy number acts: status %s", got.Status)
	}
}
