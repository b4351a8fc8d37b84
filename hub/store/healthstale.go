package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/internal/condition"
)

// HealthEventIDRetention is how long a health event id is remembered: a
// batch retried later than this after its first delivery is applied again
// (and then only changes what a newer event did not already change: the
// generated-time rule still holds).
const HealthEventIDRetention = 7 * 24 * time.Hour

// maxStalePerSweep bounds one ExpireHealth transaction.
const maxStalePerSweep = 5000

// ExpireHealth turns every health condition whose expire time is at or
// before now, and that is not Unknown yet, Unknown with reason Stale (its
// observed time, that is the last event's generated time, kept; a
// condition_history row each), derives the devices' statuses again (a
// stale condition never makes a device FAULTED), and forgets event ids
// older than HealthEventIDRetention. At most 5000 conditions a call, their
// sites locked as the link's writes lock them; it returns how many turned
// stale. Errors are database errors.
func (s *Store) ExpireHealth(ctx context.Context, now time.Time) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		n, err = s.expireHealthTx(ctx, tx, now)
		return err
	})
	if err != nil {
		return 0, err
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM health_event_ids WHERE recorded_at < $1`, now.Add(-HealthEventIDRetention)); err != nil {
		return n, fmt.Errorf("forget old health event ids: %w", err)
	}
	return n, nil
}

func (s *Store) expireHealthTx(ctx context.Context, tx pgx.Tx, now time.Time) (int, error) {
	rows, err := tx.Query(ctx, `
		SELECT DISTINCT d.site FROM device_conditions c JOIN devices d ON d.id = c.device_id
		WHERE c.expire_at <= $1 AND c.status <> 'Unknown'`, now)
	if err != nil {
		return 0, fmt.Errorf("find stale health conditions: %w", err)
	}
	sites, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(sites) == 0 {
		return 0, err
	}
	slices.Sort(sites)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM sites WHERE name = ANY($1::text[]) ORDER BY name FOR NO KEY UPDATE`, sites); err != nil {
		return 0, fmt.Errorf("lock sites: %w", err)
	}
	rows, err = tx.Query(ctx, `
		SELECT c.device_id::text FROM device_conditions c JOIN devices d ON d.id = c.device_id
		WHERE c.expire_at <= $1 AND c.status <> 'Unknown' AND d.site = ANY($2::text[])
		ORDER BY c.expire_at LIMIT $3`, now, sites, maxStalePerSweep)
	if err != nil {
		return 0, fmt.Errorf("find stale health conditions: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("find stale health conditions: %w", err)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	current, err := loadConditions(ctx, tx, ids)
	if err != nil {
		return 0, err
	}
	var conds condRows
	for _, id := range ids {
		for _, t := range slices.Sorted(maps.Keys(current[id])) {
			c := current[id][t]
			if c.Health == nil || c.Status == condition.Unknown || c.Health.ExpireTime.After(now) {
				continue
			}
			c.Status, c.Reason, c.LastTransitionTime = condition.Unknown, condition.ReasonStale, now
			c.Message = fmt.Sprintf("no report from %s since %s", c.Health.Agent, c.ObservedTime.UTC().Format(time.RFC3339))
			current[id][t] = c
			conds.add(id, c)
		}
	}
	return len(conds.ids), s.writeHealth(ctx, tx, ids, &conds, &conds, current)
}
