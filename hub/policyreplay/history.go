package policyreplay

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
)

// trigger is a policy.Trigger with what the replay needs beside it.
type trigger struct {
	policy.Trigger
	site string
	// lastFree is when the device last had a status that is neither
	// impaired, UNREACHABLE nor QUARANTINED before the trigger: a
	// quarantine before it was released.
	lastFree time.Time
}

type holds struct{ excl, planned *policy.Exclusion }

// history is what a replay reads.
type history struct {
	triggers []trigger
	siteOf   map[string]string
	devices  map[string]int // site → devices not removed
	holds    map[string]holds
	// labels are the devices' effective labels as they are now (labels
	// keep no history: the replay takes them as the devices' labels over
	// the whole period); domainDevices counts, per site, label key and
	// value, the devices not removed carrying it (the per-label guards'
	// denominators).
	labels        map[string]map[string]string
	domainDevices map[string]map[string]map[string]int
	// statuses are the status histories (oldest first, up to the period's
	// end) of the devices with a trigger; conds their condition rows.
	statuses map[string][]statusAt
	conds    map[string][]condRow
	// inputs are the recorded human decisions and the earlier ladders
	// (inputs.go).
	inputs inputs
}

// statusAt is one status_history row.
type statusAt struct {
	at time.Time
	st status.Status
}

type condRow struct {
	typ, status, reason, message string
	since, at                    time.Time
	health                       *condition.Health
}

// readHistory reads, in tx, the triggers of [from, to]: each change of a
// device into FAULTED or MAINTENANCE that starts a run (the statuses
// before it neither impaired nor UNREACHABLE inside the run), with the
// condition behind it as the history had it then.
func readHistory(ctx context.Context, tx pgx.Tx, from, to time.Time) (*history, error) {
	h := &history{siteOf: map[string]string{}, devices: map[string]int{}, holds: map[string]holds{}, statuses: map[string][]statusAt{},
		labels: map[string]map[string]string{}, domainDevices: map[string]map[string]map[string]int{}}
	rows, err := tx.Query(ctx, `SELECT d.id::text, d.site, d.removed, (`+store.LabelsExpr+`)::text FROM devices d`)
	if err != nil {
		return nil, fmt.Errorf("devices: %w", err)
	}
	for rows.Next() {
		var id, site, lj string
		var removed bool
		if err := rows.Scan(&id, &site, &removed, &lj); err != nil {
			rows.Close()
			return nil, fmt.Errorf("devices: %w", err)
		}
		h.siteOf[id] = site
		var ls map[string]string
		if err := json.Unmarshal([]byte(lj), &ls); err != nil {
			rows.Close()
			return nil, fmt.Errorf("labels of device %s: %w", id, err)
		}
		if len(ls) > 0 {
			h.labels[id] = ls
		}
		if !removed {
			h.devices[site]++
			for k, v := range ls {
				if h.domainDevices[site] == nil {
					h.domainDevices[site] = map[string]map[string]int{}
				}
				if h.domainDevices[site][k] == nil {
					h.domainDevices[site][k] = map[string]int{}
				}
				h.domainDevices[site][k][v]++
			}
		}
	}
	rows.Close()
	if err := readHolds(ctx, tx, h); err != nil {
		return nil, err
	}
	conds, err := readConditions(ctx, tx, from, to)
	if err != nil {
		return nil, err
	}
	h.conds = conds
	if h.inputs, err = readInputs(ctx, tx, from, to); err != nil {
		return nil, err
	}
	rows, err = tx.Query(ctx, `SELECT device_id::text, id, status, changed_at FROM status_history
		WHERE changed_at <= $2 AND device_id IN (SELECT device_id FROM status_history
			WHERE changed_at BETWEEN $1 AND $2 AND status IN ('FAULTED', 'MAINTENANCE'))
		ORDER BY device_id, id`, from, to)
	if err != nil {
		return nil, fmt.Errorf("status history: %w", err)
	}
	defer rows.Close()
	var w walker
	for rows.Next() {
		var dev, st string
		var id int64
		var at time.Time
		if err := rows.Scan(&dev, &id, &st, &at); err != nil {
			return nil, fmt.Errorf("status history: %w", err)
		}
		h.statuses[dev] = append(h.statuses[dev], statusAt{at, status.Status(st)})
		if t, ok := w.step(dev, id, status.Status(st), at); ok && !at.Before(from) {
			t.site = h.siteOf[dev]
			cause(&t, conds[dev])
			h.triggers = append(h.triggers, t)
		}
	}
	return h, rows.Err()
}

// walker follows one device's status history at a time, oldest first, as
// hub/store's findTrigger does newest first.
type walker struct {
	dev              string
	inRun            bool
	from             status.Status
	unreachableUntil time.Time
	unreachable      bool
	lastFree         time.Time
}

func (w *walker) step(dev string, id int64, st status.Status, at time.Time) (trigger, bool) {
	if dev != w.dev {
		*w = walker{dev: dev}
	}
	switch {
	case impaired(st):
		if w.unreachable {
			w.unreachableUntil, w.unreachable = at, false
		}
		if w.inRun {
			return trigger{}, false
		}
		w.inRun = true
		t := trigger{Trigger: policy.Trigger{DeviceID: dev, HistoryID: id, From: w.from, To: st, ChangedAt: at,
			UnreachableUntil: w.unreachableUntil}, lastFree: w.lastFree}
		return t, true
	case st == status.Unreachable:
		w.unreachable = true
	default:
		if w.unreachable {
			w.unreachableUntil, w.unreachable = at, false
		}
		w.inRun, w.from = false, st
		if st != status.Quarantined {
			w.lastFree = at
		}
	}
	return trigger{}, false
}

// cause sets t's cause from the device's condition rows (oldest first):
// the newest of each type recorded by the change, chosen as the store's
// PolicyCandidates chooses (ProvisioningHealthy=False, then a fatal
// health fault by type, then the fixed condition as it is).
func cause(t *trigger, rows []condRow) {
	latest := map[string]condRow{}
	for _, r := range rows {
		if !r.at.After(t.ChangedAt) {
			latest[r.typ] = r
		}
	}
	fixed := string(condition.MaintenanceClear)
	if t.To == status.Faulted {
		fixed = string(condition.ProvisioningHealthy)
	}
	pick, ok := latest[fixed]
	if t.To == status.Faulted && (!ok || pick.status != string(condition.False)) {
		best := ""
		for typ, r := range latest {
			if r.health != nil && r.status == string(condition.False) && r.health.Fatal && (best == "" || typ < best) {
				best = typ
			}
		}
		if best != "" {
			pick, ok = latest[best], true
		}
	}
	if !ok {
		return
	}
	t.CauseType, t.CauseReason, t.CauseMessage, t.CauseHealth, t.CauseSince = pick.typ, pick.reason, pick.message, pick.health, pick.since
}

// readConditions reads the cause conditions' history up to to, by device
// (and CustomerAllocated, which a ladder's safety check reads).
func readConditions(ctx context.Context, tx pgx.Tx, from, to time.Time) (map[string][]condRow, error) {
	rows, err := tx.Query(ctx, `SELECT device_id::text, type, status, reason, message, last_transition_time, recorded_at, health::text
		FROM condition_history WHERE recorded_at <= $2
			AND (type IN ('ProvisioningHealthy', 'MaintenanceClear', 'CustomerAllocated') OR health IS NOT NULL)
			AND device_id IN (SELECT device_id FROM status_history WHERE changed_at BETWEEN $1 AND $2 AND status IN ('FAULTED', 'MAINTENANCE'))
		ORDER BY id`, from, to)
	if err != nil {
		return nil, fmt.Errorf("condition history: %w", err)
	}
	defer rows.Close()
	out := map[string][]condRow{}
	for rows.Next() {
		var dev string
		var r condRow
		var health pgtype.Text
		if err := rows.Scan(&dev, &r.typ, &r.status, &r.reason, &r.message, &r.since, &r.at, &health); err != nil {
			return nil, fmt.Errorf("condition history: %w", err)
		}
		if health.Valid {
			var hh condition.Health
			if json.Unmarshal([]byte(health.String), &hh) == nil {
				r.health = &hh
			}
		}
		out[dev] = append(out[dev], r)
	}
	return out, rows.Err()
}

// readHolds reads the devices' exclusions and planned maintenance (as
// they are now: holds keep no history).
func readHolds(ctx context.Context, tx pgx.Tx, h *history) error {
	rows, err := tx.Query(ctx, `SELECT device_id::text, kind, reason, author, starts_at, ends_at FROM policy_device_holds`)
	if err != nil {
		return fmt.Errorf("device holds: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var dev, kind string
		var x policy.Exclusion
		var end *time.Time
		if err := rows.Scan(&dev, &kind, &x.Reason, &x.Author, &x.Start, &end); err != nil {
			return fmt.Errorf("device holds: %w", err)
		}
		if end != nil {
			x.End = *end
		}
		hs := h.holds[dev]
		if kind == "EXCLUSION" {
			hs.excl = &x
		} else {
			hs.planned = &x
		}
		h.holds[dev] = hs
	}
	return rows.Err()
}
