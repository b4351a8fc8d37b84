package remediation_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/policyrun"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/store/feed"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const ladderPolicy = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 50, maxPercent: 100, window: 1h}
    remediation: {maxInFlight: 2}
    rules:
      - name: faulted
        to: [FAULTED]
        remediation:
          steps:
            - {action: REBOOT, timeout: 1m}
            - {action: REPROVISION, timeout: 1h}
          settle: 2m
          budget: {ladders: 2, window: 168h}
`

// rig is a site of n devices at the store's level, the policy evaluator
// with the ladder engine in its pass, and a clock both share.
type rig struct {
	t    *testing.T
	st   *store.Store
	url  string
	site *storetest.Site
	clk  *clock
	ev   *policyrun.Evaluator
	eng  *remediation.Engine
	last remediation.Stats
	// file is the policy in force (setPolicy replaces it).
	file *policy.File
}

func newRig(t *testing.T, doc string, n int, webhook bool) *rig {
	t.Helper()
	st, url := storetest.New(t, nil)
	clk := &clock{t: time.Now().Add(time.Second)}
	f, err := policy.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, st: st, url: url, clk: clk, site: storetest.NewSite(t, st, "site-a", n, clk.Now), file: f}
	log := testlog.New(t)
	r.eng = remediation.New(st, remediation.Config{Now: clk.Now, Webhook: webhook}, log)
	r.ev = policyrun.New(st, policyrun.Config{Policy: func() *policy.File { return r.file }, Now: clk.Now, Replica: "r1",
		Remediate: func(ctx context.Context, file *policy.File) (err error) {
			r.last, err = r.eng.Tick(ctx, file)
			return err
		}}, log)
	return r
}

// setPolicy puts doc in force from the next pass on (a reload).
func (r *rig) setPolicy(doc string) {
	r.t.Helper()
	f, err := policy.Parse([]byte(doc))
	if err != nil {
		r.t.Fatal(err)
	}
	r.file = f
}

// tick runs one evaluator pass (quarantine decisions, then the ladders).
func (r *rig) tick() remediation.Stats {
	r.t.Helper()
	r.site.Polled()
	if _, err := r.ev.Tick(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	return r.last
}

func (r *rig) count(sql string, args ...any) int { return pgtest.Count(r.t, r.url, sql, args...) }

// finishOps ends every active operation of device id in state (the
// satellite's part, at the store's level).
func (r *rig) finishOps(id, state string) string {
	r.t.Helper()
	var op string
	err := r.st.Pool().QueryRow(context.Background(), `UPDATE operations SET state = $2, ended_at = now(),
		last_error = CASE WHEN $2 = 'FAILED' THEN 'injected' ELSE '' END
		WHERE device_id = $1 AND state IN ('PENDING', 'RUNNING') RETURNING kind`, id, state).Scan(&op)
	if err != nil {
		r.t.Fatalf("finish the operation of %s: %v", id, err)
	}
	return op
}

// fault → quarantine → reboot (the fault persists) → reprovision → healthy
// → released after the settle time; the history says step 2 fixed it and
// no step ran twice.
func TestLadderRebootThenReprovisionFixes(t *testing.T) {
	r := newRig(t, ladderPolicy, 3, false)
	dev := r.site.IDs[0]
	r.site.Fault([]string{dev}, "DeployFailed", r.clk.Now())
	s := r.tick()
	if s.Started != 1 || s.Steps != 1 {
		t.Fatalf("first pass: %+v", s)
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1 AND kind = 'REBOOT' AND source = 'policy'`, dev); n != 1 {
		t.Fatalf("%d REBOOT operations", n)
	}
	r.tick() // nothing new while the reboot runs
	if kind := r.finishOps(dev, "SUCCEEDED"); kind != "REBOOT" {
		t.Fatalf("first step %s", kind)
	}
	r.tick() // settling: the fault persists
	r.clk.Add(61 * time.Second)
	r.tick() // the reboot's timeout passed: step failed
	r.tick() // step 2
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1 AND kind = 'REPROVISION' AND state = 'PENDING'`, dev); n != 1 {
		t.Fatalf("%d REPROVISION operations pending", n)
	}
	r.finishOps(dev, "SUCCEEDED")
	r.site.Heal(dev)
	r.tick()
	r.clk.Add(time.Minute)
	r.tick()
	if n := r.count(`SELECT count(*) FROM quarantine_holds WHERE device_id = $1`, dev); n != 1 {
		t.Fatalf("released before the settle time (%d holds)", n)
	}
	r.clk.Add(61 * time.Second)
	if s := r.tick(); s.Fixed != 1 {
		t.Fatalf("not fixed: %+v", s)
	}
	if n := r.count(`SELECT count(*) FROM quarantine_holds WHERE device_id = $1`, dev); n != 0 {
		t.Fatalf("not released (%d holds)", n)
	}
	if n := r.count(`SELECT count(*) FROM remediation_ladders WHERE device_id = $1 AND state = 'SUCCEEDED' AND fixed_step = 2
		AND fixed_kind = 'REPROVISION' AND released`, dev); n != 1 {
		t.Fatal("the ladder does not say step 2 fixed it")
	}
	if n := r.count(`SELECT count(*) FROM commands WHERE device_id = $1 AND actor = 'remediation' AND reason LIKE 'fixed by step 2 of 2 (REPROVISION)%'`, dev); n != 1 {
		t.Fatal("the release does not say which step fixed it")
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1`, dev); n != 2 {
		t.Fatalf("%d operations, want 2 (no step repeated)", n)
	}
	// The change feed carries every step, in order.
	want := []string{"LADDER_STARTED", "STEP_STARTED", "STEP_FAILED", "STEP_STARTED", "STEP_SUCCEEDED", "FIXED", "RELEASED"}
	evs, _, _, err := feed.NewReader(r.st.Pool()).Read(context.Background(), feed.Cursor{}, feed.Filter{Kinds: []feed.Kind{feed.EventRemediation}}, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Remediation.Event)
	}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
}

// `release: operator`: the ladder fixes the device and ends SUCCEEDED, but
// the rule's hold stays (the device is left quarantined for an operator)
// and the history says which step fixed it.
func TestLadderReleaseOperatorKeepsTheHold(t *testing.T) {
	r := newRig(t, strings.Replace(ladderPolicy, "settle: 2m", "settle: 2m\n          release: operator", 1), 2, false)
	dev := r.site.IDs[0]
	r.site.Fault([]string{dev}, "DeployFailed", r.clk.Now())
	r.tick() // step 1: REBOOT
	if kind := r.finishOps(dev, "FAILED"); kind != "REBOOT" {
		t.Fatalf("first step %s", kind)
	}
	r.tick() // step 1 failed
	r.tick() // step 2: REPROVISION
	if kind := r.finishOps(dev, "SUCCEEDED"); kind != "REPROVISION" {
		t.Fatalf("second step %s", kind)
	}
	r.site.Heal(dev)
	r.tick() // settling
	r.clk.Add(2*time.Minute + time.Second)
	if s := r.tick(); s.Fixed != 1 {
		t.Fatalf("not fixed: %+v", s)
	}
	r.tick()
	if n := r.count(`SELECT count(*) FROM remediation_ladders WHERE device_id = $1 AND state = 'SUCCEEDED' AND fixed_step = 2
		AND fixed_kind = 'REPROVISION' AND NOT released`, dev); n != 1 {
		t.Fatal("the ladder is not SUCCEEDED by step 2 (REPROVISION), unreleased")
	}
	if n := r.count(`SELECT count(*) FROM quarantine_holds WHERE device_id = $1 AND holder = 'policy:faulted'`, dev); n != 1 {
		t.Fatalf("%d holds of rule faulted, want 1 (left quarantined)", n)
	}
	if n := r.count(`SELECT count(*) FROM remediation_events WHERE device_id = $1 AND event = 'FIXED' AND step = 2 AND kind = 'REPROVISION'
		AND detail = 'fixed by step 2 of 2 (REPROVISION) of rule faulted''s ladder; left quarantined for an operator'`, dev); n != 1 {
		t.Fatal("the history does not say which step fixed it and that it stays quarantined")
	}
	if n := r.count(`SELECT count(*) FROM remediation_events WHERE device_id = $1 AND event = 'RELEASED'`, dev); n != 0 {
		t.Fatal("a RELEASED event for a release: operator ladder")
	}
	if n := r.count(`SELECT count(*) FROM commands WHERE device_id = $1 AND actor = 'remediation'`, dev); n != 0 {
		t.Fatalf("%d commands by the remediation, want none (no release)", n)
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1`, dev); n != 2 {
		t.Fatalf("%d operations, want 2", n)
	}
}

// The site's quarantine guard trips while step 1 runs: step 2 waits
// (GuardTripped) with no operation created, and starts exactly once after
// the guard re-arms; no step is lost or repeated.
func TestGuardTripMidLadderWaitsThenResumes(t *testing.T) {
	doc := strings.Replace(ladderPolicy, "guard: {maxDevices: 50, maxPercent: 100, window: 1h}", "guard: {maxDevices: 1, maxPercent: 100, window: 10m}", 1)
	r := newRig(t, doc, 3, false)
	dev, other := r.site.IDs[0], r.site.IDs[1]
	r.site.Fault([]string{dev}, "DeployFailed", r.clk.Now())
	if s := r.tick(); s.Steps != 1 {
		t.Fatalf("first pass: %+v", s)
	}
	// A second fault is refused by the guard (1 device per 10 min): tripped.
	r.site.Fault([]string{other}, "DeployFailed", r.clk.Now())
	r.tick()
	if n := r.count(`SELECT count(*) FROM policy_site_state WHERE site = 'site-a' AND guard_tripped_since IS NOT NULL`); n != 1 {
		t.Fatal("the guard did not trip")
	}
	if kind := r.finishOps(dev, "FAILED"); kind != "REBOOT" {
		t.Fatalf("first step %s", kind)
	}
	for range 3 {
		r.tick()
	}
	var waiting string
	if err := r.st.Pool().QueryRow(context.Background(), `SELECT waiting FROM remediation_ladders WHERE device_id = $1 AND state = 'RUNNING'`, dev).Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	if waiting != remediation.WaitGuardTripped {
		t.Fatalf("waiting %q, want %s", waiting, remediation.WaitGuardTripped)
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1`, dev); n != 1 {
		t.Fatalf("%d operations while the guard is tripped, want 1 (step 1's)", n)
	}
	// The operator rejects the held quarantine; once the window has room the guard re-arms.
	pend, _, err := r.st.ListPendingActions(context.Background(), store.PendingFilter{Limit: 10})
	if err != nil || len(pend) != 1 {
		t.Fatalf("pending actions %v: %v", pend, err)
	}
	if _, err := r.st.ResolvePendingActions(context.Background(), []int64{pend[0].ID}, false, "op", "not now"); err != nil {
		t.Fatal(err)
	}
	r.tick()
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1`, dev); n != 1 {
		t.Fatal("step 2 started while the guard is still tripped")
	}
	r.clk.Add(11 * time.Minute)
	for range 3 {
		r.tick()
	}
	if n := r.count(`SELECT count(*) FROM policy_site_state WHERE site = 'site-a' AND guard_tripped_since IS NOT NULL`); n != 0 {
		t.Fatal("the guard did not re-arm")
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1 AND kind = 'REPROVISION'`, dev); n != 1 {
		t.Fatalf("%d REPROVISION operations, want 1", n)
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1`, dev); n != 2 {
		t.Fatalf("%d operations, want 2", n)
	}
	if n := r.count(`SELECT count(*) FROM remediation_events WHERE device_id = $1 AND event = 'STEP_STARTED'`, dev); n != 2 {
		t.Fatalf("%d steps started, want 2", n)
	}
	if n := r.count(`SELECT count(*) FROM remediation_events WHERE device_id = $1 AND event = 'WAITING' AND detail LIKE '%guard is tripped%'`, dev); n < 1 {
		t.Fatal("no WAITING event for the tripped guard")
	}
}

// A site's policy disabled (enabled: false) mid-ladder pauses the ladder
// where it is: no step is judged or started and no operation created; once
// enabled again the ladder goes on from its position (one ladder, each
// step started once).
func TestDisabledPolicyPausesTheLadder(t *testing.T) {
	r := newRig(t, ladderPolicy, 2, false)
	dev := r.site.IDs[0]
	r.site.Fault([]string{dev}, "DeployFailed", r.clk.Now())
	r.tick() // step 1: REBOOT
	r.setPolicy(ladderPolicy + "  sites:\n    site-a: {enabled: false}\n")
	if kind := r.finishOps(dev, "FAILED"); kind != "REBOOT" {
		t.Fatalf("first step %s", kind)
	}
	for range 3 {
		r.tick()
		r.clk.Add(time.Minute)
	}
	var waiting, state string
	var pos int
	if err := r.st.Pool().QueryRow(context.Background(), `SELECT state, waiting, position FROM remediation_ladders WHERE device_id = $1`, dev).Scan(&state, &waiting, &pos); err != nil {
		t.Fatal(err)
	}
	if state != "RUNNING" || waiting != remediation.WaitPolicyDisabled || pos != 0 {
		t.Fatalf("paused ladder: state %s, waiting %q, position %d; want RUNNING, %s, 0", state, waiting, pos, remediation.WaitPolicyDisabled)
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1`, dev); n != 1 {
		t.Fatalf("%d operations while paused, want 1 (step 1's)", n)
	}
	if n := r.count(`SELECT count(*) FROM remediation_events WHERE device_id = $1 AND event IN ('STEP_FAILED', 'ABANDONED')`, dev); n != 0 {
		t.Fatal("the paused ladder judged its step or was abandoned")
	}
	if n := r.count(`SELECT count(*) FROM quarantine_holds WHERE device_id = $1 AND holder = 'policy:faulted'`, dev); n != 1 {
		t.Fatal("the hold went away while paused")
	}
	r.setPolicy(ladderPolicy)
	r.tick() // step 1 judged: failed
	r.tick() // step 2
	r.tick()
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1 AND kind = 'REPROVISION'`, dev); n != 1 {
		t.Fatalf("%d REPROVISION operations after the resume, want 1", n)
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1`, dev); n != 2 {
		t.Fatalf("%d operations, want 2", n)
	}
	if n := r.count(`SELECT count(*) FROM remediation_ladders WHERE device_id = $1`, dev); n != 1 {
		t.Fatalf("%d ladders, want 1 (resumed, not started over)", n)
	}
	if n := r.count(`SELECT count(*) FROM remediation_events WHERE device_id = $1 AND event = 'STEP_STARTED'`, dev); n != 2 {
		t.Fatalf("%d steps started, want 2", n)
	}
	if n := r.count(`SELECT count(*) FROM remediation_ladders WHERE device_id = $1 AND waiting = ''`, dev); n != 1 {
		t.Fatal("the ladder still says it waits after the resume")
	}
}

// A ladder paused while settling (the step succeeded, the device good)
// judges nothing while paused, so a relapse then goes unseen: on resume
// the settle time starts again instead of counting the pause as good.
func TestPausedSettleStartsAgainOnResume(t *testing.T) {
	r := newRig(t, ladderPolicy, 2, false)
	dev := r.site.IDs[0]
	r.site.Fault([]string{dev}, "DeployFailed", r.clk.Now())
	r.tick() // step 1: REBOOT
	if kind := r.finishOps(dev, "SUCCEEDED"); kind != "REBOOT" {
		t.Fatalf("first step %s", kind)
	}
	r.site.Heal(dev)
	r.tick() // settling, good since now
	r.clk.Add(time.Minute)
	r.tick()
	r.setPolicy(ladderPolicy + "  sites:\n    site-a: {enabled: false}\n")
	r.tick()                                                 // paused
	r.site.Fault([]string{dev}, "DeployFailed", r.clk.Now()) // a relapse nobody judges
	r.clk.Add(5 * time.Minute)
	r.site.Heal(dev)
	r.tick()
	r.setPolicy(ladderPolicy)
	if s := r.tick(); s.Fixed != 0 {
		t.Fatalf("fixed on resume, the pause counted as settled: %+v", s)
	}
	r.tick()
	r.clk.Add(time.Minute)
	r.tick()
	if n := r.count(`SELECT count(*) FROM quarantine_holds WHERE device_id = $1`, dev); n != 1 {
		t.Fatalf("released %d holds before a whole settle time after the resume", 1-n)
	}
	r.clk.Add(61 * time.Second)
	if s := r.tick(); s.Fixed != 1 {
		t.Fatalf("not fixed a settle time after the resume: %+v", s)
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1`, dev); n != 1 {
		t.Fatalf("%d operations, want 1 (no step repeated)", n)
	}
}

// A pass that died after storing a step (its operation id chosen) but
// before creating the operation: the next pass creates that same
// operation, never a second one.
func TestStepOperationCreatedOnce(t *testing.T) {
	r := newRig(t, ladderPolicy, 2, false)
	dev := r.site.IDs[0]
	r.site.Fault([]string{dev}, "DeployFailed", r.clk.Now())
	r.tick()
	var op, ladder string
	if err := r.st.Pool().QueryRow(context.Background(), `SELECT s.operation_id::text, s.ladder_id::text FROM remediation_steps s
		JOIN remediation_ladders l ON l.id = s.ladder_id WHERE l.device_id = $1`, dev).Scan(&op, &ladder); err != nil {
		t.Fatal(err)
	}
	// Lose the operation and the step's progress, as if the pass died
	// between the step's row and the operation's.
	if _, err := r.st.Pool().Exec(context.Background(), `DELETE FROM operation_events WHERE operation_id = $1;`, op); err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.Pool().Exec(context.Background(), `DELETE FROM operations WHERE id = $1`, op); err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.Pool().Exec(context.Background(), `UPDATE remediation_steps SET state = 'STARTING' WHERE operation_id = $1`, op); err != nil {
		t.Fatal(err)
	}
	r.tick()
	r.tick()
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1`, dev); n != 1 {
		t.Fatalf("%d operations, want 1", n)
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE id = $1 AND kind = 'REBOOT'`, op); n != 1 {
		t.Fatal("the operation was not created under the step's stored id")
	}
}

func storeFilterOpen(dev string) store.HandoffFilter {
	return store.HandoffFilter{DeviceID: dev, OpenOnly: true}
}

// A hub failover in the middle of a ladder: two replicas run the
// evaluator (advisory lock), the leader goes away while step 1 runs, the
// other takes the lock and carries the ladder on; no step is lost or
// repeated.
func TestFailoverKeepsThePosition(t *testing.T) {
	st, url := storetest.New(t, nil)
	f, err := policy.Parse([]byte(ladderPolicy))
	if err != nil {
		t.Fatal(err)
	}
	site := storetest.NewSite(t, st, "site-a", 5, nil)
	start := func(replica string) context.CancelFunc {
		ctx, cancel := context.WithCancel(context.Background())
		log := testlog.New(t)
		eng := remediation.New(st, remediation.Config{}, log)
		ev := policyrun.New(st, policyrun.Config{Policy: func() *policy.File { return f }, Replica: replica, Interval: 50 * time.Millisecond,
			Remediate: func(ctx context.Context, file *policy.File) error { _, err := eng.Tick(ctx, file); return err }}, log)
		done := make(chan struct{})
		go func() { defer close(done); _ = ev.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return func() { cancel(); <-done }
	}
	count := func(sql string, args ...any) int { return pgtest.Count(t, url, sql, args...) }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s", what)
			}
		}
	}
	stopA := start("r1")
	start("r2")
	dev := site.IDs[0]
	site.Fault([]string{dev}, "DeployFailed", time.Now())
	waitFor("step 1's operation", func() bool {
		return count(`SELECT count(*) FROM operations WHERE device_id = $1 AND kind = 'REBOOT'`, dev) == 1
	})
	stopA() // the leader (or the standby: either way one replica is left)
	if _, err := st.Pool().Exec(context.Background(), `UPDATE operations SET state = 'FAILED', last_error = 'injected', ended_at = now()
		WHERE device_id = $1 AND kind = 'REBOOT'`, dev); err != nil {
		t.Fatal(err)
	}
	waitFor("step 2's operation", func() bool {
		return count(`SELECT count(*) FROM operations WHERE device_id = $1 AND kind = 'REPROVISION'`, dev) == 1
	})
	if n := count(`SELECT count(*) FROM operations WHERE device_id = $1`, dev); n != 2 {
		t.Fatalf("%d operations, want 2", n)
	}
	if n := count(`SELECT count(*) FROM remediation_events WHERE device_id = $1 AND event = 'STEP_STARTED'`, dev); n != 2 {
		t.Fatalf("%d steps started, want 2", n)
	}
}
