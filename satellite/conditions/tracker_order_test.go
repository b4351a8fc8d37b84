package conditions

import (
	"slices"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/condition"
)

// Conditions given out of condition.Types order, with gaps and an unknown
// type, land in their own slots: All answers in Types order, Get finds
// each, the unknown one is ignored, and a repeat reports nothing changed.
func TestTrackerOrderIndependent(t *testing.T) {
	now := time.Now().UTC()
	var conds []condition.Condition
	for _, ty := range []condition.Type{condition.CustomerReady, condition.Enrolled, "Bogus", condition.MaintenanceClear} {
		conds = append(conds, condition.Condition{Type: ty, Status: condition.True, Reason: "R" + string(ty[:1]), ObservedTime: now})
	}
	tr := NewTracker()
	if got := tr.Observe("d", conds); len(got) != 3 {
		t.Fatalf("first observation changed %d, want 3", len(got))
	}
	var order []condition.Type
	for _, c := range tr.All("d") {
		order = append(order, c.Type)
	}
	if want := []condition.Type{condition.Enrolled, condition.MaintenanceClear, condition.CustomerReady}; !slices.Equal(order, want) {
		t.Fatalf("All order %v, want %v", order, want)
	}
	if c, ok := tr.Get("d", condition.CustomerReady); !ok || c.Reason != "RC" {
		t.Fatalf("Get CustomerReady %v %v", c, ok)
	}
	if _, ok := tr.Get("d", condition.InstanceAllocated); ok {
		t.Fatal("Get of a type never observed")
	}
	slices.Reverse(conds)
	if got := tr.Observe("d", conds); len(got) != 0 {
		t.Fatalf("repeat in another order changed %v", got)
	}
}
