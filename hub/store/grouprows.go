package store

import (
	"cmp"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ironlink/ironlink/internal/condition"
)

// siteTouches are the sites rows a group updates: every site heard from,
// advancing last_sequence (seq non-nil), clearing stale (clear) as asked,
// and snapshot_due for a site whose final snapshot part the group applies
// (snapped).
type siteTouches struct {
	index   map[string]int
	names   []string
	seqs    []pgtype.Int8
	clear   []bool
	snapped []bool
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
	t.snapped = append(t.snapped, false)
}

// snapshotApplied notes that the group applies a final snapshot part of
// site (already added): its snapshot_due is cleared (see OpenLink).
func (t *siteTouches) snapshotApplied(site string) {
	if i, ok := t.index[site]; ok {
		t.snapped[i] = true
	}
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
			stale              = s.stale AND NOT u.clear,
			snapshot_due       = s.snapshot_due AND NOT u.snapped
		FROM unnest($1::text[], $2::bigint[], $3::bool[], $4::bool[]) AS u(name, seq, clear, snapped)
		WHERE s.name = u.name`, t.names, t.seqs, t.clear, t.snapped)
}

// condRows are condition rows as unnest() arrays.
type condRows struct {
	ids, types, statuses, reasons, messages []string
	transitions, observed                   []time.Time
	generations                             []int64
	// health is the health detail as JSON and expire its expire time,
	// null on the fixed conditions.
	health []pgtype.Text
	expire []pgtype.Timestamptz
}

// grow makes room for n more rows, so that a snapshot part's thousands
// of rows do not regrow every array as they are added.
func (r *condRows) grow(n int) {
	r.ids = slices.Grow(r.ids, n)
	r.types = slices.Grow(r.types, n)
	r.statuses = slices.Grow(r.statuses, n)
	r.reasons = slices.Grow(r.reasons, n)
	r.messages = slices.Grow(r.messages, n)
	r.transitions = slices.Grow(r.transitions, n)
	r.observed = slices.Grow(r.observed, n)
	r.generations = slices.Grow(r.generations, n)
	r.health = slices.Grow(r.health, n)
	r.expire = slices.Grow(r.expire, n)
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
	h, exp := healthColumns(c.Health)
	r.health = append(r.health, h)
	r.expire = append(r.expire, exp)
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
