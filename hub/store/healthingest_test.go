package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
)

// xid is a GPU XID health event for device (by id), generated at gen.
func xid(id, eventID string, gen time.Time, healthy, fatal bool, codes ...string) store.HealthEvent {
	st, reason := condition.False, condition.ReasonFatalError
	if !fatal {
		reason = condition.ReasonNonFatalError
	}
	if healthy {
		st, reason = condition.True, condition.ReasonHealthy
	}
	return store.HealthEvent{EventID: eventID, DeviceID: id, Condition: condition.Condition{
		Type: condition.HealthType("GPU", "GpuXidError"), Status: st, Reason: reason, Message: "xid",
		ObservedTime: gen, LastTransitionTime: gen,
		Health: &condition.Health{Agent: "gpu-health-monitor", ComponentClass: "GPU", CheckName: "GpuXidError", Fatal: fatal,
			ErrorCodes: codes, Entities: []condition.Entity{{Type: "GPU", Value: "0"}}, RecommendedAction: 24,
			GeneratedTime: gen, ExpireTime: gen.Add(time.Hour), EventID: eventID},
	}}
}

func deviceStatus(t *testing.T, s *store.Store, id string) (status.Status, string, []condition.Condition) {
	t.Helper()
	d, err := s.GetDevice(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d.Status, d.StatusReason, d.Conditions
}

func report(t *testing.T, s *store.Store, site string, evs ...store.HealthEvent) []store.HealthEventResult {
	t.Helper()
	res, err := s.ReportHealth(context.Background(), site, evs)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A fatal unhealthy event makes the device FAULTED with a reason naming
// the check and code; a retried batch changes nothing; an older event
// never overrides a newer one; a healthy event clears it; a non-fatal one
// is a warning that leaves the status; a store-only one never changes it.
func TestReportHealthConditionAndStatus(t *testing.T) {
	s, url := newStore(t)
	site := storetest.NewSite(t, s, "site-a", 2, nil)
	id := site.IDs[0]
	t0 := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)

	res := report(t, s, "site-a", xid(id, "e1", t0, false, true, "79"))
	if !res[0].Applied || res[0].DeviceID != id {
		t.Fatalf("first event: %+v", res[0])
	}
	st, reason, cs := deviceStatus(t, s, id)
	if st != status.Faulted || reason != "health.GPU/GpuXidError=False: FatalError (79)" {
		t.Fatalf("status %s %q, want FAULTED naming the check and code", st, reason)
	}
	last := cs[len(cs)-1]
	if last.Type != "health.GPU/GpuXidError" || last.Health == nil || last.Health.Agent != "gpu-health-monitor" ||
		len(last.Health.ErrorCodes) != 1 || last.Health.Entities[0].Value != "0" || last.Health.RecommendedAction != 24 {
		t.Fatalf("health condition in GetDevice: %+v %+v", last, last.Health)
	}
	hist := pgtest.Count(t, url, `SELECT count(*) FROM condition_history WHERE health IS NOT NULL`)
	statusRows := pgtest.Count(t, url, `SELECT count(*) FROM status_history WHERE device_id = $1`, id)

	// The same batch again: a duplicate, nothing written.
	res = report(t, s, "site-a", xid(id, "e1", t0, false, true, "79"))
	if !res[0].Duplicate || res[0].Applied {
		t.Fatalf("retried event: %+v", res[0])
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM condition_history WHERE health IS NOT NULL`); n != hist {
		t.Fatalf("retry wrote %d history rows", n-hist)
	}

	// Healthy (newer) clears; the older unhealthy one arriving late changes nothing.
	report(t, s, "site-a", xid(id, "e2", t0.Add(10*time.Second), true, true))
	if st, _, _ := deviceStatus(t, s, id); st != status.Available {
		t.Fatalf("after healthy: %s, want AVAILABLE", st)
	}
	res = report(t, s, "site-a", xid(id, "e0", t0.Add(-time.Second), false, true, "48"))
	if !res[0].Superseded || res[0].Applied {
		t.Fatalf("older event: %+v", res[0])
	}
	if st, _, _ := deviceStatus(t, s, id); st != status.Available {
		t.Fatalf("an older event moved the status to %s", st)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM status_history WHERE device_id = $1`, id); n != statusRows+1 {
		t.Fatalf("status rows %d → %d, want one more (AVAILABLE)", statusRows, n)
	}

	// Non-fatal: a warning, status unchanged; counted by the health index.
	report(t, s, "site-a", xid(id, "e3", t0.Add(20*time.Second), false, false, "63"))
	st, _, cs = deviceStatus(t, s, id)
	if st != status.Available || !cs[len(cs)-1].Warning() {
		t.Fatalf("non-fatal: status %s, warning %v", st, cs[len(cs)-1].Warning())
	}

	// Store only: fatal and unhealthy, yet the status stays.
	so := xid(site.IDs[1], "e4", t0, false, true, "79")
	so.Condition.Health.ProcessingStrategy = condition.StrategyStoreOnly
	report(t, s, "site-a", so)
	if st, _, _ := deviceStatus(t, s, site.IDs[1]); st != status.Available {
		t.Fatalf("store-only event changed status to %s", st)
	}
}

// Two events of the same (class, check) with the same generated time: the
// later arrival wins, across batches and within one (the batch's order),
// and each is a condition_history row; neither is Superseded.
func TestReportHealthEqualGeneratedTimeLaterArrivalWins(t *testing.T) {
	s, url := newStore(t)
	site := storetest.NewSite(t, s, "site-a", 1, nil)
	id := site.IDs[0]
	t0 := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
	rows := func() int {
		return pgtest.Count(t, url, `SELECT count(*) FROM condition_history WHERE device_id = $1 AND health IS NOT NULL`, id)
	}

	report(t, s, "site-a", xid(id, "a1", t0, false, true, "79"))
	if st, _, _ := deviceStatus(t, s, id); st != status.Faulted {
		t.Fatalf("after the fatal event: %s, want FAULTED", st)
	}
	before := rows()
	// Same generated time, arriving later: healthy wins.
	res := report(t, s, "site-a", xid(id, "a2", t0, true, true))
	if !res[0].Applied || res[0].Superseded {
		t.Fatalf("healthy at the same time, later: %+v, want applied", res[0])
	}
	st, _, cs := deviceStatus(t, s, id)
	if st != status.Available || cs[len(cs)-1].Health.EventID != "a2" {
		t.Fatalf("after the later healthy event at the same time: %s, condition from %q, want AVAILABLE from a2", st, cs[len(cs)-1].Health.EventID)
	}
	// And back: an unhealthy one at that time again, arriving last, wins.
	report(t, s, "site-a", xid(id, "a3", t0, false, true, "48"))
	st, reason, _ := deviceStatus(t, s, id)
	if st != status.Faulted || !strings.Contains(reason, "(48)") {
		t.Fatalf("after the last unhealthy event at the same time: %s %q, want FAULTED naming 48", st, reason)
	}
	if n := rows(); n != before+2 {
		t.Fatalf("history rows %d → %d, want two more (one per applied event)", before, n)
	}

	// Within one batch, at a newer shared time: the later event of the batch wins.
	t1 := t0.Add(time.Second)
	res = report(t, s, "site-a", xid(id, "b1", t1, false, true, "79"), xid(id, "b2", t1, true, true))
	if !res[0].Applied || !res[1].Applied || res[0].Superseded || res[1].Superseded {
		t.Fatalf("one batch, equal times: %+v %+v, want both applied", res[0], res[1])
	}
	st, _, cs = deviceStatus(t, s, id)
	if st != status.Available || cs[len(cs)-1].Health.EventID != "b2" {
		t.Fatalf("after [unhealthy, healthy] at one time in one batch: %s from %q, want AVAILABLE from b2", st, cs[len(cs)-1].Health.EventID)
	}
}

// Unknown device, a device of another site and an ambiguous node name
// refuse the whole batch; nothing is written. A node name maps by device
// name or its first DNS label.
func TestReportHealthDeviceMapping(t *testing.T) {
	s, url := newStore(t)
	a := storetest.NewSite(t, s, "site-a", 2, nil)
	b := storetest.NewSite(t, s, "site-b", 1, nil)
	now := time.Now().UTC().Truncate(time.Microsecond)
	good := xid(a.IDs[0], "g1", now, false, true, "79")

	for name, tc := range map[string]struct {
		ev   store.HealthEvent
		want error
	}{
		"unknown id":   {xid("6f1c1f4e-0000-4000-8000-000000000000", "x1", now, false, true), store.ErrNotFound},
		"other site":   {xid(b.IDs[0], "x2", now, false, true), store.ErrWrongSite},
		"unknown node": {func() store.HealthEvent { e := xid("", "x3", now, false, true); e.NodeName = "10.0.15.233"; return e }(), store.ErrNotFound},
	} {
		_, err := s.ReportHealth(context.Background(), "site-a", []store.HealthEvent{good, tc.ev})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM device_conditions WHERE health IS NOT NULL`); n != 0 {
		t.Fatalf("refused batches wrote %d health conditions", n)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM health_event_ids`); n != 0 {
		t.Fatalf("refused batches recorded %d event ids", n)
	}

	byNode := xid("", "n1", now, false, true, "79")
	byNode.NodeName = "site-a-001.dc1.example.net"
	res := report(t, s, "site-a", byNode)
	if res[0].DeviceID != a.IDs[1] {
		t.Fatalf("node name mapped to %s, want %s", res[0].DeviceID, a.IDs[1])
	}

	// Two devices named alike: ambiguous, candidates named.
	pgtest.MustExec(t, url, `UPDATE devices SET name = 'twin' WHERE site = 'site-a'`)
	amb := xid("", "n2", now, false, true)
	amb.NodeName = "twin"
	_, err := s.ReportHealth(context.Background(), "site-a", []store.HealthEvent{amb})
	if !errors.Is(err, store.ErrAmbiguous) || !containsAll(err.Error(), a.IDs...) {
		t.Fatalf("ambiguous node: %v", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// A check that stops reporting turns Unknown/Stale after its TTL, and the
// device it faulted is no longer FAULTED for it.
func TestExpireHealthTurnsStale(t *testing.T) {
	s, url := newStore(t)
	site := storetest.NewSite(t, s, "site-a", 1, nil)
	id := site.IDs[0]
	t0 := time.Now().UTC().Truncate(time.Microsecond)
	ev := xid(id, "s1", t0, false, true, "79")
	ev.Condition.Health.ExpireTime = t0.Add(time.Minute)
	report(t, s, "site-a", ev)
	if st, _, _ := deviceStatus(t, s, id); st != status.Faulted {
		t.Fatalf("status %s, want FAULTED", st)
	}
	if n, err := s.ExpireHealth(context.Background(), t0.Add(30*time.Second)); err != nil || n != 0 {
		t.Fatalf("before the TTL: %d stale, %v", n, err)
	}
	n, err := s.ExpireHealth(context.Background(), t0.Add(2*time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("after the TTL: %d stale, %v", n, err)
	}
	st, _, cs := deviceStatus(t, s, id)
	c := cs[len(cs)-1]
	if st != status.Available || c.Status != condition.Unknown || c.Reason != condition.ReasonStale {
		t.Fatalf("after the TTL: status %s, condition %s/%s", st, c.Status, c.Reason)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM condition_history WHERE reason = 'Stale'`); n != 1 {
		t.Fatalf("stale history rows %d, want 1", n)
	}
	// Sweeping again changes nothing.
	if n, err := s.ExpireHealth(context.Background(), t0.Add(3*time.Minute)); err != nil || n != 0 {
		t.Fatalf("second sweep: %d, %v", n, err)
	}
}
