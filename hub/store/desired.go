package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DesiredState is one device's desired impairment state.
type DesiredState struct {
	DeviceID   string
	Desired    Impairment
	Generation int64
}

// DesiredStates returns the desired impairment state of every device of
// site that has one (never-touched devices are left out), in id order.
func (s *Store) DesiredStates(ctx context.Context, site string) ([]DesiredState, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id::text, desired_impairment, desired_generation FROM devices
		WHERE site = $1 AND desired_impairment <> 'NONE' ORDER BY id`, site)
	if err != nil {
		return nil, fmt.Errorf("desired states of site %q: %w", site, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (DesiredState, error) {
		var d DesiredState
		var desired string
		err := r.Scan(&d.DeviceID, &desired, &d.Generation)
		d.Desired = Impairment(desired)
		return d, err
	})
}

// RecordDriftCorrection appends a resync correction for a device of site and
// counts it on the device. A correction that does not re-apply the device's
// current desired state (generation not its desired generation, or no
// desired state at all) is ignored (ignored=true, nothing written): it was
// made from a stale view, or names a generation the hub never issued.
// Errors (nothing is written): ErrNotFound (unknown device), ErrWrongSite
// (device of another site).
func (s *Store) RecordDriftCorrection(ctx context.Context, site, deviceID string, generation int64, detail string, at time.Time) (ignored bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		ignored = false
		var devSite, desired string
		var desiredGen int64
		err := tx.QueryRow(ctx, `SELECT site, desired_impairment, desired_generation FROM devices WHERE id = $1 FOR NO KEY UPDATE`, deviceID).
			Scan(&devSite, &desired, &desiredGen)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("device %s: %w", deviceID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("load device %s: %w", deviceID, err)
		}
		if devSite != site {
			return fmt.Errorf("device %s is registered to site %q: %w", deviceID, devSite, ErrWrongSite)
		}
		if desired == string(ImpairmentNone) || generation != desiredGen {
			ignored = true
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO drift_corrections (device_id, generation, detail, corrected_at) VALUES ($1, $2, $3, $4)`,
			deviceID, generation, detail, at); err != nil {
			return fmt.Errorf("append drift correction: %w", err)
		}
		_, err = tx.Exec(ctx, `UPDATE devices SET drift_corrections = drift_corrections + 1,
			last_drift_correction = $2, last_drift_correction_at = $3 WHERE id = $1`, deviceID, detail, at)
		if err != nil {
			return fmt.Errorf("count drift correction: %w", err)
		}
		return nil
	})
	return ignored, err
}

// ForeignDevice returns the first of ids (device UUIDs) registered to
// another site than site, with that site, or ok=false when none is (unknown
// ids are not foreign). Errors are database errors.
func (s *Store) ForeignDevice(ctx context.Context, site string, ids []string) (id, otherSite string, ok bool, err error) {
	if len(ids) == 0 {
		return "", "", false, nil
	}
	err = s.pool.QueryRow(ctx, `SELECT id::text, site FROM devices WHERE id = ANY($1::uuid[]) AND site <> $2 ORDER BY id LIMIT 1`,
		ids, site).Scan(&id, &otherSite)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, fmt.Errorf("check device sites: %w", err)
	}
	return id, otherSite, true, nil
}
