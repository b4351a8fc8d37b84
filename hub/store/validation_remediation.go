package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/hub/status"
)

// Validation rules' side of the store (migrations/00038;
// docs/reference/policy.md "Validation rules"): the failed runs no rule
// has taken yet, and the quarantine by a rule that takes one.

// ValidationBrief is a device's newest validation run as the ladder
// engine reads it.
type ValidationBrief struct {
	ID            string
	State         ValidationRunState
	FailingChecks []string
	Message       string
	CreatedAt     time.Time
	// Params is the run's VALIDATE operation's params (protojson), what
	// a re-validation repeats.
	Params []byte
}

// ValidationFailure is a device whose newest validation run FAILED and
// that no validation rule has taken: no rule quarantined it for that run,
// the run is not a ladder's own re-validation, and the device holds no
// policy quarantine and has no open ladder or handoff.
type ValidationFailure struct {
	Device RemediationDevice
	Run    ValidationBrief
}

// ValidationFailures returns the failed runs no rule has taken yet,
// oldest end first (at most 500).
func (s *Store) ValidationFailures(ctx context.Context) ([]ValidationFailure, error) {
	// Driven by the failed runs no rule took (a partial index), not by
	// every device: a pass over a large fleet reads only those.
	rows, err := s.pool.Query(ctx, `
		SELECT d.id::text, d.site, d.name, d.status, d.status_reason, d.status_changed_at, st.stale,
			r.id::text, r.failing_checks, r.message, r.created_at
		FROM validation_runs r
		JOIN devices d ON d.id = r.device_id
		JOIN sites st ON st.name = d.site
		JOIN operations o ON o.id = r.id
		WHERE r.state = 'FAILED' AND r.remediation_rule = '' AND o.source <> $1 AND NOT d.removed
		  AND NOT EXISTS (SELECT 1 FROM validation_runs n WHERE n.device_id = r.device_id AND n.created_at > r.created_at)
		  AND NOT EXISTS (SELECT 1 FROM quarantine_holds q WHERE q.device_id = d.id AND q.holder LIKE 'policy:%')
		  AND NOT EXISTS (SELECT 1 FROM remediation_ladders l WHERE l.device_id = d.id AND l.state = 'RUNNING')
		  AND NOT EXISTS (SELECT 1 FROM remediation_handoffs h WHERE h.device_id = d.id AND h.state = 'OPEN')
		ORDER BY r.ended_at, r.id LIMIT 500`, SourcePolicy)
	if err != nil {
		return nil, fmt.Errorf("failed validation runs: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ValidationFailure, error) {
		var f ValidationFailure
		var st string
		err := r.Scan(&f.Device.DeviceID, &f.Device.Site, &f.Device.Name, &st, &f.Device.StatusReason, &f.Device.StatusChangedAt,
			&f.Device.SiteStale, &f.Run.ID, &f.Run.FailingChecks, &f.Run.Message, &f.Run.CreatedAt)
		f.Device.Status, f.Run.State = status.Status(st), RunFailed
		return f, err
	})
}

// ErrRunTaken: the failed validation run was taken by a rule already, or
// a newer run exists; nothing written.
var ErrRunTaken = errors.New("validation run taken by a rule or superseded")

// QuarantineForValidation quarantines the device of failed run runID by
// rule (hold policy:<rule>, source policy, actor a.Actor, reason
// a.Reason), marks the run taken by the rule and records its REMEDIATION
// feed event (detail), in one transaction. Errors: ErrRunTaken when the
// run is no longer the device's newest, not FAILED, or taken already.
func (s *Store) QuarantineForValidation(ctx context.Context, runID, rule, detail string, a ImpairmentAction) (Command, error) {
	var cmd Command
	err := s.inTxOn(ctx, s.commandPool(), func(tx pgx.Tx) error {
		var dev string
		err := tx.QueryRow(ctx, `UPDATE validation_runs r SET remediation_rule = $2, updated_at = now()
			WHERE r.id = $1 AND r.state = 'FAILED' AND r.remediation_rule = ''
			  AND r.created_at = (SELECT max(created_at) FROM validation_runs n WHERE n.device_id = r.device_id)
			RETURNING r.device_id::text`, runID, rule).Scan(&dev)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("validation run %s: %w", runID, ErrRunTaken)
		}
		if err != nil {
			return fmt.Errorf("take validation run %s: %w", runID, err)
		}
		a.Source = SourcePolicy
		if cmd, err = s.quarantineTx(ctx, tx, dev, PolicyHolder(rule), a); err != nil {
			return err
		}
		return addValidationEvent(ctx, tx, runID, ValidationRemediation, "", "", detail)
	})
	return cmd, err
}

// newestRuns returns the newest validation run of each of the devices
// ids, with its operation's params.
func newestRuns(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, ids []string) (map[string]ValidationBrief, error) {
	rows, err := q.Query(ctx, `
		SELECT DISTINCT ON (r.device_id) r.device_id::text, r.id::text, r.state, r.failing_checks, r.message, r.created_at,
			COALESCE(o.params::text, '{}')
		FROM validation_runs r JOIN operations o ON o.id = r.id
		WHERE r.device_id = ANY($1::uuid[]) ORDER BY r.device_id, r.created_at DESC`, ids)
	if err != nil {
		return nil, fmt.Errorf("newest validation runs: %w", err)
	}
	out := map[string]ValidationBrief{}
	for rows.Next() {
		var dev, st, params string
		var b ValidationBrief
		if err := rows.Scan(&dev, &b.ID, &st, &b.FailingChecks, &b.Message, &b.CreatedAt, &params); err != nil {
			rows.Close()
			return nil, fmt.Errorf("newest validation runs: %w", err)
		}
		b.State, b.Params = ValidationRunState(st), []byte(strings.TrimSpace(params))
		out[dev] = b
	}
	return out, rows.Err()
}
