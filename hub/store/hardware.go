package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/internal/condition"
)

// hardwareUpsertSQL stores each device's newest hardware and appends it to
// the history; a state read no later than the stored one (a snapshot
// after a reconnect sends the same read again) changes nothing. A read
// that finds no inventory (NotInspected) where the stored state had one
// keeps the stored facts, marked stale since that read (staleSinceSQL).
const hardwareUpsertSQL = `WITH h AS (
	SELECT * FROM unnest($1::uuid[], $2::jsonb[], $3::timestamptz[], $4::timestamptz[])
		AS t(device_id, hardware, inspection_finished_at, read_at)
), up AS (
	INSERT INTO device_hardware AS dh (device_id, hardware, inspection_finished_at, read_at)
	SELECT device_id, hardware, inspection_finished_at, read_at FROM h
	ON CONFLICT (device_id) DO UPDATE SET hardware = ` + staleSQL + `,
		inspection_finished_at = EXCLUDED.inspection_finished_at, read_at = EXCLUDED.read_at,
		updated_at = clock_timestamp()
	WHERE dh.read_at < EXCLUDED.read_at
	RETURNING device_id, hardware, read_at
)
INSERT INTO device_hardware_history (device_id, hardware, read_at)
SELECT device_id, hardware, read_at FROM up`

// staleSQL is the state stored over dh by EXCLUDED: the last facts, marked
// stale, when the inventory disappeared (docs/reference/hardware.md
// "Re-read and history"); else the new state.
const staleSQL = `CASE WHEN NOT coalesce((EXCLUDED.hardware->>'inventoryAvailable')::boolean, false)
		AND EXCLUDED.hardware->>'inventoryStatus' = 'NotInspected'
		AND (coalesce((dh.hardware->>'inventoryAvailable')::boolean, false) OR coalesce((dh.hardware->>'stale')::boolean, false))
	THEN (dh.hardware - 'inspectionFinishedAt' - 'inventoryAvailable')
		|| jsonb_build_object('stale', true, 'staleSince', coalesce(dh.hardware->'staleSince', EXCLUDED.hardware->'readAt'),
			'inventoryStatus', EXCLUDED.hardware->'inventoryStatus', 'readAt', EXCLUDED.hardware->'readAt')
		|| jsonb_strip_nulls(jsonb_build_object('inspectionFinishedAt', EXCLUDED.hardware->'inspectionFinishedAt'))
	ELSE EXCLUDED.hardware END`

// writeHardware writes the hardware the applied batches carry (one
// statement; none when no batch carries any). A device's later batch in
// the group wins.
func writeHardware(ctx context.Context, tx pgx.Tx, items []*groupItem) error {
	latest := map[string]*Hardware{}
	var order []string
	for _, it := range items {
		for i := range it.batch.Devices {
			d := &it.batch.Devices[i]
			if d.Hardware == nil || d.Removed {
				continue
			}
			if _, ok := latest[d.DeviceID]; !ok {
				order = append(order, d.DeviceID)
			}
			latest[d.DeviceID] = d.Hardware
		}
	}
	if len(order) == 0 {
		return nil
	}
	docs := make([]string, len(order))
	inspected := make([]*time.Time, len(order))
	read := make([]time.Time, len(order))
	for i, id := range order {
		h := latest[id]
		docs[i], inspected[i], read[i] = string(h.JSON), h.InspectionFinishedAt, h.ReadAt
	}
	if _, err := tx.Exec(ctx, hardwareUpsertSQL, order, docs, inspected, read); err != nil {
		return fmt.Errorf("write hardware of %d devices: %w", len(order), err)
	}
	return nil
}

// DeviceHardware is one device's stored hardware with what selects its
// profile.
type DeviceHardware struct {
	DeviceID, Site, Name, ResourceClass string
	// JSON is the ironlink.v1.HardwareState in protobuf JSON.
	JSON []byte
	// UpdatedAt is when the hub stored it (the cursor of HardwareSince).
	UpdatedAt time.Time
}

// HardwareSince returns up to limit devices (not removed) whose hardware
// was stored after after, oldest first (by updated_at, then device id).
func (s *Store) HardwareSince(ctx context.Context, after time.Time, limit int) ([]DeviceHardware, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT h.device_id::text, d.site, d.name, coalesce(d.facts->>'resource_class', ''), h.hardware::text, h.updated_at
		FROM device_hardware h JOIN devices d ON d.id = h.device_id
		WHERE h.updated_at > $1 AND NOT d.removed
		ORDER BY h.updated_at, h.device_id LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read hardware: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeviceHardware, error) {
		var d DeviceHardware
		var doc string
		err := r.Scan(&d.DeviceID, &d.Site, &d.Name, &d.ResourceClass, &doc, &d.UpdatedAt)
		d.JSON = []byte(doc)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("read hardware: %w", err)
	}
	return out, nil
}

// DeviceHardwareJSON returns a device's stored hardware (protobuf JSON),
// or nil when its satellite has sent none.
func (s *Store) DeviceHardwareJSON(ctx context.Context, id string) ([]byte, error) {
	var doc string
	err := s.pool.QueryRow(ctx, `SELECT hardware::text FROM device_hardware WHERE device_id = $1`, id).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hardware of device %s: %w", id, err)
	}
	return []byte(doc), nil
}

// SetHubConditions writes conditions the hub makes itself
// (HardwareMatchesProfile) for their devices: a condition that says what
// the stored one says is left alone; a changed one is written with a
// condition_history row (its last_transition_time kept while the status
// stays; a NoProfile condition only over an earlier verdict), and the
// devices' statuses are derived again (hub/status). The
// sites of the devices are locked as a batch's are. It returns the number
// of conditions written.
func (s *Store) SetHubConditions(ctx context.Context, byDevice map[string]condition.Condition) (int, error) {
	if len(byDevice) == 0 {
		return 0, nil
	}
	ids := slices.Sorted(maps.Keys(byDevice))
	written := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		written = 0
		if _, err := tx.Exec(ctx, `SELECT 1 FROM sites WHERE name IN (SELECT site FROM devices WHERE id = ANY($1::uuid[]))
			ORDER BY name FOR NO KEY UPDATE`, ids); err != nil {
			return fmt.Errorf("lock sites: %w", err)
		}
		current, err := loadConditions(ctx, tx, ids)
		if err != nil {
			return err
		}
		var conds, history condRows
		var changed []string
		for _, id := range ids {
			c := byDevice[id]
			old, had := current[id][c.Type]
			if (had && old.SameObservation(c)) || (!had && c.Reason == condition.ReasonNoProfile) {
				continue // the same verdict; or no profile, and never one
			}
			if had && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
			if current[id] == nil {
				current[id] = map[condition.Type]condition.Condition{}
			}
			current[id][c.Type] = c
			conds.add(id, c)
			history.add(id, c)
			changed = append(changed, id)
		}
		written = len(changed)
		return s.writeHealth(ctx, tx, changed, &conds, &history, current)
	})
	return written, err
}
