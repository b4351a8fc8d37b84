package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/internal/condition"
)

// OpenLink records a new link for h.Site on replica h.Replica: it creates the
// site on first contact, bumps the site's fencing epoch (so any older link's
// writes are refused from now on) and returns the new epoch with the last
// committed sequence.
func (s *Store) OpenLink(ctx context.Context, h LinkHello) (LinkSession, error) {
	var sess LinkSession
	var last int64
	caps := h.Capabilities
	if caps == nil {
		caps = []string{}
	}
	err := s.pool.QueryRow(ctx, `
		INSERT INTO sites (name, link_epoch, link_replica, link_connected_at, last_seen_at, boot_id, satellite_version, capabilities)
		VALUES ($1, 1, $2, now(), now(), $3, $4, $5)
		ON CONFLICT (name) DO UPDATE SET
			link_epoch = sites.link_epoch + 1, link_replica = $2, link_connected_at = now(),
			last_seen_at = now(), boot_id = $3, satellite_version = $4, capabilities = $5
		RETURNING link_epoch, last_sequence, last_batch_boot_id`,
		h.Site, h.Replica, h.BootID, h.Version, caps).Scan(&sess.Epoch, &last, &sess.LastSequenceBootID)
	if err != nil {
		return LinkSession{}, fmt.Errorf("open link for site %q: %w", h.Site, err)
	}
	sess.LastSequence = uint64(last)
	if err := s.refreshStaleness(ctx, h.Site); err != nil {
		return LinkSession{}, err
	}
	return sess, nil
}

// CloseLink records that the link with epoch closed; a newer link is left alone.
func (s *Store) CloseLink(ctx context.Context, site string, epoch int64) error {
	_, err := s.pool.Exec(ctx, `UPDATE sites SET link_replica = NULL WHERE name = $1 AND link_epoch = $2`, site, epoch)
	if err != nil {
		return fmt.Errorf("close link for site %q: %w", site, err)
	}
	return nil
}

// lockSite locks the site row (FOR NO KEY UPDATE: writers of the site
// queue here, readers do not) and checks that epoch is the site's current
// link epoch. It returns the last committed sequence and the stale flag.
// Errors: ErrNotFound, ErrFenced (a newer link exists), database errors.
func lockSite(ctx context.Context, tx pgx.Tx, site string, epoch int64) (lastSeq int64, stale bool, err error) {
	var curEpoch int64
	err = tx.QueryRow(ctx, `SELECT link_epoch, last_sequence, stale FROM sites WHERE name = $1 FOR NO KEY UPDATE`, site).
		Scan(&curEpoch, &lastSeq, &stale)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, fmt.Errorf("site %q: %w", site, ErrNotFound)
	}
	if err != nil {
		return 0, false, fmt.Errorf("lock site %q: %w", site, err)
	}
	if curEpoch != epoch {
		return 0, false, fmt.Errorf("site %q epoch %d (current %d): %w", site, epoch, curEpoch, ErrFenced)
	}
	return lastSeq, stale, nil
}

// ApplyBatch commits b for site in one transaction, under the link's epoch.
// Sequences at or below the site's last committed sequence are recognised as
// duplicates and change nothing. Conditions older (by observed time) than the
// stored ones are ignored, so a replay never moves a condition backwards; a
// stored observed time more than MaxClockSkew in the future counts as now.
// When b is the final part of a snapshot, every device of the site that no
// part of that snapshot mentioned is marked removed.
//
// Errors: ErrFenced (a newer link exists), ErrWrongSite (a device is known
// under another site; nothing is written), database errors.
func (s *Store) ApplyBatch(ctx context.Context, site string, epoch int64, b Batch) (BatchResult, error) {
	var res BatchResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		res = BatchResult{}
		lastSeq, stale, err := lockSite(ctx, tx, site, epoch)
		if err != nil {
			return err
		}
		if b.Sequence <= uint64(lastSeq) {
			res.Duplicate = true
			_, err := tx.Exec(ctx, `UPDATE sites SET last_seen_at = now() WHERE name = $1`, site)
			return err
		}
		n, err := s.applyDevices(ctx, tx, site, b)
		if err != nil {
			return err
		}
		res.RowsWritten += n
		if b.SnapshotID != "" && b.SnapshotFinal {
			n, err := s.markUnseenRemoved(ctx, tx, site, b.SnapshotID)
			if err != nil {
				return err
			}
			res.RowsWritten += n
		}
		if stale {
			n, err := s.recomputeSite(ctx, tx, site, false)
			if err != nil {
				return err
			}
			res.RowsWritten += n
		}
		_, err = tx.Exec(ctx, `UPDATE sites SET last_sequence = $2, last_batch_boot_id = boot_id, last_seen_at = now(), stale = false
			WHERE name = $1`, site, int64(b.Sequence))
		if err != nil {
			return fmt.Errorf("advance sequence of site %q: %w", site, err)
		}
		res.RowsWritten++
		return nil
	})
	if err != nil {
		return BatchResult{}, err
	}
	return res, nil
}

func (s *Store) applyDevices(ctx context.Context, tx pgx.Tx, site string, b Batch) (int, error) {
	if len(b.Devices) == 0 {
		return 0, nil
	}
	ids := make([]string, len(b.Devices))
	for i, d := range b.Devices {
		ids[i] = d.DeviceID
	}
	// Refuse the whole batch when any device is known under another site.
	var other string
	var otherSite string
	err := tx.QueryRow(ctx, `SELECT id::text, site FROM devices WHERE id = ANY($1::uuid[]) AND site <> $2 LIMIT 1`, ids, site).Scan(&other, &otherSite)
	if err == nil {
		return 0, fmt.Errorf("device %s is registered to site %q, not %q: %w", other, otherSite, site, ErrWrongSite)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("check device sites: %w", err)
	}

	// Upsert the device rows. A stored observed time more than MaxClockSkew
	// in the future (written before the link clamped satellite clocks)
	// counts as now, here and for conditions below, so it cannot freeze them.
	now := time.Now()
	rows := 0
	batch := &pgx.Batch{}
	for _, d := range b.Devices {
		var facts []byte
		name := ""
		if d.Facts != nil {
			facts, _ = json.Marshal(d.Facts)
			name = d.Facts.Name
		}
		var snap any
		if b.SnapshotID != "" {
			snap = b.SnapshotID
		}
		batch.Queue(`
			INSERT INTO devices (id, site, name, facts, observed_at, snapshot_id, removed, removed_at)
			VALUES ($1, $2, $3, COALESCE($4::jsonb, '{}'), $5, $6, $7, CASE WHEN $7 THEN now() END)
			ON CONFLICT (id) DO UPDATE SET
				name        = CASE WHEN $4::jsonb IS NULL THEN devices.name ELSE $3 END,
				facts       = COALESCE($4::jsonb, devices.facts),
				observed_at = GREATEST(CASE WHEN devices.observed_at > $8 THEN $9 ELSE devices.observed_at END, $5),
				snapshot_id = COALESCE($6, devices.snapshot_id),
				removed     = $7,
				removed_at  = CASE WHEN $7 THEN COALESCE(devices.removed_at, now()) END`,
			d.DeviceID, site, name, nullJSON(facts), d.ObservedTime, snap, d.Removed, now.Add(MaxClockSkew), now)
		rows++
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return 0, fmt.Errorf("upsert devices: %w", err)
	}

	// Merge conditions, never moving one backwards in observed time.
	current, err := loadConditions(ctx, tx, ids)
	if err != nil {
		return 0, err
	}
	batch = &pgx.Batch{}
	for _, d := range b.Devices {
		cur := current[d.DeviceID]
		if cur == nil {
			cur = map[condition.Type]condition.Condition{}
			current[d.DeviceID] = cur
		}
		for _, c := range d.Conditions {
			old, had := cur[c.Type]
			oldObserved := notFuture(old.ObservedTime, now)
			if had && c.ObservedTime.Before(oldObserved) {
				continue // older than what we have: a replay
			}
			if had && !c.ObservedTime.After(oldObserved) && old.SameObservation(c) {
				continue
			}
			if had && old.Status == c.Status {
				// Status unchanged: no transition, whatever time the
				// satellite proposes (a restarted one knows no earlier).
				c.LastTransitionTime = old.LastTransitionTime
			}
			cur[c.Type] = c
			batch.Queue(`
				INSERT INTO device_conditions (device_id, type, status, reason, message, last_transition_time, observed_time, observed_generation)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
				ON CONFLICT (device_id, type) DO UPDATE SET status = $3, reason = $4, message = $5,
					last_transition_time = $6, observed_time = $7, observed_generation = $8`,
				d.DeviceID, string(c.Type), string(c.Status), c.Reason, c.Message, c.LastTransitionTime, c.ObservedTime, c.ObservedGeneration)
			rows++
			if !had || !old.SameObservation(c) {
				batch.Queue(`
					INSERT INTO condition_history (device_id, type, status, reason, message, last_transition_time, observed_time)
					VALUES ($1, $2, $3, $4, $5, $6, $7)`,
					d.DeviceID, string(c.Type), string(c.Status), c.Reason, c.Message, c.LastTransitionTime, c.ObservedTime)
				rows++
			}
		}
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return 0, fmt.Errorf("write conditions: %w", err)
	}
	n, err := s.recomputeDevices(ctx, tx, ids, current)
	return rows + n, err
}

func nullJSON(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// markUnseenRemoved marks removed every live device of site that snapshot
// snapshotID did not mention.
func (s *Store) markUnseenRemoved(ctx context.Context, tx pgx.Tx, site, snapshotID string) (int, error) {
	rows, err := tx.Query(ctx, `
		UPDATE devices SET removed = true, removed_at = now()
		WHERE site = $1 AND NOT removed AND snapshot_id IS DISTINCT FROM $2
		RETURNING id::text`, site, snapshotID)
	if err != nil {
		return 0, fmt.Errorf("mark unseen devices removed: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("mark unseen devices removed: %w", err)
	}
	if len(ids) > 0 {
		s.log.Info("devices missing from snapshot marked removed", "site", site, "count", len(ids))
	}
	return len(ids), nil
}

func loadConditions(ctx context.Context, q pgx.Tx, ids []string) (map[string]map[condition.Type]condition.Condition, error) {
	rows, err := q.Query(ctx, `
		SELECT device_id::text, type, status, reason, message, last_transition_time, observed_time, observed_generation
		FROM device_conditions WHERE device_id = ANY($1::uuid[])`, ids)
	if err != nil {
		return nil, fmt.Errorf("load conditions: %w", err)
	}
	defer rows.Close()
	out := map[string]map[condition.Type]condition.Condition{}
	for rows.Next() {
		var id, typ, st string
		var c condition.Condition
		if err := rows.Scan(&id, &typ, &st, &c.Reason, &c.Message, &c.LastTransitionTime, &c.ObservedTime, &c.ObservedGeneration); err != nil {
			return nil, fmt.Errorf("load conditions: %w", err)
		}
		c.Type, c.Status = condition.Type(typ), condition.Status(st)
		if out[id] == nil {
			out[id] = map[condition.Type]condition.Condition{}
		}
		out[id][c.Type] = c
	}
	return out, rows.Err()
}

// recomputeSite re-derives the status of every device of site; stale says
// whether the site is now considered silent.
func (s *Store) recomputeSite(ctx context.Context, tx pgx.Tx, site string, stale bool) (int, error) {
	rows, err := tx.Query(ctx, `SELECT id::text FROM devices WHERE site = $1`, site)
	if err != nil {
		return 0, fmt.Errorf("list devices of site %q: %w", site, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("list devices of site %q: %w", site, err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	conds, err := loadConditions(ctx, tx, ids)
	if err != nil {
		return 0, err
	}
	return s.recomputeDevices(ctx, tx, ids, conds)
}

// recomputeDevices re-derives the operational status of ids from conds (the
// devices' current conditions), their desired impairment and their site's
// stale flag, and records every change in status_history.
func (s *Store) recomputeDevices(ctx context.Context, tx pgx.Tx, ids []string, conds map[string]map[condition.Type]condition.Condition) (int, error) {
	rows, err := tx.Query(ctx, `
		SELECT d.id::text, d.status, d.status_reason, d.desired_impairment, s.stale
		FROM devices d JOIN sites s ON s.name = d.site
		WHERE d.id = ANY($1::uuid[])`, ids)
	if err != nil {
		return 0, fmt.Errorf("load device states: %w", err)
	}
	type dev struct {
		id, status, reason, desired string
		stale                       bool
	}
	devs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dev, error) {
		var d dev
		err := r.Scan(&d.id, &d.status, &d.reason, &d.desired, &d.stale)
		return d, err
	})
	if err != nil {
		return 0, fmt.Errorf("load device states: %w", err)
	}
	batch := &pgx.Batch{}
	n := 0
	for _, d := range devs {
		c := conds[d.id]
		res := status.Derive(status.Input{
			Reported:    len(c) > 0,
			SiteStale:   d.stale,
			Quarantined: d.desired == string(ImpairmentQuarantined),
			Conditions:  c,
		})
		if string(res.Status) == d.status {
			if res.Reason != d.reason && res.Status != status.Unreachable {
				// Same status for another reason (say CleanFailed → DeployFailed):
				// keep the reason current; the history records status changes.
				batch.Queue(`UPDATE devices SET status_reason = $2 WHERE id = $1`, d.id, res.Reason)
				n++
			}
			continue
		}
		batch.Queue(`
			UPDATE devices SET status = $2, status_reason = $3, status_changed_at = now(),
				last_known_status = CASE WHEN $2 = 'UNREACHABLE' THEN status ELSE NULL END
			WHERE id = $1`, d.id, string(res.Status), res.Reason)
		batch.Queue(`INSERT INTO status_history (device_id, status, reason) VALUES ($1, $2, $3)`, d.id, string(res.Status), res.Reason)
		n += 2
	}
	if batch.Len() == 0 {
		return 0, nil
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return 0, fmt.Errorf("record status changes: %w", err)
	}
	return n, nil
}
