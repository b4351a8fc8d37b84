package policyreplay_test

import (
	"context"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/policyreplay"
	"github.com/ironlink/ironlink/hub/policyrun"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// continueLadder's first step continues to the second as soon as its
// operation succeeds (no success test), as a SLURM worker's NOVA_DELETE
// before its REPROVISION.
const continueLadder = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 10, maxPercent: 100, window: 1h}
    rules:
      - name: deploy
        to: [FAULTED]
        remediation:
          steps:
            - {action: REBOOT, timeout: 1h, continue: true}
            - {action: REPROVISION, timeout: 1h}
          settle: 1s
`

// A ladder whose step continues, recorded on a real store: the reboot's
// operation succeeds while the fault still shows and the reprovision
// starts at once (not after the reboot's 1h timeout); it fixes the device.
// Replaying the live policy reproduces it with 0 differences (REBOOT
// SUCCEEDED, REPROVISION SUCCEEDED, fixed by step 2); a candidate without
// continue differs (its reboot is judged by the success test, and the
// device's recorded healing makes the reboot the fix).
func TestReplayReproducesContinuingSteps(t *testing.T) {
	ctx := context.Background()
	st, url := storetest.New(t, nil)
	site := storetest.NewSite(t, st, "site-a", 4, nil)
	f, err := policy.Parse([]byte(continueLadder))
	if err != nil {
		t.Fatal(err)
	}
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
	finish := func(dev, kind string) {
		t.Helper()
		if n := count(`WITH u AS (UPDATE operations SET state = 'SUCCEEDED', ended_at = now() WHERE device_id = $1 AND kind = $2
			AND state IN ('PENDING', 'RUNNING') RETURNING 1) SELECT count(*) FROM u`, dev, kind); n != 1 {
			t.Fatalf("finished %d %s operations", n, kind)
		}
	}
	a := site.IDs[0]
	from := time.Now().Add(-time.Second)
	site.Fault([]string{a}, "DeployFailed", time.Now())
	tick()
	finish(a, "REBOOT")
	tick()
	tick()
	finish(a, "REPROVISION") // started at once: the reboot's timeout is 1h
	site.Heal(a)
	tick()
	for deadline := time.Now().Add(30 * time.Second); count(`SELECT count(*) FROM remediation_ladders WHERE state = 'SUCCEEDED'`) == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not fixed")
		}
		tick()
	}
	to := time.Now().Add(time.Minute)
	recRem, err := policyreplay.RecordedRemediations(ctx, st.Pool(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{a: "deploy FIXED step 2 released; REBOOT SUCCEEDED, REPROVISION SUCCEEDED"}
	if got := describe(recRem); !equalMaps(got, want) {
		t.Fatalf("recorded %v, want %v", got, want)
	}
	rep, err := policyreplay.Replay(ctx, st.Pool(), f, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if diffs := policyreplay.DiffRemediations(recRem, rep.Remediations); len(diffs) != 0 {
		t.Fatalf("%d remediation differences, want 0: replayed %v", len(diffs), describe(rep.Remediations))
	}
	cand, err := policy.Parse([]byte(continueLadder))
	if err != nil {
		t.Fatal(err)
	}
	cand.Default.Rules[0].Ladder.Steps[0].Continue = false
	crep, err := policyreplay.Replay(ctx, st.Pool(), cand, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if diffs := policyreplay.DiffRemediations(recRem, crep.Remediations); len(diffs) != 1 {
		t.Fatalf("candidate without continue: %d differences, want 1: replayed %v", len(diffs), describe(crep.Remediations))
	}
}
