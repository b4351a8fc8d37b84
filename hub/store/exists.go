package store

import (
	"context"
	"fmt"
)

// SiteExists reports whether a site named name is known: a satellite of
// that name has linked at least once (sites are never deleted).
func (s *Store) SiteExists(ctx context.Context, name string) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sites WHERE name = $1)`, name).Scan(&ok); err != nil {
		return false, fmt.Errorf("look up site %q: %w", name, err)
	}
	return ok, nil
}

// DeviceExists reports whether a device with id (a canonical UUID) is
// known, removed devices included (devices are never deleted).
func (s *Store) DeviceExists(ctx context.Context, id string) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM devices WHERE id = $1::uuid)`, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("look up device %s: %w", id, err)
	}
	return ok, nil
}
