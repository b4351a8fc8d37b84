package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DomainAction is one automatic quarantine of a site with the labels its
// device carries now (the per-label guards count them by label value).
type DomainAction struct {
	Site   string
	At     time.Time
	DryRun bool
	Labels map[string]string
}

// RecentPolicyQuarantines returns the policy's quarantines decided after
// since (the ones PolicySites counts: QUARANTINE decisions, live and
// dry-run, and pending actions the policy approved itself), each with its
// device's labels, by site and time. Read-only.
func (s *Store) RecentPolicyQuarantines(ctx context.Context, since time.Time) ([]DomainAction, error) {
	rows, err := s.pool.Query(ctx, `SELECT a.site, a.at, a.dry_run, `+labelsExpr+` FROM (
			SELECT device_id, site, decided_at AS at, dry_run FROM policy_decisions
			WHERE kind = 'QUARANTINE' AND action = 'QUARANTINE' AND decided_at > $1
			UNION ALL
			SELECT device_id, site, resolved_at, false FROM policy_pending_actions
			WHERE state = 'APPROVED' AND resolved_by = '`+ActorPolicy+`' AND resolved_at > $1) a
		JOIN devices d ON d.id = a.device_id ORDER BY a.site, a.at`, since)
	if err != nil {
		return nil, fmt.Errorf("recent policy quarantines: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DomainAction, error) {
		var a DomainAction
		var raw []byte
		if err := r.Scan(&a.Site, &a.At, &a.DryRun, &raw); err != nil {
			return a, err
		}
		return a, json.Unmarshal(raw, &a.Labels)
	})
	if err != nil {
		return nil, fmt.Errorf("recent policy quarantines: %w", err)
	}
	return out, nil
}

// LabelCounts counts the devices not removed per site, label key (of
// keys) and value: site → key → value → devices. Read-only.
func (s *Store) LabelCounts(ctx context.Context, keys []string) (map[string]map[string]map[string]int, error) {
	out := map[string]map[string]map[string]int{}
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT l.site, k, l.labels->>k, count(*)
		FROM (SELECT d.site, `+labelsExpr+` AS labels FROM devices d WHERE NOT d.removed) l, unnest($1::text[]) k
		WHERE l.labels ? k GROUP BY 1, 2, 3`, keys)
	if err != nil {
		return nil, fmt.Errorf("label counts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var site, k, v string
		var n int
		if err := rows.Scan(&site, &k, &v, &n); err != nil {
			return nil, fmt.Errorf("label counts: %w", err)
		}
		if out[site] == nil {
			out[site] = map[string]map[string]int{}
		}
		if out[site][k] == nil {
			out[site][k] = map[string]int{}
		}
		out[site][k][v] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("label counts: %w", err)
	}
	return out, nil
}

// GuardFaultLabels returns the labels of the devices behind site's live
// automatic-quarantine decisions since since that were carried out
// (QUARANTINE) or held by the guard (PENDING HeldByGuard), one entry per
// device: the faults whose common cause a tripped guard names.
// Read-only.
func (s *Store) GuardFaultLabels(ctx context.Context, site string, since time.Time) ([]map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+labelsExpr+` FROM devices d WHERE d.id IN (
			SELECT device_id FROM policy_decisions WHERE site = $1 AND kind = 'QUARANTINE' AND NOT dry_run AND decided_at >= $2
			  AND (action = 'QUARANTINE' OR (action = 'PENDING' AND reason = 'HeldByGuard')))`, site, since)
	if err != nil {
		return nil, fmt.Errorf("guard faults of site %q: %w", site, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (map[string]string, error) {
		var raw []byte
		var set map[string]string
		if err := r.Scan(&raw); err != nil {
			return nil, err
		}
		return set, json.Unmarshal(raw, &set)
	})
	if err != nil {
		return nil, fmt.Errorf("guard faults of site %q: %w", site, err)
	}
	return out, nil
}

// DomainTrip is a tripped per-label guard of a site (policy_domain_trips):
// the policy holds every further quarantine of a device carrying Label =
// Value, and only those, until it re-arms.
type DomainTrip struct {
	Site, Label, Value string
	// Since is when it tripped; Rule and Detail by which rule and why.
	Since        time.Time
	Rule, Detail string
	// OpenHeld counts the site's open PENDING HeldByGuard actions of
	// devices carrying Label = Value now.
	OpenHeld int
}

// DomainTrips returns every tripped per-label guard (optionally only
// site's: "" for all), by site, label and value, with its open held
// actions. Read-only.
func (s *Store) DomainTrips(ctx context.Context, site string) ([]DomainTrip, error) {
	rows, err := s.pool.Query(ctx, `SELECT t.site, t.label, t.value, t.tripped_since, t.rule, t.detail,
			(SELECT count(*) FROM policy_pending_actions p JOIN devices d ON d.id = p.device_id
			 WHERE p.site = t.site AND p.state = 'PENDING' AND p.reason = 'HeldByGuard' AND `+labelsExpr+`->>t.label = t.value)
		FROM policy_domain_trips t WHERE $1 = '' OR t.site = $1 ORDER BY t.site, t.label, t.value`, site)
	if err != nil {
		return nil, fmt.Errorf("domain trips: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DomainTrip, error) {
		var t DomainTrip
		err := r.Scan(&t.Site, &t.Label, &t.Value, &t.Since, &t.Rule, &t.Detail, &t.OpenHeld)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("domain trips: %w", err)
	}
	return out, nil
}

// tripDomain marks the per-label guard of site for label = value tripped
// at at by rule (detail: why), unless it is tripped already.
func tripDomain(ctx context.Context, tx pgx.Tx, site, label, value string, at time.Time, rule, detail string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO policy_domain_trips (site, label, value, tripped_since, rule, detail)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`, site, label, value, at, rule, detail); err != nil {
		return fmt.Errorf("trip the %s=%s guard of site %q: %w", label, value, site, err)
	}
	return nil
}

// RearmDomain clears the tripped per-label guard of site for label =
// value; it reports whether it was tripped.
func (s *Store) RearmDomain(ctx context.Context, site, label, value string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM policy_domain_trips WHERE site = $1 AND label = $2 AND value = $3`, site, label, value)
	if err != nil {
		return false, fmt.Errorf("re-arm the %s=%s guard of site %q: %w", label, value, site, err)
	}
	return tag.RowsAffected() > 0, nil
}
