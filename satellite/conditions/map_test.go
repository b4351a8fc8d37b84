package conditions

import (
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/satellite/ironic"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// base is a healthy, available node on a Nova site with the gate open.
func base() Observation {
	return Observation{
		Node: ironic.Node{
			UUID: "0b0b0b0b-0000-0000-0000-000000000001", Name: "node-001",
			ProvisionState: "available", PowerState: "power off",
			ResourceClass: "gpu-h100", Traits: []string{ReadyTrait},
			ProvisionUpdatedAt: t0.Add(-time.Hour),
		},
		Now:       t0,
		Placement: PlacementView{Read: true, ProviderExists: true, HasTrait: true, TraitDefined: true},
	}
}

func get(t *testing.T, cs []condition.Condition, ty condition.Type) condition.Condition {
	t.Helper()
	for _, c := range cs {
		if c.Type == ty {
			return c
		}
	}
	t.Fatalf("no %s condition in %v", ty, cs)
	return condition.Condition{}
}

type want struct {
	status  condition.Status
	reason  string
	message string // substring; "" = must be empty when exact is set
	exact   bool
}

func check(t *testing.T, c condition.Condition, w want) {
	t.Helper()
	if c.Status != w.status || c.Reason != w.reason {
		t.Errorf("%s = %s/%s (%q), want %s/%s", c.Type, c.Status, c.Reason, c.Message, w.status, w.reason)
	}
	if w.exact && c.Message != w.message {
		t.Errorf("%s message = %q, want %q", c.Type, c.Message, w.message)
	}
	if !w.exact && !strings.Contains(c.Message, w.message) {
		t.Errorf("%s message = %q, want it to contain %q", c.Type, c.Message, w.message)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("%s invalid: %v", c.Type, err)
	}
}

func TestMapAlwaysSevenInOrder(t *testing.T) {
	cs := Map(Config{}, base())
	if len(cs) != len(condition.Types) {
		t.Fatalf("got %d conditions", len(cs))
	}
	for i, c := range cs {
		if c.Type != condition.Types[i] {
			t.Errorf("#%d is %s, want %s", i, c.Type, condition.Types[i])
		}
		if !c.ObservedTime.Equal(t0) || c.ObservedTime.Location() != time.UTC {
			t.Errorf("%s observed time %v", c.Type, c.ObservedTime)
		}
		if err := c.Validate(); err != nil {
			t.Error(err)
		}
	}
}

func TestMapEnrolled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state string
		err   string
		miss  bool
		w     want
		ltt   time.Time
	}{
		{"available", "available", "", false, want{condition.True, ReasonEnrolled, "", true}, t0.Add(-time.Hour)},
		{"manageable", "manageable", "", false, want{condition.True, ReasonEnrolled, "", true}, t0.Add(-time.Hour)},
		{"failure still enrolled", "clean failed", "", false, want{condition.True, ReasonEnrolled, "", true}, t0.Add(-time.Hour)},
		{"enroll without error", "enroll", "", false, want{condition.False, ReasonNotVerified, "not verified yet", false}, t0.Add(-time.Hour)},
		{"enroll with bad credentials", "enroll", "Failed to get power state: IPMI authentication failed at 2026-11-29T11:00:01.123456+00:00", false,
			want{condition.False, ReasonNotVerified, "verification failed: Failed to get power state: IPMI authentication failed at <time>", true}, t0.Add(-time.Hour)},
		{"verifying", "verifying", "", false, want{condition.False, ReasonVerifying, "verifying", false}, t0.Add(-time.Hour)},
		{"empty state", "", "", false, want{condition.Unknown, ReasonUnrecognizedState, "empty", false}, t0},
		{"field missing", "", "", true, want{condition.Unknown, ReasonFieldUnavailable, "provision_state", false}, t0},
		{"unknown future state still enrolled", "frobnicating", "", false, want{condition.True, ReasonEnrolled, "", true}, t0.Add(-time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			o.Node.ProvisionState, o.Node.LastError = tc.state, tc.err
			if tc.miss {
				o.Node.Missing = map[string]bool{"provision_state": true}
			}
			c := get(t, Map(Config{}, o), condition.Enrolled)
			check(t, c, tc.w)
			if !c.LastTransitionTime.Equal(tc.ltt) {
				t.Errorf("LastTransitionTime %v, want %v", c.LastTransitionTime, tc.ltt)
			}
		})
	}
}

func TestMapProvisioningHealthy(t *testing.T) {
	longErr := strings.Repeat("x", 5000)
	for _, tc := range []struct {
		name, state, target, lastErr string
		pua                          time.Duration // before t0; 0 = null
		w                            want
	}{
		{"available", "available", "", "", time.Hour, want{condition.True, ReasonAvailable, "", true}},
		{"active", "active", "", "", time.Hour, want{condition.True, ReasonActive, "", true}},
		{"manageable", "manageable", "", "", time.Hour, want{condition.True, ReasonManageable, "", true}},
		{"enroll", "enroll", "", "", time.Hour, want{condition.True, ReasonEnroll, "", true}},
		{"rescue", "rescue", "", "", time.Hour, want{condition.True, ReasonRescue, "", true}},
		{"cleaning", "cleaning", "available", "", time.Minute, want{condition.True, ReasonTransitioning, "cleaning → available", true}},
		{"deploying", "deploying", "active", "", time.Minute, want{condition.True, ReasonTransitioning, "deploying → active", true}},
		{"verifying", "verifying", "manageable", "", time.Minute, want{condition.True, ReasonTransitioning, "verifying → manageable", true}},
		{"deleting", "deleting", "available", "", time.Minute, want{condition.True, ReasonTransitioning, "deleting → available", true}},
		{"inspecting no target", "inspecting", "", "", time.Minute, want{condition.True, ReasonTransitioning, "inspecting", true}},
		{"adopting", "adopting", "active", "", time.Minute, want{condition.True, ReasonTransitioning, "adopting → active", true}},
		{"rescuing", "rescuing", "rescue", "", time.Minute, want{condition.True, ReasonTransitioning, "rescuing → rescue", true}},
		{"unrescuing", "unrescuing", "active", "", time.Minute, want{condition.True, ReasonTransitioning, "unrescuing → active", true}},
		{"servicing", "servicing", "active", "", time.Minute, want{condition.True, ReasonTransitioning, "servicing → active", true}},
		{"clean wait fresh", "clean wait", "available", "", 10 * time.Minute, want{condition.True, ReasonTransitioning, "clean wait → available", true}},
		{"wait call-back fresh", "wait call-back", "active", "", 29 * time.Minute, want{condition.True, ReasonTransitioning, "wait call-back → active", true}},
		{"wait with null timestamp", "clean wait", "available", "", 0, want{condition.True, ReasonTransitioning, "clean wait → available", true}},
		{"clean wait stalled", "clean wait", "available", "", 31 * time.Minute, want{condition.False, ReasonTransitionStalled, "clean wait → available since 2026-11-29T11:29:00Z, longer than the 30m0s callback timeout", true}},
		{"inspect wait stalled", "inspect wait", "manageable", "", 2 * time.Hour, want{condition.False, ReasonTransitionStalled, "inspect wait", false}},
		{"rescue wait stalled", "rescue wait", "rescue", "", 2 * time.Hour, want{condition.False, ReasonTransitionStalled, "rescue wait", false}},
		{"service wait stalled", "service wait", "active", "", 2 * time.Hour, want{condition.False, ReasonTransitionStalled, "service wait", false}},
		{"wait call-back stalled", "wait call-back", "active", "", 2 * time.Hour, want{condition.False, ReasonTransitionStalled, "wait call-back", false}},
		{"clean hold", "clean hold", "available", "", time.Hour, want{condition.True, ReasonHeld, "clean hold → available", true}},
		{"deploy hold", "deploy hold", "active", "", time.Hour, want{condition.True, ReasonHeld, "deploy hold → active", true}},
		{"service hold", "service hold", "active", "", time.Hour, want{condition.True, ReasonHeld, "service hold → active", true}},
		{"deploy failed with error", "deploy failed", "", "Failed to prepare the configdrive (Request-ID: req-0123abcd-0123-4567-89ab-0123456789ab)", time.Hour,
			want{condition.False, ReasonDeployFailed, "Failed to prepare the configdrive", true}},
		{"deploy failed null error", "deploy failed", "", "", time.Hour, want{condition.False, ReasonDeployFailed, `provision state "deploy failed" (Ironic reported no last_error)`, true}},
		{"clean failed null error", "clean failed", "", "", time.Hour, want{condition.False, ReasonCleanFailed, "no last_error", false}},
		{"inspect failed", "inspect failed", "", "boom", time.Hour, want{condition.False, ReasonInspectFailed, "boom", true}},
		{"rescue failed", "rescue failed", "", "boom", time.Hour, want{condition.False, ReasonRescueFailed, "boom", true}},
		{"unrescue failed", "unrescue failed", "", "boom", time.Hour, want{condition.False, ReasonUnrescueFailed, "boom", true}},
		{"adopt failed", "adopt failed", "", "boom", time.Hour, want{condition.False, ReasonAdoptFailed, "boom", true}},
		{"service failed", "service failed", "", "boom", time.Hour, want{condition.False, ReasonServiceFailed, "boom", true}},
		{"error is teardown failure", "error", "", "Failed to tear down: timeout", time.Hour, want{condition.False, ReasonTeardownFailed, "Failed to tear down: timeout", true}},
		{"long last_error truncated", "deploy failed", "", longErr, time.Hour, want{condition.False, ReasonDeployFailed, "…", false}},
		{"unknown state", "frobnicating", "", "", time.Hour, want{condition.Unknown, ReasonUnrecognizedState, `provision state "frobnicating" is not known`, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			o.Node.ProvisionState, o.Node.TargetProvisionState, o.Node.LastError = tc.state, tc.target, tc.lastErr
			o.Node.ProvisionUpdatedAt = time.Time{}
			if tc.pua != 0 {
				o.Node.ProvisionUpdatedAt = t0.Add(-tc.pua)
			}
			c := get(t, Map(Config{}, o), condition.ProvisioningHealthy)
			check(t, c, tc.w)
			if len(c.Message) > condition.MaxMessageBytes {
				t.Errorf("message %d bytes", len(c.Message))
			}
			switch {
			case c.Reason == ReasonTransitionStalled:
				if want := o.Node.ProvisionUpdatedAt.Add(CallbackTimeout); !c.LastTransitionTime.Equal(want) {
					t.Errorf("stall LTT %v, want %v", c.LastTransitionTime, want)
				}
			case c.Reason == ReasonUnrecognizedState || tc.pua == 0:
				if !c.LastTransitionTime.Equal(t0) {
					t.Errorf("LTT %v, want now", c.LastTransitionTime)
				}
			default:
				if !c.LastTransitionTime.Equal(o.Node.ProvisionUpdatedAt) {
					t.Errorf("LTT %v, want provision_updated_at %v", c.LastTransitionTime, o.Node.ProvisionUpdatedAt)
				}
			}
		})
	}
}

func TestMapProvisionUpdatedAtInFutureUsesNow(t *testing.T) {
	o := base()
	o.Node.ProvisionUpdatedAt = t0.Add(time.Hour) // clock skew
	c := get(t, Map(Config{}, o), condition.ProvisioningHealthy)
	if !c.LastTransitionTime.Equal(t0) {
		t.Errorf("LTT %v, want now", c.LastTransitionTime)
	}
}

func TestMapMaintenanceClear(t *testing.T) {
	for _, tc := range []struct {
		name, fault, reason string
		maint               bool
		missing             []string
		w                   want
	}{
		{"no maintenance", "", "", false, nil, want{condition.True, ReasonNoMaintenance, "", true}},
		{"manual", "", "PSU 2 failed, waiting for DC ops", true, nil, want{condition.False, ReasonManual, "PSU 2 failed, waiting for DC ops", true}},
		{"manual without reason", "", "", true, nil, want{condition.False, ReasonManual, "maintenance set without a reason", true}},
		{"power failure", "power failure", "During sync_power_state, max retries exceeded for node X, node state None does not match expected state 'power on'. Updating DB state to 'None' Switching node to maintenance mode. Error: IPMI call failed: power status.", true, nil,
			want{condition.False, ReasonPowerFailure, "During sync_power_state", false}},
		{"power failure without reason", "power failure", "", true, nil, want{condition.False, ReasonPowerFailure, "Ironic set maintenance: power failure", true}},
		{"clean failure", "clean failure", "step failed", true, nil, want{condition.False, ReasonCleanFailure, "step failed", true}},
		{"rescue abort failure", "rescue abort failure", "x", true, nil, want{condition.False, ReasonRescueAbortFailure, "x", true}},
		{"service failure", "service failure", "x", true, nil, want{condition.False, ReasonServiceFailure, "x", true}},
		{"unknown fault", "bmc lost contact", "x", true, nil, want{condition.False, "BmcLostContact", "x", true}},
		{"fault field unavailable", "", "x", true, []string{"fault"}, want{condition.False, ReasonUnspecified, "x", true}},
		{"maintenance field missing", "", "", false, []string{"maintenance"}, want{condition.Unknown, ReasonFieldUnavailable, "maintenance", false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			o.Node.Maintenance, o.Node.Fault, o.Node.MaintenanceReason = tc.maint, tc.fault, tc.reason
			for _, m := range tc.missing {
				if o.Node.Missing == nil {
					o.Node.Missing = map[string]bool{}
				}
				o.Node.Missing[m] = true
			}
			check(t, get(t, Map(Config{}, o), condition.MaintenanceClear), tc.w)
		})
	}
}

// A flapping power failure: Ironic sets and clears maintenance every few
// minutes with a reason text whose volatile parts differ; the message must
// be identical each time it comes back.
func TestMapPowerFailureFlapKeepsMessageStable(t *testing.T) {
	reasons := []string{
		"During sync_power_state, max retries exceeded for node n1, node state None does not match expected state 'power on'. Error: IPMI error at 2026-11-29T12:00:01.000001+00:00 (Request-ID: req-11111111-2222-3333-4444-555555555555) <Socket object at 0x7f3a2b1c9d80>",
		"During sync_power_state, max retries exceeded for node n1, node state None does not match expected state 'power on'.\n  Error: IPMI error at 2026-11-29 12:05:07 (Request-ID: req-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee) <Socket object at 0x7f3a2b1caa10>",
	}
	tr := NewTracker()
	var msgs []string
	for i := range 6 {
		o := base()
		o.Now = t0.Add(time.Duration(i) * 5 * time.Minute)
		if i%2 == 0 {
			o.Node.Maintenance, o.Node.Fault, o.Node.MaintenanceReason = true, "power failure", reasons[(i/2)%2]
		}
		changed := tr.Observe(o.Node.UUID, Map(Config{}, o))
		for _, c := range changed {
			if c.Type == condition.MaintenanceClear && c.Status == condition.False {
				msgs = append(msgs, c.Message)
			}
		}
		if i > 0 && len(changed) != 1 {
			t.Errorf("poll %d: %d changes, want only MaintenanceClear: %v", i, len(changed), changed)
		}
	}
	if len(msgs) != 3 {
		t.Fatalf("got %d maintenance deltas", len(msgs))
	}
	for _, m := range msgs[1:] {
		if m != msgs[0] {
			t.Errorf("message changed between flaps:\n%q\n%q", msgs[0], m)
		}
	}
}

func TestMapInValidationPool(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sel     string
		mutate  func(*ironic.Node)
		w       want
		wantErr bool
	}{
		{"no pool", "", nil, want{condition.False, ReasonNotInPool, "no validation pool is configured for this site", true}, false},
		{"resource class match", "resource_class=gpu-h100", nil, want{condition.True, ReasonMatchesSelector, "matches resource_class=gpu-h100", true}, false},
		{"resource class mismatch", "resource_class=gpu-a100", nil, want{condition.False, ReasonNotInPool, "does not match resource_class=gpu-a100", true}, false},
		{"trait match", "trait=CUSTOM_VALIDATION", func(n *ironic.Node) { n.Traits = append(n.Traits, "CUSTOM_VALIDATION") }, want{condition.True, ReasonMatchesSelector, "trait=CUSTOM_VALIDATION", false}, false},
		{"trait mismatch", "trait=CUSTOM_VALIDATION", nil, want{condition.False, ReasonNotInPool, "", false}, false},
		{"owner match", "owner=p-internal", func(n *ironic.Node) { n.Owner = "p-internal" }, want{condition.True, ReasonMatchesSelector, "", false}, false},
		{"conductor group case-insensitive", "conductor_group=Pool", func(n *ironic.Node) { n.ConductorGroup = "pool" }, want{condition.True, ReasonMatchesSelector, "", false}, false},
		{"all keys must match", "resource_class=gpu-h100,conductor_group=pool", func(n *ironic.Node) { n.ConductorGroup = "other" }, want{condition.False, ReasonNotInPool, "", false}, false},
		{"owner unavailable", "owner=p", func(n *ironic.Node) { n.Missing = map[string]bool{"owner": true} }, want{condition.Unknown, ReasonFieldUnavailable, "needs owner", false}, false},
		{"known mismatch beats unavailable", "owner=p,resource_class=gpu-a100", func(n *ironic.Node) { n.Missing = map[string]bool{"owner": true} }, want{condition.False, ReasonNotInPool, "", false}, false},
		{"traits unavailable", "trait=CUSTOM_X", func(n *ironic.Node) { n.Traits = nil; n.Missing = map[string]bool{"traits": true} }, want{condition.Unknown, ReasonFieldUnavailable, "traits", false}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := ParseSelector(tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			o := base()
			if tc.mutate != nil {
				tc.mutate(&o.Node)
			}
			check(t, get(t, Map(Config{ValidationPool: sel}, o), condition.InValidationPool), tc.w)
		})
	}
}

func TestParseSelector(t *testing.T) {
	good := map[string]Selector{
		"":    {},
		"   ": {},
		"resource_class=gpu-h100,conductor_group=pool": {ResourceClass: "gpu-h100", ConductorGroup: "pool"},
		" trait = CUSTOM_VALIDATION , owner=abc ":      {Trait: "CUSTOM_VALIDATION", Owner: "abc"},
	}
	for in, w := range good {
		got, err := ParseSelector(in)
		if err != nil || got != w {
			t.Errorf("ParseSelector(%q) = %+v, %v; want %+v", in, got, err, w)
		}
		if back, err := ParseSelector(got.String()); err != nil || back != got {
			t.Errorf("round trip of %q: %+v %v", in, back, err)
		}
	}
	for _, in := range []string{"resource_class", "colour=red", "owner=a,owner=b", "owner=", "trait=lower_case", "resource_class=a,,owner=b"} {
		if _, err := ParseSelector(in); err == nil {
			t.Errorf("ParseSelector(%q): no error", in)
		}
	}
}

func TestMapInstanceAllocated(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		standalone            bool
		inst, alloc, mismatch string
		w                     want
	}{
		{"none", false, "", "", "", want{condition.False, ReasonNoInstance, "", true}},
		{"nova instance", false, "i-1", "", "", want{condition.True, ReasonNovaInstance, "instance i-1", true}},
		{"allocation", false, "a-1", "a-1", "", want{condition.True, ReasonIronicAllocation, "allocation a-1", true}},
		{"standalone instance_uuid", true, "i-1", "", "", want{condition.True, ReasonInstanceAssociated, "instance_uuid i-1", true}},
		{"standalone allocation", true, "a-1", "a-1", "", want{condition.True, ReasonIronicAllocation, "allocation a-1", true}},
		{"allocation only", true, "", "a-1", "", want{condition.True, ReasonIronicAllocation, "", false}},
		{"mismatch from sweep, Ironic holds the node", false, "i-1", "", "Ironic points at instance i-1, which Nova does not know", want{condition.True, ReasonInstanceRecordMismatch, "Nova does not know", false}},
		{"mismatch from sweep, Ironic says free", false, "", "", "Nova server s-1 runs on this node, but Ironic has no instance_uuid", want{condition.Unknown, ReasonInstanceRecordMismatch, "Nova server s-1", false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			o.Node.InstanceUUID, o.Node.AllocationUUID, o.InstanceMismatch = tc.inst, tc.alloc, tc.mismatch
			check(t, get(t, Map(Config{Standalone: tc.standalone}, o), condition.InstanceAllocated), tc.w)
		})
	}
}

func TestMapCustomerAllocated(t *testing.T) {
	cfg := Config{InternalProjects: []string{"p-ops", "p-validation"}}
	for _, tc := range []struct {
		name                  string
		inst, lessee, project string
		missing               []string
		w                     want
	}{
		{"nothing", "", "", "", nil, want{condition.False, ReasonNotAllocated, "", true}},
		{"customer instance", "i-1", "", "p-cust", nil, want{condition.True, ReasonCustomerProject, "instance project p-cust", true}},
		{"internal instance", "i-1", "", "p-ops", nil, want{condition.False, ReasonInternalProject, "p-ops", false}},
		{"customer lessee no instance", "", "p-cust", "", nil, want{condition.True, ReasonCustomerProject, "lessee p-cust", true}},
		{"internal lessee no instance", "", "p-ops", "", nil, want{condition.False, ReasonInternalProject, "lessee p-ops", false}},
		{"customer lessee, instance project unknown", "i-1", "p-cust", "", nil, want{condition.True, ReasonCustomerProject, "lessee p-cust", true}},
		{"internal lessee, customer instance", "i-1", "p-ops", "p-cust", nil, want{condition.True, ReasonCustomerProject, "instance project p-cust", true}},
		{"instance project unknown", "i-1", "", "", nil, want{condition.Unknown, ReasonProjectUnknown, "instance i-1", false}},
		{"instance project unknown, internal lessee", "i-1", "p-ops", "", nil, want{condition.Unknown, ReasonProjectUnknown, "lessee p-ops is internal", false}},
		{"instance project unknown, lessee unavailable", "i-1", "", "", []string{"lessee"}, want{condition.Unknown, ReasonProjectUnknown, "not available at this Ironic microversion", false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			o.Node.InstanceUUID, o.Node.Lessee, o.InstanceProject = tc.inst, tc.lessee, tc.project
			for _, m := range tc.missing {
				o.Node.Missing = map[string]bool{m: true}
			}
			check(t, get(t, Map(cfg, o), condition.CustomerAllocated), tc.w)
		})
	}
	// Without internal projects every project is a customer.
	o := base()
	o.Node.Lessee = "p-ops"
	check(t, get(t, Map(Config{}, o), condition.CustomerAllocated), want{condition.True, ReasonCustomerProject, "", false})
}

func TestMapCustomerReady(t *testing.T) {
	for _, tc := range []struct {
		name        string
		standalone  bool
		pv          PlacementView
		nodeTrait   bool
		missing     bool
		quarantined bool
		gen         int64
		w           want
	}{
		{"nova present", false, PlacementView{true, true, true, true}, true, false, false, 0, want{condition.True, ReasonReadyTraitPresent, "CUSTOM_CUSTOMER_READY on the resource provider", true}},
		{"nova present, release applied", false, PlacementView{true, true, true, true}, true, false, false, 4, want{condition.True, ReasonReadyTraitPresent, "CUSTOM_CUSTOMER_READY on the resource provider", true}},
		{"nova present, quarantine pending", false, PlacementView{true, true, true, true}, true, false, true, 5, want{condition.True, ReasonReadyTraitPresent, "quarantine (generation 5) not applied yet", false}},
		{"nova quarantined", false, PlacementView{true, true, false, true}, false, false, true, 5, want{condition.False, ReasonQuarantined, "quarantined (generation 5)", false}},
		{"nova absent, never touched", false, PlacementView{true, true, false, true}, false, false, false, 0, want{condition.False, ReasonTraitAbsent, "CUSTOM_CUSTOMER_READY absent from the resource provider", true}},
		{"nova absent, release pending", false, PlacementView{true, true, false, true}, false, false, false, 3, want{condition.False, ReasonTraitAbsent, "release (generation 3) not applied yet", false}},
		{"nova drift provider only", false, PlacementView{true, true, true, true}, false, false, false, 0, want{condition.True, ReasonReadyTraitPresent, "the Ironic node lacks it (drift", false}},
		{"nova drift node only", false, PlacementView{true, true, false, true}, true, false, false, 0, want{condition.False, ReasonTraitAbsent, "the Ironic node has it (drift", false}},
		{"nova node traits unavailable: no drift note", false, PlacementView{true, true, true, true}, false, true, false, 0, want{condition.True, ReasonReadyTraitPresent, "CUSTOM_CUSTOMER_READY on the resource provider", true}},
		{"provider missing", false, PlacementView{true, false, false, true}, true, false, false, 0, want{condition.False, ReasonResourceProviderMissing, "no resource provider", false}},
		{"trait not defined", false, PlacementView{true, true, false, false}, false, false, false, 0, want{condition.False, ReasonTraitNotDefined, "not defined in Placement", false}},
		{"placement unreachable", false, PlacementView{}, true, false, false, 0, want{condition.Unknown, ReasonPlacementUnreachable, "", false}},
		{"standalone present", true, PlacementView{}, true, false, false, 0, want{condition.True, ReasonReadyTraitPresent, "CUSTOM_CUSTOMER_READY on the Ironic node", true}},
		{"standalone quarantined", true, PlacementView{}, false, false, true, 9, want{condition.False, ReasonQuarantined, "absent from the Ironic node", false}},
		{"standalone absent", true, PlacementView{}, false, false, false, 0, want{condition.False, ReasonTraitAbsent, "", false}},
		{"standalone traits unavailable", true, PlacementView{}, false, true, false, 0, want{condition.Unknown, ReasonFieldUnavailable, "traits", false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			o.Placement, o.Quarantined, o.AppliedGeneration = tc.pv, tc.quarantined, tc.gen
			o.Node.Traits = []string{"CUSTOM_GPU"}
			if tc.nodeTrait {
				o.Node.Traits = append(o.Node.Traits, ReadyTrait)
			}
			if tc.missing {
				o.Node.Traits, o.Node.Missing = nil, map[string]bool{"traits": true}
			}
			cs := Map(Config{Standalone: tc.standalone}, o)
			c := get(t, cs, condition.CustomerReady)
			check(t, c, tc.w)
			if c.ObservedGeneration != tc.gen {
				t.Errorf("ObservedGeneration %d, want %d", c.ObservedGeneration, tc.gen)
			}
			for _, other := range cs {
				if other.Type != condition.CustomerReady && other.ObservedGeneration != 0 {
					t.Errorf("%s has ObservedGeneration %d", other.Type, other.ObservedGeneration)
				}
			}
		})
	}
}

func TestClean(t *testing.T) {
	for in, w := range map[string]string{
		"":             "",
		"  a \n\t b  ": "a b",
		"Timeout at 2026-11-29T18:00:00Z and 2026-11-29 18:00:00.123,":             "Timeout at <time> and <time>,",
		"IPMI failed (Request-ID: req-0123abcd-0123-4567-89ab-0123456789ab) retry": "IPMI failed retry",
		"conn req-0123abcd-0123-4567-89ab-0123456789ab lost":                       "conn lost",
		"<object at 0x7f3a2b1c9d80>":                                               "<object at <addr>>",
	} {
		if got := Clean(in); got != w {
			t.Errorf("Clean(%q) = %q, want %q", in, got, w)
		}
	}
	if got := Clean(strings.Repeat("é", 2000)); len(got) > condition.MaxMessageBytes || !strings.HasSuffix(got, "…") {
		t.Errorf("long message not truncated: %d bytes", len(got))
	}
}

func TestCamel(t *testing.T) {
	for in, w := range map[string]string{"bmc lost contact": "BmcLostContact", "x-y_z": "XYZ", "42 things": "Fault42Things", "": "Fault", "ünïcode": "NCode"} {
		if got := camel(in); got != w {
			t.Errorf("camel(%q) = %q, want %q", in, got, w)
		}
	}
}

// BenchmarkMap maps one node with a last_error and maintenance reason.
func BenchmarkMap(b *testing.B) {
	sel, _ := ParseSelector("resource_class=gpu-h100,conductor_group=pool")
	cfg := Config{ValidationPool: sel, InternalProjects: []string{"a", "b", "c"}}
	o := base()
	o.Node.ProvisionState, o.Node.LastError = "deploy failed", "Failed to prepare the configdrive at 2026-11-29T18:00:00Z (Request-ID: req-0123abcd-0123-4567-89ab-0123456789ab)"
	o.Node.Maintenance, o.Node.Fault, o.Node.MaintenanceReason = true, "power failure", "During sync_power_state, max retries exceeded"
	o.Node.InstanceUUID, o.Node.Lessee = "i-1", "p-cust"
	b.ReportAllocs()
	for b.Loop() {
		Map(cfg, o)
	}
}

// BenchmarkMapHealthy maps a healthy node (the common case).
func BenchmarkMapHealthy(b *testing.B) {
	o := base()
	b.ReportAllocs()
	for b.Loop() {
		Map(Config{}, o)
	}
}
