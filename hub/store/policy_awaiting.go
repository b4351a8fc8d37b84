package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ResolveAwaiting settles pending action id, one that awaits fresh evidence
// (ReasonAwaitingFreshEvidence), with d: the policy's decision on the same
// trigger now that its site's evidence is fresh (d.Recheck judges it again
// inside the transaction, the site row held, as RecordPolicyDecision does).
// By d.Action, unless d is a dry-run (then nothing changes):
//
//   - QUARANTINE: the device is quarantined as RecordPolicyDecision does
//     (actor and source policy) and the action is APPROVED by ActorPolicy
//     with the command; EXPIRED instead when the device is quarantined
//     meanwhile;
//   - PENDING: the action stays open with d's reason and detail (held by
//     the guard, or a stale trigger, for an operator); d.Trips trips the
//     site's guard, d.TripsLabel a per-label guard;
//   - SKIP: the action is EXPIRED with d's reason and detail.
//
// resolved is false (nothing written) when the evidence is still not fresh
// or the action is no longer an open AwaitingFreshEvidence one. It returns
// the action as it is after the call. Errors: ErrNotFound (no such action
// or site), database errors.
func (s *Store) ResolveAwaiting(ctx context.Context, id int64, d PolicyDecision) (out PendingAction, resolved bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		resolved = false
		if d.Recheck != nil {
			ev, err := lockEvidence(ctx, tx, d.Site)
			if err != nil {
				return err
			}
			if d.Recheck(ev) != "" {
				return errNotFresh
			}
		}
		var desired, state, reason string
		err := tx.QueryRow(ctx, `SELECT d.desired_impairment FROM devices d WHERE d.id = $1 FOR NO KEY UPDATE`, d.DeviceID).Scan(&desired)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("device %s: %w", d.DeviceID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("lock device %s: %w", d.DeviceID, err)
		}
		err = tx.QueryRow(ctx, `SELECT state, reason FROM policy_pending_actions WHERE id = $1 FOR UPDATE`, id).Scan(&state, &reason)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("pending action %d: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("lock pending action %d: %w", id, err)
		}
		if state != PendingOpen || reason != ReasonAwaitingFreshEvidence || d.DryRun {
			return errNotFresh
		}
		if err := s.settleAwaiting(ctx, tx, id, desired, d); err != nil {
			return err
		}
		resolved = true
		rows, err := tx.Query(ctx, `SELECT `+pendingColumns+`
			FROM policy_pending_actions p JOIN devices d ON d.id = p.device_id JOIN policy_decisions pd ON pd.id = p.decision_id
			WHERE p.id = $1`, id)
		if err != nil {
			return fmt.Errorf("read pending action %d: %w", id, err)
		}
		out, err = pgx.CollectExactlyOneRow(rows, func(r pgx.CollectableRow) (PendingAction, error) { return scanPending(r) })
		return err
	})
	if errors.Is(err, errNotFresh) {
		return PendingAction{}, false, nil
	}
	return out, resolved, err
}

// settleAwaiting writes ResolveAwaiting's outcome for pending action id of
// a device whose desired impairment is desired.
func (s *Store) settleAwaiting(ctx context.Context, tx pgx.Tx, id int64, desired string, d PolicyDecision) error {
	expire := func(why string) error {
		_, err := tx.Exec(ctx, `UPDATE policy_pending_actions SET state = 'EXPIRED', resolved_at = $2, resolved_by = $3,
			resolution_reason = $4 WHERE id = $1`, id, d.DecidedAt, ActorPolicy, why)
		if err != nil {
			return fmt.Errorf("expire pending action %d: %w", id, err)
		}
		return nil
	}
	switch d.Action {
	case "QUARANTINE":
		if desired == string(ImpairmentQuarantined) {
			return expire("quarantined meanwhile")
		}
		why := fmt.Sprintf("policy rule %s: %s (pending action %d, confirmed by a fresh poll)", d.Rule, ruleDetail(d.Rule, d.Detail), id)
		cmd, err := s.quarantineTx(ctx, tx, d.DeviceID, PolicyHolder(d.Rule), ImpairmentAction{Actor: ActorPolicy, Reason: why, Source: SourcePolicy})
		if err != nil {
			return fmt.Errorf("policy quarantine: %w", err)
		}
		_, err = tx.Exec(ctx, `UPDATE policy_pending_actions SET state = 'APPROVED', resolved_at = $2, resolved_by = $3,
			resolution_reason = $4, command_id = $5 WHERE id = $1`, id, d.DecidedAt, ActorPolicy,
			"a fresh poll confirmed the cause: "+d.Detail, cmd.ID)
		if err != nil {
			return fmt.Errorf("approve pending action %d: %w", id, err)
		}
		return nil
	case "PENDING":
		if _, err := tx.Exec(ctx, `UPDATE policy_pending_actions SET reason = $2, detail = $3 WHERE id = $1`, id, d.Reason, d.Detail); err != nil {
			return fmt.Errorf("update pending action %d: %w", id, err)
		}
		return trip(ctx, tx, d)
	default:
		return expire(fmt.Sprintf("policy: %s: %s", d.Reason, d.Detail))
	}
}
