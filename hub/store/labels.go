package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/internal/labels"
)

// labelsExpr is the SQL expression of a device row's (alias d) effective
// labels as a jsonb object: the satellite's labels (facts.labels) with the
// hub's labels file over them (migration 00027), at most
// labels.MaxPerDevice of them (migration 00046).
//
// While the labels file has no entry (device_file_labels empty: an
// uncorrelated EXISTS, evaluated once per statement) the effective labels
// are the satellite's alone, read straight from facts (at most
// labels.MaxPerDevice already: the hub refuses larger sets from a link): calling the SQL
// function (not inlinable: it holds a subquery) costs a function call per
// row, 13x the time of a label selector's first page at 1,000,000 devices
// (issue 26 item 4). Both branches give the same object.
const labelsExpr = `(CASE WHEN EXISTS (SELECT 1 FROM device_file_labels) THEN ironlink_device_labels(d.site, d.name, d.id, d.facts)
	WHEN jsonb_typeof(d.facts->'labels') = 'object' THEN d.facts->'labels' ELSE '{}'::jsonb END)`

// LabelsExpr is labelsExpr for the fleet view's own queries (a device row
// aliased d).
const LabelsExpr = labelsExpr

// FileLabelsEmpty reports whether the labels file in force has no entry
// (device_file_labels empty): a device's effective labels are then its
// satellite's, facts.labels, and a label selector can be answered from
// the index devices_labels (migration 00065) with LabelsMatch. Errors are
// database errors, wrapped.
func FileLabelsEmpty(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (bool, error) {
	var has bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM device_file_labels)`).Scan(&has); err != nil {
		return false, fmt.Errorf("labels file: %w", err)
	}
	return !has, nil
}

// LabelsMatch is the SQL condition "the effective labels of device d hold
// every label of the jsonb parameter p" (p a placeholder such as "$3";
// its value a non-empty object). With fileEmpty (FileLabelsEmpty) it reads
// facts.labels alone, which then are the effective labels (labelsExpr:
// an object, else none; a non-object holds no object either) and which the
// index devices_labels answers (jsonb_path_ops, @>). The condition is
// only that term: a second, equivalent term over labelsExpr would make
// PostgreSQL multiply the two estimates, take one label of 50,000
// devices for 500, and read all 50,000 through the index for a first page
// that walking the primary key finds in 2,000 (issue 26 item 4). A labels
// file loaded between FileLabelsEmpty and the read is seen by the next read.
func LabelsMatch(fileEmpty bool, p string) string {
	if fileEmpty {
		return `d.facts->'labels' @> ` + p + `::jsonb`
	}
	return labelsExpr + ` @> ` + p + `::jsonb`
}

// FileLabelEntry is one entry of the hub's labels file (hub/labelsfile):
// labels for one device by id, or for the devices of Site whose name
// matches NameLike (a LIKE pattern, backslash escapes; see GlobToLike).
type FileLabelEntry struct {
	// DeviceID is a node UUID; "" when the entry names a site and pattern.
	DeviceID string
	// Site and NameLike select devices when DeviceID is "".
	Site, NameLike string
	// Labels are the entry's labels (checked by internal/labels).
	Labels map[string]string
}

// ReplaceFileLabels makes entries (in file order: a later entry wins per
// key) the labels file in force, replacing the previous one in one
// transaction. Idempotent: every replica calls it after each (re)load.
func (s *Store) ReplaceFileLabels(ctx context.Context, entries []FileLabelEntry) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM device_file_labels`); err != nil {
			return fmt.Errorf("clear file labels: %w", err)
		}
		for i, e := range entries {
			raw, err := json.Marshal(e.Labels)
			if err != nil {
				return fmt.Errorf("encode file labels entry %d: %w", i, err)
			}
			var id any
			if e.DeviceID != "" {
				id = e.DeviceID
			}
			if _, err := tx.Exec(ctx, `INSERT INTO device_file_labels (pos, site, name_like, device_id, labels)
				VALUES ($1, $2, $3, $4::uuid, $5::jsonb)`, i, e.Site, e.NameLike, id, raw); err != nil {
				return fmt.Errorf("store file labels entry %d: %w", i, err)
			}
		}
		return nil
	})
}

// DeviceLabels returns the effective labels of the devices ids (satellite
// and labels file merged) by device id; a device without labels or
// unknown is absent. Read-only.
func (s *Store) DeviceLabels(ctx context.Context, ids []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT d.id::text, `+labelsExpr+` FROM devices d WHERE d.id = ANY($1::uuid[])`, ids)
	if err != nil {
		return nil, fmt.Errorf("device labels: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var raw []byte
		if err := rows.Scan(&id, &raw); err != nil {
			return nil, fmt.Errorf("device labels: %w", err)
		}
		var set map[string]string
		if err := json.Unmarshal(raw, &set); err != nil {
			return nil, fmt.Errorf("decode labels of device %s: %w", id, err)
		}
		if len(set) > 0 {
			out[id] = set
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("device labels: %w", err)
	}
	return out, nil
}

// decodeLabels decodes device id's effective labels (labelsExpr's jsonb):
// nil for none.
func decodeLabels(id string, raw []byte) (map[string]string, error) {
	var set map[string]string
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, fmt.Errorf("decode labels of device %s: %w", id, err)
	}
	if len(set) == 0 {
		return nil, nil
	}
	return set, nil
}

// fillLabels sets the effective labels of devs.
func (s *Store) fillLabels(ctx context.Context, devs []Device) error {
	ids := make([]string, len(devs))
	for i, d := range devs {
		ids[i] = d.ID
	}
	sets, err := s.DeviceLabels(ctx, ids)
	if err != nil {
		return err
	}
	for i := range devs {
		devs[i].Labels = sets[devs[i].ID]
	}
	return nil
}

// labelsArg is the jsonb parameter of a label selector: nil (no label
// condition) for an empty set.
func labelsArg(sel map[string]string) (any, error) {
	if len(sel) == 0 {
		return nil, nil
	}
	raw, err := json.Marshal(sel)
	if err != nil {
		return nil, fmt.Errorf("encode label selector: %w", err)
	}
	return string(raw), nil
}

// LabelsOverLimit is what CountDevicesOverLabelLimit found.
type LabelsOverLimit struct {
	// Devices is how many devices (not removed) carry more labels merged
	// (satellite and labels file) than labels.MaxPerDevice, so that some
	// were dropped (docs/reference/labels.md).
	Devices int
	// Sample names up to 5 of them, "site/name (id): N labels".
	Sample []string
}

// CountDevicesOverLabelLimit counts the devices whose merged labels
// exceed the per-device limit (migration 00046: those keep the file's
// labels first, then the satellite's, each in key byte order, up to the
// limit). Only devices some labels-file entry names can exceed it, so
// with no labels file in force it reads one empty table. Read-only.
func (s *Store) CountDevicesOverLabelLimit(ctx context.Context) (LabelsOverLimit, error) {
	var out LabelsOverLimit
	rows, err := s.pool.Query(ctx, `
		WITH over AS (
			SELECT d.site, d.name, d.id::text AS id, n
			FROM devices d, LATERAL (SELECT count(*) AS n FROM jsonb_object_keys(ironlink_device_labels_uncapped(d.site, d.name, d.id, d.facts))) c
			WHERE NOT d.removed AND EXISTS (SELECT 1 FROM device_file_labels) AND n > $1)
		SELECT (SELECT count(*) FROM over), site, name, id, n FROM (SELECT * FROM over ORDER BY site, name, id LIMIT 5) s`, labels.MaxPerDevice)
	if err != nil {
		return out, fmt.Errorf("count devices over the label limit: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var site, name, id string
		var total, n int64
		if err := rows.Scan(&total, &site, &name, &id, &n); err != nil {
			return out, fmt.Errorf("count devices over the label limit: %w", err)
		}
		out.Devices = int(total)
		out.Sample = append(out.Sample, fmt.Sprintf("%s/%s (%s): %d labels", site, name, id, n))
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("count devices over the label limit: %w", err)
	}
	return out, nil
}
