package policyreplay_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/policyapi"
	"github.com/ironlink/ironlink/hub/policyreplay"
	"github.com/ironlink/ironlink/hub/policyrun"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// liveLadders is the recorded scenario's policy: a two-step ladder for
// deploy failures, a one-step ladder with a budget of one ladder for clean
// failures.
const liveLadders = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 10, maxPercent: 100, window: 1h}
    remediation: {maxInFlight: 5}
    rules:
      - name: deploy
        to: [FAULTED]
        reasons: [DeployFailed]
        remediation:
          steps:
            - {action: REBOOT, timeout: 5s}
            - {action: REPROVISION, timeout: 5s}
          settle: 1s
          budget: {ladders: 3, window: 1h}
      - name: clean
        to: [FAULTED]
        reasons: [CleanFailed]
        remediation:
          steps:
            - {action: REBOOT, timeout: 5s}
          settle: 1s
          budget: {ladders: 1, window: 1h}
`

// candidateLadders differs from liveLadders in the deploy rule's ladder:
// one REPROVISION step.
const candidateLadders = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 10, maxPercent: 100, window: 1h}
    remediation: {maxInFlight: 5}
    rules:
      - name: deploy
        to: [FAULTED]
        reasons: [DeployFailed]
        remediation:
          steps:
            - {action: REPROVISION, timeout: 5s}
          settle: 1s
          budget: {ladders: 3, window: 1h}
      - name: clean
        to: [FAULTED]
        reasons: [CleanFailed]
        remediation:
          steps:
            - {action: REBOOT, timeout: 5s}
          settle: 1s
          budget: {ladders: 1, window: 1h}
`

// TestReplayReproducesLaddersHandoffsApprovals records, on a real store
// and PostgreSQL with the evaluator and the ladder engine on the wall
// clock, a run in which: device A faults, is quarantined, a reboot does
// not fix it (step 1 fails at its timeout), a reprovision does, and it is
// released after the settle time; device B's two steps fail and it is
// handed off (ladder exhausted), then an operator closes the handoff;
// device C's stale fault waits for an approval, an operator approves it,
// its ladder's reboot fixes it; device E's stale fault is rejected;
// device F is fixed by its one-ladder budget, faults again and is handed
// off (budget spent). Replaying the live policy over the period reports 0
// differences in decisions and in remediations (steps, results, fixes,
// releases, handoffs), the counts per day, and changes no table; a
// candidate whose deploy ladder is one REPROVISION step differs for A, B
// and C exactly.
func TestReplayReproducesLaddersHandoffsApprovals(t *testing.T) {
	ctx := context.Background()
	st, url := storetest.New(t, nil)
	site := storetest.NewSite(t, st, "site-a", 6, nil)
	f, err := policy.Parse([]byte(liveLadders))
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
	// waitFor runs passes until cond holds (the steps' timeouts and settle
	// times pass on the wall clock).
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
	resolve := func(dev string, approve bool) {
		t.Helper()
		var id int64
		if err := st.Pool().QueryRow(ctx, `SELECT id FROM policy_pending_actions WHERE device_id = $1`, dev).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := st.ResolvePendingActions(ctx, []int64{id}, approve, "alice", "checked by hand"); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c, e, fdev := site.IDs[0], site.IDs[1], site.IDs[2], site.IDs[3], site.IDs[4]

	from := time.Now().Add(-time.Second)
	t0 := time.Now()
	site.Fault([]string{a, b}, "DeployFailed", t0)
	site.Fault([]string{fdev}, "CleanFailed", t0)
	site.Fault([]string{c, e}, "DeployFailed", t0.Add(-2*time.Hour)) // older than the guard window: stale, for an operator
	tick()                                                           // A, B, F quarantined, step 1 (REBOOT) each; C, E pending
	if n := count(`SELECT count(*) FROM remediation_steps`); n != 3 {
		t.Fatalf("%d steps started, want 3", n)
	}
	finish(a)
	finish(b)
	finish(fdev)
	site.Heal(fdev)
	tick() // F settling
	resolve(c, true)
	resolve(e, false)
	tick() // C's ladder: REBOOT
	finish(c)
	site.Heal(c)
	waitFor("C and F fixed and released", func() bool {
		return count(`SELECT count(*) FROM remediation_ladders WHERE state = 'SUCCEEDED' AND released`) == 2
	})
	waitFor("A's and B's reboots failed (still faulty at the timeout) and their step 2 (REPROVISION) started", func() bool {
		return count(`SELECT count(*) FROM remediation_steps s JOIN remediation_ladders l ON l.id = s.ladder_id
			WHERE l.device_id IN ($1, $2) AND s.step = 1`, a, b) == 2
	})
	finish(a)
	finish(b)
	site.Heal(a)
	site.Fault([]string{fdev}, "CleanFailed", time.Now()) // F again: its budget of one ladder is spent
	waitFor("A fixed, B handed off (ladder exhausted), F handed off (budget spent)", func() bool {
		return count(`SELECT count(*) FROM remediation_ladders WHERE state = 'SUCCEEDED' AND released`) == 3 &&
			count(`SELECT count(*) FROM remediation_handoffs`) == 2
	})
	var hb int64
	if err := st.Pool().QueryRow(ctx, `SELECT id FROM remediation_handoffs WHERE device_id = $1`, b).Scan(&hb); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CloseHandoff(ctx, hb, "alice", "replaced the disk", "cli"); err != nil {
		t.Fatal(err)
	}
	tick()
	to := time.Now().Add(time.Hour)

	recorded, err := policyreplay.Recorded(ctx, st.Pool(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	recRem, err := policyreplay.RecordedRemediations(ctx, st.Pool(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // device → the recorded remediation, as text
		a:    "deploy FIXED step 2 released; REBOOT FAILED, REPROVISION SUCCEEDED",
		b:    "deploy HANDED_OFF LadderExhausted; REBOOT FAILED, REPROVISION FAILED",
		c:    "deploy FIXED step 1 released; REBOOT SUCCEEDED",
		fdev: "clean FIXED step 1 released; REBOOT SUCCEEDED | clean HANDED_OFF BudgetSpent",
	}
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
	if len(rep.Approvals) != 2 || !rep.Approvals[0].Approved || rep.Approvals[0].DeviceID != c || rep.Approvals[1].Approved || rep.Approvals[1].By != "alice" {
		t.Errorf("approvals taken as inputs %+v, want C approved then E rejected, by alice", rep.Approvals)
	}
	var sum policyreplay.Day
	for _, d := range rep.Days {
		sum.Quarantines += d.Quarantines
		sum.Pending += d.Pending
		sum.LadderSteps += d.LadderSteps
		sum.Fixes += d.Fixes
		sum.Releases += d.Releases
		sum.Handoffs += d.Handoffs
		sum.Approvals += d.Approvals
		sum.Rejections += d.Rejections
	}
	wantSum := policyreplay.Day{Quarantines: 4, Pending: 2, LadderSteps: 6, Fixes: 3, Releases: 3, Handoffs: 2, Approvals: 1, Rejections: 1}
	if sum != wantSum {
		t.Errorf("replayed totals %+v, want %+v", sum, wantSum)
	}
	t.Logf("replay of the live policy: %d decisions, %d remediations, 0 differences; days %+v", len(rep.Decisions), len(rep.Remediations), rep.Days)

	// The RPC reports the same: remediations, approvals, counts, no
	// difference.
	api := policyapi.NewServer(st, liveSource{f}, nil, testlog.New(t))
	api.SetReplayDB(st.Pool())
	resp, err := api.ReplayPolicy(ctx, &ironlinkv1.ReplayPolicyRequest{FromTime: timestamppb.New(from), ToTime: timestamppb.New(to)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetDifferences() != 0 || resp.GetRemediationDifferences() != 0 || len(resp.GetRemediations()) != 5 || len(resp.GetApprovals()) != 2 {
		t.Fatalf("ReplayPolicy: %d + %d differences, %d remediations, %d approvals; want 0, 0, 5, 2",
			resp.GetDifferences(), resp.GetRemediationDifferences(), len(resp.GetRemediations()), len(resp.GetApprovals()))
	}
	for _, r := range resp.GetRemediations() {
		if r.GetDeviceId() == a && (r.GetOutcome() != "FIXED" || r.GetFixedStep() != 2 || !r.GetReleased() || len(r.GetSteps()) != 2 || r.GetSteps()[1].GetKind() != "REPROVISION") {
			t.Errorf("RPC remediation of A: %v", r)
		}
	}

	// A candidate with a one-step deploy ladder (REPROVISION): A is still
	// faulty at the step's timeout and is handed off; B is handed off
	// after one step; C's fix is a REPROVISION. F's rule is unchanged.
	cand, err := policy.Parse([]byte(candidateLadders))
	if err != nil {
		t.Fatal(err)
	}
	crep, err := policyreplay.Replay(ctx, st.Pool(), cand, from, to)
	if err != nil {
		t.Fatal(err)
	}
	diffs := policyreplay.DiffRemediations(recRem, crep.Remediations)
	got := map[string]bool{}
	for _, d := range diffs {
		got[d.DeviceID] = true
	}
	if len(diffs) != 3 || !got[a] || !got[b] || !got[c] {
		t.Fatalf("candidate: differences for %v, want A, B and C: replayed %v", got, describe(crep.Remediations))
	}
	wantCand := map[string]string{
		a:    "deploy HANDED_OFF LadderExhausted; REPROVISION FAILED",
		b:    "deploy HANDED_OFF LadderExhausted; REPROVISION FAILED",
		c:    "deploy FIXED step 1 released; REPROVISION SUCCEEDED",
		fdev: "clean FIXED step 1 released; REBOOT SUCCEEDED | clean HANDED_OFF BudgetSpent",
	}
	if got := describe(crep.Remediations); !equalMaps(got, wantCand) {
		t.Errorf("candidate remediations %v, want %v", got, wantCand)
	}
	if d := policyreplay.Diff(recorded, crep.Decisions); len(d) != 0 {
		t.Errorf("candidate: %d decision differences, want 0 (only the ladder changed)", len(d))
	}
}

// describe renders remediations per device: "rule OUTCOME ...; KIND
// RESULT, ..." joined by " | " in order.
func describe(rs []policyreplay.Remediation) map[string]string {
	out := map[string]string{}
	for _, r := range rs {
		s := r.Rule + " " + r.Outcome
		switch r.Outcome {
		case policyreplay.OutcomeFixed:
			s += " step " + strconv.Itoa(r.FixedStep)
			if r.Released {
				s += " released"
			}
		case policyreplay.OutcomeHandedOff:
			s += " " + r.Handoff
		}
		var steps []string
		for _, st := range r.Steps {
			steps = append(steps, st.Kind+" "+st.Result)
		}
		if len(steps) > 0 {
			s += "; " + strings.Join(steps, ", ")
		}
		if out[r.DeviceID] != "" {
			s = out[r.DeviceID] + " | " + s
		}
		out[r.DeviceID] = s
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
