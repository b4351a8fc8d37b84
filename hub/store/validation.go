package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Validation runs (migrations 00032 and 00033; hub/validation decides).

// ValidationRunState is a run's state as stored.
type ValidationRunState string

// Run states.
const (
	RunRunning  ValidationRunState = "RUNNING"
	RunAwaiting ValidationRunState = "AWAITING_RESULTS"
	RunPassed   ValidationRunState = "PASSED"
	RunFailed   ValidationRunState = "FAILED"
)

// HubCheck is the name of the hub's own check of a run: the inspected
// hardware against its profile.
const HubCheck = "hardware-profile"

// ErrRunFinished: the validation run passed or failed already; nothing
// is written.
var ErrRunFinished = errors.New("validation run finished")

// ErrCheckNotRequired: a result for a check the validation run does not
// require (not in its required checks: a typo would otherwise pass
// unnoticed); nothing written.
var ErrCheckNotRequired = errors.New("check not required by the validation run")

// ErrValidationRequired: the device is in the validation pool and no
// validation run of it passed since it last failed one (or ever).
var ErrValidationRequired = errors.New("device is in the validation pool and has no passed validation run")

// ValidationRun is one stored run with its results.
type ValidationRun struct {
	ID, DeviceID, DeviceName, Site string
	State                          ValidationRunState
	RequiredChecks, FailingChecks  []string
	Message, OfferCommandID        string
	CreatedAt                      time.Time
	EndedAt                        *time.Time
	Results                        []ValidationResult
	// Operation's state, last error, actor, start and end (for the runner).
	OpState     OperationState
	OpLastError string
	OpActor     string
	OpStartedAt *time.Time
}

// ValidationResult is one check's recorded result.
type ValidationResult struct {
	Check                  string
	Pass                   bool
	Duration               time.Duration
	OutputExcerpt          string
	ArtifactsURL, Reporter string
	RecordedAt             time.Time
}

// createValidationRun adds the run of a VALIDATE operation o (its
// required checks from o's params) in o's transaction.
func createValidationRun(ctx context.Context, tx pgx.Tx, o Operation) error {
	if o.Kind != "VALIDATE" || o.DeviceID == "" {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO validation_runs (id, device_id, site, required_checks)
		VALUES ($1, $2, $3, ARRAY(SELECT jsonb_array_elements_text(coalesce($4::jsonb->'validationChecks', '[]'))))`,
		o.ID, o.DeviceID, o.Site, string(o.Params))
	if err != nil {
		return fmt.Errorf("validation run of operation %s: %w", o.ID, err)
	}
	return addValidationEvent(ctx, tx, o.ID, ValidationStarted, "", "", "")
}

// endRunsSupersededBy fails the open validation runs of o's device when o
// changes the node (any kind but HARDWARE_REREAD; a new VALIDATE too): a run
// started before an ADOPT, a DEPLOY or a reprovision would otherwise
// judge, and offer, a machine it no longer describes. In o's transaction;
// each ended run gets its FAILED feed event.
func endRunsSupersededBy(ctx context.Context, tx pgx.Tx, o Operation) error {
	if o.DeviceID == "" || o.Kind == "HARDWARE_REREAD" {
		return nil
	}
	msg := fmt.Sprintf("superseded by operation %s (%s) started on the device before the run ended", o.ID, o.Kind)
	rows, err := tx.Query(ctx, `UPDATE validation_runs SET state = 'FAILED', message = $2, failing_checks = ARRAY['operation'],
		updated_at = now(), ended_at = now()
		WHERE device_id = $1 AND state IN ('RUNNING', 'AWAITING_RESULTS') RETURNING id::text`, o.DeviceID, msg)
	if err != nil {
		return fmt.Errorf("end validation runs of device %s: %w", o.DeviceID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("end validation runs of device %s: %w", o.DeviceID, err)
	}
	for _, id := range ids {
		if err := addValidationEvent(ctx, tx, id, ValidationFailed, "", "", msg); err != nil {
			return err
		}
	}
	return nil
}

const runColumns = `r.id::text, r.device_id::text, d.name, r.site, r.state, r.required_checks, r.failing_checks,
	r.message, coalesce(r.offer_command_id::text, ''), r.created_at, r.ended_at, o.state, o.last_error, o.actor, o.started_at`

const runFrom = ` FROM validation_runs r JOIN devices d ON d.id = r.device_id JOIN operations o ON o.id = r.id`

func scanRun(r pgx.CollectableRow) (ValidationRun, error) {
	var v ValidationRun
	var st, ost string
	err := r.Scan(&v.ID, &v.DeviceID, &v.DeviceName, &v.Site, &st, &v.RequiredChecks, &v.FailingChecks, &v.Message,
		&v.OfferCommandID, &v.CreatedAt, &v.EndedAt, &ost, &v.OpLastError, &v.OpActor, &v.OpStartedAt)
	v.State, v.OpState = ValidationRunState(st), OperationState(ost)
	return v, err
}

// ValidationRuns returns runs newest first with their results: of device
// deviceID when set, else of site when set, else all; at most limit.
// Read-only.
func (s *Store) ValidationRuns(ctx context.Context, deviceID, site string, limit int) ([]ValidationRun, error) {
	var dev any
	if deviceID != "" {
		dev = deviceID
	}
	rows, err := s.pool.Query(ctx, `SELECT `+runColumns+runFrom+`
		WHERE ($1::uuid IS NULL OR r.device_id = $1::uuid) AND ($2 = '' OR r.site = $2)
		ORDER BY r.created_at DESC, r.id LIMIT $3`, dev, site, limit)
	if err != nil {
		return nil, fmt.Errorf("validation runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("validation runs: %w", err)
	}
	return runs, s.addResults(ctx, s.pool, runs)
}

// OpenValidationRuns returns the runs not yet passed or failed, oldest
// first, at most limit, with their results. Read-only.
func (s *Store) OpenValidationRuns(ctx context.Context, limit int) ([]ValidationRun, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+runColumns+runFrom+`
		WHERE r.state IN ('RUNNING', 'AWAITING_RESULTS') ORDER BY r.created_at, r.id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("open validation runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("open validation runs: %w", err)
	}
	return runs, s.addResults(ctx, s.pool, runs)
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (s *Store) addResults(ctx context.Context, q querier, runs []ValidationRun) error {
	if len(runs) == 0 {
		return nil
	}
	ids := make([]string, len(runs))
	at := map[string]int{}
	for i, r := range runs {
		ids[i], at[r.ID] = r.ID, i
	}
	rows, err := q.Query(ctx, `SELECT run_id::text, check_name, result = 'PASS', duration_ms, output_excerpt, artifacts_url,
		reporter, recorded_at FROM validation_results WHERE run_id = ANY($1::uuid[]) ORDER BY run_id, check_name`, ids)
	if err != nil {
		return fmt.Errorf("validation results: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var v ValidationResult
		var ms int64
		if err := rows.Scan(&id, &v.Check, &v.Pass, &ms, &v.OutputExcerpt, &v.ArtifactsURL, &v.Reporter, &v.RecordedAt); err != nil {
			return fmt.Errorf("validation results: %w", err)
		}
		v.Duration = time.Duration(ms) * time.Millisecond
		runs[at[id]].Results = append(runs[at[id]].Results, v)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("validation results: %w", err)
	}
	return nil
}

// lockRun locks run id and returns it. Errors: ErrNotFound; ErrWrongSite
// when site is set and the run is of another site; ErrRunFinished when it
// passed or failed.
func lockRun(ctx context.Context, tx pgx.Tx, id, site string) (ValidationRun, error) {
	rows, err := tx.Query(ctx, `SELECT `+runColumns+runFrom+` WHERE r.id = $1 FOR UPDATE OF r`, id)
	if err != nil {
		return ValidationRun{}, fmt.Errorf("lock validation run %s: %w", id, err)
	}
	run, err := pgx.CollectExactlyOneRow(rows, scanRun)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return run, fmt.Errorf("validation run %s: %w", id, ErrNotFound)
	case err != nil:
		return run, fmt.Errorf("lock validation run %s: %w", id, err)
	case site != "" && run.Site != site:
		return run, fmt.Errorf("validation run %s is of site %s: %w", id, run.Site, ErrWrongSite)
	case run.State == RunPassed || run.State == RunFailed:
		return run, fmt.Errorf("validation run %s %s: %w", id, run.State, ErrRunFinished)
	}
	return run, nil
}

// RecordValidationResult records (or replaces) one check's result of run
// runID and returns the run with its results. site, when set, is the
// caller's site: a run of another site is ErrWrongSite. Errors:
// ErrNotFound, ErrWrongSite, ErrRunFinished, ErrCheckNotRequired; nothing
// written on error.
func (s *Store) RecordValidationResult(ctx context.Context, runID, site string, v ValidationResult) (ValidationRun, error) {
	var run ValidationRun
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if run, err = lockRun(ctx, tx, runID, site); err != nil {
			return err
		}
		if v.Check != HubCheck && !slices.Contains(run.RequiredChecks, v.Check) {
			return fmt.Errorf("validation run %s requires %s, not %q: %w", runID, strings.Join(run.RequiredChecks, ", "), v.Check, ErrCheckNotRequired)
		}
		if err := upsertResult(ctx, tx, runID, v); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE validation_runs SET updated_at = now() WHERE id = $1`, runID)
		if err != nil {
			return fmt.Errorf("touch validation run %s: %w", runID, err)
		}
		runs := []ValidationRun{run}
		if err := s.addResults(ctx, tx, runs); err != nil {
			return err
		}
		run = runs[0]
		return nil
	})
	return run, err
}

func upsertResult(ctx context.Context, tx pgx.Tx, runID string, v ValidationResult) error {
	res := "FAIL"
	if v.Pass {
		res = "PASS"
	}
	changed, err := resultChanged(ctx, tx, runID, v.Check, res, v.OutputExcerpt)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO validation_results (run_id, check_name, result, duration_ms, output_excerpt, artifacts_url, reporter)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (run_id, check_name) DO UPDATE SET result = EXCLUDED.result, duration_ms = EXCLUDED.duration_ms,
			output_excerpt = EXCLUDED.output_excerpt, artifacts_url = EXCLUDED.artifacts_url, reporter = EXCLUDED.reporter,
			recorded_at = now()`, runID, v.Check, res, v.Duration.Milliseconds(), v.OutputExcerpt, v.ArtifactsURL, v.Reporter)
	if err != nil {
		return fmt.Errorf("record result %s of validation run %s: %w", v.Check, runID, err)
	}
	if !changed && v.Check == HubCheck {
		return nil // the hub's check decided again, the same: no feed event
	}
	return addValidationEvent(ctx, tx, runID, ValidationRecorded, v.Check, res, v.OutputExcerpt)
}

// RunVerdict is what hub/validation decided for an open run.
type RunVerdict struct {
	// State is the run's new state (RUNNING, AWAITING_RESULTS, PASSED or
	// FAILED); Message and FailingChecks go with it.
	State         ValidationRunState
	Message       string
	FailingChecks []string
	// HubResult, when set, is the hub's own check's result to record.
	HubResult *ValidationResult
}

// AdvanceValidationRun writes verdict v for open run id; a PASSED run
// offers its device as Offer does (an OFFER command recorded with
// action a), unless the device is quarantined (then the message says so).
// Errors: ErrNotFound, ErrRunFinished (another replica decided first).
func (s *Store) AdvanceValidationRun(ctx context.Context, id string, v RunVerdict, a ImpairmentAction) (ValidationRun, error) {
	var run ValidationRun
	err := s.inTxOn(ctx, s.commandPool(), func(tx pgx.Tx) error {
		var err error
		if run, err = lockRun(ctx, tx, id, ""); err != nil {
			return err
		}
		if v.HubResult != nil {
			if err := upsertResult(ctx, tx, id, *v.HubResult); err != nil {
				return err
			}
		}
		var offer any
		msg := v.Message
		if v.State == RunPassed {
			cmd, err := s.offerTx(ctx, tx, run.DeviceID, a, false)
			var held *HeldByOthersError
			switch {
			case errors.As(err, &held):
				msg += "; not offered: " + err.Error()
			case err != nil:
				return err
			default:
				offer = cmd.ID
			}
		}
		if v.FailingChecks == nil {
			v.FailingChecks = []string{}
		}
		_, err = tx.Exec(ctx, `UPDATE validation_runs SET state = $2, message = $3, failing_checks = $4, offer_command_id = $5,
			updated_at = now(), ended_at = CASE WHEN $2 IN ('PASSED', 'FAILED') THEN now() END WHERE id = $1`,
			id, string(v.State), msg, v.FailingChecks, offer)
		if err != nil {
			return fmt.Errorf("advance validation run %s: %w", id, err)
		}
		if v.State == RunPassed || v.State == RunFailed {
			if err := addValidationEvent(ctx, tx, id, string(v.State), "", "", msg); err != nil {
				return err
			}
		}
		run.State, run.Message, run.FailingChecks = v.State, msg, v.FailingChecks
		if s, ok := offer.(string); ok {
			run.OfferCommandID = s
		}
		return nil
	})
	return run, err
}

// validationGate refuses an offer of a device in the validation pool
// (InValidationPool True) whose newest validation run did not pass.
func validationGate(ctx context.Context, tx pgx.Tx, deviceID string) error {
	var refused bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM device_conditions
			WHERE device_id = $1 AND type = 'InValidationPool' AND status = 'True')
		AND coalesce((SELECT state FROM validation_runs WHERE device_id = $1 ORDER BY created_at DESC LIMIT 1), '') <> 'PASSED'`,
		deviceID).Scan(&refused)
	if err != nil {
		return fmt.Errorf("validation gate of %s: %w", deviceID, err)
	}
	if refused {
		return fmt.Errorf("device %s: %w: start a validation run (op start --kind validate)", deviceID, ErrValidationRequired)
	}
	return nil
}
