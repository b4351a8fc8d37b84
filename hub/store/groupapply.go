package store

import (
	"cmp"
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

// applyGroup commits items (a site's several in their order) in one
// transaction, retried whole on deadlock, serialization failure or errDeviceRace. Each item's
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
	// The status it is written with (see devRows) and the desired
	// impairment it was derived with.
	status, reason pgtype.Text
	changed        bool
	desired        string
}

// applyGroupTx is applyGroup inside tx, in three round trips and the
// commit:
//
//  1. Lock every site row of the group (FOR NO KEY UPDATE, by name, so
//     concurrent groups never deadlock) and, in the same round trip, read
//     the devices the batches name with their conditions. Sort the items
//     out: an unknown site is ErrNotFound, another epoch ErrFenced, a
//     sequence at or below the site's last a duplicate (it only records the
//     site as heard from); a batch naming a device of another site — or one
//     an earlier batch of the group creates for its own site — is
//     ErrWrongSite.
//  2. Merge the batches' conditions into the stored ones in Go (the rules
//     of ApplyBatch), derive each device's status with hub/status, and send
//     every write in one round trip: one statement per table over unnest()
//     arrays (sites; devices insert and update, each with its status;
//     device_conditions upsert; condition_history append; status_history
//     append; snapshot removal marking).
//  3. Rarely: devices whose desired impairment changed between the read
//     and the write, site-condition sets, and sites that were stale (every
//     device's status re-derived), in the same transaction.
func (s *Store) applyGroupTx(ctx context.Context, tx pgx.Tx, items []*groupItem) error {
	names := make([]string, 0, len(items))
	for _, it := range items {
		names = append(names, it.site)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	// The devices the batches name, read with their conditions in the
	// same round trip as the site locks, after them. The device rows are
	// not locked: the site locks keep every other ingest write away, and a
	// quarantine or release committed meanwhile is caught when the device
	// is written (see groupWrites.results).
	var ids []string
	for _, it := range items {
		if it.batch != nil {
			for _, d := range it.batch.Devices {
				ids = append(ids, d.DeviceID)
			}
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	rb := &pgx.Batch{}
	rb.Queue(`SELECT name, link_epoch, last_sequence, stale FROM sites
		WHERE name = ANY($1::text[]) ORDER BY name FOR NO KEY UPDATE`, names)
	if len(ids) > 0 {
		rb.Queue(loadDeviceStatesSQL, ids)
	}
	br := tx.SendBatch(ctx, rb)
	locked, err := readSiteLocks(br)
	if err != nil {
		br.Close()
		return err
	}
	states := map[string]devState{}
	current := map[string]map[condition.Type]condition.Condition{}
	if len(ids) > 0 {
		if err := readDeviceStates(br, states, current); err != nil {
			br.Close()
			return err
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("lock sites: %w", err)
	}

	// Sort the items out in order: a site's several items each meet the
	// site as the ones before them left it (sequence), and an item whose
	// prev (the write before it on its link) failed fails unwritten.
	var touch siteTouches
	var siteSets, applied []*groupItem
	var staleSites []string
	lastSeq := map[string]int64{}
	for n, l := range locked {
		lastSeq[n] = l.lastSeq
	}
	stale := map[string]bool{}
	claimed := map[string]string{} // device id → site of the batch creating it in this group
	for _, it := range items {
		l, ok := locked[it.site]
		switch {
		case it.prev != nil && it.prev.err != nil:
			it.err = afterFailed(it)
			continue
		case !ok:
			it.err = fmt.Errorf("site %q: %w", it.site, ErrNotFound)
			continue
		case l.epoch != it.epoch:
			it.err = fmt.Errorf("site %q epoch %d (current %d): %w", it.site, it.epoch, l.epoch, ErrFenced)
			continue
		case it.batch == nil:
			siteSets = append(siteSets, it)
			touch.add(it.site, nil, true)
			if l.stale && !stale[it.site] {
				stale[it.site] = true
				staleSites = append(staleSites, it.site)
			}
			continue
		case it.batch.Sequence <= uint64(lastSeq[it.site]):
			it.bres.Duplicate = true
			touch.add(it.site, nil, false)
			continue
		}
		// Refuse batches naming another site's devices.
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
		}
		applied = append(applied, it)
		lastSeq[it.site] = int64(it.batch.Sequence)
		touch.add(it.site, &it.batch.Sequence, true)
		if l.stale && !stale[it.site] {
			stale[it.site] = true
			staleSites = append(staleSites, it.site)
		}
	}

	w := s.groupWrites(applied, states, current)

	// One round trip for every write.
	batch := &pgx.Batch{}
	touch.queue(batch)
	w.queue(batch)
	br = tx.SendBatch(ctx, batch)
	raced, err := w.results(br, touch.len() > 0)
	if err != nil {
		br.Close()
		return err
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("write condition batches: %w", err)
	}
	for _, it := range applied {
		if n := w.removed[it.site]; n > 0 && it.batch.SnapshotID != "" && it.batch.SnapshotFinal {
			it.bres.RowsWritten += n
			s.log.Info("devices missing from snapshot marked removed", "site", it.site, "count", n)
		}
	}
	if len(raced) > 0 {
		// A quarantine or release committed between the read and the
		// write of these devices: derive their status again.
		if _, err := s.recomputeDevices(ctx, tx, raced, current); err != nil {
			return err
		}
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
				break
			}
		}
	}
	return nil
}

// readSiteLocks reads the result of the site lock query.
func readSiteLocks(br pgx.BatchResults) (map[string]siteLock, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("lock sites: %w", err)
	}
	defer rows.Close()
	locked := map[string]siteLock{}
	for rows.Next() {
		var n string
		var l siteLock
		if err := rows.Scan(&n, &l.epoch, &l.lastSeq, &l.stale); err != nil {
			return nil, fmt.Errorf("lock sites: %w", err)
		}
		locked[n] = l
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock sites: %w", err)
	}
	return locked, nil
}

// loadDeviceStatesSQL reads the devices $1 that exist (site, status,
// desired impairment) with their conditions (one row per condition).
const loadDeviceStatesSQL = `
	SELECT d.id::text, d.site, d.status, d.status_reason, d.desired_impairment,
		c.type, c.status, c.reason, c.message, c.last_transition_time, c.observed_time, c.observed_generation
	FROM devices d LEFT JOIN device_conditions c ON c.device_id = d.id
	WHERE d.id = ANY($1::uuid[])`

// readDeviceStates reads the result of loadDeviceStatesSQL into states
// and conds.
func readDeviceStates(br pgx.BatchResults, states map[string]devState, conds map[string]map[condition.Type]condition.Condition) error {
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("load devices: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var d devState
		var typ, st, reason, msg pgtype.Text
		var ltt, obs pgtype.Timestamptz
		var gen pgtype.Int8
		if err := rows.Scan(&id, &d.site, &d.status, &d.reason, &d.desired, &typ, &st, &reason, &msg, &ltt, &obs, &gen); err != nil {
			return fmt.Errorf("load devices: %w", err)
		}
		states[id] = d
		if !typ.Valid {
			continue
		}
		if conds[id] == nil {
			conds[id] = map[condition.Type]condition.Condition{}
		}
		conds[id][condition.Type(typ.String)] = condition.Condition{Type: condition.Type(typ.String), Status: condition.Status(st.String),
			Reason: reason.String, Message: msg.String, LastTransitionTime: ltt.Time, ObservedTime: obs.Time, ObservedGeneration: gen.Int64}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load devices: %w", err)
	}
	return nil
}

// siteTouches are the sites rows a group updates: every site heard from,
// advancing last_sequence (seq non-nil) and clearing stale (clear) as asked.
type siteTouches struct {
	index map[string]int
	names []string
	seqs  []pgtype.Int8
	clear []bool
}

func (t *siteTouches) add(site string, seq *uint64, clear bool) {
	v := pgtype.Int8{}
	if seq != nil {
		v = pgtype.Int8{Int64: int64(*seq), Valid: true}
	}
	// A site's several items in a group make one row: the highest
	// sequence applied, stale cleared when any item clears it.
	if i, ok := t.index[site]; ok {
		if v.Valid && (!t.seqs[i].Valid || v.Int64 > t.seqs[i].Int64) {
			t.seqs[i] = v
		}
		t.clear[i] = t.clear[i] || clear
		return
	}
	if t.index == nil {
		t.index = map[string]int{}
	}
	t.index[site] = len(t.names)
	t.names = append(t.names, site)
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

// devRows are device rows as unnest() arrays, with the status each is
// written with: status and reason null keep the stored ones; changed says
// the status itself changed (status_changed_at, last_known_status).
type devRows struct {
	ids, sites, names []string
	facts, snapshots  []pgtype.Text
	observed          []time.Time
	removed           []bool
	status, reason    []pgtype.Text
	changed           []bool
	// desired is the desired impairment each status was derived with.
	desired []string
}

func (r *devRows) add(d *devWrite) {
	r.ids = append(r.ids, d.id)
	r.sites = append(r.sites, d.site)
	r.names = append(r.names, d.name)
	r.facts = append(r.facts, d.facts)
	r.snapshots = append(r.snapshots, d.snapshot)
	r.observed = append(r.observed, d.observed)
	r.removed = append(r.removed, d.removed)
	r.status = append(r.status, d.status)
	r.reason = append(r.reason, d.reason)
	r.changed = append(r.changed, d.changed)
	r.desired = append(r.desired, d.desired)
}

// groupWrites is everything a group writes for its batches.
type groupWrites struct {
	now              time.Time
	inserts, updates devRows
	conds, history   condRows
	// statusHistory are the status_history rows (device, status, reason).
	statusHistory struct{ ids, statuses, reasons []string }
	unseen        struct{ sites, snapshots []string }
	// removed counts, per site, the devices the final snapshot parts
	// marked removed (filled by results).
	removed map[string]int
}

// groupWrites merges the applied batches into current (each device's
// stored conditions, updated in place) and derives the statuses of their
// devices from states (the rows read; absent: new devices) with
// hub/status.Derive. Per batch and device, in order, the rules of
// ApplyBatch:
//
//   - a condition older (observed time) than the stored one is a replay and
//     is dropped; a stored time more than MaxClockSkew ahead counts as now;
//   - one not newer and the same observation changes nothing;
//   - an unchanged status keeps the stored last_transition_time;
//   - every change of status, reason, message or generation is one
//     condition_history row;
//   - a changed operational status is one status_history row; a changed
//     reason alone updates the reason.
func (s *Store) groupWrites(applied []*groupItem, states map[string]devState, current map[string]map[condition.Type]condition.Condition) *groupWrites {
	w := &groupWrites{now: time.Now(), removed: map[string]int{}}
	// A device written by several batches of the group (a site's
	// consecutive batches) is one row per table: its merged device write
	// and its final conditions; its history rows are every batch's.
	devs := map[string]*devWrite{}
	var order []string
	touchedAll := map[string]map[condition.Type]bool{}
	for _, it := range applied {
		b := it.batch
		res := &it.bres
		res.RowsWritten++ // the sequence
		var snap pgtype.Text
		if b.SnapshotID != "" {
			snap = pgtype.Text{String: b.SnapshotID, Valid: true}
		}
		var batchOrder []string
		inBatch := map[string]bool{}
		touched := map[string]map[condition.Type]bool{}
		for _, d := range b.Devices {
			dw := devs[d.DeviceID]
			if dw == nil {
				_, exists := states[d.DeviceID]
				dw = &devWrite{id: d.DeviceID, site: it.site, exists: exists}
				devs[d.DeviceID] = dw
				order = append(order, d.DeviceID)
			}
			if !inBatch[d.DeviceID] {
				inBatch[d.DeviceID] = true
				batchOrder = append(batchOrder, d.DeviceID)
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
				if touchedAll[d.DeviceID] == nil {
					touchedAll[d.DeviceID] = map[condition.Type]bool{}
				}
				touchedAll[d.DeviceID][c.Type] = true
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
		for _, id := range batchOrder {
			dw := devs[id]
			st, ok := states[id]
			if !ok {
				st = devState{status: string(status.Unknown), reason: "NeverReported", desired: string(ImpairmentNone)}
			}
			// The site's stale flag is cleared by this group.
			var step devWrite
			changed := step.derive(st, current[id], false)
			dw.desired = step.desired
			if step.status.Valid {
				dw.status, dw.changed = step.status, true
				st.status = step.status.String
			}
			if step.reason.Valid {
				dw.reason = step.reason
				st.reason = step.reason.String
			}
			// The next batch of the group meets the device as this one
			// left it.
			st.site = it.site
			states[id] = st
			if changed {
				w.statusHistory.ids = append(w.statusHistory.ids, id)
				w.statusHistory.statuses = append(w.statusHistory.statuses, step.status.String)
				w.statusHistory.reasons = append(w.statusHistory.reasons, step.reason.String)
				res.RowsWritten++
			}
		}
		if b.SnapshotID != "" && b.SnapshotFinal {
			w.unseen.sites = append(w.unseen.sites, it.site)
			w.unseen.snapshots = append(w.unseen.snapshots, b.SnapshotID)
		}
	}
	for _, id := range order {
		dw := devs[id]
		types := make([]condition.Type, 0, len(touchedAll[id]))
		for t := range touchedAll[id] {
			types = append(types, t)
		}
		slices.Sort(types)
		for _, t := range types {
			w.conds.add(id, current[id][t])
		}
		if dw.exists {
			w.updates.add(dw)
		} else {
			w.inserts.add(dw)
		}
	}
	return w
}

// derive sets the status d is written with, from its stored state st and
// conditions c with the site's stale flag (the rules of recomputeDevices);
// it reports whether the status (not only its reason) changed.
func (d *devWrite) derive(st devState, c map[condition.Type]condition.Condition, stale bool) bool {
	d.desired = st.desired
	res := status.Derive(status.Input{
		Reported:    len(c) > 0,
		SiteStale:   stale,
		Quarantined: st.desired == string(ImpairmentQuarantined),
		Conditions:  c,
	})
	if string(res.Status) == st.status {
		if res.Reason != st.reason && res.Status != status.Unreachable {
			d.reason = pgtype.Text{String: res.Reason, Valid: true}
		}
		return false
	}
	d.status = pgtype.Text{String: string(res.Status), Valid: true}
	d.reason = pgtype.Text{String: res.Reason, Valid: true}
	d.changed = true
	return true
}

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
		INSERT INTO device_conditions (device_id, type, status, reason, message, last_transition_time, observed_time, observed_generation)
		SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::bigint[])
		ON CONFLICT (device_id, type) DO UPDATE SET
			status = EXCLUDED.status, reason = EXCLUDED.reason, message = EXCLUDED.message,
			last_transition_time = EXCLUDED.last_transition_time, observed_time = EXCLUDED.observed_time,
			observed_generation = EXCLUDED.observed_generation`
	groupAppendConditionHistory = `
		INSERT INTO condition_history (device_id, type, status, reason, message, last_transition_time, observed_time)
		SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[])`
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
// unnest() arrays.
func (w *groupWrites) queue(b *pgx.Batch) {
	if r := &w.inserts; len(r.ids) > 0 {
		b.Queue(groupInsertDevices, r.ids, r.sites, r.names, r.facts, r.observed, r.snapshots, r.removed, r.status, r.reason)
	}
	if r := &w.updates; len(r.ids) > 0 {
		b.Queue(groupUpdateDevices, r.ids, r.sites, r.names, r.facts, r.observed, r.snapshots, r.removed, r.status, r.reason, r.changed,
			w.now.Add(MaxClockSkew), w.now)
	}
	if r := &w.conds; len(r.ids) > 0 {
		b.Queue(groupUpsertConditions, r.ids, r.types, r.statuses, r.reasons, r.messages, r.transitions, r.observed, r.generations)
	}
	if r := &w.history; len(r.ids) > 0 {
		b.Queue(groupAppendConditionHistory, r.ids, r.types, r.statuses, r.reasons, r.messages, r.transitions, r.observed)
	}
	if r := &w.statusHistory; len(r.ids) > 0 {
		b.Queue(groupAppendStatusHistory, r.ids, r.statuses, r.reasons)
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

// statusRows are status changes as unnest() arrays: changed says the
// status itself changed (history row, changed_at, last_known_status);
// otherwise only the reason did.
type statusRows struct {
	ids, statuses, reasons []string
	changed                []bool
}

// derive adds the status change of device id, if any, from its stored
// state st and conditions c with the site's stale flag.
func (r *statusRows) derive(id string, st devState, c map[condition.Type]condition.Condition, stale bool) {
	var d devWrite
	if d.derive(st, c, stale) || d.reason.Valid {
		r.ids = append(r.ids, id)
		r.statuses = append(r.statuses, cmp.Or(d.status.String, st.status))
		r.reasons = append(r.reasons, d.reason.String)
		r.changed = append(r.changed, d.changed)
	}
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
	b.Queue(groupAppendStatusHistory, ids, statuses, reasons)
	return 2
}
