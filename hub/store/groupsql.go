package store

import (
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Statement order follows the foreign keys: devices first.
const (
	groupInsertDevices = `
		INSERT INTO devices (id, site, name, facts, observed_at, snapshot_id, removed, removed_at, status, status_reason)
		SELECT u.id, u.site, u.name, COALESCE(u.facts::jsonb, '{}'), u.observed_at, u.snapshot_id, u.removed,
			CASE WHEN u.removed THEN now() END, COALESCE(u.status, 'UNKNOWN'), COALESCE(u.reason, 'NeverReported')
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::bool[], $8::text[], $9::text[])
			AS u(id, site, name, facts, observed_at, snapshot_id, removed, status, reason)
		ON CONFLICT (id) DO NOTHING`
	groupUpdateDevices = `
		UPDATE devices d SET
			name              = CASE WHEN u.facts IS NULL THEN d.name ELSE u.name END,
			facts             = COALESCE(u.facts::jsonb, d.facts),
			observed_at       = GREATEST(CASE WHEN d.observed_at > $11 THEN $12 ELSE d.observed_at END, u.observed_at),
			snapshot_id       = COALESCE(u.snapshot_id, d.snapshot_id),
			removed           = u.removed,
			removed_at        = CASE WHEN u.removed THEN COALESCE(d.removed_at, now()) END,
			status            = COALESCE(u.status, d.status),
			status_reason     = COALESCE(u.reason, d.status_reason),
			status_changed_at = CASE WHEN u.changed THEN now() ELSE d.status_changed_at END,
			last_known_status = CASE WHEN NOT u.changed THEN d.last_known_status
			                         WHEN u.status = 'UNREACHABLE' THEN d.status END
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::bool[], $8::text[], $9::text[], $10::bool[])
			AS u(id, site, name, facts, observed_at, snapshot_id, removed, status, reason, changed)
		WHERE d.id = u.id
		RETURNING d.id::text, d.desired_impairment`
	groupUpsertConditions = `
		INSERT INTO device_conditions (device_id, type, status, reason, message, last_transition_time, observed_time, observed_generation,
			health, expire_at)
		SELECT u.id, u.type, u.status, u.reason, u.message, u.ltt, u.obs, u.gen, u.health::jsonb, u.expire
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::bigint[],
			$9::text[], $10::timestamptz[]) AS u(id, type, status, reason, message, ltt, obs, gen, health, expire)
		ON CONFLICT (device_id, type) DO UPDATE SET
			status = EXCLUDED.status, reason = EXCLUDED.reason, message = EXCLUDED.message,
			last_transition_time = EXCLUDED.last_transition_time, observed_time = EXCLUDED.observed_time,
			observed_generation = EXCLUDED.observed_generation, health = EXCLUDED.health, expire_at = EXCLUDED.expire_at`
	groupAppendConditionHistory = `
		INSERT INTO condition_history (device_id, type, status, reason, message, last_transition_time, observed_time, health)
		SELECT u.id, u.type, u.status, u.reason, u.message, u.ltt, u.obs, u.health::jsonb
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::text[])
			AS u(id, type, status, reason, message, ltt, obs, health)`
	groupAppendStatusHistory = `
		INSERT INTO status_history (device_id, status, reason)
		SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[])`
	groupMarkUnseen = `
		WITH m AS (
			UPDATE devices d SET removed = true, removed_at = now()
			FROM unnest($1::text[], $2::text[]) AS u(site, snapshot_id)
			WHERE d.site = u.site AND NOT d.removed AND d.snapshot_id IS DISTINCT FROM u.snapshot_id
			RETURNING d.site)
		SELECT site, count(*) FROM m GROUP BY site`
)

// queue queues the group's writes, one statement per table, each over
// unnest() arrays. The devices update comes last but for the snapshot's
// removal marking (which reads the snapshot ids it sets): from that
// statement on, the group holds its devices' row locks until it commits,
// and a quarantine, release or command result of one of them waits, so
// the history appends run before it, not inside that window.
func (w *groupWrites) queue(b *pgx.Batch) {
	if r := &w.inserts; len(r.ids) > 0 {
		b.Queue(groupInsertDevices, r.ids, r.sites, r.names, r.facts, r.observed, r.snapshots, r.removed, r.status, r.reason)
	}
	if r := &w.conds; len(r.ids) > 0 {
		b.Queue(groupUpsertConditions, r.ids, r.types, r.statuses, r.reasons, r.messages, r.transitions, r.observed, r.generations,
			r.health, r.expire)
	}
	if r := &w.history; len(r.ids) > 0 {
		b.Queue(groupAppendConditionHistory, r.ids, r.types, r.statuses, r.reasons, r.messages, r.transitions, r.observed, r.health)
	}
	if r := &w.statusHistory; len(r.ids) > 0 {
		b.Queue(groupAppendStatusHistory, r.ids, r.statuses, r.reasons)
	}
	if r := &w.updates; len(r.ids) > 0 {
		b.Queue(groupUpdateDevices, r.ids, r.sites, r.names, r.facts, r.observed, r.snapshots, r.removed, r.status, r.reason, r.changed,
			w.now.Add(MaxClockSkew), w.now)
	}
	if len(w.unseen.sites) > 0 {
		b.Queue(groupMarkUnseen, w.unseen.sites, w.unseen.snapshots)
	}
}

// results reads the results of what queue queued (after the sites update
// when touched). It returns the devices whose desired impairment changed
// between the read and the write (their status must be derived again); an
// insert that lost a device to a concurrent insert is errDeviceRace.
func (w *groupWrites) results(br pgx.BatchResults, touched bool) (raced []string, err error) {
	if touched {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("update sites: %w", err)
		}
	}
	if len(w.inserts.ids) > 0 {
		tag, err := br.Exec()
		if err != nil {
			return nil, fmt.Errorf("insert devices: %w", err)
		}
		if int(tag.RowsAffected()) != len(w.inserts.ids) {
			return nil, errDeviceRace
		}
	}
	steps := []struct {
		ok   bool
		what string
	}{
		{len(w.conds.ids) > 0, "upsert conditions"},
		{len(w.history.ids) > 0, "append condition history"},
		{len(w.statusHistory.ids) > 0, "append status history"},
	}
	for _, st := range steps {
		if !st.ok {
			continue
		}
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("%s: %w", st.what, err)
		}
	}
	if raced, err = w.updateResults(br); err != nil {
		return nil, err
	}
	if len(w.unseen.sites) > 0 {
		rows, err := br.Query()
		if err != nil {
			return nil, fmt.Errorf("mark unseen devices removed: %w", err)
		}
		for rows.Next() {
			var site string
			var n int
			if err := rows.Scan(&site, &n); err != nil {
				rows.Close()
				return nil, fmt.Errorf("mark unseen devices removed: %w", err)
			}
			w.removed[site] = n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("mark unseen devices removed: %w", err)
		}
	}
	return raced, nil
}

// updateResults reads the devices update's result: the devices whose
// desired impairment is not the one their status was derived with.
func (w *groupWrites) updateResults(br pgx.BatchResults) (raced []string, err error) {
	if len(w.updates.ids) > 0 {
		rows, err := br.Query()
		if err != nil {
			return nil, fmt.Errorf("update devices: %w", err)
		}
		want := make(map[string]string, len(w.updates.ids))
		for i, id := range w.updates.ids {
			want[id] = w.updates.desired[i]
		}
		for rows.Next() {
			var id, desired string
			if err := rows.Scan(&id, &desired); err != nil {
				rows.Close()
				return nil, fmt.Errorf("update devices: %w", err)
			}
			if want[id] != desired {
				raced = append(raced, id)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("update devices: %w", err)
		}
	}
	return raced, nil
}
