package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/internal/condition"
)

// ErrHistoryExpired: an as_of time before the history horizon (retention
// has dropped the partitions that held it; see HistoryHorizon).
var ErrHistoryExpired = errors.New("history before this time has been dropped by retention")

// ErrAsOfUnsupported: a filter that cannot be answered as of a past time
// (it reads facts, which have no history).
var ErrAsOfUnsupported = errors.New("filter has no history to answer as of a past time")

// Status reasons of a device as of a time for which no status history row
// exists (see asOfColumns).
const (
	// ReasonHistoryExpired: the device's status at the time was recorded
	// before the history horizon, in a partition retention dropped.
	ReasonHistoryExpired = "HistoryExpired"
)

// asOfColumns with asOfFrom read devices (alias d) as they were at $1 (timestamptz), with
// $2 the history horizon (timestamptz, NULL when nothing was dropped), in
// the column order of scanDevice. What each column is as of $1:
//   - status, status_reason, status_changed_at: the newest status_history
//     row recorded at or before $1 (ties: the higher id); without one, the
//     device's current status when it has held since at or before $1,
//     else UNKNOWN with reason NeverReported (no status was derived yet at
//     $1) or HistoryExpired (the row was in a dropped partition);
//   - last_known_status: for UNREACHABLE, the status of the row before;
//   - removed, removed_at: removed_at at or before $1 (a device removed and
//     later seen again has no removal recorded: it counts as present);
//   - desired_impairment, desired_generation: the newest impairment_history
//     row changed at or before $1 (NONE, 0 without one);
//   - applied_generation: the highest generation of a command of the device
//     that SUCCEEDED at or before $1;
//   - observed_at, last_command_error and its class and reason, drift
//     corrections: not recorded over time, so empty/zero;
//   - id, site, name, facts: the current values (they have no history).
const asOfColumns = `d.id::text, d.site, d.name, d.facts,
		d.removed_at IS NOT NULL AND d.removed_at <= $1,
		CASE WHEN d.removed_at <= $1 THEN d.removed_at END,
		NULL::timestamptz,
		COALESCE(sh.status, CASE WHEN d.status_changed_at <= $1 THEN d.status ELSE 'UNKNOWN' END),
		COALESCE(sh.reason, CASE WHEN d.status_changed_at <= $1 THEN d.status_reason
			WHEN $2::timestamptz IS NOT NULL AND d.first_seen_at < $2 THEN 'HistoryExpired' ELSE 'NeverReported' END),
		COALESCE(sh.changed_at, CASE WHEN d.status_changed_at <= $1 THEN d.status_changed_at
			WHEN $2::timestamptz IS NOT NULL AND d.first_seen_at < $2 THEN $2 ELSE d.first_seen_at END),
		COALESCE(lk.status, ''),
		COALESCE(ih.desired, 'NONE'), COALESCE(ih.generation, 0), COALESCE(ap.generation, 0),
		'', 0::bigint, '', NULL::timestamptz, '', ''`

const asOfFrom = `
	FROM devices d
	LEFT JOIN LATERAL (
		SELECT h.id, h.status, h.reason, h.changed_at FROM status_history h
		WHERE h.device_id = d.id AND h.changed_at <= $1
		ORDER BY h.changed_at DESC, h.id DESC LIMIT 1) sh ON true
	LEFT JOIN LATERAL (
		SELECT h.status FROM status_history h
		WHERE sh.status = 'UNREACHABLE' AND h.device_id = d.id AND h.changed_at <= sh.changed_at
			AND (h.changed_at, h.id) < (sh.changed_at, sh.id)
		ORDER BY h.changed_at DESC, h.id DESC LIMIT 1) lk ON true
	LEFT JOIN LATERAL (
		SELECT h.desired, h.generation FROM impairment_history h
		WHERE h.device_id = d.id AND h.changed_at <= $1
		ORDER BY h.changed_at DESC, h.id DESC LIMIT 1) ih ON true
	LEFT JOIN LATERAL (
		SELECT max(c.generation) AS generation FROM commands c
		WHERE c.device_id = d.id AND c.state = 'SUCCEEDED' AND c.completed_at <= $1) ap ON true`

// asOfArgs checks asOf against the history horizon and returns the first
// two query arguments of asOfColumns. Errors: ErrHistoryExpired.
func (s *Store) asOfArgs(ctx context.Context, asOf time.Time) ([]any, error) {
	h, err := s.HistoryHorizon(ctx)
	if err != nil {
		return nil, err
	}
	if !h.IsZero() && asOf.Before(h) {
		return nil, fmt.Errorf("as of %s: the oldest history kept starts at %s: %w",
			asOf.UTC().Format(time.RFC3339), h.UTC().Format(time.RFC3339), ErrHistoryExpired)
	}
	var horizon any
	if !h.IsZero() {
		horizon = h
	}
	return []any{asOf, horizon}, nil
}

// listDevicesAsOf is ListDevices for f.AsOf: devices first seen at or
// before f.AsOf, in id order, as asOfColumns describes them, filtered on
// those values (statuses, impairments, removed as of f.AsOf; site, sites
// and names on the current values). Errors: ErrHistoryExpired,
// ErrAsOfUnsupported (f.InstanceMismatch).
func (s *Store) listDevicesAsOf(ctx context.Context, f DeviceFilter) ([]Device, bool, error) {
	if f.InstanceMismatch {
		return nil, false, fmt.Errorf("instance_mismatch reads facts: %w", ErrAsOfUnsupported)
	}
	if len(f.Labels) > 0 {
		return nil, false, fmt.Errorf("labels have no history: %w", ErrAsOfUnsupported)
	}
	args, err := s.asOfArgs(ctx, f.AsOf)
	if err != nil {
		return nil, false, err
	}
	sts, imps := f.textArrays()
	args = append(args, f.Site, sts, f.IncludeRemoved, f.After, f.Limit+1, imps, f.Sites, f.NameLike, f.NameLike2)
	var devs []Device
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The plan's cost grows with the devices walked, past PostgreSQL's
		// jit_above_cost at a few thousand: JIT compilation then costs
		// seconds for a query that runs in milliseconds.
		// Its filters are "($3 = '' OR d.site = $3)"-style: planned for
		// the values given each time, never generically (a generic plan
		// walks every device of the fleet for one site's page).
		if _, err := tx.Exec(ctx, `SELECT set_config('jit', 'off', true), set_config('plan_cache_mode', 'force_custom_plan', true)`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
		SELECT a.id, a.site, a.name, a.facts, a.removed, a.removed_at, a.observed_at, a.status, a.status_reason,
			a.status_changed_at, a.last_known_status, a.desired_impairment, a.desired_generation, a.applied_generation,
			a.last_command_error, a.drift_corrections, a.last_drift_correction, a.last_drift_correction_at,
			a.last_command_failure_class, a.last_command_failure_reason
		FROM (SELECT `+asOfColumns+`, d.id AS uid`+asOfFrom+`
			WHERE d.first_seen_at <= $1
			  AND ($3 = '' OR d.site = $3)
			  AND ($6 = '' OR d.id > $6::uuid)
			  AND ($9::text[] IS NULL OR d.site = ANY($9::text[]))
			  AND ($10 = '' OR d.name LIKE $10) AND ($11 = '' OR d.name LIKE $11)
			  -- QUARANTINED or RELEASED as of $1 needs an impairment row by then.
			  AND (cardinality($8::text[]) = 0 OR 'NONE' = ANY($8::text[]) OR EXISTS (
				SELECT 1 FROM impairment_history i0 WHERE i0.device_id = d.id AND i0.changed_at <= $1))
			) AS a (id, site, name, facts, removed, removed_at, observed_at, status, status_reason,
				status_changed_at, last_known_status, desired_impairment, desired_generation, applied_generation,
				last_command_error, drift_corrections, last_drift_correction, last_drift_correction_at,
				last_command_failure_class, last_command_failure_reason, uid)
		WHERE (cardinality($4::text[]) = 0 OR a.status = ANY($4::text[]))
		  AND ($5 OR NOT a.removed)
		  AND (cardinality($8::text[]) = 0 OR a.desired_impairment = ANY($8::text[]))
		ORDER BY a.uid LIMIT $7`, args...)
		if err != nil {
			return err
		}
		devs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Device, error) { return scanDevice(r) })
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("list devices as of %s: %w", f.AsOf.UTC().Format(time.RFC3339), err)
	}
	more := len(devs) > f.Limit
	if more {
		devs = devs[:f.Limit]
	}
	return devs, more, s.fillLabels(ctx, devs)
}

// GetDeviceAsOf returns device id as it was at asOf (see asOfColumns), with
// its conditions as of asOf: for each condition type (the seven, then the
// health conditions the device had by then) the newest condition_history
// row recorded at or before asOf (types without one are absent); ObservedAt is the latest observed time
// among them. Errors: ErrNotFound (unknown, or first seen after asOf),
// ErrHistoryExpired.
func (s *Store) GetDeviceAsOf(ctx context.Context, id string, asOf time.Time) (Device, error) {
	args, err := s.asOfArgs(ctx, asOf)
	if err != nil {
		return Device{}, err
	}
	// One round trip: the device with its labels (as facts, the current
	// values), then its conditions as of asOf.
	var d Device
	found := false
	var labels []byte
	b := &pgx.Batch{}
	b.Queue(`SELECT `+asOfColumns+`, `+labelsExpr+asOfFrom+` WHERE d.id = $3 AND d.first_seen_at <= $1`, append(args, id)...).Query(scanOneDevice(&d, &labels, &found))
	b.Queue(conditionsAsOfSQL, id, asOf, fixedConditionTypes()).Query(func(rows pgx.Rows) error {
		d.Conditions, err = collectConditionsAsOf(rows, id, asOf)
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return Device{}, fmt.Errorf("get device %s as of %s: %w", id, asOf.UTC().Format(time.RFC3339), err)
	}
	if !found {
		var name string
		var first time.Time
		if err := s.pool.QueryRow(ctx, `SELECT COALESCE(NULLIF(name, ''), id::text), first_seen_at FROM devices WHERE id = $1`, id).Scan(&name, &first); err == nil {
			return Device{}, fmt.Errorf("device %s as of %s: %w: the hub first heard of it %s later, at %s; its history starts there",
				name, asOf.UTC().Format(time.RFC3339), ErrNotFound, first.Sub(asOf).Round(time.Millisecond), first.UTC().Format(time.RFC3339Nano))
		}
		return Device{}, fmt.Errorf("device %s as of %s: %w", id, asOf.UTC().Format(time.RFC3339), ErrNotFound)
	}
	if d.Labels, err = decodeLabels(d.ID, labels); err != nil {
		return Device{}, err
	}
	for _, c := range d.Conditions {
		if d.ObservedAt == nil || c.ObservedTime.After(*d.ObservedAt) {
			t := c.ObservedTime
			d.ObservedAt = &t
		}
	}
	return d, nil
}

// StatusHistoryAsOf is StatusHistory limited to the changes recorded at or
// before asOf, newest first.
func (s *Store) StatusHistoryAsOf(ctx context.Context, id string, asOf time.Time, limit int) ([]StatusChange, error) {
	rows, err := s.pool.Query(ctx, `SELECT status, reason, changed_at FROM status_history
		WHERE device_id = $1 AND changed_at <= $3 ORDER BY changed_at DESC, id DESC LIMIT $2`, id, limit, asOf)
	if err != nil {
		return nil, fmt.Errorf("status history of %s: %w", id, err)
	}
	return collectStatusChanges(rows, id)
}

// ImpairmentHistoryAsOf is ImpairmentHistory limited to the entries
// changed at or before asOf, newest first.
func (s *Store) ImpairmentHistoryAsOf(ctx context.Context, id string, asOf time.Time, limit int) ([]ImpairmentChange, error) {
	rows, err := s.pool.Query(ctx, `SELECT desired, generation, actor, reason, source, command_id::text, changed_at, action, holder
		FROM impairment_history WHERE device_id = $1 AND changed_at <= $3 ORDER BY changed_at DESC, id DESC LIMIT $2`, id, limit, asOf)
	if err != nil {
		return nil, fmt.Errorf("impairment history of %s: %w", id, err)
	}
	return collectImpairmentChanges(rows, id)
}

func collectStatusChanges(rows pgx.Rows, id string) ([]StatusChange, error) {
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StatusChange, error) {
		var c StatusChange
		var st string
		err := r.Scan(&st, &c.Reason, &c.ChangedAt)
		c.Status = status.Status(st)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("status history of %s: %w", id, err)
	}
	return out, nil
}

func collectImpairmentChanges(rows pgx.Rows, id string) ([]ImpairmentChange, error) {
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ImpairmentChange, error) {
		var c ImpairmentChange
		var desired, action string
		err := r.Scan(&desired, &c.Generation, &c.Actor, &c.Reason, &c.Source, &c.CommandID, &c.ChangedAt, &action, &c.Holder)
		c.Desired, c.Action = Impairment(desired), Action(action)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("impairment history of %s: %w", id, err)
	}
	return out, nil
}

// conditionsAsOfSQL reads, for device $1, the newest condition_history
// row of each type recorded at or before $2 (ties: the higher id) in one
// pass over the device's rows (index condition_history_device, one descent
// per weekly partition), keeping the types of $3 (the seven fixed ones) and
// those that had a health row by then. A LATERAL probe per type walked the
// weeks backwards once per type until it met that type, and once more for
// the health types: eight passes where this is one (issue 26 item 4).
const conditionsAsOfSQL = `
	SELECT type, status, reason, message, last_transition_time, observed_time, health FROM (
		SELECT DISTINCT ON (h.type) h.type, h.status, h.reason, h.message, h.last_transition_time, h.observed_time,
			h.health::text AS health, bool_or(h.health IS NOT NULL) OVER (PARTITION BY h.type) AS was_health
		FROM condition_history h
		WHERE h.device_id = $1 AND h.recorded_at <= $2
		ORDER BY h.type, h.recorded_at DESC, h.id DESC) c
	WHERE c.type = ANY($3::text[]) OR c.was_health`

// fixedConditionTypes is condition.Types as text.
func fixedConditionTypes() []string {
	types := make([]string, len(condition.Types))
	for i, t := range condition.Types {
		types[i] = string(t)
	}
	return types
}

// collectConditionsAsOf scans the rows of conditionsAsOfSQL and orders
// them: the fixed types in condition.Types order, then the others by type.
func collectConditionsAsOf(rows pgx.Rows, id string, asOf time.Time) ([]condition.Condition, error) {
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (condition.Condition, error) {
		var c condition.Condition
		var typ, st string
		var health pgtype.Text
		err := r.Scan(&typ, &st, &c.Reason, &c.Message, &c.LastTransitionTime, &c.ObservedTime, &health)
		c.Type, c.Status, c.Health = condition.Type(typ), condition.Status(st), decodeHealth(health)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("conditions of %s as of %s: %w", id, asOf.UTC().Format(time.RFC3339), err)
	}
	rank := func(t condition.Type) int {
		if i := slices.Index(condition.Types, t); i >= 0 {
			return i
		}
		return len(condition.Types)
	}
	slices.SortFunc(out, func(a, b condition.Condition) int {
		return cmp.Or(cmp.Compare(rank(a.Type), rank(b.Type)), strings.Compare(string(a.Type), string(b.Type)))
	})
	return out, nil
}
