package policyreplay_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/policyreplay"
	"github.com/ironlink/ironlink/hub/policyrun"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// liveRacks is the per-rack scenario's policy: at most 2 quarantines per
// rack in the guard window, at most 1 ladder step in flight per rack.
const liveRacks = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 10, maxPercent: 100, window: 1h, perLabel: [{label: rack, maxDevices: 2, maxPercent: 100}]}
    remediation: {maxInFlight: 5, perLabel: [{label: rack, maxInFlight: 1}]}
    rules:
      - name: deploy
        to: [FAULTED]
        reasons: [DeployFailed]
        remediation:
          steps:
            - {action: REBOOT, timeout: 3s}
          settle: 1s
          budget: {ladders: 3, window: 1h}
`

// TestReplayReproducesPerRackGuardAndLadderLimit records, with the
// evaluator and the ladder engine on the wall clock, a run in which three
// devices of rack r1 and one of rack r2 fault at once: the per-rack guard
// quarantines two of r1 and holds the third (PENDING, the rack's guard
// tripped), r2's is quarantined; the per-rack ladder limit runs one r1
// ladder at a time (the second waits, MaxInFlightPerLabel, past the
// step's timeout) while r2's runs; each reboot fixes its device. The
// replay of the live policy, reading the devices' labels, reproduces the
// decisions and the remediations with 0 differences (without the labels
// it would quarantine the third r1 device and time out the second r1
// ladder's reboot).
func TestReplayReproducesPerRackGuardAndLadderLimit(t *testing.T) {
	ctx := context.Background()
	st, url := storetest.New(t, nil)
	site := storetest.NewSite(t, st, "site-a", 4, nil)
	f, err := policy.Parse([]byte(liveRacks))
	if err != nil {
		t.Fatal(err)
	}
	r1 := slices.Sorted(slices.Values(site.IDs[:3])) // decided in device id order
	c := site.IDs[3]
	var ups []store.DeviceUpdate
	for i, id := range site.IDs {
		rack := "r1"
		if id == c {
			rack = "r2"
		}
		ups = append(ups, store.DeviceUpdate{DeviceID: id, ObservedTime: time.Now().UTC(),
			Facts: &store.Facts{Name: "node-" + string(rune('a'+i)), Labels: map[string]string{"rack": rack}}})
	}
	site.Send(ups)
	log := testlog.New(t)
	eng := remediation.New(st, remediation.Config{}, log)
	ev := policyrun.New(st, policyrun.Config{Policy: func() *policy.File { return f }, Replica: "r1",
		Remediate: func(ctx context.Context, file *policy.File) error { _, err := eng.Tick(ctx, file); return err }}, log)
	tick := func() {
		t.Helper()
		site.Polled()
		if _, err := ev.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	count := func(sql string, args ...any) int { return pgtest.Count(t, url, sql, args...) }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s", what)
			}
			tick()
		}
	}
	finish := func(dev string) {
		t.Helper()
		pgtest.MustExec(t, url, `UPDATE operations SET state = 'SUCCEEDED', ended_at = now() WHERE device_id = $1 AND state IN ('PENDING', 'RUNNING')`, dev)
	}

	from := time.Now().Add(-time.Second)
	t0 := time.Now()
	site.Fault(append(slices.Clone(r1), c), "DeployFailed", t0)
	tick()
	held := r1[2]
	if n := count(`SELECT count(*) FROM policy_decisions WHERE device_id = $1 AND action = 'PENDING'`, held); n != 1 {
		t.Fatalf("the third device of rack r1 was not held by the per-rack guard (%d PENDING decisions)", n)
	}
	if n := count(`SELECT count(*) FROM remediation_ladders WHERE device_id = $1 AND waiting = $2`, r1[1], remediation.WaitDomainInFlight); n != 1 {
		t.Fatalf("the second r1 ladder does not wait for the rack's in-flight limit")
	}
	if n := count(`SELECT count(*) FROM remediation_steps`); n != 2 {
		t.Fatalf("%d steps started, want 2 (one per rack)", n)
	}
	finish(r1[0])
	finish(c)
	site.Heal(r1[0])
	site.Heal(c)
	waitFor("the first r1 ladder and r2's fixed, the second r1 ladder's reboot started", func() bool {
		return count(`SELECT count(*) FROM remediation_ladders WHERE state = 'SUCCEEDED'`) == 2 && count(`SELECT count(*) FROM remediation_steps`) == 3
	})
	if d := time.Until(t0.Add(3500 * time.Millisecond)); d > 0 {
		time.Sleep(d) // past the step timeout counted from t0: a replay without the rack limit would time the reboot out
	}
	finish(r1[1])
	site.Heal(r1[1])
	waitFor("the second r1 ladder fixed", func() bool {
		return count(`SELECT count(*) FROM remediation_ladders WHERE state = 'SUCCEEDED'`) == 3
	})
	to := time.Now().Add(time.Hour)

	recorded, err := policyreplay.Recorded(ctx, st.Pool(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	recRem, err := policyreplay.RecordedRemediations(ctx, st.Pool(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{r1[0]: "deploy FIXED step 1 released; REBOOT SUCCEEDED", r1[1]: "deploy FIXED step 1 released; REBOOT SUCCEEDED",
		c: "deploy FIXED step 1 released; REBOOT SUCCEEDED"}
	if got := describe(recRem); !equalMaps(got, want) {
		t.Fatalf("recorded remediations %v, want %v", got, want)
	}
	before := pgtest.Checksums(t, url)
	rep, err := policyreplay.Replay(ctx, st.Pool(), f, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if changed := pgtest.ChangedTables(before, pgtest.Checksums(t, url)); len(changed) > 0 {
		t.Fatalf("the replay changed tables %v", changed)
	}
	if diffs := policyreplay.Diff(recorded, rep.Decisions); len(diffs) != 0 {
		for _, d := range diffs {
			t.Errorf("trigger %d of %s: recorded %+v, replayed %+v", d.TriggerID, d.DeviceID, d.Recorded, d.Replayed)
		}
		t.Fatalf("%d decision differences, want 0", len(diffs))
	}
	if diffs := policyreplay.DiffRemediations(recRem, rep.Remediations); len(diffs) != 0 {
		t.Fatalf("%d remediation differences, want 0: replayed %v, recorded %v", len(diffs), describe(rep.Remediations), describe(recRem))
	}
	pending := 0
	for _, d := range rep.Decisions {
		if d.DeviceID == held && d.Action == string(policy.ActionPending) && d.Reason == policy.ReasonHeldByGuard {
			pending++
		}
	}
	if pending != 1 {
		t.Errorf("replayed decisions %+v: want the third r1 device held by the guard", rep.Decisions)
	}
	t.Logf("replay of the per-rack policy: %d decisions, %d remediations, 0 differences", len(rep.Decisions), len(rep.Remediations))
}
