package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
)

// A condition re-sent with the same status but a later
// last_transition_time (a restarted satellite knows no earlier one) keeps
// the stored transition time and writes no history row; a changed reason
// with the same status writes a row but keeps the time; a changed status
// takes the new time. (Before the fix a restarted satellite reset
// last_transition_time of every condition.)
func TestSameStatusKeepsLastTransitionTime(t *testing.T) {
	ctx := context.Background()
	s, url := newStore(t)
	sess := open(t, s, "site-a")
	id := uuid.NewString()
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Microsecond)
	send := func(seq uint64, cs []condition.Condition, at time.Time) {
		t.Helper()
		if _, err := s.ApplyBatch(ctx, "site-a", sess.Epoch, store.Batch{Sequence: seq, Devices: []store.DeviceUpdate{{DeviceID: id, Conditions: cs, ObservedTime: at}}}); err != nil {
			t.Fatal(err)
		}
	}
	ltt := func(ty condition.Type) time.Time {
		t.Helper()
		d, err := s.GetDevice(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range d.Conditions {
			if c.Type == ty {
				return c.LastTransitionTime.UTC()
			}
		}
		t.Fatalf("no %s", ty)
		return time.Time{}
	}
	send(1, conds(t0, nil), t0)
	history := pgtest.Count(t, url, `SELECT count(*) FROM condition_history`)

	// Restart: everything the same, proposed transition time = now.
	t1 := t0.Add(30 * time.Minute)
	send(2, conds(t1, nil), t1)
	for _, ty := range condition.Types {
		if got := ltt(ty); !got.Equal(t0) {
			t.Errorf("%s last_transition_time %s after an unchanged re-send, want %s", ty, got, t0)
		}
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM condition_history`); n != history {
		t.Errorf("history rows %d → %d for an unchanged re-send", history, n)
	}

	// Same status, new reason: a history row, the time kept.
	t2 := t1.Add(time.Minute)
	c := condition.Condition{Type: condition.MaintenanceClear, Status: condition.True, Reason: "OtherReason", LastTransitionTime: t2, ObservedTime: t2}
	send(3, []condition.Condition{c}, t2)
	if got := ltt(condition.MaintenanceClear); !got.Equal(t0) {
		t.Errorf("reason change moved last_transition_time to %s, want %s", got, t0)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM condition_history WHERE reason = 'OtherReason' AND last_transition_time = $1`, t0); n != 1 {
		t.Errorf("history rows for the reason change with the kept time: %d, want 1", n)
	}

	// Status change: the new time.
	t3 := t2.Add(time.Minute)
	c = condition.Condition{Type: condition.MaintenanceClear, Status: condition.False, Reason: "Manual", LastTransitionTime: t3, ObservedTime: t3}
	send(4, []condition.Condition{c}, t3)
	if got := ltt(condition.MaintenanceClear); !got.Equal(t3) {
		t.Errorf("status change: last_transition_time %s, want %s", got, t3)
	}
}
