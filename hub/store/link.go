package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ironlink/ironlink/internal/condition"
)

// OpenLink records a new link for h.Site on replica h.Replica: it creates the
// site on first contact, bumps the site's fencing epoch (so any older link's
// writes are refused from now on) and returns the new epoch with the last
// committed sequence. When the last batch was committed by another
// satellite process (h.BootID differs from a non-empty
// last_batch_boot_id), the new process cannot resume and sends a snapshot:
// the site's snapshot_due is set until a group applies its final part, and
// until then the policy's evidence is not fresh (SiteEvidence.SnapshotDue).
// While it is set, the session names no process as the last batch's
// (LastSequenceBootID ""), so whichever process links next sends a
// snapshot too, even the one whose batches the hub holds (it would resume
// otherwise, and the flag would never clear).
func (s *Store) OpenLink(ctx context.Context, h LinkHello) (LinkSession, error) {
	var sess LinkSession
	var last int64
	caps := h.Capabilities
	if caps == nil {
		caps = []string{}
	}
	// prev is the row as it was before this statement (a CTE reads the
	// statement's snapshot): the link this one replaces, if one was open.
	var ageSeconds float64
	err := s.pool.QueryRow(ctx, `
		WITH prev AS (SELECT boot_id, link_replica, extract(epoch FROM now() - link_connected_at)::float8 AS age
			FROM sites WHERE name = $1 AND link_replica IS NOT NULL)
		INSERT INTO sites (name, link_epoch, link_replica, link_connected_at, last_seen_at, boot_id, satellite_version, capabilities)
		VALUES ($1, 1, $2, now(), now(), $3, $4, $5)
		ON CONFLICT (name) DO UPDATE SET
			link_epoch = sites.link_epoch + 1, link_replica = $2, link_connected_at = now(),
			last_seen_at = now(), boot_id = $3, satellite_version = $4, capabilities = $5,
			snapshot_due = sites.snapshot_due OR (sites.last_batch_boot_id <> '' AND sites.last_batch_boot_id <> $3)
		RETURNING link_epoch, last_sequence, CASE WHEN snapshot_due THEN '' ELSE last_batch_boot_id END,
			EXISTS (SELECT FROM prev), COALESCE((SELECT boot_id FROM prev), ''),
			COALESCE((SELECT link_replica FROM prev), ''), COALESCE((SELECT age FROM prev), 0)`,
		h.Site, h.Replica, h.BootID, h.Version, caps).Scan(&sess.Epoch, &last, &sess.LastSequenceBootID,
		&sess.Replaced.Open, &sess.Replaced.BootID, &sess.Replaced.Replica, &ageSeconds)
	sess.Replaced.Age = time.Duration(ageSeconds * float64(time.Second))
	if err != nil {
		return LinkSession{}, fmt.Errorf("open link for site %q: %w", h.Site, err)
	}
	sess.LastSequence = uint64(last)
	if err := s.refreshStaleness(ctx, h.Site); err != nil {
		return LinkSession{}, err
	}
	if err := s.healAppliedGenerations(ctx, h.Site); err != nil {
		return LinkSession{}, err
	}
	return sess, nil
}

// healAppliedGenerations sets the applied generation of every device of
// site whose desired generation's command SUCCEEDED but whose row does not
// say so: RecordResult writes the device row after the command's commit
// when a condition group held it, and a replica killed in between leaves
// it behind. The last command error is cleared as a success clears it.
// It reads only the site's devices whose applied generation lags their
// desired one, each with its command by (device_id, generation).
func (s *Store) healAppliedGenerations(ctx context.Context, site string) error {
	tag, err := s.pool.Exec(ctx, `
		UPDATE devices d SET applied_generation = d.desired_generation,
			last_command_error = '', last_command_failure_class = '', last_command_failure_reason = ''
		FROM commands c
		WHERE d.site = $1 AND d.applied_generation < d.desired_generation
			AND c.device_id = d.id AND c.generation = d.desired_generation AND c.state = 'SUCCEEDED'`, site)
	if err != nil {
		return fmt.Errorf("heal applied generations of site %q: %w", site, err)
	}
	if n := tag.RowsAffected(); n > 0 {
		s.log.Warn("applied generations healed from succeeded commands", "site", site, "devices", n)
	}
	return nil
}

// CloseLink records that the link with epoch closed; a newer link is left alone.
func (s *Store) CloseLink(ctx context.Context, site string, epoch int64) error {
	_, err := s.pool.Exec(ctx, `UPDATE sites SET link_replica = NULL WHERE name = $1 AND link_epoch = $2`, site, epoch)
	if err != nil {
		return fmt.Errorf("close link for site %q: %w", site, err)
	}
	return nil
}

// ApplyBatch commits b for site under the link's epoch, in one transaction
// with whatever other batches and site-condition sets of this Store wait
// at the same time (group commit: see group.go); it returns once that
// transaction committed. Sequences at or below the site's last committed
// sequence are recognised as duplicates and change nothing. Conditions
// older (by observed time) than the stored ones are ignored, so a replay
// never moves a condition backwards; a stored observed time more than
// MaxClockSkew in the future counts as now. When b is the final part of a
// snapshot, every device of the site that no part of that snapshot
// mentioned is marked removed. A refused batch changes nothing, and never
// fails another site's batch of the same group.
//
// Errors: ErrFenced (a newer link exists), ErrNotFound (no such site),
// ErrWrongSite (a device is known under another site; nothing is written),
// database errors, the context's error when ctx ends first (the batch may
// then still commit).
func (s *Store) ApplyBatch(ctx context.Context, site string, epoch int64, b Batch) (BatchResult, error) {
	it := &groupItem{site: site, epoch: epoch, batch: &b}
	if err := s.group.submit(ctx, s, it); err != nil {
		return BatchResult{}, err
	}
	return it.bres, nil
}

// loadConditionsSQL reads the conditions of the devices $1 (uuid[]) in
// scanConditions' column order.
const loadConditionsSQL = `
	SELECT device_id::text, type, status, reason, message, last_transition_time, observed_time, observed_generation, health::text
	FROM device_conditions WHERE device_id = ANY($1::uuid[])`

func loadConditions(ctx context.Context, q pgx.Tx, ids []string) (map[string]map[condition.Type]condition.Condition, error) {
	rows, err := q.Query(ctx, loadConditionsSQL, ids)
	if err != nil {
		return nil, fmt.Errorf("load conditions: %w", err)
	}
	return scanConditions(rows)
}

// scanConditions reads rows of device_id, type, status, reason, message,
// last_transition_time, observed_time, observed_generation, health (as
// loadConditions selects them) into conditions per device, and closes rows.
func scanConditions(rows pgx.Rows) (map[string]map[condition.Type]condition.Condition, error) {
	defer rows.Close()
	out := map[string]map[condition.Type]condition.Condition{}
	for rows.Next() {
		var id, typ, st string
		var c condition.Condition
		var health pgtype.Text
		if err := rows.Scan(&id, &typ, &st, &c.Reason, &c.Message, &c.LastTransitionTime, &c.ObservedTime, &c.ObservedGeneration, &health); err != nil {
			return nil, fmt.Errorf("load conditions: %w", err)
		}
		c.Type, c.Status, c.Health = condition.Type(typ), condition.Status(st), decodeHealth(health)
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
// stale flag (hub/status.Derive, in Go), and records every change with one
// UPDATE and one status_history INSERT over unnest() arrays.
func (s *Store) recomputeDevices(ctx context.Context, tx pgx.Tx, ids []string, conds map[string]map[condition.Type]condition.Condition) (int, error) {
	rows, err := tx.Query(ctx, `
		SELECT d.id::text, d.status, d.status_reason, d.desired_impairment, s.stale
		FROM devices d JOIN sites s ON s.name = d.site
		WHERE d.id = ANY($1::uuid[])`, ids)
	if err != nil {
		return 0, fmt.Errorf("load device states: %w", err)
	}
	type dev struct {
		id    string
		st    devState
		stale bool
	}
	devs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dev, error) {
		var d dev
		err := r.Scan(&d.id, &d.st.status, &d.st.reason, &d.st.desired, &d.stale)
		return d, err
	})
	if err != nil {
		return 0, fmt.Errorf("load device states: %w", err)
	}
	var changes statusRows
	for _, d := range devs {
		changes.derive(d.id, d.st, conds[d.id], d.stale)
	}
	batch := &pgx.Batch{}
	n := changes.queue(batch)
	if n == 0 {
		return 0, nil
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return 0, fmt.Errorf("record status changes: %w", err)
	}
	written := 0
	for _, ch := range changes.changed {
		written++
		if ch {
			written++
		}
	}
	return written, nil
}
