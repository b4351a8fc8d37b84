package conditions

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/condition"
)

func types(cs []condition.Condition) []condition.Type {
	var out []condition.Type
	for _, c := range cs {
		out = append(out, c.Type)
	}
	return out
}

func TestTrackerFirstObservationIsFull(t *testing.T) {
	tr := NewTracker()
	o := base()
	changed := tr.Observe("d1", Map(Config{}, o))
	if !slices.Equal(types(changed), condition.Types) {
		t.Fatalf("first observation changed %v", types(changed))
	}
	if got := tr.Observe("d1", Map(Config{}, o)); got != nil {
		t.Fatalf("same observation again changed %v", types(got))
	}
	if !slices.Equal(tr.Devices(), []string{"d1"}) {
		t.Errorf("Devices %v", tr.Devices())
	}
	if !slices.Equal(types(tr.All("d1")), condition.Types) {
		t.Errorf("All %v", types(tr.All("d1")))
	}
	if tr.All("nope") != nil {
		t.Error("All of an unknown device not nil")
	}
}

func TestTrackerTransitionTimes(t *testing.T) {
	var tr Tracker // zero value works
	o := base()
	pua0 := o.Node.ProvisionUpdatedAt
	tr.Observe("d", Map(Config{}, o))
	ph, _ := tr.Get("d", condition.ProvisioningHealthy)
	if !ph.LastTransitionTime.Equal(pua0) {
		t.Fatalf("initial LTT %v, want provision_updated_at %v", ph.LastTransitionTime, pua0)
	}

	// Later poll, same status, different reason (available → cleaning is
	// still True): LTT kept, reason/message delta sent.
	o.Now = t0.Add(time.Minute)
	o.Node.ProvisionState, o.Node.TargetProvisionState, o.Node.ProvisionUpdatedAt = "cleaning", "available", t0.Add(30*time.Second)
	changed := tr.Observe("d", Map(Config{}, o))
	if !slices.Equal(types(changed), []condition.Type{condition.ProvisioningHealthy}) {
		t.Fatalf("changed %v", types(changed))
	}
	if !changed[0].LastTransitionTime.Equal(pua0) {
		t.Errorf("status unchanged but LTT moved to %v", changed[0].LastTransitionTime)
	}
	if !changed[0].ObservedTime.Equal(o.Now) {
		t.Errorf("ObservedTime %v", changed[0].ObservedTime)
	}

	// Status change driven by the provision state: LTT = provision_updated_at.
	o.Now = t0.Add(2 * time.Minute)
	failAt := t0.Add(90 * time.Second)
	o.Node.ProvisionState, o.Node.TargetProvisionState, o.Node.ProvisionUpdatedAt = "clean failed", "", failAt
	changed = tr.Observe("d", Map(Config{}, o))
	if len(changed) != 1 || changed[0].Status != condition.False || !changed[0].LastTransitionTime.Equal(failAt) {
		t.Fatalf("changed %+v", changed)
	}

	// Status change not driven by provisioning: LTT = poll time.
	o.Now = t0.Add(3 * time.Minute)
	o.Node.Maintenance, o.Node.MaintenanceReason = true, "ops"
	changed = tr.Observe("d", Map(Config{}, o))
	if len(changed) != 1 || changed[0].Type != condition.MaintenanceClear || !changed[0].LastTransitionTime.Equal(o.Now) {
		t.Fatalf("changed %+v", changed)
	}

	// The stored conditions carry the latest ObservedTime even when unchanged.
	o.Now = t0.Add(4 * time.Minute)
	if got := tr.Observe("d", Map(Config{}, o)); got != nil {
		t.Fatalf("changed %v", types(got))
	}
	for _, c := range tr.All("d") {
		if !c.ObservedTime.Equal(o.Now) {
			t.Errorf("%s ObservedTime %v", c.Type, c.ObservedTime)
		}
	}
}

func TestTrackerNeverMovesBackwards(t *testing.T) {
	tr := NewTracker()
	now := t0
	c := condition.Condition{Type: condition.Enrolled, Status: condition.True, Reason: ReasonEnrolled, LastTransitionTime: now, ObservedTime: now}
	tr.Observe("d", []condition.Condition{c})
	// A status change whose proposed time is older than the last transition
	// (e.g. a stale provision_updated_at) is clamped to the observation time.
	c2 := condition.Condition{Type: condition.Enrolled, Status: condition.False, Reason: ReasonNotVerified, LastTransitionTime: now.Add(-time.Hour), ObservedTime: now.Add(time.Minute)}
	got := tr.Observe("d", []condition.Condition{c2})
	if len(got) != 1 || !got[0].LastTransitionTime.Equal(now.Add(time.Minute)) {
		t.Fatalf("got %+v", got)
	}
	// Zero times are filled in.
	c3 := condition.Condition{Type: condition.MaintenanceClear, Status: condition.True, Reason: ReasonNoMaintenance}
	got = tr.Observe("d", []condition.Condition{c3})
	if len(got) != 1 || got[0].ObservedTime.IsZero() || !got[0].LastTransitionTime.Equal(got[0].ObservedTime) {
		t.Fatalf("got %+v", got)
	}
	// Unknown types are ignored.
	if got := tr.Observe("d", []condition.Condition{{Type: "Bogus", Status: condition.True, Reason: "X"}}); got != nil {
		t.Fatalf("bogus type tracked: %+v", got)
	}
}

func TestTrackerGenerationChangeIsDelta(t *testing.T) {
	tr := NewTracker()
	o := base()
	o.Quarantined, o.AppliedGeneration = false, 1
	tr.Observe("d", Map(Config{}, o))
	o.AppliedGeneration = 2 // release re-applied with a newer generation, same trait state
	changed := tr.Observe("d", Map(Config{}, o))
	if len(changed) != 1 || changed[0].Type != condition.CustomerReady || changed[0].ObservedGeneration != 2 {
		t.Fatalf("changed %+v", changed)
	}
}

func TestTrackerForget(t *testing.T) {
	tr := NewTracker()
	tr.Observe("a", Map(Config{}, base()))
	tr.Observe("b", Map(Config{}, base()))
	tr.Forget("a")
	if !slices.Equal(tr.Devices(), []string{"b"}) {
		t.Fatalf("Devices %v", tr.Devices())
	}
	if _, ok := tr.Get("a", condition.Enrolled); ok {
		t.Fatal("forgotten device still has conditions")
	}
	if got := tr.Observe("a", Map(Config{}, base())); len(got) != len(condition.Types) {
		t.Fatalf("re-observed forgotten device: %d changes", len(got))
	}
}

// BenchmarkTrackerObserve observes 10,000 unchanged devices (a quiet poll).
func BenchmarkTrackerObserve(b *testing.B) {
	tr := NewTracker()
	const n = 10000
	ids := make([]string, n)
	conds := Map(Config{}, base())
	for i := range ids {
		ids[i] = fmt.Sprintf("dev-%05d", i)
		tr.Observe(ids[i], conds)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, id := range ids {
			tr.Observe(id, conds)
		}
	}
}
