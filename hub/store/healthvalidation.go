package store

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/internal/condition"
)

// Health events as validation results (docs/reference/hardware.md
// "Validation"): a health event reported through either door for a device
// whose validation run is open, whose check name is one of the run's
// required checks and which was generated after the run started, records
// that check's result in the health event's transaction, as
// RecordValidationResult would.

// Metadata keys of a health event that a validation result takes.
const (
	// HealthMetaDuration is the check's duration, a Go duration ("90s").
	HealthMetaDuration = "duration"
	// HealthMetaArtifacts is the check's artifacts link (http or https).
	HealthMetaArtifacts = "artifacts_url"
)

// openRunsSQL lists the open validation runs of the devices $1 (the
// partial index validation_runs_open).
const openRunsSQL = `SELECT id::text, device_id::text, required_checks, created_at FROM validation_runs
	WHERE state IN ('RUNNING', 'AWAITING_RESULTS') AND device_id = ANY($1::uuid[])`

// openRun is an open validation run as the health intake needs it.
type openRun struct {
	id, deviceID string
	checks       []string
	createdAt    time.Time
}

// loadConditionsAndRuns reads the current conditions of ids and their
// devices' open validation runs in one round trip.
func loadConditionsAndRuns(ctx context.Context, tx pgx.Tx, ids []string) (map[string]map[condition.Type]condition.Condition, map[string]openRun, error) {
	b := &pgx.Batch{}
	b.Queue(loadConditionsSQL, ids)
	b.Queue(openRunsSQL, ids)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("load conditions: %w", err)
	}
	current, err := scanConditions(rows)
	if err != nil {
		return nil, nil, err
	}
	rows, err = br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("open validation runs: %w", err)
	}
	runs := map[string]openRun{}
	for rows.Next() {
		var r openRun
		if err := rows.Scan(&r.id, &r.deviceID, &r.checks, &r.createdAt); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("open validation runs: %w", err)
		}
		runs[r.deviceID] = r // at most one open run a device (endRunsSupersededBy)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("open validation runs: %w", err)
	}
	return current, runs, br.Close()
}

// recordHealthResults records, for every event of events not a duplicate
// nor superseded, healthy or not (not expired), whose device has an open
// run requiring its check name and that was generated at or after the
// run's start, the check's result: PASS when healthy; the message as
// output excerpt; duration and artifacts link from its metadata (ignored
// when not valid); the agent as reporter. A later event of the batch for
// the same run and check replaces an earlier one. It sets
// res[i].ValidationRunID of the events recorded.
func recordHealthResults(ctx context.Context, tx pgx.Tx, events []HealthEvent, res []HealthEventResult, runs map[string]openRun) error {
	if len(runs) == 0 {
		return nil
	}
	type key struct{ run, check string }
	last := map[key]int{}
	var order []key
	for i, ev := range events {
		r, ok := runs[res[i].DeviceID]
		h := ev.Condition.Health
		if !ok || h == nil || res[i].Duplicate || res[i].Superseded || ev.Condition.Status == condition.Unknown ||
			!slices.Contains(r.checks, h.CheckName) || h.GeneratedTime.Before(r.createdAt) {
			continue
		}
		k := key{r.id, h.CheckName}
		if _, seen := last[k]; !seen {
			order = append(order, k)
		}
		last[k] = i
		res[i].ValidationRunID = r.id
	}
	for _, k := range order {
		if err := upsertResult(ctx, tx, k.run, healthResult(events[last[k]])); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE validation_runs SET updated_at = now() WHERE id = $1`, k.run); err != nil {
			return fmt.Errorf("touch validation run %s: %w", k.run, err)
		}
	}
	return nil
}

// healthResult is the validation result a health event records.
func healthResult(ev HealthEvent) ValidationResult {
	h := ev.Condition.Health
	v := ValidationResult{Check: h.CheckName, Pass: ev.Condition.Status == condition.True, OutputExcerpt: ev.Condition.Message, Reporter: h.Agent}
	if d, err := time.ParseDuration(h.Metadata[HealthMetaDuration]); err == nil && d >= 0 && d <= 7*24*time.Hour {
		v.Duration = d
	}
	raw := h.Metadata[HealthMetaArtifacts]
	if u, err := url.Parse(raw); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		v.ArtifactsURL = raw
	}
	return v
}
