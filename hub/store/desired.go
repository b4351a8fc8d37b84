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
// counts it on the device. Errors: ErrNotFound (unknown device),
// ErrWrongSite (device of another site; nothing is written).
func (s *Store) RecordDriftCorrection(ctx context.Context, site, deviceID string, generation int64, detail string, at time.Time) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var devSite string
		err := tx.QueryRow(ctx, `SELECT site FROM devices WHERE id = $1 FOR UPDATE`, deviceID).Scan(&devSite)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("device %s: %w", deviceID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("load device %s: %w", deviceID, err)
		}
		if devSite != site {
			return fmt.Errorf("device %s is registered to site %q: %w", deviceID, devSite, ErrWrongSite)
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
}
