package web

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	hubstatus "github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
)

// The read-only queries the fleet view needs that FleetService has no RPC
// for. Each is one statement (no per-row follow-ups), served by the
// migrations' indexes: devices (site, status, id) for the counts, the
// primary key for keyset paging, condition_history (device_id, id) for a
// device's history.

// cellCount is the number of devices of one site in one status.
type cellCount struct {
	Site   string
	Status hubstatus.Status
	N      int
}

// countBySiteStatus counts the devices that are not removed, per site and
// status, of sites (nil: every site), from the counts the database keeps
// (store.StatusCounts), not by reading every device.
func countBySiteStatus(ctx context.Context, pool *pgxpool.Pool, sites []string) ([]cellCount, error) {
	counts, err := store.StatusCounts(ctx, pool, sites)
	if err != nil {
		return nil, err
	}
	out := make([]cellCount, len(counts))
	for i, c := range counts {
		out[i] = cellCount{Site: c.Site, Status: c.Status, N: c.N}
	}
	return out, nil
}

// listFilter is the device list's filter: ListDevices' filters (the same
// meaning as store.DeviceFilter) plus Name, a case-insensitive substring of
// the device name or a prefix of its id.
type listFilter struct {
	Site             string
	Statuses         []hubstatus.Status
	Impairments      []store.Impairment
	InstanceMismatch bool
	// HealthWarning keeps devices with a health warning (store.HasHealthWarning).
	HealthWarning  bool
	IncludeRemoved bool
	Name           string
	// Sites bounds the list to the caller's roster sites (nil: every site).
	Sites []string
	// Sel is the selector filter (the CLI's --selector syntax), in the
	// store's terms; SelText as typed.
	Sel     store.DeviceSelector
	SelText string
	// LabelsIndexed says the labels file is empty (store.FileLabelsEmpty),
	// so Sel.Labels can be answered from the labels index.
	LabelsIndexed bool
	// Sort is the column the list is ordered by (a sortColumns key),
	// Desc for descending; the device id breaks ties.
	Sort string
	Desc bool
	// After is the keyset cursor: the last device id of the previous
	// page (the next page starts after that device's sort position).
	After string
	Limit int
}

// listRow is one device of the list, with only the columns the list shows.
type listRow struct {
	ID, Site, Name    string
	Status            hubstatus.Status
	StatusReason      string
	StatusChangedAt   time.Time
	LastKnownStatus   hubstatus.Status
	DesiredImpairment store.Impairment
	Removed           bool
	LastCommandError  string
	Orphaned          bool
	// Holders are the device's quarantine holds: who quarantined it and
	// why (addHolders), oldest first.
	Holders []rowHolder
}

// rowHolder is one quarantine hold of a listed device.
type rowHolder struct{ Holder, Actor, Reason string }

// addHolders fills the quarantine holds of the quarantined rows (one
// query for the page).
func addHolders(ctx context.Context, pool *pgxpool.Pool, rows []listRow) error {
	var ids []string
	at := map[string]int{}
	for i, r := range rows {
		if r.DesiredImpairment == store.ImpairmentQuarantined {
			ids, at[r.ID] = append(ids, r.ID), i
		}
	}
	if len(ids) == 0 {
		return nil
	}
	q, err := pool.Query(ctx, `SELECT device_id::text, holder, actor, reason FROM quarantine_holds
		WHERE device_id = ANY($1::uuid[]) ORDER BY created_at, holder`, ids)
	if err != nil {
		return fmt.Errorf("list devices' holds: %w", err)
	}
	defer q.Close()
	for q.Next() {
		var id string
		var h rowHolder
		if err := q.Scan(&id, &h.Holder, &h.Actor, &h.Reason); err != nil {
			return fmt.Errorf("list devices' holds: %w", err)
		}
		rows[at[id]].Holders = append(rows[at[id]].Holders, h)
	}
	if err := q.Err(); err != nil {
		return fmt.Errorf("list devices' holds: %w", err)
	}
	return nil
}

// hasMismatch is the same predicate as the store's ListDevices filter
// instance_mismatch: facts hold a non-empty instance_mismatches array.
const hasMismatch = `(CASE WHEN jsonb_typeof(d.facts->'instance_mismatches') = 'array'
	THEN jsonb_array_length(d.facts->'instance_mismatches') > 0 ELSE false END)`

// where is the list's WHERE clause over f.args(): the label term as
// store.LabelsMatch states it, indexed while the labels file is empty
// (f.LabelsIndexed).
func (f listFilter) where() string {
	w := listWhere + `
	  AND ($15::jsonb IS NULL OR ` + store.LabelsMatch(f.LabelsIndexed, "$15") + `)`
	if f.HealthWarning {
		w += `
	  AND ` + store.HasHealthWarning
	}
	return w
}

// listWhere is where's part but for the labels.
const listWhere = `
	WHERE ($1 = '' OR d.site = $1)
	  AND (cardinality($2::text[]) = 0 OR d.status = ANY($2::text[]))
	  AND ($3 OR NOT d.removed)
	  AND (cardinality($4::text[]) = 0 OR d.desired_impairment = ANY($4::text[]))
	  AND (NOT $5 OR ` + hasMismatch + `)
	  AND ($6 = '' OR d.name ILIKE $6 ESCAPE '\' OR d.id::text LIKE $7 ESCAPE '\')
	  AND (NOT $8 OR d.site = ANY($9::text[]))
	  AND (cardinality($10::text[]) = 0 OR d.status = ANY($10::text[]))
	  AND (cardinality($11::text[]) = 0 OR EXISTS (
	        SELECT 1 FROM device_conditions c WHERE c.device_id = d.id AND c.reason = ANY($11::text[])))
	  AND ($12 = '' OR d.facts->>'resource_class' = $12)
	  AND ($13 = '' OR d.name LIKE $13)
	  AND ($14 = '' OR d.site = $14)`

func (f listFilter) args() []any {
	sts := make([]string, len(f.Statuses))
	for i, s := range f.Statuses {
		sts[i] = string(s)
	}
	imps := make([]string, len(f.Impairments))
	for i, im := range f.Impairments {
		imps[i] = string(im)
	}
	var like, prefix string
	if f.Name != "" {
		esc := likeEscape(f.Name)
		like, prefix = "%"+esc+"%", strings.ToLower(esc)+"%"
	}
	selSts := make([]string, len(f.Sel.Statuses))
	for i, s := range f.Sel.Statuses {
		selSts[i] = string(s)
	}
	reasons := f.Sel.Reasons
	if reasons == nil {
		reasons = []string{}
	}
	return []any{f.Site, sts, f.IncludeRemoved, imps, f.InstanceMismatch, like, prefix, f.Sites != nil, f.Sites,
		selSts, reasons, f.Sel.ResourceClass, f.Sel.NameLike, f.Sel.Site, labelsJSON(f.Sel.Labels)}
}

// labelsJSON is a label selector as the jsonb the list's containment test
// takes (the labels of docs/reference/labels.md), nil for none.
func labelsJSON(set map[string]string) any {
	if len(set) == 0 {
		return nil
	}
	raw, _ := json.Marshal(set) // a map[string]string always encodes
	return string(raw)
}

func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// listDevices returns up to f.Limit devices in f's sort order after the
// device f.After, and whether more follow: keyset paging on (sort column,
// id), so a later page costs what the first does.
func listDevices(ctx context.Context, pool *pgxpool.Pool, f listFilter) ([]listRow, bool, error) {
	col, ok := sortColumns[f.Sort]
	if !ok {
		col = sortColumns[defaultSort]
	}
	cmp, dir := ">", ""
	if f.Desc {
		cmp, dir = "<", " DESC"
	}
	args := append(f.args(), f.After, f.Limit+1)
	rows, err := pool.Query(ctx, `
		SELECT d.id::text, d.site, d.name, d.status, d.status_reason, d.status_changed_at,
			COALESCE(d.last_known_status, ''), d.desired_impairment, d.removed, d.last_command_error, `+hasMismatch+`
		FROM devices d`+f.where()+`
		  AND ($16 = '' OR (`+fmt.Sprintf(col, "d")+`, d.id) `+cmp+` (SELECT `+fmt.Sprintf(col, "o")+`, o.id FROM devices o WHERE o.id = $16::uuid))
		ORDER BY `+fmt.Sprintf(col, "d")+dir+`, d.id`+dir+` LIMIT $17`, args...)
	if err != nil {
		return nil, false, fmt.Errorf("list devices: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (listRow, error) {
		var d listRow
		var st, lks, imp string
		err := r.Scan(&d.ID, &d.Site, &d.Name, &st, &d.StatusReason, &d.StatusChangedAt, &lks, &imp, &d.Removed,
			&d.LastCommandError, &d.Orphaned)
		d.Status, d.LastKnownStatus, d.DesiredImpairment = hubstatus.Status(st), hubstatus.Status(lks), store.Impairment(imp)
		return d, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("list devices: %w", err)
	}
	more := len(out) > f.Limit
	if more {
		out = out[:f.Limit]
	}
	return out, more, nil
}

// countsOnly reports whether f filters live devices by site and status
// only: its count is then a sum of store.StatusCounts, not a count of the
// device rows (1,000,000 of them unfiltered; issue 26 item 4).
func (f listFilter) countsOnly() bool {
	return len(f.Impairments) == 0 && !f.InstanceMismatch && !f.HealthWarning && !f.IncludeRemoved && f.Name == "" &&
		f.Sel.Site == "" && f.Sel.Sites == nil && len(f.Sel.Statuses) == 0 && len(f.Sel.Reasons) == 0 &&
		f.Sel.ResourceClass == "" && f.Sel.NameLike == "" && f.Sel.IDs == nil && len(f.Sel.Labels) == 0
}

// countDevices counts every device f selects (ignoring After and Limit).
func countDevices(ctx context.Context, pool *pgxpool.Pool, f listFilter) (int, error) {
	if f.countsOnly() {
		counts, err := store.StatusCounts(ctx, pool, f.Sites)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, c := range counts {
			if (f.Site == "" || c.Site == f.Site) && (len(f.Statuses) == 0 || slices.Contains(f.Statuses, c.Status)) {
				n += c.N
			}
		}
		return n, nil
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM devices d`+f.where(), f.args()...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count devices: %w", err)
	}
	return n, nil
}

// conditionChange is one condition_history row.
type conditionChange struct {
	Type, Status, Reason, Message string
	LastTransitionTime            time.Time
	ObservedTime                  time.Time
}

// conditionHistory returns up to limit condition changes of a device, newest
// first: by recorded_at, the partition key, so only the newest partitions are
// read (by id alone PostgreSQL reads every partition and sorts).
func conditionHistory(ctx context.Context, pool *pgxpool.Pool, id string, limit int) ([]conditionChange, error) {
	rows, err := pool.Query(ctx, `SELECT type, status, reason, message, last_transition_time, observed_time
		FROM condition_history WHERE device_id = $1 ORDER BY recorded_at DESC, id DESC LIMIT $2`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("condition history of %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (conditionChange, error) {
		var c conditionChange
		err := r.Scan(&c.Type, &c.Status, &c.Reason, &c.Message, &c.LastTransitionTime, &c.ObservedTime)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("condition history of %s: %w", id, err)
	}
	return out, nil
}

// siteNames lists the names of sites (nil: every site) in order (for the
// device list's site filter; FleetService.ListSites also counts each
// site's devices and orphans, which costs a scan of every device's facts).
func siteNames(ctx context.Context, pool *pgxpool.Pool, sites []string) ([]string, error) {
	rows, err := pool.Query(ctx, `SELECT name FROM sites WHERE NOT $1 OR name = ANY($2::text[]) ORDER BY name`, sites != nil, sites)
	if err != nil {
		return nil, fmt.Errorf("list site names: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list site names: %w", err)
	}
	return names, nil
}
