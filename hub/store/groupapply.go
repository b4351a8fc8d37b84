package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/internal/condition"
)

// errDeviceRace: a device this group inserts was inserted meanwhile by
// another transaction (another site's link on another replica); the group
// is retried, and then sees the row.
var errDeviceRace = errors.New("device inserted concurrently")

// applyGroup commits items (distinct sites) in one transaction, retried
// whole on deadlock, serialization failure or errDeviceRace. Each item's
// result or refusal is left in it; the error returned is the one that
// failed the transaction (then no item was written).
func (s *Store) applyGroup(ctx context.Context, items []*groupItem) error {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		err = s.inTx(ctx, func(tx pgx.Tx) error {
			for _, it := range items {
				it.bres, it.sres, it.err = BatchResult{}, SiteConditionsResult{}, nil
			}
			return s.applyGroupTx(ctx, tx, items)
		})
		if !errors.Is(err, errDeviceRace) {
			break
		}
	}
	return err
}

// siteLock is a site row as locked by a group.
type siteLock struct {
	epoch, lastSeq int64
	stale          bool
}

// devState is a device row's current status, read under the group's lock.
type devState struct {
	site, status, reason, desired string
}

// devWrite is one device row a group writes.
type devWrite struct {
	id, site, name string
	facts          pgtype.Text
	snapshot       pgtype.Text
	observed       time.Time
	removed        bool
	exists         bool
}

// applyGroupTx is applyGroup inside tx. In order:
//
//  1. Lock every site row of the group (FOR NO KEY UPDATE, by name, so
//     concurrent groups never deadlock) and sort the items out: an unknown
//     site is ErrNotFound, another epoch ErrFenced, a sequence at or below
//     the site's last a duplicate (it only records the site as heard from).
//  2. Lock the device rows the batches name (by id) and refuse, with
//     ErrWrongSite, a batch naming a device of another site — or one an
//     earlier batch of the group creates for its own site.
//  3. Merge the batches' conditions into the stored ones in Go (the rules
//     of ApplyBatch), derive each device's status with hub/status, and send
//     every write in one round trip: one statement per table over unnest()
//     arrays (sites, devices insert and update, device_conditions upsert,
//     condition_history append, snapshot removal marking, statuses and
//     status_history append).
//  4. Site-condition sets, and sites that were stale (every device's
//     status re-derived), follow in the same transaction.
func (s *Store) applyGroupTx(ctx context.Context, tx pgx.Tx, items []*groupItem) error {
	names := make([]string, 0, len(items))
	for _, it := range items {
		names = append(names, it.site)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	rows, err := tx.Query(ctx, `SELECT name, link_epoch, last_sequence, stale FROM sites
		WHERE name = ANY($1::text[]) ORDER BY name FOR NO KEY UPDATE`, names)
	if err != nil {
		return fmt.Errorf("lock sites: %w", err)
	}
	locked := map[string]siteLock{}
	for rows.Next() {
		var n string
		var l siteLock
		if err := rows.Scan(&n, &l.epoch, &l.lastSeq, &l.stale); err != nil {
			rows.Close()
			return fmt.Errorf("lock sites: %w", err)
		}
		locked[n] = l
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("lock sites: %w", err)
	}

	var touch siteTouches
	var batches, siteSets []*groupItem
	var staleSites []string
	for _, it := range items {
		l, ok := locked[it.site]
		switch {
		case !ok:
			it.err = fmt.Errorf("site %q: %w", it.site, ErrNotFound)
		case l.epoch != it.epoch:
			it.err = fmt.Errorf("site %q epoch %d (current %d): %w", it.site, it.epoch, l.epoch, ErrFenced)
		case it.batch == nil:
			siteSets = append(siteSets, it)
			touch.add(it.site, nil, true)
			if l.stale {
				staleSites = append(staleSites, it.site)
			}
		case it.batch.Sequence <= uint64(l.lastSeq):
			it.bres.Duplicate = true
			touch.add(it.site, nil, false)
		default:
			batches = append(batches, it)
		}
	}

	// Lock the named devices and refuse batches naming another site's.
	var ids []string
	for _, it := range batches {
		for _, d := range it.batch.Devices {
			ids = append(ids, d.DeviceID)
		}
	}
	states := map[string]devState{}
	if len(ids) > 0 {
		slices.Sort(ids)
		ids = slices.Compact(ids)
		rows, err := tx.Query(ctx, `SELECT id::text, site, status, status_reason, desired_impairment FROM devices
			WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE`, ids)
		if err != nil {
			return fmt.Errorf("lock devices: %w", err)
		}
		for rows.Next() {
			var id string
			var d devState
			if err := rows.Scan(&id, &d.site, &d.status, &d.reason, &d.desired); err != nil {
				rows.Close()
				return fmt.Errorf("lock devices: %w", err)
			}
			states[id] = d
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("lock devices: %w", err)
		}
	}
	claimed := map[string]string{} // device id → site of the batch creating it in this group
	applied := batches[:0:0]
	var appliedIDs []string
	for _, it := range batches {
		var bad error
		for _, d := range it.batch.Devices {
			if st, ok := states[d.DeviceID]; ok && st.site != it.site {
				bad = fmt.Errorf("device %s is registered to site %q, not %q: %w", d.DeviceID, st.site, it.site, ErrWrongSite)
				break
			}
			if other, ok := claimed[d.DeviceID]; ok && other != it.site {
				bad = fmt.Errorf("device %s is registered to site %q, not %q: %w", d.DeviceID, other, it.site, ErrWrongSite)
				break
			}
		}
		if bad != nil {
			it.err = bad
			continue
		}
		for _, d := range it.batch.Devices {
			if _, ok := states[d.DeviceID]; !ok {
				claimed[d.DeviceID] = it.site
			}
			appliedIDs = append(appliedIDs, d.DeviceID)
		}
		applied = append(applied, it)
		touch.add(it.site, &it.batch.Sequence, true)
		if locked[it.site].stale {
			staleSites = append(staleSites, it.site)
		}
	}

	current := map[string]map[condition.Type]condition.Condition{}
	if len(appliedIDs) > 0 {
		if current, err = loadConditions(ctx, tx, appliedIDs); err != nil {
			return err
		}
	}
	w := s.groupWrites(applied, states, current)

	// One round trip for every write.
	batch := &pgx.Batch{}
	touch.queue(batch)
	w.queue(batch)
	var removedQ, insertQ bool
	if len(w.unseen.sites) > 0 {
		removedQ = true
		batch.Queue(`
			WITH m AS (
				UPDATE devices d SET removed = true, removed_at = now()
				FROM unnest($1::text[], $2::text[]) AS u(site, snapshot_id)
				WHERE d.site = u.site AND NOT d.removed AND d.snapshot_id IS DISTINCT FROM u.snapshot_id
				RETURNING d.site)
			SELECT site, count(*) FROM m GROUP BY site`, w.unseen.sites, w.unseen.snapshots)
	}
	insertQ = len(w.inserts.ids) > 0
	br := tx.SendBatch(ctx, batch)
	if err := w.results(br, touch.len() > 0, insertQ); err != nil {
		br.Close()
		return err
	}
	if removedQ {
		rows, err := br.Query()
		if err != nil {
			br.Close()
			return fmt.Errorf("mark unseen devices removed: %w", err)
		}
		bySite := map[string]int{}
		for rows.Next() {
			var site string
			var n int
			if err := rows.Scan(&site, &n); err != nil {
				rows.Close()
				br.Close()
				return fmt.Errorf("mark unseen devices removed: %w", err)
			}
			bySite[site] = n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			br.Close()
			return fmt.Errorf("mark unseen devices removed: %w", err)
		}
		for _, it := range applied {
			if n := bySite[it.site]; n > 0 {
				it.bres.RowsWritten += n
				s.log.Info("devices missing from snapshot marked removed", "site", it.site, "count", n)
			}
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("write condition batches: %w", err)
	}

	for _, it := range siteSets {
		if it.sres, err = writeSiteConditions(ctx, tx, it.site, it.conds); err != nil {
			return err
		}
	}
	for _, site := range staleSites {
		// Being heard from ends a site's staleness (its flag was cleared
		// above): every device's status follows.
		n, err := s.recomputeSite(ctx, tx, site, false)
		if err != nil {
			return err
		}
		for _, it := range applied {
			if it.site == site {
				it.bres.RowsWritten += n
			}
		}
	}
	return nil
}

// siteTouches are the sites rows a group updates: every site heard from,
// advancing last_sequence (seq non-nil) and clearing stale (clear) as asked.
type siteTouches struct {
	names []string
	seqs  []pgtype.Int8
	clear []bool
}

func (t *siteTouches) add(site string, seq *uint64, clear bool) {
	t.names = append(t.names, site)
	v := pgtype.Int8{}
	if seq != nil {
		v = pgtype.Int8{Int64: int64(*seq), Valid: true}
	}
	t.seqs = append(t.seqs, v)
	t.clear = append(t.clear, clear)
}

func (t *siteTouches) len() int { return len(t.names) }

func (t *siteTouches) queue(b *pgx.Batch) {
	if t.len() == 0 {
		return
	}
	b.Queue(`
		UPDATE sites s SET
			last_sequence      = COALESCE(u.seq, s.last_sequence),
			last_batch_boot_id = CASE WHEN u.seq IS NULL THEN s.last_batch_boot_id ELSE s.boot_id END,
			last_seen_at       = now(),
			stale              = s.stale AND NOT u.clear
		FROM unnest($1::text[], $2::bigint[], $3::bool[]) AS u(name, seq, clear)
		WHERE s.name = u.name`, t.names, t.seqs, t.clear)
}

// condRows are condition rows as unnest() arrays.
type condRows struct {
	ids, types, statuses, reasons, messages []string
	transitions, observed                   []time.Time
	generations                             []int64
}

func (r *condRows) add(id string, c condition.Condition) {
	r.ids = append(r.ids, id)
	r.types = append(r.types, string(c.Type))
	r.statuses = append(r.statuses, string(c.Status))
	r.reasons = append(r.reasons, c.Reason)
	r.messages = append(r.messages, c.Message)
	r.transitions = append(r.transitions, c.LastTransitionTime)
	r.observed = append(r.observed, c.ObservedTime)
	r.generations = append(r.generations, c.ObservedGeneration)
}

// devRows are device rows as unnest() arrays.
type devRows struct {
	ids, sites, names []string
	facts, snapshots  []pgtype.Text
	observed          []time.Time
	removed           []bool
}

func (r *devRows) add(d *devWrite) {
	r.ids = append(r.ids, d.id)
	r.sites = append(r.sites, d.site)
	r.names = append(r.names, d.name)
	r.facts = append(r.facts, d.facts)
	r.snapshots = append(r.snapshots, d.snapshot)
	r.observed = append(r.observed, d.observed)
	r.removed = append(r.removed, d.removed)
}

// statusRows are status changes as unnest() arrays: changed says the
// status itself changed (history row, changed_at, last_known_status);
// otherwise only the reason did.
type statusRows struct {
	ids, statuses, reasons []string
	changed                []bool
}

// groupWrites is everything a group writes for its batches.
type groupWrites struct {
	now              time.Time
	inserts, updates devRows
	conds, history   condRows
	statuses         statusRows
	unseen           struct{ sites, snapshots []string }
	// statusQueued is how many status statements queue queued.
	statusQueued int
}

// groupWrites merges the applied batches into current (each device's
// stored conditions, updated in place) and derives the statuses of their
// devices from states (the locked rows; absent: new devices). Per batch
// and device, in order, the rules of ApplyBatch:
//
//   - a condition older (observed time) than the stored one is a replay and
//     is dropped; a stored time more than MaxClockSkew ahead counts as now;
//   - one not newer and the same observation changes nothing;
//   - an unchanged status keeps the stored last_transition_time;
//   - every change of status, reason, message or generation is one
//     condition_history row.
func (s *Store) groupWrites(applied []*groupItem, states map[string]devState, current map[string]map[condition.Type]condition.Condition) *groupWrites {
	w := &groupWrites{now: time.Now()}
	for _, it := range applied {
		b := it.batch
		res := &it.bres
		res.RowsWritten++ // the sequence
		var snap pgtype.Text
		if b.SnapshotID != "" {
			snap = pgtype.Text{String: b.SnapshotID, Valid: true}
		}
		devs := map[string]*devWrite{}
		var order []string
		touched := map[string]map[condition.Type]bool{}
		for _, d := range b.Devices {
			dw := devs[d.DeviceID]
			if dw == nil {
				_, exists := states[d.DeviceID]
				dw = &devWrite{id: d.DeviceID, site: it.site, exists: exists}
				devs[d.DeviceID] = dw
				order = append(order, d.DeviceID)
			}
			if d.Facts != nil {
				facts, _ := json.Marshal(d.Facts)
				dw.facts = pgtype.Text{String: string(facts), Valid: true}
				dw.name = d.Facts.Name
			}
			if snap.Valid {
				dw.snapshot = snap
			}
			if d.ObservedTime.After(dw.observed) {
				dw.observed = d.ObservedTime
			}
			dw.removed = d.Removed
			res.RowsWritten++

			cur := current[d.DeviceID]
			if cur == nil {
				cur = map[condition.Type]condition.Condition{}
				current[d.DeviceID] = cur
			}
			for _, c := range d.Conditions {
				old, had := cur[c.Type]
				oldObserved := notFuture(old.ObservedTime, w.now)
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
				if touched[d.DeviceID] == nil {
					touched[d.DeviceID] = map[condition.Type]bool{}
				}
				if !touched[d.DeviceID][c.Type] {
					touched[d.DeviceID][c.Type] = true
					res.RowsWritten++
				}
				if !had || !old.SameObservation(c) {
					w.history.add(d.DeviceID, c)
					res.RowsWritten++
				}
			}
		}
		for _, id := range order {
			dw := devs[id]
			if dw.exists {
				w.updates.add(dw)
			} else {
				w.inserts.add(dw)
			}
			types := make([]condition.Type, 0, len(touched[id]))
			for t := range touched[id] {
				types = append(types, t)
			}
			slices.Sort(types)
			for _, t := range types {
				w.conds.add(id, current[id][t])
			}
			st, ok := states[id]
			if !ok {
				st = devState{status: string(status.Unknown), reason: "NeverReported", desired: string(ImpairmentNone)}
			}
			// The site's stale flag is cleared by this group.
			if w.statuses.derive(id, st, current[id], false) {
				res.RowsWritten += 2
			}
		}
		if b.SnapshotID != "" && b.SnapshotFinal {
			w.unseen.sites = append(w.unseen.sites, it.site)
			w.unseen.snapshots = append(w.unseen.snapshots, b.SnapshotID)
		}
	}
	return w
}

// derive adds the status change of device id, if any, from its stored
// state st and conditions c with the site's stale flag; it reports whether
// the status (not only its reason) changed.
func (r *statusRows) derive(id string, st devState, c map[condition.Type]condition.Condition, stale bool) bool {
	res := status.Derive(status.Input{
		Reported:    len(c) > 0,
		SiteStale:   stale,
		Quarantined: st.desired == string(ImpairmentQuarantined),
		Conditions:  c,
	})
	if string(res.Status) == st.status {
		if res.Reason != st.reason && res.Status != status.Unreachable {
			// Same status for another reason (say CleanFailed → DeployFailed):
			// keep the reason current; the history records status changes.
			r.add(id, res, false)
		}
		return false
	}
	r.add(id, res, true)
	return true
}

func (r *statusRows) add(id string, res status.Result, changed bool) {
	r.ids = append(r.ids, id)
	r.statuses = append(r.statuses, string(res.Status))
	r.reasons = append(r.reasons, res.Reason)
	r.changed = append(r.changed, changed)
}

// queue queues the status updates and status_history rows; it returns how
// many statements it queued.
func (r *statusRows) queue(b *pgx.Batch) int {
	if len(r.ids) == 0 {
		return 0
	}
	b.Queue(`
		UPDATE devices d SET
			status            = u.status,
			status_reason     = u.reason,
			status_changed_at = CASE WHEN u.changed THEN now() ELSE d.status_changed_at END,
			last_known_status = CASE WHEN NOT u.changed THEN d.last_known_status
			                         WHEN u.status = 'UNREACHABLE' THEN d.status END
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bool[]) AS u(id, status, reason, changed)
		WHERE d.id = u.id`, r.ids, r.statuses, r.reasons, r.changed)
	var ids, statuses, reasons []string
	for i, ch := range r.changed {
		if ch {
			ids = append(ids, r.ids[i])
			statuses = append(statuses, r.statuses[i])
			reasons = append(reasons, r.reasons[i])
		}
	}
	if len(ids) == 0 {
		return 1
	}
	b.Queue(`INSERT INTO status_history (device_id, status, reason)
		SELECT id, status, reason FROM unnest($1::uuid[], $2::text[], $3::text[]) AS u(id, status, reason)`, ids, statuses, reasons)
	return 2
}

// queue queues the device, condition, history and status writes, in the
// order the foreign keys need.
func (w *groupWrites) queue(b *pgx.Batch) {
	if len(w.inserts.ids) > 0 {
		r := &w.inserts
		b.Queue(`
			INSERT INTO devices (id, site, name, facts, observed_at, snapshot_id, removed, removed_at)
			SELECT u.id, u.site, u.name, COALESCE(u.facts::jsonb, '{}'), u.observed_at, u.snapshot_id, u.removed,
				CASE WHEN u.removed THEN now() END
			FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::bool[])
				AS u(id, site, name, facts, observed_at, snapshot_id, removed)
			ON CONFLICT (id) DO NOTHING`, r.ids, r.sites, r.names, r.facts, r.observed, r.snapshots, r.removed)
	}
	if len(w.updates.ids) > 0 {
		r := &w.updates
		b.Queue(`
			UPDATE devices d SET
				name        = CASE WHEN u.facts IS NULL THEN d.name ELSE u.name END,
				facts       = COALESCE(u.facts::jsonb, d.facts),
				observed_at = GREATEST(CASE WHEN d.observed_at > $8 THEN $9 ELSE d.observed_at END, u.observed_at),
				snapshot_id = COALESCE(u.snapshot_id, d.snapshot_id),
				removed     = u.removed,
				removed_at  = CASE WHEN u.removed THEN COALESCE(d.removed_at, now()) END
			FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::bool[])
				AS u(id, site, name, facts, observed_at, snapshot_id, removed)
			WHERE d.id = u.id`, r.ids, r.sites, r.names, r.facts, r.observed, r.snapshots, r.removed,
			w.now.Add(MaxClockSkew), w.now)
	}
	if len(w.conds.ids) > 0 {
		r := &w.conds
		b.Queue(`
			INSERT INTO device_conditions (device_id, type, status, reason, message, last_transition_time, observed_time, observed_generation)
			SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::bigint[])
			ON CONFLICT (device_id, type) DO UPDATE SET
				status = EXCLUDED.status, reason = EXCLUDED.reason, message = EXCLUDED.message,
				last_transition_time = EXCLUDED.last_transition_time, observed_time = EXCLUDED.observed_time,
				observed_generation = EXCLUDED.observed_generation`,
			r.ids, r.types, r.statuses, r.reasons, r.messages, r.transitions, r.observed, r.generations)
	}
	if len(w.history.ids) > 0 {
		r := &w.history
		b.Queue(`
			INSERT INTO condition_history (device_id, type, status, reason, message, last_transition_time, observed_time)
			SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[])`,
			r.ids, r.types, r.statuses, r.reasons, r.messages, r.transitions, r.observed)
	}
	w.statusQueued = w.statuses.queue(b)
}

// results reads the results of what queue queued (after the sites update
// when touched): an insert that lost a device to a concurrent insert is
// errDeviceRace.
func (w *groupWrites) results(br pgx.BatchResults, touched, inserted bool) error {
	if touched {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("update sites: %w", err)
		}
	}
	if inserted {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("insert devices: %w", err)
		}
		if int(tag.RowsAffected()) != len(w.inserts.ids) {
			return errDeviceRace
		}
	}
	steps := []struct {
		ok   bool
		what string
	}{
		{len(w.updates.ids) > 0, "update devices"},
		{len(w.conds.ids) > 0, "upsert conditions"},
		{len(w.history.ids) > 0, "append condition history"},
		{w.statusQueued > 0, "record status changes"},
		{w.statusQueued > 1, "append status history"},
	}
	for _, st := range steps {
		if !st.ok {
			continue
		}
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("%s: %w", st.what, err)
		}
	}
	return nil
}
