package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// HardwareOfDevices returns every device (not removed) of site (all when
// empty; only sites when non-nil) and resource class (all when empty),
// with its stored hardware (JSON nil when none), in site, resource class
// and name order. Read-only.
func (s *Store) HardwareOfDevices(ctx context.Context, site string, sites []string, class string) ([]DeviceHardware, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT d.id::text, d.site, d.name, coalesce(d.facts->>'resource_class', ''), coalesce(h.hardware::text, ''),
			coalesce(h.updated_at, 'epoch'::timestamptz)
		FROM devices d LEFT JOIN device_hardware h ON h.device_id = d.id
		WHERE NOT d.removed AND ($1 = '' OR d.site = $1) AND ($2::text[] IS NULL OR d.site = ANY($2::text[]))
		  AND ($3 = '' OR coalesce(d.facts->>'resource_class', '') = $3)
		ORDER BY d.site, 4, d.name, d.id`, site, sites, class)
	if err != nil {
		return nil, fmt.Errorf("hardware of devices: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeviceHardware, error) {
		var d DeviceHardware
		var doc string
		err := r.Scan(&d.DeviceID, &d.Site, &d.Name, &d.ResourceClass, &doc, &d.UpdatedAt)
		if doc != "" {
			d.JSON = []byte(doc)
		}
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("hardware of devices: %w", err)
	}
	return out, nil
}

// HardwareHistoryEntry is one stored hardware state of a device.
type HardwareHistoryEntry struct {
	// JSON is the ironlink.v1.HardwareState in protobuf JSON.
	JSON       []byte
	RecordedAt time.Time
}

// HardwareHistory returns device id's hardware history newest first, at
// most limit. Read-only.
func (s *Store) HardwareHistory(ctx context.Context, id string, limit int) ([]HardwareHistoryEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT hardware::text, recorded_at FROM device_hardware_history
		WHERE device_id = $1 ORDER BY read_at DESC, id DESC LIMIT $2`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("hardware history of %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (HardwareHistoryEntry, error) {
		var e HardwareHistoryEntry
		var doc string
		err := r.Scan(&doc, &e.RecordedAt)
		e.JSON = []byte(doc)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("hardware history of %s: %w", id, err)
	}
	return out, nil
}

// DeviceHardwareOf returns device id's stored hardware with what selects
// its profile and the inspection_finished_at it was read at (nil: none;
// JSON nil when the satellite has sent no hardware). Read-only.
func (s *Store) DeviceHardwareOf(ctx context.Context, id string) (DeviceHardware, *time.Time, error) {
	var d DeviceHardware
	var doc string
	var inspected *time.Time
	err := s.pool.QueryRow(ctx, `
		SELECT d.id::text, d.site, d.name, coalesce(d.facts->>'resource_class', ''), coalesce(h.hardware::text, ''),
			coalesce(h.updated_at, 'epoch'::timestamptz), h.inspection_finished_at
		FROM devices d LEFT JOIN device_hardware h ON h.device_id = d.id WHERE d.id = $1`, id).
		Scan(&d.DeviceID, &d.Site, &d.Name, &d.ResourceClass, &doc, &d.UpdatedAt, &inspected)
	if err != nil {
		return d, nil, fmt.Errorf("hardware of device %s: %w", id, err)
	}
	if doc != "" {
		d.JSON = []byte(doc)
	}
	return d, inspected, nil
}
