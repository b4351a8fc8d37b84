package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// holdsFleet reports three devices of site s: d[0] HELD (healthy, trait
// absent), d[1] AVAILABLE, d[2] IN_SERVICE (a customer's instance, trait
// present).
func holdsFleet(t *testing.T, st *store.Store) (*storetest.Site, []string) {
	t.Helper()
	s := storetest.NewSite(t, st, "s", 3, nil)
	at := time.Now()
	s.Send([]store.DeviceUpdate{
		{DeviceID: s.IDs[0], Conditions: conds(at, map[condition.Type]condition.Status{condition.CustomerReady: condition.False}), ObservedTime: at},
		{DeviceID: s.IDs[2], Conditions: conds(at, map[condition.Type]condition.Status{
			condition.InstanceAllocated: condition.True, condition.CustomerAllocated: condition.True}), ObservedTime: at},
	})
	return s, s.IDs
}

func deviceState(t *testing.T, st *store.Store, id string) (status.Status, store.Impairment) {
	t.Helper()
	d, err := st.GetDevice(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d.Status, d.DesiredImpairment
}

var op = store.ImpairmentAction{Actor: "alice", Reason: "test", Source: "operator-api"}

// The bug of issue 25: a HELD device released came back offered. Each of
// HELD, AVAILABLE and IN_SERVICE gets back what the quarantine took.
func TestReleaseGivesBackWhatQuarantineTook(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	_, ids := holdsFleet(t, st)
	want := []struct {
		status  status.Status
		outcome store.ReleaseOutcome
		desired store.Impairment
	}{
		{status.Held, store.ReleaseUnoffered, store.ImpairmentReleasedUnoffered},
		{status.Available, store.ReleaseOffered, store.ImpairmentReleased},
		{status.InService, store.ReleaseOffered, store.ImpairmentReleased},
	}
	for i, id := range ids {
		if got, _ := deviceState(t, st, id); got != want[i].status {
			t.Fatalf("device %d starts %s, want %s", i, got, want[i].status)
		}
		if _, err := st.Quarantine(ctx, id, store.HolderOperator, op); err != nil {
			t.Fatal(err)
		}
		if got, _ := deviceState(t, st, id); got != status.Quarantined {
			t.Fatalf("device %d quarantined is %s", i, got)
		}
		// The preview says what the release will do, and writes nothing.
		p, err := st.PlanRelease(ctx, id, store.HolderOperator, false)
		if err != nil || p.Outcome != want[i].outcome || p.StatusBefore != want[i].status {
			t.Fatalf("device %d plan %+v %v", i, p, err)
		}
		p, cmd, err := st.Release(ctx, id, store.HolderOperator, false, op, true)
		if err != nil || cmd.ID != "" || p.Outcome != want[i].outcome {
			t.Fatalf("device %d validate-only release %+v %+v %v", i, p, cmd, err)
		}
		if got, _ := deviceState(t, st, id); got != status.Quarantined {
			t.Fatalf("a validate-only release changed device %d to %s", i, got)
		}
		p, cmd, err = st.Release(ctx, id, store.HolderOperator, false, op, false)
		if err != nil || p.Outcome != want[i].outcome || cmd.Desired != want[i].desired || cmd.Action != store.ActionRelease || cmd.Holder != store.HolderOperator {
			t.Fatalf("device %d release %+v %+v %v", i, p, cmd, err)
		}
		// No satellite here: the conditions are those of before the
		// quarantine, so the status is back to where it began.
		if got, imp := deviceState(t, st, id); imp != want[i].desired || got != want[i].status {
			t.Fatalf("device %d released: %s %s", i, got, imp)
		}
	}
	if got, _ := deviceState(t, st, ids[0]); got != status.Held {
		t.Fatalf("the HELD device came back %s", got)
	}
	h, err := st.ImpairmentHistory(ctx, ids[0], 10)
	if err != nil || len(h) != 2 || h[0].Action != store.ActionRelease || h[0].Desired != store.ImpairmentReleasedUnoffered || h[1].Action != store.ActionQuarantine {
		t.Fatalf("history %+v %v", h, err)
	}
	// Releasing again: nothing to release, nothing written.
	p, cmd, err := st.Release(ctx, ids[0], store.HolderOperator, false, op, false)
	if err != nil || p.Outcome != store.ReleaseNotQuarantined || cmd.ID != "" {
		t.Fatalf("second release %+v %+v %v", p, cmd, err)
	}
}

func TestOfferIsItsOwnRecordedAction(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	_, ids := holdsFleet(t, st)
	if _, err := st.Quarantine(ctx, ids[0], store.HolderOperator, op); err != nil {
		t.Fatal(err)
	}
	_, err := st.Offer(ctx, ids[0], op, false)
	if !errors.Is(err, store.ErrQuarantined) {
		t.Fatalf("offer of a quarantined device: %v", err)
	}
	if _, _, err := st.Release(ctx, ids[0], store.HolderOperator, false, op, false); err != nil {
		t.Fatal(err)
	}
	if cmd, err := st.Offer(ctx, ids[0], op, true); err != nil || cmd.ID != "" {
		t.Fatalf("validate-only offer %+v %v", cmd, err)
	}
	cmd, err := st.Offer(ctx, ids[0], op, false)
	if err != nil || cmd.Desired != store.ImpairmentReleased || cmd.Action != store.ActionOffer {
		t.Fatalf("offer %+v %v", cmd, err)
	}
	h, err := st.ImpairmentHistory(ctx, ids[0], 1)
	if err != nil || len(h) != 1 || h[0].Action != store.ActionOffer || h[0].CommandID != cmd.ID {
		t.Fatalf("history %+v %v", h, err)
	}
	// Offered now: the next quarantine records that, and its release restores it.
	if _, err := st.Quarantine(ctx, ids[0], store.HolderOperator, op); err != nil {
		t.Fatal(err)
	}
	if p, err := st.PlanRelease(ctx, ids[0], store.HolderOperator, false); err != nil || p.Outcome != store.ReleaseOffered {
		t.Fatalf("plan after an offer %+v %v", p, err)
	}
}

func TestReleasedOnlyWhenTheLastHoldGoes(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	_, ids := holdsFleet(t, st)
	id := ids[1] // AVAILABLE
	rule := store.PolicyHolder("faulted-gpu")
	if _, err := st.Quarantine(ctx, id, rule, store.ImpairmentAction{Actor: store.ActorPolicy, Reason: "rule", Source: store.SourcePolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Quarantine(ctx, id, store.HolderOperator, op); err != nil {
		t.Fatal(err)
	}
	// The second hold did not overwrite what the first quarantine took.
	p, cmd, err := st.Release(ctx, id, store.HolderOperator, false, op, false)
	if err != nil || p.Outcome != store.ReleaseStillHeld || len(p.Remaining) != 1 || p.Remaining[0].Holder != rule || cmd.Desired != store.ImpairmentQuarantined {
		t.Fatalf("operator release with the rule's hold left: %+v %+v %v", p, cmd, err)
	}
	if got, _ := deviceState(t, st, id); got != status.Quarantined {
		t.Fatalf("released while a rule holds it: %s", got)
	}
	// The operator has no hold left: a plain release is refused, nothing written.
	_, _, err = st.Release(ctx, id, store.HolderOperator, false, op, false)
	var held *store.HeldByOthersError
	if !errors.As(err, &held) || !errors.Is(err, store.ErrHeldByOthers) || len(held.Holds) != 1 {
		t.Fatalf("release without a hold: %v", err)
	}
	// The rule's release ends it, giving back what the first hold took.
	p, cmd, err = st.Release(ctx, id, rule, false, op, false)
	if err != nil || p.Outcome != store.ReleaseOffered || cmd.Desired != store.ImpairmentReleased {
		t.Fatalf("rule release %+v %+v %v", p, cmd, err)
	}

	// Two rules and an operator, then every hold at once, explicitly.
	for _, h := range []string{store.PolicyHolder("a"), store.PolicyHolder("b"), store.HolderOperator} {
		if _, err := st.Quarantine(ctx, ids[0], h, op); err != nil {
			t.Fatal(err)
		}
	}
	p, cmd, err = st.Release(ctx, ids[0], store.HolderOperator, true, op, false)
	if err != nil || p.Outcome != store.ReleaseUnoffered || len(p.Released) != 3 || cmd.Action != store.ActionReleaseAllHolds {
		t.Fatalf("all-holds release %+v %+v %v", p, cmd, err)
	}
	hs, err := st.Holds(ctx, []string{ids[0]})
	if err != nil || len(hs[ids[0]]) != 0 {
		t.Fatalf("holds left %+v %v", hs, err)
	}
}

func TestBulkReleasePreviewCountsPerOutcome(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	s := storetest.NewSite(t, st, "s", 11, nil)
	at := time.Now()
	// Two HELD, nine AVAILABLE.
	var ups []store.DeviceUpdate
	for _, id := range s.IDs[:2] {
		ups = append(ups, store.DeviceUpdate{DeviceID: id, Conditions: conds(at, map[condition.Type]condition.Status{condition.CustomerReady: condition.False}), ObservedTime: at})
	}
	s.Send(ups)
	sel := store.DeviceSelector{NameLike: "s-%"}
	if _, _, err := st.BulkSetDesiredImpairment(ctx, sel, 11, store.BulkRequest{Desired: store.ImpairmentQuarantined, Selector: "name=s-*", Actor: "alice", Reason: "r", Source: "bulk-api"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Quarantine(ctx, s.IDs[10], store.PolicyHolder("x"), store.ImpairmentAction{Actor: store.ActorPolicy, Reason: "rule", Source: store.SourcePolicy}); err != nil {
		t.Fatal(err)
	}
	plans, err := st.PlanBulkRelease(ctx, sel, store.HolderOperator, false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[store.ReleaseOutcome]int{}
	for _, c := range store.CountReleasePlans(plans) {
		got[c.Outcome] += c.Count
		if c.Outcome == store.ReleaseStillHeld && (len(c.Holders) != 1 || c.Holders[0] != "policy:x") {
			t.Fatalf("still held by %v", c.Holders)
		}
	}
	want := map[store.ReleaseOutcome]int{store.ReleaseUnoffered: 2, store.ReleaseOffered: 8, store.ReleaseStillHeld: 1}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("preview counts %v, want %v", got, want)
		}
	}
	r, cmds, err := st.BulkSetDesiredImpairment(ctx, sel, 11, store.BulkRequest{Desired: store.ImpairmentReleased, Holder: store.HolderOperator,
		Selector: "name=s-*", Actor: "alice", Reason: "r", Source: "bulk-api"})
	if err != nil || len(cmds) != 11 || len(r.Plans) != 11 {
		t.Fatalf("bulk release: %d commands, %d plans, %v", len(cmds), len(r.Plans), err)
	}
	for i, id := range s.IDs {
		st0, imp := deviceState(t, st, id)
		switch {
		case i < 2 && (st0 != status.Held || imp != store.ImpairmentReleasedUnoffered):
			t.Fatalf("HELD device %d came back %s %s", i, st0, imp)
		case i == 10 && st0 != status.Quarantined:
			t.Fatalf("the rule's device is %s", st0)
		case i >= 2 && i < 10 && imp != store.ImpairmentReleased:
			t.Fatalf("AVAILABLE device %d released as %s", i, imp)
		}
	}
}

// TestMigrationGivesExistingQuarantinesAHold migrates to 00017, quarantines
// devices the way the code did then, and migrates on: each quarantined
// device gets one hold named after its source, and what its quarantine took
// comes from the histories (unknown: released as not offered).
func TestMigrationGivesExistingQuarantinesAHold(t *testing.T) {
	ctx := context.Background()
	url := pgtest.DatabaseAt(t, 17)
	// 1: offered (CustomerReady True), operator. 2: HELD, operator.
	// 3: offered, by policy rule r1. 4: no CustomerReady history.
	pgtest.MustExec(t, url, `INSERT INTO sites (name) VALUES ('a');
		INSERT INTO devices (id, site, status, desired_impairment, desired_generation)
			SELECT ('00000000-0000-0000-0000-00000000000' || i)::uuid, 'a', 'QUARANTINED', 'QUARANTINED', 1 FROM generate_series(1, 4) i;
		INSERT INTO condition_history (device_id, type, status, reason, last_transition_time, observed_time, recorded_at)
			SELECT ('00000000-0000-0000-0000-00000000000' || i)::uuid, 'CustomerReady', CASE WHEN i = 2 THEN 'False' ELSE 'True' END, 'X',
				now() - interval '2 hours', now() - interval '2 hours', now() - interval '2 hours' FROM generate_series(1, 3) i;
		INSERT INTO status_history (device_id, status, reason, changed_at)
			SELECT ('00000000-0000-0000-0000-00000000000' || i)::uuid, CASE WHEN i = 2 THEN 'HELD' ELSE 'AVAILABLE' END, 'X', now() - interval '2 hours'
			FROM generate_series(1, 4) i;
		INSERT INTO commands (id, device_id, site, generation, desired, actor, reason, source)
			SELECT ('10000000-0000-0000-0000-00000000000' || i)::uuid, ('00000000-0000-0000-0000-00000000000' || i)::uuid, 'a', 1, 'QUARANTINED',
				CASE WHEN i = 3 THEN 'policy' ELSE 'alice' END, 'why', CASE WHEN i = 3 THEN 'policy' ELSE 'operator-api' END FROM generate_series(1, 4) i;
		INSERT INTO impairment_history (device_id, desired, generation, actor, reason, source, command_id, changed_at)
			SELECT device_id, desired, generation, actor, reason, source, id, now() - interval '1 hour' FROM commands;
		INSERT INTO policy_decisions (device_id, site, kind, trigger_id, action, reason, rule, command_id)
			VALUES ('00000000-0000-0000-0000-000000000003', 'a', 'QUARANTINE', 1, 'QUARANTINE', 'X', 'r1', '10000000-0000-0000-0000-000000000003')`)
	if _, err := store.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	got := pgtest.QueryString(t, url, `SELECT string_agg(h.holder || ':' || COALESCE(d.pre_quarantine_offered::text, 'null') || ':' || d.pre_quarantine_status, ',' ORDER BY d.id)
		FROM devices d JOIN quarantine_holds h ON h.device_id = d.id`)
	if want := "operator:true:AVAILABLE,operator:false:HELD,policy:r1:true:AVAILABLE,operator:null:AVAILABLE"; got != want {
		t.Fatalf("holds after migration %q, want %q", got, want)
	}
	st, err := store.Open(ctx, url, testlog.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i, want := range []store.ReleaseOutcome{store.ReleaseOffered, store.ReleaseUnoffered, store.ReleaseHeldByOthers, store.ReleaseUnoffered} {
		plan, err := st.PlanRelease(ctx, fmt.Sprintf("00000000-0000-0000-0000-00000000000%d", i+1), store.HolderOperator, false)
		if err != nil || plan.Outcome != want {
			t.Fatalf("device %d: plan %+v %v, want %s", i+1, plan, err, want)
		}
	}
}
