package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Validation events of the change feed (migrations/00037, feed source 7):
// written in the transaction of the change they describe.

// Validation feed events.
const (
	ValidationStarted  = "STARTED"
	ValidationRecorded = "RESULT"
	ValidationPassed   = "PASSED"
	ValidationFailed   = "FAILED"
	// ValidationRemediation: a validation rule quarantined the device of
	// a failed run to run its ladder (migrations/00038).
	ValidationRemediation = "REMEDIATION"
)

// addValidationEvent records event of run runID (its device and site
// from the run) with the check, result and detail given.
func addValidationEvent(ctx context.Context, tx pgx.Tx, runID, event, check, result, detail string) error {
	_, err := tx.Exec(ctx, `INSERT INTO validation_events (run_id, device_id, site, event, check_name, result, detail)
		SELECT id, device_id, site, $2, $3, $4, $5 FROM validation_runs WHERE id = $1`, runID, event, check, result, detail)
	if err != nil {
		return fmt.Errorf("record %s event of validation run %s: %w", event, runID, err)
	}
	return nil
}

// resultChanged reports whether check's stored result of run runID is
// absent or differs from res and excerpt.
func resultChanged(ctx context.Context, tx pgx.Tx, runID, check, res, excerpt string) (bool, error) {
	var same bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM validation_results
		WHERE run_id = $1 AND check_name = $2 AND result = $3 AND output_excerpt = $4)`, runID, check, res, excerpt).Scan(&same)
	if err != nil {
		return false, fmt.Errorf("result %s of validation run %s: %w", check, runID, err)
	}
	return !same, nil
}
