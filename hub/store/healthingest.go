package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/internal/condition"
)

// ErrAmbiguous: a health event's node name maps to several devices of its
// site; the error's message names them (docs/reference/health.md "Which
// device").
var ErrAmbiguous = errors.New("node name matches several devices")

// HealthEvent is one health event as ReportHealth applies it, validated by
// the caller (hub/healthapi).
type HealthEvent struct {
	// EventID is unique per site: an id the site already reported changes
	// nothing.
	EventID string
	// The device: DeviceID (canonical UUID), else DeviceName (its Ironic
	// name at the site), else NodeName (a host name or address: the device
	// whose name is NodeName or NodeName's first DNS label).
	DeviceID, DeviceName, NodeName string
	// Condition is the health condition the event makes: a health type,
	// status True (healthy) or False, ObservedTime the (clamped) generated
	// time, Health filled. A condition whose Health.ExpireTime has passed
	// is stored Unknown/Stale at once.
	Condition condition.Condition
}

// HealthEventResult is what ReportHealth did with one event.
type HealthEventResult struct {
	// DeviceID is the device the event was mapped to.
	DeviceID string
	// Applied: the condition changed (a new observation or a newer time).
	Applied bool
	// Duplicate: the site already reported this event id.
	Duplicate bool
	// Superseded: the condition holds a newer event; nothing changed.
	Superseded bool
	// ValidationRunID is the open validation run of the device whose
	// required check the event's check name is: the event recorded that
	// check's result (healthvalidation.go); empty otherwise.
	ValidationRunID string
}

// ReportHealth applies a batch of health events of site in one
// transaction: each event's device is resolved (an unknown or removed one
// is ErrNotFound, one of another site ErrWrongSite, an ambiguous node name
// ErrAmbiguous: the whole batch is refused and nothing is written); an
// event id the site already reported changes nothing; an event older
// (generated time) than the condition's is superseded; at equal times the
// later arrival wins; an unchanged observation with a newer time only
// moves the observed and expire times. Every change is a condition_history
// row; the devices' statuses are derived again (hub/status) and every
// status change recorded. Results are in the order of events.
//
// Errors: ErrNotFound (site or device), ErrWrongSite, ErrAmbiguous,
// database errors.
func (s *Store) ReportHealth(ctx context.Context, site string, events []HealthEvent) ([]HealthEventResult, error) {
	var out []HealthEventResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = s.reportHealthTx(ctx, tx, site, events)
		return err
	})
	return out, err
}

func (s *Store) reportHealthTx(ctx context.Context, tx pgx.Tx, site string, events []HealthEvent) ([]HealthEventResult, error) {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM sites WHERE name = $1 FOR NO KEY UPDATE`, site).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("site %q: %w", site, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("lock site %q: %w", site, err)
	}
	res := make([]HealthEventResult, len(events))
	if err := resolveHealthDevices(ctx, tx, site, events, res); err != nil {
		return nil, err
	}
	fresh, err := claimEventIDs(ctx, tx, site, events)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(events))
	for _, r := range res {
		ids = append(ids, r.DeviceID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	current, runs, err := loadConditionsAndRuns(ctx, tx, ids)
	if err != nil {
		return nil, err
	}
	var conds, history condRows
	written := map[string]map[condition.Type]bool{}
	now := time.Now()
	for i, ev := range events {
		if !fresh[ev.EventID] {
			res[i].Duplicate = true
			continue
		}
		delete(fresh, ev.EventID) // a second event with the id in this batch is a duplicate
		id := res[i].DeviceID
		if current[id] == nil {
			current[id] = map[condition.Type]condition.Condition{}
		}
		c, applied, superseded := mergeHealth(current[id], ev.Condition, now)
		res[i].Applied, res[i].Superseded = applied, superseded
		if !applied {
			continue
		}
		if written[id] == nil {
			written[id] = map[condition.Type]bool{}
		}
		written[id][c.Type] = true
		if c.changedObservation {
			history.add(id, c.Condition)
		}
	}
	for _, id := range ids {
		for _, t := range slices.Sorted(maps.Keys(written[id])) {
			conds.add(id, current[id][t])
		}
	}
	if err := recordHealthResults(ctx, tx, events, res, runs); err != nil {
		return nil, err
	}
	return res, s.writeHealth(ctx, tx, ids, &conds, &history, current)
}

// mergedHealth is a merged condition and whether its observation changed
// (a condition_history row) or only its times.
type mergedHealth struct {
	condition.Condition
	changedObservation bool
}

// mergeHealth merges c into cur (a device's current conditions) by
// generated time, then arrival; it reports whether cur changed and whether
// c was older than the stored condition.
func mergeHealth(cur map[condition.Type]condition.Condition, c condition.Condition, now time.Time) (mergedHealth, bool, bool) {
	if !c.Health.ExpireTime.After(now) {
		c.Status, c.Reason = condition.Unknown, condition.ReasonStale
	}
	old, had := cur[c.Type]
	if had && c.ObservedTime.Before(old.ObservedTime) {
		return mergedHealth{}, false, true
	}
	same := had && old.SameObservation(c)
	if same && !c.ObservedTime.After(old.ObservedTime) && c.Health.ExpireTime.Equal(old.Health.ExpireTime) {
		return mergedHealth{}, false, false
	}
	c.LastTransitionTime = c.ObservedTime
	if had && old.Status == c.Status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	cur[c.Type] = c
	return mergedHealth{Condition: c, changedObservation: !same}, true, false
}

// writeHealth writes the merged conditions and their history rows, then
// derives the devices' statuses again from current. It bumps the
// conditions version of the devices' sites (migration 00063).
func (s *Store) writeHealth(ctx context.Context, tx pgx.Tx, ids []string, conds, history *condRows,
	current map[string]map[condition.Type]condition.Condition) error {
	if len(conds.ids) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	// Their sites' conditions change outside the sites' links: the
	// replica holding a link must not use the conditions it keeps of them
	// (groupcache.go).
	b.Queue(`UPDATE sites SET conditions_version = conditions_version + 1
		WHERE name IN (SELECT site FROM devices WHERE id = ANY($1::uuid[]))`, conds.ids)
	b.Queue(groupUpsertConditions, conds.ids, conds.types, conds.statuses, conds.reasons, conds.messages, conds.transitions,
		conds.observed, conds.generations, conds.health, conds.expire)
	if len(history.ids) > 0 {
		b.Queue(groupAppendConditionHistory, history.ids, history.types, history.statuses, history.reasons, history.messages,
			history.transitions, history.observed, history.health)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("write health conditions: %w", err)
	}
	_, err := s.recomputeDevices(ctx, tx, ids, current)
	return err
}

// resolveHealthDevices sets res[i].DeviceID for every event, or returns
// why one cannot be mapped (nothing is written then).
func resolveHealthDevices(ctx context.Context, tx pgx.Tx, site string, events []HealthEvent, res []HealthEventResult) error {
	var ids, names, nodes []string
	for _, ev := range events {
		switch {
		case ev.DeviceID != "":
			ids = append(ids, ev.DeviceID)
		case ev.DeviceName != "":
			names = append(names, ev.DeviceName)
		default:
			nodes = append(nodes, foldHost(ev.NodeName), foldHost(firstLabel(ev.NodeName)))
		}
	}
	// Node names match names and labels whatever their ASCII case (RFC
	// 4343): $4 holds them folded, and each side is folded the same way
	// (foldSQL, foldHost).
	rows, err := tx.Query(ctx, `
		SELECT d.id::text, d.site, d.name, COALESCE(l->>'`+NodeLabelHostname+`', ''), COALESCE(l->>'`+NodeLabelAddress+`', '')
		FROM devices d, LATERAL (SELECT `+labelsExpr+` AS l) x
		WHERE NOT d.removed AND (d.id = ANY($1::uuid[]) OR (d.site = $2 AND (
			(d.name <> '' AND d.name = ANY($3::text[]))
			OR (d.name <> '' AND `+foldSQL("d.name")+` = ANY($4::text[]))
			OR `+foldSQL("l->>'"+NodeLabelHostname+"'")+` = ANY($4::text[]) OR `+foldSQL("l->>'"+NodeLabelAddress+"'")+` = ANY($4::text[]))))`,
		ids, site, names, nodes)
	if err != nil {
		return fmt.Errorf("resolve health devices: %w", err)
	}
	type dev struct{ id, site, name, host, addr string }
	devs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dev, error) {
		var d dev
		return d, r.Scan(&d.id, &d.site, &d.name, &d.host, &d.addr)
	})
	if err != nil {
		return fmt.Errorf("resolve health devices: %w", err)
	}
	// byName: exact names (device_name); byHost and byLabel: names and
	// hostname/address labels folded (node_name).
	byID, byName, byHost, byLabel := map[string]dev{}, map[string][]string{}, map[string][]string{}, map[string][]string{}
	for _, d := range devs {
		byID[d.id] = d
		if d.site == site {
			byName[d.name] = append(byName[d.name], d.id)
			if d.name != "" {
				byHost[foldHost(d.name)] = append(byHost[foldHost(d.name)], d.id)
			}
			for _, v := range slices.Compact([]string{foldHost(d.host), foldHost(d.addr)}) {
				if v != "" {
					byLabel[v] = append(byLabel[v], d.id)
				}
			}
		}
	}
	for i, ev := range events {
		switch {
		case ev.DeviceID != "":
			d, ok := byID[ev.DeviceID]
			if !ok {
				return fmt.Errorf("device %s: %w", ev.DeviceID, ErrNotFound)
			}
			if d.site != site {
				return fmt.Errorf("device %s is registered to another site, not %q: %w", ev.DeviceID, site, ErrWrongSite)
			}
			res[i].DeviceID = d.id
		case ev.DeviceName != "":
			if len(byName[ev.DeviceName]) != 1 {
				return fmt.Errorf("device named %q at site %q: %w", ev.DeviceName, site, ErrNotFound)
			}
			res[i].DeviceID = byName[ev.DeviceName][0]
		default:
			id, err := matchNode(ev.NodeName, site, byHost, byLabel)
			if err != nil {
				return err
			}
			res[i].DeviceID = id
		}
	}
	return nil
}

// matchNode maps a node name to the one device of byHost (the site's
// devices by folded name) named like it or like its first DNS label; when
// none is, to the one device of byLabel (by the folded value of its
// hostname or address label) carrying it or its first DNS label. Names
// compare without ASCII case (foldHost): GPU-07 is gpu-07.
func matchNode(node, site string, byHost, byLabel map[string][]string) (string, error) {
	folded := foldHost(node)
	cands := nodeCandidates(folded, byHost)
	if len(cands) == 0 {
		cands = nodeCandidates(folded, byLabel)
	}
	switch len(cands) {
	case 1:
		return cands[0], nil
	case 0:
		return "", fmt.Errorf("node %q maps to no device of site %q (by name, first DNS label, or label %s or %s): %w",
			node, site, NodeLabelHostname, NodeLabelAddress, ErrNotFound)
	}
	return "", fmt.Errorf("node %q maps to %d devices of site %q: %s: %w", node, len(cands), site, strings.Join(cands, ", "), ErrAmbiguous)
}

// nodeCandidates returns the device ids by holds under node or its first
// DNS label, sorted, each once.
func nodeCandidates(node string, by map[string][]string) []string {
	cands := slices.Clone(by[node])
	if l := firstLabel(node); l != node {
		cands = append(cands, by[l]...)
	}
	slices.Sort(cands)
	return slices.Compact(cands)
}

// NodeLabelHostname and NodeLabelAddress are the labels a health event's
// node name is matched against when no device of the site is named like
// it (docs/reference/health.md "Which device"): each site maps them from
// its Ironic fields (the satellite's --label-map, e.g.
// hostname=extra.fqdn,address=extra.ip) or the labels file gives them.
const (
	NodeLabelHostname = "hostname"
	NodeLabelAddress  = "address"
)

// foldHost folds a host name's ASCII letters to lower case: host names
// compare without case (RFC 4343), and only ASCII letters fold (a
// non-ASCII byte is compared as it is). foldSQL folds the same way.
func foldHost(name string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, name)
}

// foldSQL is the SQL expression folding text expression expr as foldHost
// does (ASCII letters only, whatever the database's collation).
func foldSQL(expr string) string {
	return "translate(" + expr + ", 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"
}

// firstLabel is a host name's first DNS label ("gpu-01" of
// "gpu-01.dc1.example"); an IP address or a bare name is returned whole.
func firstLabel(node string) string {
	if net.ParseIP(node) != nil {
		return node
	}
	name, _, _ := strings.Cut(node, ".")
	return name
}

// claimEventIDs records the batch's event ids for site and returns those
// not reported before (by this batch or an earlier one).
func claimEventIDs(ctx context.Context, tx pgx.Tx, site string, events []HealthEvent) (map[string]bool, error) {
	ids := make([]string, 0, len(events))
	for _, ev := range events {
		ids = append(ids, ev.EventID)
	}
	rows, err := tx.Query(ctx, `INSERT INTO health_event_ids (site, event_id) SELECT $1, unnest($2::text[])
		ON CONFLICT DO NOTHING RETURNING event_id`, site, ids)
	if err != nil {
		return nil, fmt.Errorf("record health event ids: %w", err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("record health event ids: %w", err)
	}
	fresh := make(map[string]bool, len(got))
	for _, id := range got {
		fresh[id] = true
	}
	return fresh, nil
}
