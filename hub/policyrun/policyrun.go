// Package policyrun is the hub's quarantine-policy evaluator: every
// Interval, and within Coalesce of a wake-up (Evaluator.Wake: the hub
// calls it on store.PolicyNotifyChannel, sent when any replica commits a
// device entering FAULTED or MAINTENANCE), on exactly one replica at a time
// (a PostgreSQL advisory lock held in an open transaction, its writes
// fenced by an epoch), it reads the devices in FAULTED or MAINTENANCE with their
// triggering status change (store.PolicyCandidates), applies the pure
// decision of hub/policy and records it with store.RecordPolicyDecision
// (one decision per device and triggering change: a quarantine is a
// desired state like an operator's, with source "policy"); it re-arms
// tripped guards, expires pending actions whose cause is gone, and
// releases policy quarantines whose rule auto-releases.
package policyrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/logkey"
)

// LockKey is the PostgreSQL advisory lock (pg_try_advisory_xact_lock, in
// a transaction kept open) whose holder is the one evaluator of the fleet.
const LockKey int64 = 0x69726f6e706f6c // "ironpol"

// DefaultInterval is how often the evaluator runs without a wake-up
// (--policy-interval): the backstop of Wake.
const DefaultInterval = time.Second

// DefaultCoalesce is how long the leader waits after a wake-up before its
// pass (--policy-coalesce), so that a burst of faults committed over a
// few milliseconds is decided in one pass.
const DefaultCoalesce = 20 * time.Millisecond

// Hooks observe the evaluator (metrics); nil fields are skipped.
type Hooks struct {
	// Decided is called for every recorded decision: its action, whether
	// it is a dry-run, and its latency (decision time − the triggering
	// status change's commit time; 0 for releases).
	Decided func(action string, dryRun bool, latency time.Duration)
	// Leading is called with true when this replica takes the lock and
	// false when it loses it.
	Leading func(bool)
}

// Config configures an Evaluator.
type Config struct {
	// Interval between passes without a wake-up (default DefaultInterval).
	Interval time.Duration
	// Coalesce is the wait between a wake-up and the pass it causes (default
	// DefaultCoalesce; negative: none): wake-ups within it, and during a
	// pass, make one further pass.
	Coalesce time.Duration
	// Replica names this replica in decisions.
	Replica string
	// Policy returns the policy file in force (a policy.Watcher's Policy).
	Policy func() *policy.File
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Hooks observe the passes (metrics).
	Hooks Hooks
	// Remediate, when set, runs at the end of every pass with the policy
	// in force (hub/remediation's ladders: advanced only by the lock's
	// holder, level-triggered).
	Remediate func(ctx context.Context, file *policy.File) error
	// FreshFor is the freshness bound of a site's evidence: its last poll
	// may be at most this old for the policy to act (the hub's
	// --stale-after; default DefaultFreshFor).
	FreshFor time.Duration
}

// DefaultFreshFor is Config.FreshFor's default (the hub's default
// --stale-after).
const DefaultFreshFor = 3 * time.Minute

// Evaluator applies the quarantine policy. Run it on every replica: only
// the holder of LockKey evaluates.
type Evaluator struct {
	st  Store
	cfg Config
	log *slog.Logger
	// dbDown: the latest attempt at the lock failed for want of the
	// database (logged once, not at every Interval; Run's goroutine only).
	dbDown bool
	// wake holds at most one pending wake-up (Wake).
	wake chan struct{}
}

// New returns an evaluator over st.
func New(st Store, cfg Config, log *slog.Logger) *Evaluator {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FreshFor <= 0 {
		cfg.FreshFor = DefaultFreshFor
	}
	if cfg.Policy == nil {
		cfg.Policy = policy.Disabled
	}
	if cfg.Coalesce == 0 {
		cfg.Coalesce = DefaultCoalesce
	}
	return &Evaluator{st: st, cfg: cfg, log: log, wake: make(chan struct{}, 1)}
}

// Wake asks for a pass soon (within Coalesce) instead of at the next
// Interval; it never blocks, and wake-ups before that pass starts fold
// into it. Only the replica holding the lock passes: on the others it does
// nothing. The hub calls it for every notification on
// store.PolicyNotifyChannel. Safe for concurrent use.
func (e *Evaluator) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Run evaluates every Interval and after each Wake (Coalesce later) while
// this replica holds the advisory lock, trying to take it every Interval
// otherwise, until ctx ends (then
// it returns nil). Losing the lock's connection ends the lead; a failed
// pass is logged and the next one runs as usual. While the database does
// not answer (a failover), the failure is logged once, and once more when
// the lock can be asked for again, not at every Interval.
func (e *Evaluator) Run(ctx context.Context) error {
	tick := time.NewTicker(e.cfg.Interval)
	defer tick.Stop()
	for {
		if err := e.lead(ctx, tick.C); err != nil && ctx.Err() == nil && !e.dbDown {
			e.log.Warn("policy evaluator lost its lock connection; retrying every interval", logkey.Err, err)
			e.dbDown = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// KeepaliveEvery is how often the lock's transaction runs a statement
// while this replica leads: well under the hub sessions'
// idle_in_transaction_session_timeout (internal/pgprimary, 10 s), which
// thus ends only a stopped replica's lock.
const KeepaliveEvery = time.Second

// lead takes the lock (returns nil at once when another replica holds it)
// and evaluates until ctx ends or the lock's session fails.
//
// The lock is transaction-level (pg_try_advisory_xact_lock) inside a
// transaction kept open on its own connection, a statement every
// KeepaliveEvery: a replica stopped (SIGSTOP) or cut off leaves that
// transaction idle, PostgreSQL ends it after
// idle_in_transaction_session_timeout and the lock is free for another
// replica (a session-level lock would stay with the stopped one). Taking
// the lead bumps the fencing epoch (Store.TakePolicyLead) and every pass
// writes under it (store.WithPolicyFence): a replica that resumes after
// losing the lead has its writes refused (store.ErrPolicyFenced) before
// its keepalive notices.
func (e *Evaluator) lead(ctx context.Context, tick <-chan time.Time) error {
	conn, err := e.st.Pool().Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire lock connection: %w", err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		conn.Release()
		return fmt.Errorf("begin policy lock transaction: %w", err)
	}
	// release ends the transaction (and the lock with it), or drops the
	// connection so the session ends.
	release := func() {
		ctx2, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := tx.Rollback(ctx2); err != nil {
			_ = conn.Conn().Close(ctx2)
		}
		conn.Release()
	}
	var got bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, LockKey).Scan(&got); err != nil {
		release()
		return fmt.Errorf("try policy lock: %w", err)
	}
	if e.dbDown {
		e.dbDown = false
		e.log.Info("policy evaluator reaches the database again")
	}
	if !got {
		release()
		return nil
	}
	epoch, err := e.st.TakePolicyLead(ctx, e.cfg.Replica)
	if err != nil {
		release()
		return err
	}
	e.log.Info("policy evaluator leading", logkey.Replica, e.cfg.Replica, "interval", e.cfg.Interval, "epoch", epoch)
	if e.cfg.Hooks.Leading != nil {
		e.cfg.Hooks.Leading(true)
	}
	lctx, cancel := context.WithCancel(ctx)
	var keptErr error // keepLock's, once kept is closed
	kept := make(chan struct{})
	go func() { keptErr = keepLock(lctx, tx); cancel(); close(kept) }()
	defer func() {
		cancel()
		<-kept
		if e.cfg.Hooks.Leading != nil {
			e.cfg.Hooks.Leading(false)
		}
		release()
	}()
	fenced := store.WithPolicyFence(lctx, epoch)
	for full := true; ; {
		if _, err := e.pass(fenced, full); err != nil && lctx.Err() == nil {
			if errors.Is(err, store.ErrPolicyFenced) {
				e.log.Warn("policy pass refused: another replica took the lead", logkey.Err, err)
				return err
			}
			e.log.Error("policy pass failed", logkey.Err, err)
		}
		select {
		case <-lctx.Done():
			if ctx.Err() != nil {
				return nil
			}
			<-kept
			return keptErr
		case <-tick:
			full = true
		case <-e.wake:
			if !e.coalesce(lctx) {
				if ctx.Err() != nil {
					return nil
				}
				<-kept
				return keptErr
			}
			full = false
		}
	}
}

// keepLock runs a statement on the lock's transaction every
// KeepaliveEvery until ctx ends (nil) or the statement fails (the
// session ended: the lock is gone).
func keepLock(ctx context.Context, tx pgx.Tx) error {
	t := time.NewTicker(KeepaliveEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("policy lock session: %w", err)
		}
	}
}

// coalesce waits Coalesce after a wake-up and drops the wake-ups that came
// meanwhile (the pass about to run covers them); false when ctx ended.
func (e *Evaluator) coalesce(ctx context.Context) bool {
	if e.cfg.Coalesce > 0 {
		t := time.NewTimer(e.cfg.Coalesce)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	select {
	case <-e.wake:
	default:
	}
	return true
}

// Stats counts what one pass did.
type Stats struct {
	Decisions, Quarantined, Pending, Skipped, Released, Expired, Rearmed int
}

// Tick runs one pass now, whether or not this replica holds the lock (Run
// calls it only while it does; tests call it directly): it expires pending
// actions, decides each candidate transition of a site whose policy is
// enabled, re-arms tripped guards and releases quarantines that ended.
func (e *Evaluator) Tick(ctx context.Context) (Stats, error) { return e.pass(ctx, true) }

// pass is one pass: Tick's when full, else (after a Wake) only the
// decisions of the candidate transitions, the rest waiting for the next
// full pass (at most Interval later): a new fault is decided without
// the work that does not depend on it.
func (e *Evaluator) pass(ctx context.Context, full bool) (Stats, error) {
	var stats Stats
	file := e.cfg.Policy()
	scope := enabledScope(file)
	if !full && scope.None() {
		// A wake-up only decides candidates, and no site has any.
		return stats, nil
	}
	now := e.cfg.Now()
	if full {
		n, err := e.st.ExpirePendingActions(ctx)
		if err != nil {
			return stats, err
		}
		stats.Expired = n
	}
	sites, err := e.st.PolicySites(ctx, now.Add(-longestWindow(file)))
	if err != nil {
		return stats, err
	}
	bySite := make(map[string]*store.PolicySite, len(sites))
	for i := range sites {
		bySite[sites[i].Name] = &sites[i]
	}
	cands, holds, err := e.candidates(ctx, file, scope)
	if err != nil {
		return stats, err
	}
	dom, err := e.loadDomains(ctx, file, cands, now.Add(-longestWindow(file)))
	if err != nil {
		return stats, err
	}
	for _, c := range cands {
		p := file.Effective(c.Site)
		site := bySite[c.Site]
		if !p.Enabled || site == nil {
			continue // no policy here: nothing to decide or log
		}
		if err := e.decide(ctx, p, site, c, holds[c.DeviceID], dom, now, &stats); err != nil {
			return stats, err
		}
	}
	if !full {
		return stats, nil
	}
	if err := e.healed(ctx, file, scope, now.Add(-longestWindow(file)), now, &stats); err != nil {
		return stats, err
	}
	if err := e.rearmGuards(ctx, file, sites, now, &stats); err != nil {
		return stats, err
	}
	if err := e.rearmDomains(ctx, file, dom, bySite, now, &stats); err != nil {
		return stats, err
	}
	n, err := e.releases(ctx, file, bySite, now)
	stats.Released = n
	if err == nil && e.cfg.Remediate != nil {
		err = e.cfg.Remediate(ctx, file)
	}
	return stats, err
}

// longestWindow is the longest guard window of the default policy and of
// every site's: how far back a pass reads the sites' recent actions.
func longestWindow(file *policy.File) time.Duration {
	maxWin := file.Default.Guard.Window
	for _, name := range file.SiteNames() {
		if w := file.Effective(name).Guard.Window; w > maxWin {
			maxWin = w
		}
	}
	return maxWin
}

// enabledScope is the sites whose policy in file is enabled: every site
// but those that turn it off when the default is on, else those that turn
// it on. With none (policy off everywhere, the default) a pass reads no
// candidates: the evaluator, woken by every fault, costs ingest nothing
// (issue 26; docs/design/performance.md).
func enabledScope(file *policy.File) store.SiteScope {
	sc := store.SiteScope{Except: file.Default.Enabled, Sites: []string{}}
	for _, name := range file.SiteNames() {
		if file.Effective(name).Enabled != file.Default.Enabled {
			sc.Sites = append(sc.Sites, name)
		}
	}
	return sc
}

// candidates reads the transitions to decide on of the sites in scope
// (those whose policy in file is enabled) and their devices' holds (by
// device id).
func (e *Evaluator) candidates(ctx context.Context, file *policy.File, scope store.SiteScope) ([]store.PolicyCandidate, map[string][]store.DeviceHold, error) {
	cands, err := e.st.PolicyCandidates(ctx, scope)
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, 0, len(cands))
	for _, c := range cands {
		if file.Effective(c.Site).Enabled {
			ids = append(ids, c.DeviceID)
		}
	}
	holds := map[string][]store.DeviceHold{}
	if len(ids) > 0 {
		if holds, err = e.st.DeviceHolds(ctx, ids); err != nil {
			return nil, nil, err
		}
	}
	return cands, holds, nil
}

// decide runs policy p on candidate c of site (whose holds are holds),
// records the decision unless it is to wait, and counts it in stats; site's
// recent actions, open pending actions and guard follow, so the next
// candidate of the pass sees them.
func (e *Evaluator) decide(ctx context.Context, p policy.SitePolicy, site *store.PolicySite, c store.PolicyCandidate, holds []store.DeviceHold, dom *domainView, now time.Time, stats *Stats) error {
	excl, planned := holdsOf(holds)
	in := policy.Input{
		Policy: p,
		Trigger: policy.Trigger{DeviceID: c.DeviceID, HistoryID: c.HistoryID, From: c.From, To: c.To,
			CauseType: string(c.Cause.Type), CauseReason: c.Cause.Reason, CauseMessage: c.Cause.Message,
			CauseHealth: c.Cause.Health, CauseSince: c.Cause.LastTransitionTime, ChangedAt: c.ChangedAt, UnreachableUntil: c.UnreachableUntil,
			AlreadyQuarantined: c.Quarantined},
		Site:     e.siteState(site),
		Excluded: excl, Planned: planned, Now: now,
	}
	dom.apply(&in, c)
	d := policy.Decide(in)
	if d.Action == policy.ActionWait {
		return nil
	}
	if c.AwaitingID != 0 {
		return e.resolveAwaiting(ctx, c, d, site, now, stats)
	}
	triggered := c.ChangedAt
	rec := store.PolicyDecision{DeviceID: c.DeviceID, Site: c.Site, Kind: store.DecisionKindQuarantine, TriggerID: c.HistoryID,
		Action: string(d.Action), Reason: d.Reason, Detail: d.Detail, Rule: d.Rule, DryRun: d.DryRun,
		From: string(c.From), To: string(c.To), Cause: c.Cause, TriggeredAt: &triggered,
		WindowCount: d.WindowCount, SiteDevices: d.Devices, Trips: d.Trips, Replica: e.cfg.Replica, DecidedAt: now,
		Recheck: e.recheck}
	if d.TripsDomain != nil {
		rec.TripsLabel, rec.TripsValue = d.TripsDomain.Label, d.TripsDomain.Value
	}
	out, recorded, err := e.st.RecordPolicyDecision(ctx, rec)
	if err != nil {
		return fmt.Errorf("device %s: %w", c.DeviceID, err)
	}
	if !recorded {
		return nil
	}
	stats.Decisions++
	e.observe(out, e.cfg.Now().Sub(c.ChangedAt))
	countDecision(out, site, now, stats)
	dom.record(c, out, now)
	if out.Trips && site.TrippedSince == nil {
		site.TrippedSince, site.TrippedRule = &now, out.Rule
		e.log.Warn("policy guard tripped: further automatic quarantines wait for an operator",
			logkey.Site, c.Site, "rule", out.Rule, "detail", out.Detail)
	}
	if out.TripsLabel != "" {
		e.log.Warn("policy guard tripped for one label value: further automatic quarantines of its devices wait for an operator",
			logkey.Site, c.Site, "domain", out.TripsLabel+"="+out.TripsValue, "rule", out.Rule, "detail", out.Detail)
	}
	return nil
}

// countDecision counts the recorded decision out in stats and in site's
// recent actions (a quarantine) or open pending actions (held by the
// guard, or stale).
func countDecision(out store.PolicyDecision, site *store.PolicySite, now time.Time, stats *Stats) {
	switch out.Action {
	case string(policy.ActionQuarantine):
		stats.Quarantined++
		site.Recent = append(site.Recent, store.PolicyAction{At: now, DryRun: out.DryRun})
	case string(policy.ActionPending):
		stats.Pending++
		if !out.DryRun {
			if out.Reason == policy.ReasonHeldByGuard {
				site.OpenHeld++
			} else {
				site.OpenStale++
			}
		}
	default:
		stats.Skipped++
	}
}

// rearmGuards re-arms the tripped guards of sites once an operator has
// dealt with what they held (policy.Rearm), counting them in stats.
func (e *Evaluator) rearmGuards(ctx context.Context, file *policy.File, sites []store.PolicySite, now time.Time, stats *Stats) error {
	for i := range sites {
		s := &sites[i]
		if s.TrippedSince == nil {
			continue
		}
		p := file.Effective(s.Name)
		if policy.Rearm(p.Guard, e.siteState(s), s.OpenHeld, now) {
			if ok, err := e.st.RearmGuard(ctx, s.Name); err != nil {
				return err
			} else if ok {
				stats.Rearmed++
				e.log.Info("policy guard re-armed", logkey.Site, s.Name)
			}
		}
	}
	return nil
}

func (e *Evaluator) releases(ctx context.Context, file *policy.File, bySite map[string]*store.PolicySite, now time.Time) (int, error) {
	qs, err := e.st.PolicyQuarantines(ctx)
	if err != nil || len(qs) == 0 {
		return 0, err
	}
	ids := make([]string, len(qs))
	for i, q := range qs {
		ids[i] = q.DeviceID
	}
	holds, err := e.st.DeviceHolds(ctx, ids)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, q := range qs {
		p := file.Effective(q.Site)
		var cleared time.Time
		if q.Status == status.Quarantined {
			cleared = q.StatusChangedAt
		}
		excl, _ := holdsOf(holds[q.DeviceID])
		site := bySite[q.Site]
		fresh := site != nil && e.evidence(site.Evidence).Check(now) == ""
		d := policy.DecideRelease(p, policy.Quarantine{DeviceID: q.DeviceID, Generation: q.Generation, Rule: q.Rule,
			Status: q.Status, ClearedSince: cleared}, !q.SiteStale && fresh, excl, now)
		if d.Action != policy.ActionRelease {
			continue
		}
		out, recorded, err := e.st.RecordPolicyDecision(ctx, store.PolicyDecision{DeviceID: q.DeviceID, Site: q.Site,
			Kind: store.DecisionKindRelease, TriggerID: q.Generation, Action: string(d.Action), Reason: d.Reason,
			Detail: d.Detail, Rule: d.Rule, DryRun: d.DryRun, From: string(q.Status), Replica: e.cfg.Replica, DecidedAt: now,
			Recheck: e.recheck})
		if err != nil {
			return n, fmt.Errorf("release device %s: %w", q.DeviceID, err)
		}
		if recorded {
			n++
			e.observe(out, 0)
		}
	}
	return n, nil
}

func (e *Evaluator) observe(d store.PolicyDecision, latency time.Duration) {
	e.log.Info("policy decision", logkey.DeviceID, d.DeviceID, logkey.Site, d.Site, "action", d.Action, "reason", d.Reason,
		"rule", d.Rule, "dry_run", d.DryRun, logkey.CommandID, d.CommandID, "detail", d.Detail)
	if e.cfg.Hooks.Decided != nil {
		e.cfg.Hooks.Decided(d.Action, d.DryRun, latency)
	}
}

func (e *Evaluator) siteState(s *store.PolicySite) policy.SiteState {
	st := policy.SiteState{Evidence: e.evidence(s.Evidence), Devices: s.Devices, Tripped: s.TrippedSince != nil}
	for _, a := range s.Recent {
		st.RecentActions = append(st.RecentActions, policy.RecentAction{At: a.At, DryRun: a.DryRun})
	}
	return st
}

// holdsOf splits a device's holds into its exclusion and planned maintenance.
func holdsOf(hs []store.DeviceHold) (excl, planned *policy.Exclusion) {
	for _, h := range hs {
		x := &policy.Exclusion{Reason: h.Reason, Author: h.Author, Start: h.StartsAt}
		if h.EndsAt != nil {
			x.End = *h.EndsAt
		}
		switch h.Kind {
		case store.HoldExclusion:
			excl = x
		case store.HoldPlannedMaintenance:
			planned = x
		}
	}
	return excl, planned
}
