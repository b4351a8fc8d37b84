package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

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
	var wake bool
	var kept groupKept
	for attempt := 1; attempt <= 3; attempt++ {
		err = s.inTx(ctx, func(tx pgx.Tx) error {
			for _, it := range items {
				it.bres, it.sres, it.err = BatchResult{}, SiteConditionsResult{}, nil
			}
			var err error
			wake, kept, err = s.applyGroupTx(ctx, tx, items)
			return err
		})
		if !errors.Is(err, errDeviceRace) {
			break
		}
	}
	if err != nil {
		// Whatever the group merged is unknown to have committed.
		for _, it := range items {
			s.conds.drop(it.site)
		}
		return err
	}
	s.conds.keep(kept.applied, kept.current, kept.versions)
	if wake {
		s.wakePolicy() // after the commit, outside it (policyhint.go)
	}
	return nil
}

// groupKept is what a committed group leaves in the condition cache: its
// applied items, its devices' conditions and the conditions version of
// each site, as read under the site's lock.
type groupKept struct {
	applied  []*groupItem
	current  map[string]map[condition.Type]condition.Condition
	versions map[string]int64
}

// siteLock is a site row as locked by a group.
type siteLock struct {
	epoch, lastSeq int64
	stale          bool
	// condVersion is sites.conditions_version (groupcache.go).
	condVersion int64
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
//
// wake reports that the group may have written a status_history row
// entering FAULTED or MAINTENANCE: the caller then hints the policy
// evaluator after the commit (the transaction itself does not notify:
// policyNotifyDeferredSQL).
func (s *Store) applyGroupTx(ctx context.Context, tx pgx.Tx, items []*groupItem) (wake bool, kept groupKept, err error) {
	read, err := s.lockSitesReadDevices(ctx, tx, items)
	if err != nil {
		return false, kept, err
	}
	plan := sortOutItems(items, read)
	w := s.groupWrites(plan.applied, read.states, read.current)
	raced, err := sendGroupWrites(ctx, tx, &plan.touch, w)
	if err != nil {
		return false, kept, err
	}
	if err := writeHardware(ctx, tx, plan.applied); err != nil {
		return false, kept, err
	}
	// The re-derivations of step 3 may write such rows too: counted as
	// waking (they are rare).
	wake = len(raced) > 0 || len(plan.siteSets) > 0 || len(plan.staleSites) > 0
	for _, st := range w.statusHistory.statuses {
		wake = wake || wakesPolicy(st)
	}
	for _, it := range plan.applied {
		if n := w.removed[it.site]; n > 0 && it.batch.endsSnapshot() {
			it.bres.RowsWritten += n
			s.log.Info("devices missing from snapshot marked removed", "site", it.site, "count", n)
		}
	}
	if err := s.finishGroup(ctx, tx, plan, raced, read.current); err != nil {
		return false, kept, err
	}
	kept = groupKept{applied: plan.applied, current: read.current, versions: map[string]int64{}}
	for site, l := range read.locked {
		kept.versions[site] = l.condVersion
	}
	return wake, kept, nil
}

// groupRead is what round trip 1 of a group read: the locked site rows
// by name, and the named devices that exist with their conditions.
type groupRead struct {
	locked  map[string]siteLock
	states  map[string]devState
	current map[string]map[condition.Type]condition.Condition
}

// lockSitesReadDevices is round trip 1: it locks the group's site rows
// and reads the devices its batches name: with their conditions, or, for
// the devices whose conditions the condition cache holds, the device rows
// alone (checkCached then checks the cache against the locked site rows).
func (s *Store) lockSitesReadDevices(ctx context.Context, tx pgx.Tx, items []*groupItem) (groupRead, error) {
	names := make([]string, 0, len(items))
	for _, it := range items {
		names = append(names, it.site)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	// The devices the batches name, read in the same round trip as the
	// site locks, after them. The device rows are not locked: the site
	// locks keep every other ingest write away, and a quarantine or
	// release committed meanwhile is caught when the device is written
	// (see groupWrites.results).
	r := groupRead{states: map[string]devState{}, current: map[string]map[condition.Type]condition.Condition{}}
	c := cachedRead{used: map[string]cacheStamp{}, site: map[string]string{}}
	var miss []string
	for _, it := range items {
		if it.batch != nil {
			n := len(c.hit)
			miss, c.hit = s.conds.lookup(it, r.current, c.used, miss, c.hit)
			for _, id := range c.hit[n:] {
				c.site[id] = it.site
			}
		}
	}
	miss = c.settle(miss, r.current)
	rb := &pgx.Batch{}
	rb.Queue(policyNotifyDeferredSQL)
	rb.Queue(`SELECT name, link_epoch, last_sequence, stale, conditions_version FROM sites
		WHERE name = ANY($1::text[]) ORDER BY name FOR NO KEY UPDATE`, names)
	if len(miss) > 0 {
		rb.Queue(loadDeviceStatesSQL, miss)
	}
	if len(c.hit) > 0 {
		rb.Queue(loadDeviceRowsSQL, c.hit)
	}
	br := tx.SendBatch(ctx, rb)
	err := readLocksAndDevices(br, &r, len(miss) > 0, len(c.hit) > 0)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("lock sites: %w", cerr)
	}
	if err != nil {
		return groupRead{}, err
	}
	if err := s.checkCached(ctx, tx, &c, &r); err != nil {
		return groupRead{}, err
	}
	return r, nil
}

// readLocksAndDevices reads the results lockSitesReadDevices queued.
func readLocksAndDevices(br pgx.BatchResults, r *groupRead, full, rows bool) error {
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("defer the policy hint: %w", err)
	}
	var err error
	if r.locked, err = readSiteLocks(br); err != nil {
		return err
	}
	if full {
		if err := readDeviceStates(br, r.states, r.current); err != nil {
			return err
		}
	}
	if rows {
		return readDeviceRows(br, r.states)
	}
	return nil
}

// cachedRead is what a group took from the condition cache: the devices
// (hit) with their site, and the stamp of each site's entry it used.
type cachedRead struct {
	hit  []string
	site map[string]string
	used map[string]cacheStamp
}

// settle sorts and compacts miss and takes out of hit (and current) any
// device also in miss (named by another site's batch too): such a device
// is read whole. It returns miss.
func (c *cachedRead) settle(miss []string, current map[string]map[condition.Type]condition.Condition) []string {
	slices.Sort(miss)
	miss = slices.Compact(miss)
	hit := c.hit[:0]
	for _, id := range c.hit {
		if _, ok := slices.BinarySearch(miss, id); ok {
			delete(current, id)
			continue
		}
		hit = append(hit, id)
	}
	c.hit = hit
	return miss
}

// checkCached checks the cached conditions against the locked site rows
// and the device rows read: a site whose link epoch or conditions version
// is no longer the entry's loses its entry, and its devices' conditions
// are read (one more round trip, rare), as are those of a device now of
// another site; a device that no longer exists has none.
func (s *Store) checkCached(ctx context.Context, tx pgx.Tx, c *cachedRead, r *groupRead) error {
	var reread []string
	for _, id := range c.hit {
		site := c.site[id]
		stamp, l := c.used[site], r.locked[site]
		st, exists := r.states[id]
		switch {
		case l.epoch != stamp.epoch || l.condVersion != stamp.version:
			s.conds.drop(site)
			delete(r.current, id)
			reread = append(reread, id)
		case !exists:
			delete(r.current, id)
		case st.site != site:
			delete(r.current, id)
			reread = append(reread, id)
		}
	}
	if len(reread) == 0 {
		return nil
	}
	conds, err := loadConditions(ctx, tx, reread)
	if err != nil {
		return err
	}
	maps.Copy(r.current, conds)
	return nil
}

// groupPlan is how a group's items were sorted out: the site rows to
// update, the site-condition sets and batches to write, and the sites that
// were stale (their devices' statuses are derived again).
type groupPlan struct {
	touch      siteTouches
	siteSets   []*groupItem
	applied    []*groupItem
	staleSites []string
}

// sortOutItems sorts the items out in order: a site's several items each
// meet the site as the ones before them left it (sequence), and an item
// whose prev (the write before it on its link) failed fails unwritten.
// Refused items get their error, duplicates their result.
func sortOutItems(items []*groupItem, read groupRead) *groupPlan {
	p := &groupPlan{}
	lastSeq := map[string]int64{}
	for n, l := range read.locked {
		lastSeq[n] = l.lastSeq
	}
	stale := map[string]bool{}
	markStale := func(site string, l siteLock) {
		if l.stale && !stale[site] {
			stale[site] = true
			p.staleSites = append(p.staleSites, site)
		}
	}
	claimed := map[string]string{} // device id → site of the batch creating it in this group
	for _, it := range items {
		l, ok := read.locked[it.site]
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
			p.siteSets = append(p.siteSets, it)
			p.touch.add(it.site, nil, true)
			markStale(it.site, l)
			continue
		case it.batch.Sequence <= uint64(lastSeq[it.site]):
			it.bres.Duplicate = true
			p.touch.add(it.site, nil, false)
			continue
		}
		if it.err = foreignDevice(it, read.states, claimed); it.err != nil {
			continue
		}
		for _, d := range it.batch.Devices {
			if _, ok := read.states[d.DeviceID]; !ok {
				claimed[d.DeviceID] = it.site
			}
		}
		p.applied = append(p.applied, it)
		lastSeq[it.site] = int64(it.batch.Sequence)
		p.touch.add(it.site, &it.batch.Sequence, true)
		if it.batch.endsSnapshot() {
			p.touch.snapshotApplied(it.site)
		}
		markStale(it.site, l)
	}
	return p
}

// foreignDevice refuses (ErrWrongSite) a batch naming a device of another
// site: one stored (states) or one an earlier batch of the group creates
// (claimed).
func foreignDevice(it *groupItem, states map[string]devState, claimed map[string]string) error {
	for _, d := range it.batch.Devices {
		if st, ok := states[d.DeviceID]; ok && st.site != it.site {
			return fmt.Errorf("device %s is registered to site %q, not %q: %w", d.DeviceID, st.site, it.site, ErrWrongSite)
		}
		if other, ok := claimed[d.DeviceID]; ok && other != it.site {
			return fmt.Errorf("device %s is registered to site %q, not %q: %w", d.DeviceID, other, it.site, ErrWrongSite)
		}
	}
	return nil
}

// sendGroupWrites is round trip 2: the site rows and every write of w. It
// returns the devices whose desired impairment changed meanwhile.
func sendGroupWrites(ctx context.Context, tx pgx.Tx, touch *siteTouches, w *groupWrites) (raced []string, err error) {
	batch := &pgx.Batch{}
	touch.queue(batch)
	w.queue(batch)
	br := tx.SendBatch(ctx, batch)
	raced, err = w.results(br, touch.len() > 0)
	if err != nil {
		br.Close()
		return nil, err
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("write condition batches: %w", err)
	}
	return raced, nil
}

// finishGroup is step 3: the raced devices' statuses derived again, the
// site-condition sets written, and the stale sites' devices re-derived
// (counted in the first applied batch of the site).
func (s *Store) finishGroup(ctx context.Context, tx pgx.Tx, p *groupPlan, raced []string,
	current map[string]map[condition.Type]condition.Condition) error {
	if len(raced) > 0 {
		// A quarantine or release committed between the read and the
		// write of these devices: derive their status again.
		if _, err := s.recomputeDevices(ctx, tx, raced, current); err != nil {
			return err
		}
	}
	var err error
	for _, it := range p.siteSets {
		if it.sres, err = writeSiteConditions(ctx, tx, it.site, it.conds); err != nil {
			return err
		}
	}
	for _, site := range p.staleSites {
		// Being heard from ends a site's staleness (its flag was cleared
		// above): every device's status follows.
		n, err := s.recomputeSite(ctx, tx, site, false)
		if err != nil {
			return err
		}
		for _, it := range p.applied {
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
		if err := rows.Scan(&n, &l.epoch, &l.lastSeq, &l.stale, &l.condVersion); err != nil {
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
		c.type, c.status, c.reason, c.message, c.last_transition_time, c.observed_time, c.observed_generation, c.health::text
	FROM devices d LEFT JOIN device_conditions c ON c.device_id = d.id
	WHERE d.id = ANY($1::uuid[])`

// loadDeviceRowsSQL reads the devices $1 that exist (site, status,
// desired impairment) without their conditions (the condition cache has
// them).
const loadDeviceRowsSQL = `
	SELECT id::text, site, status, status_reason, desired_impairment FROM devices WHERE id = ANY($1::uuid[])`

// readDeviceRows reads the result of loadDeviceRowsSQL into states.
func readDeviceRows(br pgx.BatchResults, states map[string]devState) error {
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("load devices: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var d devState
		if err := rows.Scan(&id, &d.site, &d.status, &d.reason, &d.desired); err != nil {
			return fmt.Errorf("load devices: %w", err)
		}
		states[id] = d
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load devices: %w", err)
	}
	return nil
}

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
		var health pgtype.Text
		if err := rows.Scan(&id, &d.site, &d.status, &d.reason, &d.desired, &typ, &st, &reason, &msg, &ltt, &obs, &gen, &health); err != nil {
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
			Reason: reason.String, Message: msg.String, LastTransitionTime: ltt.Time, ObservedTime: obs.Time, ObservedGeneration: gen.Int64,
			Health: decodeHealth(health)}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load devices: %w", err)
	}
	return nil
}
