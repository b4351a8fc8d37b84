package policyrun

import (
	"context"
	"fmt"
	"time"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/logkey"
)

// evidence converts the store's view of a site's freshness into the
// policy's, with the configured bound.
func (e *Evaluator) evidence(s store.SiteEvidence) policy.Evidence {
	mark := func(c *condition.Condition) *policy.SiteMark {
		if c == nil {
			return nil
		}
		return &policy.SiteMark{Status: string(c.Status), Reason: c.Reason, Message: c.Message, At: c.ObservedTime}
	}
	polled := mark(s.Polled)
	if polled != nil {
		polled.Received = s.PolledReceived
	}
	return policy.Evidence{Reachable: !s.Stale, LinkUp: s.LinkUp, SnapshotDue: s.SnapshotDue, LinkSince: s.LinkSince, LastSeen: s.LastSeen,
		Polled: polled, Listing: mark(s.Listing), FreshFor: e.cfg.FreshFor}
}

// recheck judges a site's evidence again right before an action is
// recorded and sent (store.PolicyDecision.Recheck), at the clock's now.
func (e *Evaluator) recheck(s store.SiteEvidence) string {
	return e.evidence(s).Check(e.cfg.Now())
}

// resolveAwaiting settles candidate c, whose trigger waits for fresh
// evidence, with the decision d taken now: nothing while d still waits;
// otherwise store.ResolveAwaiting (the evidence re-checked in its
// transaction) quarantines, hands it to an operator (guard, stale) or
// expires it, and the outcome is counted like a decision.
func (e *Evaluator) resolveAwaiting(ctx context.Context, c store.PolicyCandidate, d policy.Decision, site *store.PolicySite, now time.Time, stats *Stats) error {
	if d.Action == policy.ActionPending && d.Reason == policy.ReasonAwaitingFreshEvidence {
		return nil // still not fresh
	}
	rec := store.PolicyDecision{DeviceID: c.DeviceID, Site: c.Site, Kind: store.DecisionKindQuarantine, TriggerID: c.HistoryID,
		Action: string(d.Action), Reason: d.Reason, Detail: d.Detail, Rule: d.Rule, DryRun: d.DryRun, Trips: d.Trips,
		Replica: e.cfg.Replica, DecidedAt: now, Recheck: e.recheck}
	if d.TripsDomain != nil {
		rec.TripsLabel, rec.TripsValue = d.TripsDomain.Label, d.TripsDomain.Value
	}
	pa, resolved, err := e.st.ResolveAwaiting(ctx, c.AwaitingID, rec)
	if err != nil {
		return fmt.Errorf("device %s: pending action %d: %w", c.DeviceID, c.AwaitingID, err)
	}
	if !resolved {
		return nil
	}
	e.log.Info("policy settled a trigger that awaited fresh evidence", logkey.DeviceID, c.DeviceID, logkey.Site, c.Site,
		"pending_action", pa.ID, "state", pa.State, "reason", pa.Reason, "action", d.Action, "rule", d.Rule,
		logkey.CommandID, pa.CommandID, "detail", d.Detail)
	switch {
	case pa.State == store.PendingApproved:
		stats.Quarantined++
		site.Recent = append(site.Recent, store.PolicyAction{At: now})
		if e.cfg.Hooks.Decided != nil {
			e.cfg.Hooks.Decided(string(policy.ActionQuarantine), false, e.cfg.Now().Sub(c.ChangedAt))
		}
	case pa.State == store.PendingOpen && pa.Reason == policy.ReasonHeldByGuard:
		site.OpenHeld++
		if d.Trips && site.TrippedSince == nil {
			site.TrippedSince, site.TrippedRule = &now, d.Rule
			e.log.Warn("policy guard tripped: further automatic quarantines wait for an operator",
				logkey.Site, c.Site, "rule", d.Rule, "detail", d.Detail)
		}
	case pa.State == store.PendingOpen:
		site.OpenStale++
	default:
		stats.Expired++
	}
	return nil
}

// healed records a SKIP decision (policy.DecideHealed) for every trigger
// changed after since whose cause cleared before it was decided, on sites
// whose policy is enabled: every trigger gets exactly one decision.
func (e *Evaluator) healed(ctx context.Context, file *policy.File, scope store.SiteScope, since, now time.Time, stats *Stats) error {
	ts, err := e.st.HealedTriggers(ctx, since, scope)
	if err != nil {
		return err
	}
	for _, t := range ts {
		p := file.Effective(t.Site)
		if !p.Enabled {
			continue
		}
		d := policy.DecideHealed(p, t.From, t.To, t.HealedTo, t.ChangedAt, t.HealedAt)
		cause := condition.ProvisioningHealthy
		if t.To == "MAINTENANCE" {
			cause = condition.MaintenanceClear
		}
		triggered := t.ChangedAt
		out, recorded, err := e.st.RecordPolicyDecision(ctx, store.PolicyDecision{DeviceID: t.DeviceID, Site: t.Site,
			Kind: store.DecisionKindQuarantine, TriggerID: t.HistoryID, Action: string(d.Action), Reason: d.Reason, Detail: d.Detail,
			DryRun: d.DryRun, From: string(t.From), To: string(t.To), Cause: condition.Condition{Type: cause},
			TriggeredAt: &triggered, Replica: e.cfg.Replica, DecidedAt: now})
		if err != nil {
			return fmt.Errorf("healed trigger of device %s: %w", t.DeviceID, err)
		}
		if recorded {
			stats.Decisions++
			stats.Skipped++
			e.observe(out, 0)
		}
	}
	return nil
}
