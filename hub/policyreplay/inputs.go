package policyreplay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/hub/store"
)

// Approval is an operator's recorded resolution of a pending action: the
// replay takes it as an input (a human decision, not the policy's) for the
// same trigger when the replay asks for an approval there too.
type Approval struct {
	// DeviceID, Site and TriggerID name the trigger of the pending action.
	DeviceID, Site string
	TriggerID      int64
	// At is when the operator resolved it; By who; Approved: approved
	// (the device is quarantined by the rule then), else rejected.
	At       time.Time
	By       string
	Approved bool
	// Rule is the pending action's rule.
	Rule string
}

type triggerKey struct {
	dev string
	id  int64
}

// inputs are what the replay reads besides the status and condition
// history: the operators' approvals and rejections, the closes of repair
// handoffs (both human decisions), and the ladders started before the
// period (they count against a ladder's budget).
type inputs struct {
	approvals    map[triggerKey]Approval
	closes       map[string][]time.Time // device → handoffs closed, oldest first
	priorLadders map[string][]time.Time // device → ladders started before the period
}

// readInputs reads, in tx, the inputs of [from, to].
func readInputs(ctx context.Context, tx pgx.Tx, from, to time.Time) (inputs, error) {
	in := inputs{approvals: map[triggerKey]Approval{}, closes: map[string][]time.Time{}, priorLadders: map[string][]time.Time{}}
	rows, err := tx.Query(ctx, `SELECT p.device_id::text, p.site, pd.trigger_id, p.resolved_at, p.resolved_by, p.state = 'APPROVED', p.rule
		FROM policy_pending_actions p JOIN policy_decisions pd ON pd.id = p.decision_id
		WHERE pd.triggered_at BETWEEN $1 AND $2 AND p.state IN ('APPROVED', 'REJECTED') AND p.resolved_by <> $3
			AND p.resolved_at <= $2 ORDER BY p.id`, from, to, store.ActorPolicy)
	if err != nil {
		return in, fmt.Errorf("approvals: %w", err)
	}
	for rows.Next() {
		var a Approval
		if err := rows.Scan(&a.DeviceID, &a.Site, &a.TriggerID, &a.At, &a.By, &a.Approved, &a.Rule); err != nil {
			rows.Close()
			return in, fmt.Errorf("approvals: %w", err)
		}
		in.approvals[triggerKey{a.DeviceID, a.TriggerID}] = a
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return in, fmt.Errorf("approvals: %w", err)
	}
	if err := readTimes(ctx, tx, in.closes, `SELECT device_id::text, closed_at FROM remediation_handoffs
		WHERE closed_at IS NOT NULL AND closed_at <= $1 ORDER BY closed_at`, to); err != nil {
		return in, fmt.Errorf("handoff closes: %w", err)
	}
	if err := readTimes(ctx, tx, in.priorLadders, `SELECT device_id::text, started_at FROM remediation_ladders
		WHERE started_at < $1 ORDER BY started_at`, from); err != nil {
		return in, fmt.Errorf("earlier ladders: %w", err)
	}
	return in, nil
}

// readTimes appends (device, time) rows of query to m.
func readTimes(ctx context.Context, tx pgx.Tx, m map[string][]time.Time, query string, args ...any) error {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var dev string
		var at time.Time
		if err := rows.Scan(&dev, &at); err != nil {
			return err
		}
		m[dev] = append(m[dev], at)
	}
	return rows.Err()
}
