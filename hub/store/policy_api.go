package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/internal/condition"
)

// DecisionFilter selects decisions for ListPolicyDecisions (newest first).
type DecisionFilter struct {
	// Site, DeviceID, when non-empty, keep that site's or device's decisions.
	Site, DeviceID string
	// Sites, when non-nil, keeps only these sites (an operator bound to sites).
	Sites []string
	// Actions, when non-empty, keeps decisions with one of these actions.
	Actions []string
	// DryRun: nil keeps all, else only dry-run (true) or live (false) ones.
	DryRun *bool
	// Before is the keyset cursor: only ids below it (0: from the newest).
	Before int64
	// Limit is the page size (1-1000).
	Limit int
}

const decisionColumns = `id, device_id::text, site, kind, trigger_id, action, reason, detail, rule, dry_run,
	from_status, to_status, cause_type, cause_reason, cause_message, cause_since, triggered_at,
	window_count, site_devices, COALESCE(command_id::text, ''), replica, decided_at,
	COALESCE((SELECT p.id FROM policy_pending_actions p WHERE p.decision_id = policy_decisions.id), 0),
	COALESCE((SELECT dv.name FROM devices dv WHERE dv.id = policy_decisions.device_id), '')`

func scanDecision(r pgx.Row) (PolicyDecision, error) {
	var d PolicyDecision
	var ctype string
	var since *time.Time
	err := r.Scan(&d.ID, &d.DeviceID, &d.Site, &d.Kind, &d.TriggerID, &d.Action, &d.Reason, &d.Detail, &d.Rule, &d.DryRun,
		&d.From, &d.To, &ctype, &d.Cause.Reason, &d.Cause.Message, &since, &d.TriggeredAt,
		&d.WindowCount, &d.SiteDevices, &d.CommandID, &d.Replica, &d.DecidedAt, &d.PendingID, &d.DeviceName)
	d.Cause.Type = condition.Type(ctype)
	if since != nil {
		d.Cause.LastTransitionTime = *since
	}
	return d, err
}

// ListPolicyDecisions returns one page of the decision log, newest first,
// and whether more follow.
func (s *Store) ListPolicyDecisions(ctx context.Context, f DecisionFilter) ([]PolicyDecision, bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+decisionColumns+` FROM policy_decisions
		WHERE ($1 = '' OR site = $1) AND ($2 = '' OR device_id = $2::uuid)
			AND ($3::text[] IS NULL OR site = ANY($3::text[]))
			AND (cardinality($4::text[]) = 0 OR action = ANY($4::text[]))
			AND ($5::boolean IS NULL OR dry_run = $5)
			AND ($6::bigint = 0 OR id < $6)
		ORDER BY id DESC LIMIT $7`, f.Site, f.DeviceID, f.Sites, nonNil(f.Actions), f.DryRun, f.Before, f.Limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list policy decisions: %w", err)
	}
	ds, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PolicyDecision, error) { return scanDecision(r) })
	if err != nil {
		return nil, false, fmt.Errorf("list policy decisions: %w", err)
	}
	more := len(ds) > f.Limit
	if more {
		ds = ds[:f.Limit]
	}
	return ds, more, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// PendingAction is an automatic quarantine waiting for an operator.
type PendingAction struct {
	ID         int64
	DecisionID int64
	DeviceID   string
	DeviceName string
	Site       string
	Rule       string
	// Reason is "HeldByGuard" or "StaleTrigger".
	Reason, Detail string
	// State is PendingOpen, PendingApproved, PendingRejected or PendingExpired.
	State            string
	CreatedAt        time.Time
	ResolvedAt       *time.Time
	ResolvedBy       string
	ResolutionReason string
	CommandID        string
	// Cause is the triggering condition (from the decision).
	Cause condition.Condition
}

// PendingFilter selects pending actions for ListPendingActions (oldest first).
type PendingFilter struct {
	Site  string
	Sites []string
	// States, when empty, keeps PENDING ones only.
	States []string
	// After is the keyset cursor (ids above it).
	After int64
	Limit int
}

const pendingColumns = `p.id, p.decision_id, p.device_id::text, d.name, p.site, p.rule, p.reason, p.detail, p.state,
	p.created_at, p.resolved_at, p.resolved_by, p.resolution_reason, COALESCE(p.command_id::text, ''),
	pd.cause_type, pd.cause_reason, pd.cause_message, pd.cause_since`

func scanPending(r pgx.Row) (PendingAction, error) {
	var p PendingAction
	var ctype string
	var since *time.Time
	err := r.Scan(&p.ID, &p.DecisionID, &p.DeviceID, &p.DeviceName, &p.Site, &p.Rule, &p.Reason, &p.Detail, &p.State,
		&p.CreatedAt, &p.ResolvedAt, &p.ResolvedBy, &p.ResolutionReason, &p.CommandID,
		&ctype, &p.Cause.Reason, &p.Cause.Message, &since)
	p.Cause.Type = condition.Type(ctype)
	if since != nil {
		p.Cause.LastTransitionTime = *since
	}
	return p, err
}

// ListPendingActions returns one page of pending actions, oldest first,
// and whether more follow.
func (s *Store) ListPendingActions(ctx context.Context, f PendingFilter) ([]PendingAction, bool, error) {
	states := f.States
	if len(states) == 0 {
		states = []string{PendingOpen}
	}
	rows, err := s.pool.Query(ctx, `SELECT `+pendingColumns+`
		FROM policy_pending_actions p JOIN devices d ON d.id = p.device_id JOIN policy_decisions pd ON pd.id = p.decision_id
		WHERE ($1 = '' OR p.site = $1) AND ($2::text[] IS NULL OR p.site = ANY($2::text[]))
			AND p.state = ANY($3::text[]) AND p.id > $4
		ORDER BY p.id LIMIT $5`, f.Site, f.Sites, states, f.After, f.Limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list pending actions: %w", err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PendingAction, error) { return scanPending(r) })
	if err != nil {
		return nil, false, fmt.Errorf("list pending actions: %w", err)
	}
	more := len(ps) > f.Limit
	if more {
		ps = ps[:f.Limit]
	}
	return ps, more, nil
}

// PendingSites returns the sites of the pending actions ids (for
// authorization before ResolvePendingActions). Errors: ErrNotFound naming
// the first unknown id.
func (s *Store) PendingSites(ctx context.Context, ids []int64) (map[int64]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, site FROM policy_pending_actions WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("pending actions: %w", err)
	}
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var site string
		if err := rows.Scan(&id, &site); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pending actions: %w", err)
		}
		out[id] = site
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pending actions: %w", err)
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			return nil, fmt.Errorf("pending action %d: %w", id, ErrNotFound)
		}
	}
	return out, nil
}

// ResolvePendingActions approves (approve=true) or rejects every pending
// action of ids, all or nothing, in one transaction: an approval
// quarantines the device as SetDesiredImpairment does (actor, source
// SourcePolicy, reason naming the action, its rule and the operator's
// reason), a rejection only closes the action. An approved action whose
// device is already quarantined is closed without a new command. Locks
// are taken device rows first, in id order (SetDesiredImpairment's order).
//
// Errors (nothing is written): ErrNotFound (an unknown id), ErrNotPending
// (an action already approved, rejected or expired).
func (s *Store) ResolvePendingActions(ctx context.Context, ids []int64, approve bool, actor, reason string) ([]PendingAction, error) {
	var out []PendingAction
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, `SELECT d.id::text FROM devices d
			WHERE d.id IN (SELECT device_id FROM policy_pending_actions WHERE id = ANY($1)) ORDER BY d.id FOR NO KEY UPDATE`, ids)
		if err != nil {
			return fmt.Errorf("lock devices: %w", err)
		}
		rows.Close()
		rows, err = tx.Query(ctx, `SELECT id, device_id::text, rule, reason, state FROM policy_pending_actions
			WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids)
		if err != nil {
			return fmt.Errorf("lock pending actions: %w", err)
		}
		type row struct {
			id                    int64
			dev, rule, why, state string
		}
		got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			var x row
			err := r.Scan(&x.id, &x.dev, &x.rule, &x.why, &x.state)
			return x, err
		})
		if err != nil {
			return fmt.Errorf("lock pending actions: %w", err)
		}
		byID := map[int64]row{}
		for _, x := range got {
			byID[x.id] = x
		}
		for _, id := range ids {
			x, ok := byID[id]
			if !ok {
				return fmt.Errorf("pending action %d: %w", id, ErrNotFound)
			}
			if x.state != PendingOpen {
				return fmt.Errorf("pending action %d is %s: %w", id, x.state, ErrNotPending)
			}
		}
		state := PendingRejected
		if approve {
			state = PendingApproved
		}
		for _, x := range got {
			var cmdID any
			if approve {
				var desired string
				if err := tx.QueryRow(ctx, `SELECT desired_impairment FROM devices WHERE id = $1`, x.dev).Scan(&desired); err != nil {
					return fmt.Errorf("load device %s: %w", x.dev, err)
				}
				if desired != string(ImpairmentQuarantined) {
					why := fmt.Sprintf("approved pending action %d (policy rule %s, %s): %s", x.id, x.rule, x.why, reason)
					cmd, err := s.quarantineTx(ctx, tx, x.dev, PolicyHolder(x.rule), ImpairmentAction{Actor: actor, Reason: why, Source: SourcePolicy})
					if err != nil {
						return err
					}
					cmdID = cmd.ID
				}
			}
			if _, err := tx.Exec(ctx, `UPDATE policy_pending_actions SET state = $2, resolved_at = now(), resolved_by = $3,
				resolution_reason = $4, command_id = $5 WHERE id = $1`, x.id, state, actor, reason, cmdID); err != nil {
				return fmt.Errorf("resolve pending action %d: %w", x.id, err)
			}
		}
		rows, err = tx.Query(ctx, `SELECT `+pendingColumns+`
			FROM policy_pending_actions p JOIN devices d ON d.id = p.device_id JOIN policy_decisions pd ON pd.id = p.decision_id
			WHERE p.id = ANY($1) ORDER BY p.id`, ids)
		if err != nil {
			return fmt.Errorf("read resolved actions: %w", err)
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (PendingAction, error) { return scanPending(r) })
		return err
	})
	return out, err
}
