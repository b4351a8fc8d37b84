package policyrun_test

import (
	"context"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/policyrun"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

func newStore(t testing.TB) (*store.Store, string) { return storetest.New(t, nil) }

func newSite(t testing.TB, st *store.Store, name string, n int) *storetest.Site {
	return storetest.NewSite(t, st, name, n, nil)
}

func livePolicy(t *testing.T, doc string) func() *policy.File { return benchPolicy(t, doc) }

func benchPolicy(t testing.TB, doc string) func() *policy.File {
	t.Helper()
	f, err := policy.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return func() *policy.File { return f }
}

const testPolicy = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 5, maxPercent: 10, window: 1h}
    rules:
      - name: offered-faulted
        to: [FAULTED]
        autoReleaseAfter: 1m
  sites:
    site-dry: {dryRun: true}
    site-off: {enabled: false}
`

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

func count(t *testing.T, url, sql string, args ...any) int { return pgtest.Count(t, url, sql, args...) }

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, timeout)
		}
	}
}

// 50 devices, 20 fault within a minute, guard 5 / 10 %: 5 quarantined, 15
// pending, the guard tripped; 3 approved in bulk; a release (operator's and
// the policy's own) goes through during the trip; nothing is decided twice.
func TestGuardHoldsTheRest(t *testing.T) {
	ctx := context.Background()
	st, url := newStore(t)
	// One clock for the evaluator and the satellite's observations: a fault
	// time or a heal time read from time.Now() while the evaluator's clock
	// stands still made the auto-release below depend on how long the test
	// took to get there (it failed once under load).
	clk := &clock{t: time.Now()}
	a := storetest.NewSite(t, st, "site-a", 50, clk.Now)
	ev := policyrun.New(st, policyrun.Config{Policy: livePolicy(t, testPolicy), Now: clk.Now, Replica: "r1"}, testlog.New(t))

	start := clk.Now()
	for i := 0; i < 20; i++ { // 20 faults over ~a minute (satellite times)
		a.Fault(a.IDs[i:i+1], "DeployFailed", start.Add(time.Duration(i)*3*time.Second-time.Minute))
	}
	stats, err := ev.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Quarantined != 5 || stats.Pending != 15 {
		t.Fatalf("pass: %+v; want 5 quarantined, 15 pending", stats)
	}
	if n := count(t, url, `SELECT count(*) FROM commands WHERE source = 'policy' AND desired = 'QUARANTINED' AND state = 'PENDING'`); n != 5 {
		t.Fatalf("%d policy quarantine commands, want 5", n)
	}
	if n := count(t, url, `SELECT count(*) FROM policy_pending_actions WHERE state = 'PENDING' AND reason = 'HeldByGuard'`); n != 15 {
		t.Fatalf("%d pending held by guard, want 15", n)
	}
	sites, err := st.PolicySites(ctx, clk.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if s := sites[0]; s.TrippedSince == nil || s.TrippedRule != "offered-faulted" || s.OpenHeld != 15 || len(s.Recent) != 5 {
		t.Fatalf("site state %+v", s)
	}
	// Idempotent: another pass decides nothing new.
	if stats, err := ev.Tick(ctx); err != nil || stats.Decisions != 0 {
		t.Fatalf("second pass: %+v %v", stats, err)
	}
	// Every decision names its rule and trigger.
	ds, _, err := st.ListPolicyDecisions(ctx, store.DecisionFilter{Site: "site-a", Actions: []string{"QUARANTINE"}, Limit: 100})
	if err != nil || len(ds) != 5 {
		t.Fatalf("decisions %d %v", len(ds), err)
	}
	for _, d := range ds {
		if d.Rule != "offered-faulted" || d.From != "AVAILABLE" || d.To != "FAULTED" || d.Cause.Reason != "DeployFailed" || d.CommandID == "" || d.SiteDevices != 50 {
			t.Fatalf("decision %+v", d)
		}
	}

	// Approve 3 in bulk.
	pend, _, err := st.ListPendingActions(ctx, store.PendingFilter{Site: "site-a", Limit: 100})
	if err != nil || len(pend) != 15 {
		t.Fatalf("pending %d %v", len(pend), err)
	}
	ids := []int64{pend[0].ID, pend[1].ID, pend[2].ID}
	got, err := st.ResolvePendingActions(ctx, ids, true, "alice", "confirmed broken")
	if err != nil || len(got) != 3 {
		t.Fatalf("approve: %v %v", got, err)
	}
	for _, p := range got {
		if p.State != store.PendingApproved || p.CommandID == "" || p.ResolvedBy != "alice" {
			t.Fatalf("approved %+v", p)
		}
	}
	// Approving again is refused, all or nothing.
	if _, err := st.ResolvePendingActions(ctx, []int64{pend[3].ID, pend[0].ID}, false, "bob", "x"); err == nil {
		t.Fatal("resolving an approved action again was accepted")
	}
	if n := count(t, url, `SELECT count(*) FROM policy_pending_actions WHERE state = 'PENDING'`); n != 12 {
		t.Fatalf("%d still pending, want 12 (a refused bulk call changed something)", n)
	}

	// A release during the trip: an operator's goes through...
	if _, err := st.SetDesiredImpairment(ctx, ds[0].DeviceID, store.ImpairmentReleased, "bob", "false alarm", "operator-api"); err != nil {
		t.Fatal(err)
	}
	// ...and so does the policy's own auto-release once the cause cleared.
	healed := ds[1].DeviceID
	a.Heal(healed)
	// The hub commits the heal at its own (real) time: 61 s after that.
	clk.Add(61*time.Second + max(0, time.Since(clk.Now())))
	stats, err = ev.Tick(ctx)
	if err != nil || stats.Released != 1 {
		t.Fatalf("release pass: %+v %v", stats, err)
	}
	d, err := st.GetDevice(ctx, healed)
	if err != nil || d.DesiredImpairment != store.ImpairmentReleased {
		t.Fatalf("healed device %+v %v", d.DesiredImpairment, err)
	}
	if n := count(t, url, `SELECT count(*) FROM policy_site_state WHERE guard_tripped_since IS NOT NULL`); n != 1 {
		t.Fatal("the guard re-armed with actions still pending")
	}
	// Reject the rest: the guard re-arms only once the window has room too.
	var rest []int64
	for _, p := range pend[3:] {
		rest = append(rest, p.ID)
	}
	if _, err := st.ResolvePendingActions(ctx, rest, false, "alice", "not now"); err != nil {
		t.Fatal(err)
	}
	if stats, err := ev.Tick(ctx); err != nil || stats.Rearmed != 0 {
		t.Fatalf("re-armed with a full window: %+v %v", stats, err)
	}
	clk.Add(time.Hour)
	if stats, err := ev.Tick(ctx); err != nil || stats.Rearmed != 1 {
		t.Fatalf("not re-armed after the window slid: %+v %v", stats, err)
	}
}

// A link cut long enough for the site to turn UNREACHABLE, with faults
// during it: on reconnect nothing is quarantined automatically; every one is
// pending as a stale trigger.
func TestOutageIsNotReplayed(t *testing.T) {
	ctx := context.Background()
	st, url := newStore(t)
	b := newSite(t, st, "site-b", 50)
	ev := policyrun.New(st, policyrun.Config{Policy: livePolicy(t, testPolicy), Replica: "r1"}, testlog.New(t))
	pgtest.MustExec(t, url, `UPDATE sites SET last_seen_at = now() - interval '10 minutes' WHERE name = 'site-b'`)
	if stale, err := st.MarkStaleSites(ctx, time.Minute); err != nil || len(stale) != 1 {
		t.Fatalf("stale %v %v", stale, err)
	}
	if stats, err := ev.Tick(ctx); err != nil || stats.Decisions != 0 {
		t.Fatalf("pass while unreachable: %+v %v", stats, err)
	}
	// The faults happened during the cut; the satellite reports them after.
	during := time.Now().Add(-30 * time.Second)
	b.Connect()
	b.Fault(b.IDs[:8], "CleanFailed", during)
	stats, err := ev.Tick(ctx)
	if err != nil || stats.Pending != 8 || stats.Quarantined != 0 {
		t.Fatalf("pass after reconnect: %+v %v", stats, err)
	}
	if n := count(t, url, `SELECT count(*) FROM commands`); n != 0 {
		t.Fatalf("%d commands after an outage, want none", n)
	}
	if n := count(t, url, `SELECT count(*) FROM policy_pending_actions WHERE reason = 'StaleTrigger' AND state = 'PENDING'`); n != 8 {
		t.Fatalf("%d stale pending, want 8", n)
	}
	// A fault that begins after the reconnect is acted on.
	b.Fault(b.IDs[8:9], "CleanFailed", time.Now())
	if stats, err := ev.Tick(ctx); err != nil || stats.Quarantined != 1 {
		t.Fatalf("fresh fault after reconnect: %+v %v", stats, err)
	}
}

// A dry-run site logs what it would do and changes nothing; a site with
// the policy off logs nothing.
func TestDryRunChangesNothing(t *testing.T) {
	ctx := context.Background()
	st, url := newStore(t)
	dry := newSite(t, st, "site-dry", 50)
	off := newSite(t, st, "site-off", 10)
	ev := policyrun.New(st, policyrun.Config{Policy: livePolicy(t, testPolicy), Replica: "r1"}, testlog.New(t))
	dry.Fault(dry.IDs[:7], "DeployFailed", time.Now())
	off.Fault(off.IDs[:3], "DeployFailed", time.Now())
	stats, err := ev.Tick(ctx)
	if err != nil || stats.Decisions != 7 {
		t.Fatalf("pass: %+v %v", stats, err)
	}
	if n := count(t, url, `SELECT count(*) FROM policy_decisions WHERE dry_run AND action = 'QUARANTINE'`); n != 5 {
		t.Fatalf("%d would-quarantine, want 5", n)
	}
	if n := count(t, url, `SELECT count(*) FROM policy_decisions WHERE dry_run AND action = 'PENDING' AND reason = 'HeldByGuard'`); n != 2 {
		t.Fatalf("%d would-be-held, want 2", n)
	}
	for _, q := range []string{`SELECT count(*) FROM commands`, `SELECT count(*) FROM policy_pending_actions`,
		`SELECT count(*) FROM policy_site_state WHERE guard_tripped_since IS NOT NULL`, `SELECT count(*) FROM policy_decisions WHERE site = 'site-off'`} {
		if n := count(t, url, q); n != 0 {
			t.Fatalf("%s = %d, want 0", q, n)
		}
	}
}

// Exclusions and planned maintenance skip, and only one of two evaluators
// leads.
func TestExclusionAndOneLeader(t *testing.T) {
	ctx := context.Background()
	st, url := newStore(t)
	a := newSite(t, st, "site-a", 50)
	if _, err := st.SetDeviceHold(ctx, store.DeviceHold{DeviceID: a.IDs[0], Kind: store.HoldExclusion, Reason: "burn-in", Author: "alice", StartsAt: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetDeviceHold(ctx, store.DeviceHold{DeviceID: uuid.NewString(), Kind: store.HoldExclusion, Reason: "x", Author: "a", StartsAt: time.Now()}); err == nil {
		t.Fatal("hold on an unknown device accepted")
	}
	var clockReads atomic.Int64 // by the leader
	cfg := policyrun.Config{Policy: livePolicy(t, testPolicy), Interval: 20 * time.Millisecond,
		Now: func() time.Time { clockReads.Add(1); return time.Now() }}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	leading := map[string]int{}
	for _, r := range []string{"r1", "r2"} {
		c := cfg
		c.Replica = r
		c.Hooks.Leading = func(on bool) {
			mu.Lock()
			if on {
				leading[r]++
			}
			mu.Unlock()
		}
		ev := policyrun.New(st, c, testlog.New(t))
		wg.Add(1)
		go func() { defer wg.Done(); _ = ev.Run(rctx) }()
	}
	a.Fault(a.IDs[:2], "DeployFailed", time.Now())
	waitFor(t, 10*time.Second, "the two decisions", func() bool { return count(t, url, `SELECT count(*) FROM policy_decisions`) >= 2 })
	// A pass begins with a reading of the clock (and reads it once more per
	// decision): three more readings mean a whole pass began and ended after
	// the decisions, which would have made any extra one.
	after := clockReads.Load()
	waitFor(t, 10*time.Second, "a whole pass after the decisions", func() bool { return clockReads.Load() >= after+3 })
	cancel()
	wg.Wait()
	if n := count(t, url, `SELECT count(*) FROM policy_decisions WHERE action = 'SKIP' AND reason = 'ExcludedFromAutomation'`); n != 1 {
		t.Fatalf("%d exclusion skips, want 1", n)
	}
	if n := count(t, url, `SELECT count(*) FROM policy_decisions WHERE action = 'QUARANTINE'`); n != 1 {
		t.Fatalf("%d quarantines, want 1", n)
	}
	if len(leading) != 1 {
		t.Fatalf("leaders: %v, want exactly one", leading)
	}
	if n := count(t, url, `SELECT count(DISTINCT replica) FROM policy_decisions`); n != 1 {
		t.Fatalf("decisions from %d replicas", n)
	}
}

// A blip shorter than the hold-down is never decided; a later fault of the
// same device is a new trigger with its own decision, once.
func TestHoldDownBlipAndRefault(t *testing.T) {
	ctx := context.Background()
	st, url := newStore(t)
	clk := &clock{t: time.Now()}
	a := storetest.NewSite(t, st, "site-a", 50, clk.Now)
	doc := `
policy:
  default:
    enabled: true
    rules: [{name: faulted, to: [FAULTED], holdDown: 30s}]
`
	ev := policyrun.New(st, policyrun.Config{Policy: livePolicy(t, doc), Now: clk.Now, Replica: "r1"}, testlog.New(t))
	a.Fault(a.IDs[:1], "DeployFailed", clk.Now())
	clk.Add(10 * time.Second)
	if stats, err := ev.Tick(ctx); err != nil || stats.Decisions != 0 {
		t.Fatalf("inside the hold-down: %+v %v", stats, err)
	}
	a.Heal(a.IDs[0]) // the blip ends
	clk.Add(time.Minute)
	// The blip gets its one decision: SKIP HealedWithinHoldDown, no command.
	if stats, err := ev.Tick(ctx); err != nil || stats.Decisions != 1 || stats.Skipped != 1 || stats.Quarantined != 0 {
		t.Fatalf("after the blip: %+v %v", stats, err)
	}
	blip, _, err := st.ListPolicyDecisions(ctx, store.DecisionFilter{Site: "site-a", Limit: 10})
	if err != nil || len(blip) != 1 || blip[0].Action != "SKIP" || blip[0].Reason != policy.ReasonHealedWithinHoldDown ||
		blip[0].From != "AVAILABLE" || blip[0].To != "FAULTED" || blip[0].CommandID != "" || !strings.Contains(blip[0].Detail, "healed to AVAILABLE") {
		t.Fatalf("the blip's decision: %+v %v", blip, err)
	}
	if stats, err := ev.Tick(ctx); err != nil || stats.Decisions != 0 {
		t.Fatalf("the blip decided twice: %+v %v", stats, err)
	}
	a.Fault(a.IDs[:1], "DeployFailed", clk.Now().Add(-31*time.Second))
	if stats, err := ev.Tick(ctx); err != nil || stats.Quarantined != 1 {
		t.Fatalf("a fault that held: %+v %v", stats, err)
	}
	if _, err := st.SetDesiredImpairment(ctx, a.IDs[0], store.ImpairmentReleased, "bob", "fixed", "operator-api"); err != nil {
		t.Fatal(err)
	}
	a.Heal(a.IDs[0])
	a.Fault(a.IDs[:1], "CleanFailed", clk.Now().Add(-31*time.Second))
	if stats, err := ev.Tick(ctx); err != nil || stats.Quarantined != 1 {
		t.Fatalf("the second fault: %+v %v", stats, err)
	}
	if stats, err := ev.Tick(ctx); err != nil || stats.Decisions != 0 {
		t.Fatalf("decided twice: %+v %v", stats, err)
	}
	if n := count(t, url, `SELECT count(DISTINCT trigger_id) FROM policy_decisions WHERE action = 'QUARANTINE'`); n != 2 {
		t.Fatalf("%d triggers quarantined, want 2", n)
	}
	if n := count(t, url, `SELECT count(*) FROM commands WHERE source = 'policy'`); n != 2 {
		t.Fatalf("%d policy commands, want 2 (none for the blip)", n)
	}
}

// The evidence is judged again in the transaction that creates the
// command, with the site row held: a QUARANTINE decided while the link was
// up but recorded after it ended becomes PENDING AwaitingFreshEvidence (no
// command); with the link up it quarantines.
func TestRecheckAtSend(t *testing.T) {
	ctx := context.Background()
	st, url := newStore(t)
	a := newSite(t, st, "site-a", 10)
	a.Fault(a.IDs[:2], "DeployFailed", time.Now())
	cands, err := st.PolicyCandidates(ctx, store.SiteScope{Except: true})
	if err != nil || len(cands) != 2 {
		t.Fatalf("candidates %v %v", cands, err)
	}
	linkUp := func(ev store.SiteEvidence) string {
		if !ev.LinkUp {
			return "the site's link ended"
		}
		return ""
	}
	rec := func(c store.PolicyCandidate) store.PolicyDecision {
		return store.PolicyDecision{DeviceID: c.DeviceID, Site: c.Site, Kind: store.DecisionKindQuarantine, TriggerID: c.HistoryID,
			Action: "QUARANTINE", Reason: "RuleMatched", Rule: "r", DecidedAt: time.Now(), Recheck: linkUp}
	}
	out, ok, err := st.RecordPolicyDecision(ctx, rec(cands[0]))
	if err != nil || !ok || out.Action != "QUARANTINE" || out.CommandID == "" {
		t.Fatalf("link up: %+v %v %v", out, ok, err)
	}
	a.Cut()
	out, ok, err = st.RecordPolicyDecision(ctx, rec(cands[1]))
	if err != nil || !ok || out.Action != "PENDING" || out.Reason != store.ReasonAwaitingFreshEvidence || out.CommandID != "" ||
		out.PendingID == 0 || !strings.Contains(out.Detail, "link ended") {
		t.Fatalf("link ended before the send: %+v %v %v", out, ok, err)
	}
	if n := count(t, url, `SELECT count(*) FROM commands`); n != 1 {
		t.Fatalf("%d commands, want the one sent while the link was up", n)
	}
	// The awaiting trigger is still a candidate, with its pending action.
	cands, err = st.PolicyCandidates(ctx, store.SiteScope{Except: true})
	if err != nil || len(cands) != 1 || cands[0].AwaitingID != out.PendingID {
		t.Fatalf("candidates after the re-check: %+v %v", cands, err)
	}
}

// TestFaultWakesTheLeader: with a --policy-interval of an hour, two
// replicas (each its own store and LISTEN connection, as two hub processes
// have) decide a fault committed after the leader's first pass, woken by
// the notification of the FAULTED row on store.PolicyNotifyChannel; only
// the leader decides, once per device, and a commit without a fault wakes
// nobody.
func TestFaultWakesTheLeader(t *testing.T) {
	ctx := context.Background()
	st, url := newStore(t)
	a := newSite(t, st, "site-a", 50)
	var passes atomic.Int64
	var mu sync.Mutex
	leading := map[string]int{}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, r := range []string{"r1", "r2"} {
		rst, err := store.Open(ctx, url, testlog.New(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rst.Close)
		ev := policyrun.New(rst, policyrun.Config{Policy: livePolicy(t, testPolicy), Interval: time.Hour, Replica: r,
			Hooks: policyrun.Hooks{Leading: func(on bool) {
				mu.Lock()
				if on {
					leading[r]++
				}
				mu.Unlock()
			}},
			Remediate: func(context.Context, *policy.File) error { passes.Add(1); return nil }}, testlog.New(t))
		stop := rst.Notifications().Subscribe(store.PolicyNotifyChannel, func(string) { ev.Wake() })
		t.Cleanup(stop)
		wg.Add(1)
		go func() { defer wg.Done(); _ = ev.Run(rctx) }()
	}
	defer func() { cancel(); wg.Wait() }()
	waitFor(t, 10*time.Second, "the leader's first pass", func() bool { return passes.Load() >= 1 })
	// The listeners connect when subscribed; give them a moment, then a
	// non-fault commit must not wake the leader.
	time.Sleep(200 * time.Millisecond)
	before := passes.Load()
	a.Heal(a.IDs[5])
	time.Sleep(200 * time.Millisecond)
	if n := passes.Load(); n != before {
		t.Errorf("%d passes after a commit without a fault, want none", n-before)
	}
	a.Fault(a.IDs[:2], "DeployFailed", time.Now())
	waitFor(t, 30*time.Second, "two decisions woken by the fault (the interval is an hour)", func() bool {
		return count(t, url, `SELECT count(*) FROM policy_decisions WHERE action = 'QUARANTINE'`) == 2
	})
	a.Fault(a.IDs[2:3], "DeployFailed", time.Now())
	waitFor(t, 30*time.Second, "the third fault's decision", func() bool {
		return count(t, url, `SELECT count(*) FROM policy_decisions WHERE action = 'QUARANTINE'`) == 3
	})
	cancel()
	wg.Wait()
	if n := count(t, url, `SELECT count(*) FROM policy_decisions`); n != 3 {
		t.Errorf("%d decisions, want 3 (one per fault)", n)
	}
	if len(leading) != 1 {
		t.Errorf("leaders: %v, want exactly one", leading)
	}
	if n := count(t, url, `SELECT count(DISTINCT replica) FROM policy_decisions`); n != 1 {
		t.Errorf("decisions from %d replicas, want 1", n)
	}
}

// PolicyCandidates reads only the sites in its scope: every site, every
// site but one, one site, none (then no query).
func TestCandidatesInScopeOnly(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	a := newSite(t, st, "site-a", 4)
	b := newSite(t, st, "site-b", 4)
	a.Fault(a.IDs[:2], "DeployFailed", time.Now())
	b.Fault(b.IDs[:3], "DeployFailed", time.Now())
	for _, tc := range []struct {
		scope store.SiteScope
		want  map[string]int
	}{
		{store.SiteScope{Except: true}, map[string]int{"site-a": 2, "site-b": 3}},
		{store.SiteScope{Except: true, Sites: []string{"site-b"}}, map[string]int{"site-a": 2}},
		{store.SiteScope{Sites: []string{"site-b"}}, map[string]int{"site-b": 3}},
		{store.SiteScope{}, map[string]int{}},
	} {
		cands, err := st.PolicyCandidates(ctx, tc.scope)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, c := range cands {
			got[c.Site]++
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("scope %+v: candidates by site %v, want %v", tc.scope, got, tc.want)
		}
	}
}
