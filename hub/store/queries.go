package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/internal/condition"
)

// DeviceFilter selects devices for ListDevices.
type DeviceFilter struct {
	// Site, when non-empty, keeps devices of that site.
	Site string
	// Sites, when non-nil, keeps only devices of these sites (an operator
	// bound to sites); an empty non-nil slice keeps none.
	Sites []string
	// Statuses, when non-empty, keeps devices with one of them.
	Statuses []status.Status
	// IncludeRemoved keeps removed devices too.
	IncludeRemoved bool
	// Impairments, when non-empty, keeps devices whose desired impairment is one of them.
	Impairments []Impairment
	// InstanceMismatch keeps only devices whose facts hold at least one
	// InstanceMismatch (orphaned instance).
	InstanceMismatch bool
	// HealthWarning keeps only devices with at least one health warning
	// (a health condition False, not fatal, not STORE_ONLY). Not with AsOf.
	HealthWarning bool
	// NameLike, when non-empty, keeps devices whose name matches this LIKE
	// pattern (backslash escapes; see LikePrefix and GlobToLike).
	NameLike string
	// NameLike2 is a second LIKE pattern that must match too (a prefix and
	// a pattern given together).
	NameLike2 string
	// Labels, when non-empty, keeps devices carrying every one of these
	// labels (effective labels, docs/reference/labels.md). Not with AsOf.
	Labels map[string]string
	// After is the keyset cursor: only devices with id > After (empty: from the start).
	After string
	// IDFrom and IDTo, when non-empty, keep devices with IDFrom <= id <=
	// IDTo (canonical UUIDs; an id prefix's range, see
	// ListDevicesRequest.id_prefix). Not with AsOf.
	IDFrom, IDTo string
	// Limit is the page size (1-1000).
	Limit int
	// AsOf, when not zero, answers from the stored histories as the fleet
	// was at that time (see listDevicesAsOf); InstanceMismatch cannot be
	// combined with it (ErrAsOfUnsupported).
	AsOf time.Time
}

// hasMismatch is true for a device row (alias d) whose facts hold a
// non-empty instance_mismatches array; rows written before the field
// existed lack it and are false.
const hasMismatch = `(CASE WHEN jsonb_typeof(d.facts->'instance_mismatches') = 'array'
	THEN jsonb_array_length(d.facts->'instance_mismatches') > 0 ELSE false END)`

// HasHealthWarning is the SQL condition "device d has a health warning" over
// a devices row aliased d: a health condition False, not fatal, not
// STORE_ONLY (processing strategy 2), as condition.Condition.Warning says.
// The fleet view's list filters with it as ListDevices does.
const HasHealthWarning = `EXISTS (SELECT 1 FROM device_conditions hc WHERE hc.device_id = d.id AND ` + healthWarningCond + `)`

// healthWarningCond is true for a device_conditions row (alias hc) that is
// a health warning: a health condition False, not fatal, not STORE_ONLY.
const healthWarningCond = `hc.health IS NOT NULL AND hc.status = 'False'
	AND NOT COALESCE((hc.health->>'fatal')::bool, false)
	AND COALESCE((hc.health->>'processing_strategy')::int, 0) <> 2`

const deviceColumns = `d.id::text, d.site, d.name, d.facts, d.removed, d.removed_at, d.observed_at, d.status,
	d.status_reason, d.status_changed_at, COALESCE(d.last_known_status, ''), d.desired_impairment,
	d.desired_generation, d.applied_generation, d.last_command_error, d.drift_corrections,
	d.last_drift_correction, d.last_drift_correction_at, d.last_command_failure_class, d.last_command_failure_reason`

func scanDevice(r pgx.Row) (Device, error) { return scanDeviceExtra(r) }

// scanDeviceExtra is scanDevice of a row with more columns after
// deviceColumns, scanned into extra.
func scanDeviceExtra(r pgx.Row, extra ...any) (Device, error) {
	var d Device
	var facts []byte
	var st, lks, desired, class string
	err := r.Scan(append([]any{&d.ID, &d.Site, &d.Name, &facts, &d.Removed, &d.RemovedAt, &d.ObservedAt, &st,
		&d.StatusReason, &d.StatusChangedAt, &lks, &desired, &d.DesiredGeneration, &d.AppliedGeneration, &d.LastCommandError,
		&d.DriftCorrections, &d.LastDriftCorrection, &d.LastDriftCorrectionAt, &class, &d.LastCommandFailureReason}, extra...)...)
	if err != nil {
		return d, err
	}
	d.Status, d.LastKnownStatus, d.DesiredImpairment = status.Status(st), status.Status(lks), Impairment(desired)
	d.LastCommandFailureClass = FailureClass(class)
	if len(facts) > 0 {
		if err := json.Unmarshal(facts, &d.Facts); err != nil {
			return d, fmt.Errorf("decode facts of device %s: %w", d.ID, err)
		}
	}
	return d, nil
}

// textArrays returns f's statuses and impairments as the text[] parameters
// of the device listings (ListDevices, its as_of form).
func (f DeviceFilter) textArrays() (statuses, impairments []string) {
	statuses = make([]string, len(f.Statuses))
	for i, st := range f.Statuses {
		statuses[i] = string(st)
	}
	impairments = make([]string, len(f.Impairments))
	for i, im := range f.Impairments {
		impairments[i] = string(im)
	}
	return statuses, impairments
}

// ListDevices returns up to f.Limit devices in id order, and whether more follow.
func (s *Store) ListDevices(ctx context.Context, f DeviceFilter) ([]Device, bool, error) {
	if !f.AsOf.IsZero() {
		return s.listDevicesAsOf(ctx, f)
	}
	sts, imps := f.textArrays()
	lab, err := labelsArg(f.Labels)
	if err != nil {
		return nil, false, err
	}
	// Only the filters given are in the statement (one statement text per
	// combination, each planned for what it asks): a catch-all
	// "($1 = '' OR d.site = $1)" may be planned generically once prepared,
	// and at 1,000,000 devices a generic plan walks the primary key past
	// every device of the other sites (issue 26 item 4).
	var where []string
	var args []any
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	if f.Site != "" {
		where = append(where, "d.site = "+arg(f.Site))
	}
	if len(sts) > 0 {
		where = append(where, "d.status = ANY("+arg(sts)+"::text[])")
	}
	if !f.IncludeRemoved {
		where = append(where, "NOT d.removed")
	}
	if f.After != "" {
		where = append(where, "d.id > "+arg(f.After)+"::uuid")
	}
	if f.IDFrom != "" {
		where = append(where, "d.id BETWEEN "+arg(f.IDFrom)+"::uuid AND "+arg(f.IDTo)+"::uuid")
	}
	if len(imps) > 0 {
		where = append(where, "d.desired_impairment = ANY("+arg(imps)+"::text[])")
	}
	if f.InstanceMismatch {
		where = append(where, hasMismatch)
	}
	if f.Sites != nil {
		where = append(where, "d.site = ANY("+arg(f.Sites)+"::text[])")
	}
	for _, like := range []string{f.NameLike, f.NameLike2} {
		if like != "" {
			where = append(where, "d.name LIKE "+arg(like))
		}
	}
	if f.HealthWarning {
		where = append(where, HasHealthWarning)
	}
	if lab != nil {
		empty, err := FileLabelsEmpty(ctx, s.pool)
		if err != nil {
			return nil, false, err
		}
		where = append(where, LabelsMatch(empty, arg(lab)))
	}
	// The effective labels come with the page (one statement, not a second
	// read of the same rows).
	q := `SELECT ` + deviceColumns + `, ` + labelsExpr + ` FROM devices d`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	rows, err := s.pool.Query(ctx, q+` ORDER BY d.id LIMIT `+arg(f.Limit+1), args...)
	if err != nil {
		return nil, false, fmt.Errorf("list devices: %w", err)
	}
	devs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Device, error) {
		var labels []byte
		d, err := scanDeviceExtra(r, &labels)
		if err != nil {
			return d, err
		}
		var set map[string]string
		if err := json.Unmarshal(labels, &set); err != nil {
			return d, fmt.Errorf("decode labels of device %s: %w", d.ID, err)
		}
		if len(set) > 0 {
			d.Labels = set
		}
		return d, nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("list devices: %w", err)
	}
	more := len(devs) > f.Limit
	if more {
		devs = devs[:f.Limit]
	}
	return devs, more, nil
}

// scanOneDevice returns a batch callback that scans the device row a
// query (device columns, then its labels) returns, if any, into d and
// labels and sets found.
func scanOneDevice(d *Device, labels *[]byte, found *bool) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		defer rows.Close()
		if rows.Next() {
			*found = true
			var err error
			if *d, err = scanDeviceExtra(rows, labels); err != nil {
				return err
			}
		}
		return rows.Err()
	}
}

// GetDevice returns one device with its current conditions (the fixed ones
// in condition.Types order, then its health conditions by type). Errors:
// ErrNotFound.
func (s *Store) GetDevice(ctx context.Context, id string) (Device, error) {
	// One round trip: the device with its effective labels, then its
	// conditions (issue 26 item 4: each round trip costs its scheduling
	// delay on a loaded host).
	var d Device
	found := false
	var labels []byte
	var conds map[string]map[condition.Type]condition.Condition
	var err error
	b := &pgx.Batch{}
	b.Queue(`SELECT `+deviceColumns+`, `+labelsExpr+` FROM devices d WHERE d.id = $1`, id).Query(scanOneDevice(&d, &labels, &found))
	b.Queue(loadConditionsSQL, []string{id}).Query(func(rows pgx.Rows) error {
		conds, err = scanConditions(rows)
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return Device{}, fmt.Errorf("get device %s: %w", id, err)
	}
	if !found {
		return Device{}, fmt.Errorf("device %s: %w", id, ErrNotFound)
	}
	d.Conditions = orderConditions(conds[id])
	if d.Labels, err = decodeLabels(d.ID, labels); err != nil {
		return Device{}, err
	}
	return d, nil
}

// orderConditions lists conds: the fixed ones in condition.Types order,
// HardwareMatchesProfile, then the health conditions sorted by type.
func orderConditions(conds map[condition.Type]condition.Condition) []condition.Condition {
	var out []condition.Condition
	for _, t := range append(condition.Types[:len(condition.Types):len(condition.Types)], condition.HardwareMatchesProfile) {
		if c, ok := conds[t]; ok {
			out = append(out, c)
		}
	}
	var health []condition.Condition
	for t, c := range conds {
		if t.IsHealth() {
			health = append(health, c)
		}
	}
	slices.SortFunc(health, func(a, b condition.Condition) int { return strings.Compare(string(a.Type), string(b.Type)) })
	return append(out, health...)
}

// DeviceSite returns the site a device belongs to (it never changes once
// the device is known). Errors: ErrNotFound.
func (s *Store) DeviceSite(ctx context.Context, id string) (string, error) {
	var site string
	err := s.pool.QueryRow(ctx, `SELECT site FROM devices WHERE id = $1`, id).Scan(&site)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("device %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("site of device %s: %w", id, err)
	}
	return site, nil
}

// StatusHistory returns up to limit status changes of a device, newest
// first (by the time recorded, then id: the order of the partition key, so
// only the newest partitions of status_history are read).
func (s *Store) StatusHistory(ctx context.Context, id string, limit int) ([]StatusChange, error) {
	rows, err := s.pool.Query(ctx, `SELECT status, reason, changed_at FROM status_history
		WHERE device_id = $1 ORDER BY changed_at DESC, id DESC LIMIT $2`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("status history of %s: %w", id, err)
	}
	return collectStatusChanges(rows, id)
}

// ImpairmentHistory returns up to limit quarantine/release entries of a device, newest first.
func (s *Store) ImpairmentHistory(ctx context.Context, id string, limit int) ([]ImpairmentChange, error) {
	rows, err := s.pool.Query(ctx, `SELECT desired, generation, actor, reason, source, command_id::text, changed_at, action, holder
		FROM impairment_history WHERE device_id = $1 ORDER BY id DESC LIMIT $2`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("impairment history of %s: %w", id, err)
	}
	return collectImpairmentChanges(rows, id)
}

// GetCommand returns one command. Errors: ErrNotFound.
func (s *Store) GetCommand(ctx context.Context, id string) (Command, error) {
	c, err := scanCommand(s.commandPool().QueryRow(ctx, `SELECT `+commandColumns+` FROM commands WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Command{}, fmt.Errorf("command %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Command{}, fmt.Errorf("get command %s: %w", id, err)
	}
	return c, nil
}

// CommandFilter selects commands for ListCommands.
type CommandFilter struct {
	DeviceID string
	Site     string
	// Sites, when non-nil, keeps only commands of these sites (an operator
	// bound to sites); an empty non-nil slice keeps none.
	Sites  []string
	States []CommandState
	// RequestID, when non-empty, keeps the commands of one bulk request
	// (BulkSetDesiredImpairment).
	RequestID string
	// Offset and Limit page through the newest-first list.
	Offset, Limit int
}

// ListCommands returns up to f.Limit commands, newest first, and whether more follow.
func (s *Store) ListCommands(ctx context.Context, f CommandFilter) ([]Command, bool, error) {
	states := make([]string, len(f.States))
	for i, st := range f.States {
		states[i] = string(st)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+commandColumns+` FROM commands
		WHERE ($1 = '' OR device_id = $1::uuid) AND ($2 = '' OR site = $2)
		  AND (cardinality($3::text[]) = 0 OR state = ANY($3::text[]))
		  AND ($6::text[] IS NULL OR site = ANY($6::text[]))
		  AND ($7 = '' OR request_id = $7::uuid)
		ORDER BY created_at DESC, id OFFSET $4 LIMIT $5`, f.DeviceID, f.Site, states, f.Offset, f.Limit+1, f.Sites, f.RequestID)
	if err != nil {
		return nil, false, fmt.Errorf("list commands: %w", err)
	}
	cmds, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Command, error) { return scanCommand(r) })
	if err != nil {
		return nil, false, fmt.Errorf("list commands: %w", err)
	}
	more := len(cmds) > f.Limit
	if more {
		cmds = cmds[:f.Limit]
	}
	return cmds, more, nil
}

// ListSites returns every site in name order, each with its site conditions
// and its count of non-removed devices that have an instance mismatch. A
// site counts as connected when a replica holds its link and it is not
// stale.
func (s *Store) ListSites(ctx context.Context) ([]Site, error) {
	// JIT off: PostgreSQL estimates the orphan counts (the partial index
	// devices_instance_mismatch, usually empty) at half the devices, past
	// jit_above_cost at 1,000,000 devices, and compiled a 1 ms query on
	// every call (0.3-0.6 s). Off for this transaction only.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sites: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only: nothing to keep
	if _, err := tx.Exec(ctx, `SELECT set_config('jit', 'off', true)`); err != nil {
		return nil, fmt.Errorf("list sites: %w", err)
	}
	rows, err := tx.Query(ctx, `
		SELECT s.name, s.last_sequence, s.last_seen_at, COALESCE(s.link_replica, ''), s.stale,
			s.link_replica IS NOT NULL AND NOT s.stale, s.satellite_version, s.capabilities,
			(SELECT count(*) FROM devices d WHERE d.site = s.name AND NOT d.removed AND `+hasMismatch+`),
			COALESCE(hw.n, 0)
		FROM sites s
		LEFT JOIN (
			-- from the few devices with a health condition False (partial
			-- index device_conditions_health_false), not from every device
			SELECT d.site, count(*) AS n FROM devices d
			WHERE NOT d.removed AND d.id IN (SELECT hc.device_id FROM device_conditions hc WHERE `+healthWarningCond+`)
			GROUP BY d.site) hw ON hw.site = s.name
		ORDER BY s.name`)
	if err != nil {
		return nil, fmt.Errorf("list sites: %w", err)
	}
	sites, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Site, error) {
		var st Site
		var seq int64
		err := r.Scan(&st.Name, &seq, &st.LastSeenAt, &st.Replica, &st.Stale, &st.Connected, &st.SatelliteVersion, &st.Capabilities,
			&st.InstanceMismatchCount, &st.HealthWarningCount)
		st.LastSequence = uint64(seq)
		return st, err
	})
	if err != nil {
		return nil, fmt.Errorf("list sites: %w", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		return nil, fmt.Errorf("list sites: %w", err)
	}
	conds, err := loadSiteConditions(ctx, s.pool, "")
	if err != nil {
		return nil, err
	}
	live, err := s.LiveDevices(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sites: %w", err)
	}
	for i := range sites {
		sites[i].Conditions = conds[sites[i].Name]
		sites[i].DeviceCount = live[sites[i].Name]
	}
	return sites, nil
}
