package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/internal/condition"
)

// SourcePolicy is the source recorded for quarantines and releases the
// quarantine policy makes (automatically, or when an operator approves a
// pending action).
const SourcePolicy = "policy"

// ActorPolicy is the actor of automatic policy decisions.
const ActorPolicy = "policy"

// Decision kinds and the pending-action reasons, as stored.
const (
	DecisionKindQuarantine = "QUARANTINE"
	DecisionKindRelease    = "RELEASE"
)

// Pending action states, as stored.
const (
	PendingOpen     = "PENDING"
	PendingApproved = "APPROVED"
	PendingRejected = "REJECTED"
	PendingExpired  = "EXPIRED"
)

// Device hold kinds, as stored.
const (
	HoldExclusion          = "EXCLUSION"
	HoldPlannedMaintenance = "PLANNED_MAINTENANCE"
)

// ErrNotPending: an approve or reject named a pending action that is no
// longer PENDING (approved, rejected or expired); nothing was written.
var ErrNotPending = errors.New("already resolved: only a PENDING action can be approved or rejected")

// PolicySite is what the evaluator reads about a site before deciding.
type PolicySite struct {
	Name string
	// Stale is the site's stale flag (UNREACHABLE).
	Stale bool
	// Evidence is how fresh the hub's view of the site is.
	Evidence SiteEvidence
	// Devices counts its devices not removed.
	Devices int
	// Recent are the times of its QUARANTINE decisions (live and dry-run)
	// decided after since.
	Recent []PolicyAction
	// TrippedSince is when the guard tripped (nil: armed); TrippedRule and
	// TrippedDetail say by which rule and why.
	TrippedSince               *time.Time
	TrippedRule, TrippedDetail string
	// OpenHeld, OpenStale and OpenAwaiting count the site's PENDING actions
	// held by the guard, from stale triggers and awaiting fresh evidence.
	OpenHeld, OpenStale, OpenAwaiting int
}

// PolicyAction is one QUARANTINE decision's time and dry-run flag.
type PolicyAction struct {
	At     time.Time
	DryRun bool
}

// PolicySites returns the policy view of every site (name order), with
// the QUARANTINE decisions decided after since.
func (s *Store) PolicySites(ctx context.Context, since time.Time) ([]PolicySite, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT s.name, `+evidenceSQL+`,
			ps.guard_tripped_since, COALESCE(ps.guard_tripped_rule, ''), COALESCE(ps.guard_tripped_detail, ''),
			(SELECT count(*) FROM policy_pending_actions p WHERE p.site = s.name AND p.state = 'PENDING' AND p.reason = 'HeldByGuard'),
			(SELECT count(*) FROM policy_pending_actions p WHERE p.site = s.name AND p.state = 'PENDING' AND p.reason = 'StaleTrigger'),
			(SELECT count(*) FROM policy_pending_actions p WHERE p.site = s.name AND p.state = 'PENDING' AND p.reason = '`+ReasonAwaitingFreshEvidence+`')
		FROM sites s LEFT JOIN policy_site_state ps ON ps.site = s.name`+evidenceJoins+` ORDER BY s.name`)
	if err != nil {
		return nil, fmt.Errorf("policy sites: %w", err)
	}
	sites, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PolicySite, error) {
		var p PolicySite
		ev, fill := evidenceDest(&p.Evidence)
		dest := append(append([]any{&p.Name}, ev...), &p.TrippedSince, &p.TrippedRule, &p.TrippedDetail, &p.OpenHeld, &p.OpenStale, &p.OpenAwaiting)
		err := r.Scan(dest...)
		fill()
		p.Stale = p.Evidence.Stale
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("policy sites: %w", err)
	}
	// Live devices, from the counts migration 00052 keeps (counting the
	// device rows took 10 s at 1,000,000 devices), through StatusCounts,
	// which folds the status changes gathered since the last fold: the
	// policy's full pass reads this every second (docs/design/performance.md
	// "The policy's full pass and the status counts").
	live, err := s.LiveDevices(ctx)
	if err != nil {
		return nil, fmt.Errorf("policy sites: %w", err)
	}
	for i := range sites {
		sites[i].Devices = live[sites[i].Name]
	}
	// The policy's quarantines: its QUARANTINE decisions, and the pending
	// actions awaiting fresh evidence that it confirmed itself (approved by
	// ActorPolicy; an operator's approvals do not count).
	rows, err = s.pool.Query(ctx, `SELECT site, at, dry_run FROM (
			SELECT site, decided_at AS at, dry_run FROM policy_decisions
			WHERE kind = 'QUARANTINE' AND action = 'QUARANTINE' AND decided_at > $1
			UNION ALL
			SELECT site, resolved_at, false FROM policy_pending_actions
			WHERE state = 'APPROVED' AND resolved_by = '`+ActorPolicy+`' AND resolved_at > $1) a ORDER BY site, at`, since)
	if err != nil {
		return nil, fmt.Errorf("policy sites: recent actions: %w", err)
	}
	recent := map[string][]PolicyAction{}
	for rows.Next() {
		var site string
		var a PolicyAction
		if err := rows.Scan(&site, &a.At, &a.DryRun); err != nil {
			rows.Close()
			return nil, fmt.Errorf("policy sites: recent actions: %w", err)
		}
		recent[site] = append(recent[site], a)
	}
	rows.Close()
	for i := range sites {
		sites[i].Recent = recent[sites[i].Name]
	}
	return sites, rows.Err()
}

// DeviceHold is an exclusion from automation or a planned maintenance of
// one device.
type DeviceHold struct {
	DeviceID string
	// Kind is HoldExclusion or HoldPlannedMaintenance.
	Kind           string
	Reason, Author string
	StartsAt       time.Time
	// EndsAt is nil for an exclusion until cleared.
	EndsAt    *time.Time
	CreatedAt time.Time
}

// SetDeviceHold records (or replaces) h for its device. Errors:
// ErrNotFound (no such device).
func (s *Store) SetDeviceHold(ctx context.Context, h DeviceHold) (DeviceHold, error) {
	err := s.pool.QueryRow(ctx, `
		INSERT INTO policy_device_holds (device_id, kind, reason, author, starts_at, ends_at)
		SELECT d.id, $2, $3, $4, $5, $6 FROM devices d WHERE d.id = $1
		ON CONFLICT (device_id, kind) DO UPDATE SET reason = $3, author = $4, starts_at = $5, ends_at = $6, created_at = now()
		RETURNING created_at`, h.DeviceID, h.Kind, h.Reason, h.Author, h.StartsAt, h.EndsAt).Scan(&h.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return DeviceHold{}, fmt.Errorf("device %s: %w", h.DeviceID, ErrNotFound)
	}
	if err != nil {
		return DeviceHold{}, fmt.Errorf("set %s of device %s: %w", h.Kind, h.DeviceID, err)
	}
	return h, nil
}

// ClearDeviceHold removes the hold of kind from device; cleared is false
// when there was none.
func (s *Store) ClearDeviceHold(ctx context.Context, deviceID, kind string) (cleared bool, err error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM policy_device_holds WHERE device_id = $1 AND kind = $2`, deviceID, kind)
	if err != nil {
		return false, fmt.Errorf("clear %s of device %s: %w", kind, deviceID, err)
	}
	return tag.RowsAffected() > 0, nil
}

// DeviceHolds returns the holds of ids (every device's when ids is nil),
// by device id then kind. Ended holds are included (the caller compares
// EndsAt with its clock).
func (s *Store) DeviceHolds(ctx context.Context, ids []string) (map[string][]DeviceHold, error) {
	rows, err := s.pool.Query(ctx, `SELECT device_id::text, kind, reason, author, starts_at, ends_at, created_at
		FROM policy_device_holds WHERE $1::uuid[] IS NULL OR device_id = ANY($1::uuid[]) ORDER BY device_id, kind`, ids)
	if err != nil {
		return nil, fmt.Errorf("device holds: %w", err)
	}
	hs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeviceHold, error) {
		var h DeviceHold
		err := r.Scan(&h.DeviceID, &h.Kind, &h.Reason, &h.Author, &h.StartsAt, &h.EndsAt, &h.CreatedAt)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("device holds: %w", err)
	}
	out := map[string][]DeviceHold{}
	for _, h := range hs {
		out[h.DeviceID] = append(out[h.DeviceID], h)
	}
	return out, nil
}

// PolicyDecision is one decision of the quarantine policy, as logged.
type PolicyDecision struct {
	ID       int64
	DeviceID string
	// DeviceName is the device's Ironic node name when read back ("" when
	// the node has none); RecordPolicyDecision ignores it.
	DeviceName string
	Site       string
	// Kind is DecisionKindQuarantine or DecisionKindRelease.
	Kind string
	// TriggerID is the status_history id of the triggering change
	// (QUARANTINE) or the desired generation released (RELEASE).
	TriggerID int64
	// Action is QUARANTINE, PENDING, SKIP or RELEASE (policy.Action).
	Action, Reason, Detail, Rule string
	DryRun                       bool
	From, To                     string
	Cause                        condition.Condition
	TriggeredAt                  *time.Time
	WindowCount, SiteDevices     int
	// Trips: the decision trips the site's guard (not stored as a column:
	// it sets policy_site_state).
	Trips bool
	// TripsLabel and TripsValue, when set, name the per-label guard the
	// decision trips (policy_domain_trips; the site's guard stays armed).
	TripsLabel, TripsValue string
	// CommandID is the command the decision created ("" when none);
	// PendingID the pending action it created (0 when none).
	CommandID string
	PendingID int64
	Replica   string
	DecidedAt time.Time
	// Recheck, when set, judges the site's evidence again inside the
	// recording transaction, the site row held (lockEvidence): "" when it is
	// still fresh, else why not. A QUARANTINE whose evidence is no longer
	// fresh is recorded as PENDING ReasonAwaitingFreshEvidence with that
	// detail; a RELEASE is not recorded (recorded false: asked again next
	// pass). Not stored.
	Recheck func(SiteEvidence) string
}

// ReasonAwaitingFreshEvidence is the reason of a PENDING decision whose
// trigger waits for fresh evidence from its site (hub/policy's reason of
// the same name): its pending action stays open until the policy confirms
// it (ResolveAwaiting) or its cause clears (ExpirePendingActions).
const ReasonAwaitingFreshEvidence = "AwaitingFreshEvidence"

// RecordPolicyDecision logs d, once per (device, kind, trigger), and in
// the same transaction does what it says unless it is a dry-run: QUARANTINE
// or RELEASE sets the device's desired state as an operator's call does
// (SetDesiredImpairment: actor ActorPolicy, source SourcePolicy, reason
// naming the rule and the triggering condition); PENDING adds a pending
// action; Trips marks the site's guard tripped, TripsLabel a per-label
// guard. A QUARANTINE whose device
// is meanwhile quarantined, or a RELEASE whose quarantine is no longer the
// device's desired state, is logged as SKIP instead.
//
// recorded is false (nothing written) when the trigger was already
// decided. It returns the logged decision (ID, CommandID, PendingID set).
func (s *Store) RecordPolicyDecision(ctx context.Context, d PolicyDecision) (out PolicyDecision, recorded bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		out, recorded = d, false
		if err := recheckEvidence(ctx, tx, &out); err != nil {
			return err
		}
		var desired string
		err := tx.QueryRow(ctx, `SELECT desired_impairment FROM devices WHERE id = $1 FOR NO KEY UPDATE`, d.DeviceID).Scan(&desired)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("device %s: %w", d.DeviceID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("lock device %s: %w", d.DeviceID, err)
		}
		switch {
		case d.Kind == DecisionKindQuarantine && d.Action == "QUARANTINE" && desired == string(ImpairmentQuarantined):
			out.Action, out.Reason, out.Detail, out.Trips, out.TripsLabel = "SKIP", "AlreadyQuarantined", "quarantined meanwhile", false, ""
		case d.Kind == DecisionKindRelease && d.Action == "RELEASE":
			// The rule's own hold, added by the quarantine this releases.
			var held bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM quarantine_holds WHERE device_id = $1 AND holder = $2 AND generation = $3)`,
				d.DeviceID, PolicyHolder(d.Rule), d.TriggerID).Scan(&held); err != nil {
				return fmt.Errorf("policy hold of %s: %w", d.DeviceID, err)
			}
			if desired != string(ImpairmentQuarantined) || !held {
				out.Action, out.Reason, out.Detail = "SKIP", "QuarantineSuperseded", "the policy's quarantine is no longer in force"
			}
		}
		var since any
		if !out.Cause.LastTransitionTime.IsZero() {
			since = out.Cause.LastTransitionTime
		}
		err = tx.QueryRow(ctx, `
			INSERT INTO policy_decisions (device_id, site, kind, trigger_id, action, reason, detail, rule, dry_run,
				from_status, to_status, cause_type, cause_reason, cause_message, cause_since, triggered_at,
				window_count, site_devices, replica, decided_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, COALESCE($20, now()))
			ON CONFLICT (device_id, kind, trigger_id) DO NOTHING
			RETURNING id, decided_at`,
			out.DeviceID, out.Site, out.Kind, out.TriggerID, out.Action, out.Reason, out.Detail, out.Rule, out.DryRun,
			out.From, out.To, string(out.Cause.Type), out.Cause.Reason, out.Cause.Message, since, out.TriggeredAt,
			out.WindowCount, out.SiteDevices, out.Replica, nullTime(out.DecidedAt)).Scan(&out.ID, &out.DecidedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // decided before
		}
		if err != nil {
			return fmt.Errorf("log policy decision: %w", err)
		}
		recorded = true
		if out.DryRun {
			return nil
		}
		switch out.Action {
		case "QUARANTINE", "RELEASE":
			// The rule's own hold: a release ends the quarantine only when
			// no other source holds the device (holds.go).
			a := ImpairmentAction{Actor: ActorPolicy, Reason: fmt.Sprintf("policy rule %s: %s (decision %d)", out.Rule, ruleDetail(out.Rule, out.Detail), out.ID), Source: SourcePolicy}
			var cmd Command
			verb := "quarantine"
			if out.Action == "RELEASE" {
				verb = "release"
				_, cmd, err = s.releaseTx(ctx, tx, out.DeviceID, PolicyHolder(out.Rule), false, a, false)
			} else {
				cmd, err = s.quarantineTx(ctx, tx, out.DeviceID, PolicyHolder(out.Rule), a)
			}
			if err != nil {
				return fmt.Errorf("policy %s: %w", verb, err)
			}
			if cmd.ID == "" {
				return nil
			}
			out.CommandID = cmd.ID
			if _, err := tx.Exec(ctx, `UPDATE policy_decisions SET command_id = $2 WHERE id = $1`, out.ID, cmd.ID); err != nil {
				return fmt.Errorf("link decision to command: %w", err)
			}
		case "PENDING":
			err := tx.QueryRow(ctx, `INSERT INTO policy_pending_actions (decision_id, device_id, site, rule, reason, detail, created_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`, out.ID, out.DeviceID, out.Site, out.Rule, out.Reason, out.Detail, out.DecidedAt).
				Scan(&out.PendingID)
			if err != nil {
				return fmt.Errorf("add pending action: %w", err)
			}
		}
		return trip(ctx, tx, out)
	})
	if errors.Is(err, errNotFresh) {
		return d, false, nil
	}
	return out, recorded, err
}

// recheckEvidence re-checks, with the site's row held (lockEvidence), the
// evidence of a decision that sends a command: a quarantine whose evidence
// is no longer fresh becomes PENDING AwaitingFreshEvidence in *d, a release
// returns errNotFresh (it waits for the next pass). Other decisions pass.
func recheckEvidence(ctx context.Context, tx pgx.Tx, d *PolicyDecision) error {
	if d.Recheck == nil || (d.Action != "QUARANTINE" && d.Action != "RELEASE") {
		return nil
	}
	ev, err := lockEvidence(ctx, tx, d.Site)
	if err != nil {
		return err
	}
	if why := d.Recheck(ev); why != "" {
		if d.Action == "RELEASE" {
			return errNotFresh
		}
		d.Action, d.Reason, d.Trips, d.TripsLabel = "PENDING", ReasonAwaitingFreshEvidence, false, ""
		d.Detail = "re-checked before sending: " + why
	}
	return nil
}

// trip trips what the recorded decision d trips: the site's guard
// (Trips) or a per-label guard (TripsLabel).
func trip(ctx context.Context, tx pgx.Tx, d PolicyDecision) error {
	switch {
	case d.Trips:
		return tripGuard(ctx, tx, d.Site, d.DecidedAt, d.Rule, d.Detail)
	case d.TripsLabel != "":
		return tripDomain(ctx, tx, d.Site, d.TripsLabel, d.TripsValue, d.DecidedAt, d.Rule, d.Detail)
	}
	return nil
}

// tripGuard marks site's guard tripped at at by rule (detail: why), unless
// it is tripped already.
func tripGuard(ctx context.Context, tx pgx.Tx, site string, at time.Time, rule, detail string) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO policy_site_state (site, guard_tripped_since, guard_tripped_rule, guard_tripped_detail, updated_at)
		VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (site) DO UPDATE SET guard_tripped_since = COALESCE(policy_site_state.guard_tripped_since, $2),
			guard_tripped_rule = CASE WHEN policy_site_state.guard_tripped_since IS NULL THEN $3 ELSE policy_site_state.guard_tripped_rule END,
			guard_tripped_detail = CASE WHEN policy_site_state.guard_tripped_since IS NULL THEN $4 ELSE policy_site_state.guard_tripped_detail END,
			updated_at = now()`, site, at, rule, detail)
	if err != nil {
		return fmt.Errorf("trip guard of site %q: %w", site, err)
	}
	return nil
}

// errNotFresh ends a RELEASE's transaction whose evidence is not fresh.
var errNotFresh = errors.New("evidence not fresh")

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// RearmGuard clears the tripped state of site's guard; it reports whether
// the guard was tripped.
func (s *Store) RearmGuard(ctx context.Context, site string) (bool, error) {
	var tag pgconn.CommandTag
	err := s.inTx(ctx, func(tx pgx.Tx) (err error) {
		tag, err = tx.Exec(ctx, `UPDATE policy_site_state SET guard_tripped_since = NULL, guard_tripped_rule = '',
		guard_tripped_detail = '', updated_at = now() WHERE site = $1 AND guard_tripped_since IS NOT NULL`, site)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("re-arm guard of site %q: %w", site, err)
	}
	return tag.RowsAffected() > 0, nil
}

// ExpirePendingActions marks EXPIRED every PENDING action whose cause is
// gone: its device is removed, quarantined meanwhile, or no longer in
// FAULTED, MAINTENANCE or UNREACHABLE (an unreachable site keeps its
// actions). It returns the number expired.
func (s *Store) ExpirePendingActions(ctx context.Context) (int, error) {
	var tag pgconn.CommandTag
	err := s.inTx(ctx, func(tx pgx.Tx) (err error) {
		tag, err = tx.Exec(ctx, `
		UPDATE policy_pending_actions p SET state = 'EXPIRED', resolved_at = now(), resolved_by = 'policy',
			resolution_reason = CASE WHEN d.removed THEN 'device removed'
				WHEN d.desired_impairment = 'QUARANTINED' THEN 'quarantined meanwhile'
				ELSE 'cause cleared: status ' || d.status END
		FROM devices d WHERE d.id = p.device_id AND p.state = 'PENDING'
			AND (d.removed OR d.desired_impairment = 'QUARANTINED' OR d.status NOT IN ('FAULTED', 'MAINTENANCE', 'UNREACHABLE'))`)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("expire pending actions: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// PolicyQuarantine is a device whose desired state is a quarantine the
// policy made, for the auto-release decision.
type PolicyQuarantine struct {
	DeviceID, Site, Rule string
	Generation           int64
	Status               status.Status
	StatusChangedAt      time.Time
	SiteStale            bool
}

// PolicyQuarantines returns the policy rules' quarantine holds (holds.go:
// one per device and rule, from a decision or an approved pending action)
// without a RELEASE decision for the generation that added them; a device
// an operator holds too is listed, and the rule's release leaves it
// quarantined.
func (s *Store) PolicyQuarantines(ctx context.Context) ([]PolicyQuarantine, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT d.id::text, d.site, substr(h.holder, 8), h.generation, d.status, d.status_changed_at, s.stale
		FROM devices d
		JOIN sites s ON s.name = d.site
		JOIN quarantine_holds h ON h.device_id = d.id AND h.holder LIKE 'policy:%'
		WHERE d.desired_impairment = 'QUARANTINED' AND NOT d.removed
			AND NOT EXISTS (SELECT 1 FROM policy_decisions r WHERE r.device_id = d.id AND r.kind = 'RELEASE' AND r.trigger_id = h.generation)
		ORDER BY d.site, d.id, h.holder`)
	if err != nil {
		return nil, fmt.Errorf("policy quarantines: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (PolicyQuarantine, error) {
		var q PolicyQuarantine
		var st string
		err := r.Scan(&q.DeviceID, &q.Site, &q.Rule, &q.Generation, &st, &q.StatusChangedAt, &q.SiteStale)
		q.Status = status.Status(st)
		return q, err
	})
}

// ruleDetail is a decision's detail without its leading "rule NAME: "
// (hub/policy names the rule there), so that a reason reads "policy rule
// gpu-fatal: AVAILABLE → FAULTED, …", not "policy rule gpu-fatal: rule
// gpu-fatal: …".
func ruleDetail(rule, detail string) string {
	return strings.TrimPrefix(detail, "rule "+rule+": ")
}
