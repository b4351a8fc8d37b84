package store

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/internal/condition"
)

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

// groupMerge is the state of groupWrites while it merges a group's
// batches: the rows read (states, current: updated in place as each batch
// leaves them) and one device write per device of the group.
type groupMerge struct {
	w       *groupWrites
	states  map[string]devState
	current map[string]map[condition.Type]condition.Condition
	// A device written by several batches of the group (a site's
	// consecutive batches) is one row per table: its merged device write
	// and its final conditions; its history rows are every batch's.
	devs  map[string]*devWrite
	order []string
	// touchedAll are the condition types written per device.
	touchedAll map[string]map[condition.Type]bool
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
	m := &groupMerge{
		w:      &groupWrites{now: time.Now(), removed: map[string]int{}},
		states: states, current: current,
		devs: map[string]*devWrite{}, touchedAll: map[string]map[condition.Type]bool{},
	}
	n := 0
	for _, it := range applied {
		for _, d := range it.batch.Devices {
			n += len(d.Conditions)
		}
	}
	m.w.history.grow(n)
	for _, it := range applied {
		m.mergeBatch(it)
	}
	m.collectRows()
	return m.w
}

// mergeBatch merges one applied batch: its devices' facts and conditions,
// then each device's status, counting the rows in it.bres.
func (m *groupMerge) mergeBatch(it *groupItem) {
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
		if !inBatch[d.DeviceID] {
			inBatch[d.DeviceID] = true
			batchOrder = append(batchOrder, d.DeviceID)
		}
		m.mergeDevice(it.site, d, snap)
		res.RowsWritten++
		m.mergeConditions(d, touched, res)
	}
	for _, id := range batchOrder {
		m.deriveStatus(it.site, id, res)
	}
	if b.endsSnapshot() {
		m.w.unseen.sites = append(m.w.unseen.sites, it.site)
		m.w.unseen.snapshots = append(m.w.unseen.snapshots, b.SnapshotID)
	}
}

// mergeDevice merges a batch's device update into the device's write:
// facts, name, snapshot, newest observed time, removed flag.
func (m *groupMerge) mergeDevice(site string, d DeviceUpdate, snap pgtype.Text) {
	dw := m.devs[d.DeviceID]
	if dw == nil {
		_, exists := m.states[d.DeviceID]
		dw = &devWrite{id: d.DeviceID, site: site, exists: exists}
		m.devs[d.DeviceID] = dw
		m.order = append(m.order, d.DeviceID)
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
}

// mergeConditions merges a device update's conditions into the device's
// current ones by the rules above; touched are the types this batch wrote
// per device (each counted once in res), history rows are added to w.
func (m *groupMerge) mergeConditions(d DeviceUpdate, touched map[string]map[condition.Type]bool, res *BatchResult) {
	cur := m.current[d.DeviceID]
	if cur == nil {
		cur = map[condition.Type]condition.Condition{}
		m.current[d.DeviceID] = cur
	}
	for _, c := range d.Conditions {
		old, had := cur[c.Type]
		oldObserved := notFuture(old.ObservedTime, m.w.now)
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
		if m.touchedAll[d.DeviceID] == nil {
			m.touchedAll[d.DeviceID] = map[condition.Type]bool{}
		}
		m.touchedAll[d.DeviceID][c.Type] = true
		if !touched[d.DeviceID][c.Type] {
			touched[d.DeviceID][c.Type] = true
			res.RowsWritten++
		}
		if !had || !old.SameObservation(c) {
			m.w.history.add(d.DeviceID, c)
			res.RowsWritten++
		}
	}
}

// deriveStatus derives device id's status after a batch of site, sets it
// on the device's write and in states (the next batch of the group meets
// the device as this one left it), and adds a status_history row when the
// status changed.
func (m *groupMerge) deriveStatus(site, id string, res *BatchResult) {
	dw := m.devs[id]
	st, ok := m.states[id]
	if !ok {
		st = devState{status: string(status.Unknown), reason: "NeverReported", desired: string(ImpairmentNone)}
	}
	// The site's stale flag is cleared by this group.
	var step devWrite
	changed := step.derive(st, m.current[id], false)
	dw.desired = step.desired
	if step.status.Valid {
		dw.status, dw.changed = step.status, true
		st.status = step.status.String
	}
	if step.reason.Valid {
		dw.reason = step.reason
		st.reason = step.reason.String
	}
	st.site = site
	m.states[id] = st
	if changed {
		m.w.statusHistory.ids = append(m.w.statusHistory.ids, id)
		m.w.statusHistory.statuses = append(m.w.statusHistory.statuses, step.status.String)
		m.w.statusHistory.reasons = append(m.w.statusHistory.reasons, step.reason.String)
		res.RowsWritten++
	}
}

// collectRows turns the merged devices into rows, in the order first
// seen: each device's written conditions (by type) and its insert or
// update.
func (m *groupMerge) collectRows() {
	n := 0
	for _, id := range m.order {
		n += len(m.touchedAll[id])
	}
	m.w.conds.grow(n)
	for _, id := range m.order {
		dw := m.devs[id]
		types := make([]condition.Type, 0, len(m.touchedAll[id]))
		for t := range m.touchedAll[id] {
			types = append(types, t)
		}
		slices.Sort(types)
		for _, t := range types {
			m.w.conds.add(id, m.current[id][t])
		}
		if dw.exists {
			m.w.updates.add(dw)
		} else {
			m.w.inserts.add(dw)
		}
	}
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
