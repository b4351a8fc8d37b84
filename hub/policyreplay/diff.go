package policyreplay

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Difference is a trigger whose replayed decision differs from the
// recorded one; Recorded or Replayed is nil when only the other decided.
type Difference struct {
	DeviceID  string
	TriggerID int64
	Recorded  *Decision
	Replayed  *Decision
}

// Recorded reads the quarantine decisions the hub recorded (the
// policy_decisions table) for the triggers of [from, to], read-only. A
// guard trip is known only for a site's current trip (policy_site_state).
func Recorded(ctx context.Context, pool *pgxpool.Pool, from, to time.Time) ([]Decision, error) {
	var out []Decision
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		// The decision that tripped a guard is not a column: it is the one
		// decided when the site's guard (still) tripped, with its detail.
		rows, err := tx.Query(ctx, `SELECT pd.device_id::text, pd.site, pd.trigger_id, pd.decided_at, pd.action, pd.reason, pd.rule, pd.detail,
				pd.dry_run, COALESCE(pd.action = 'PENDING' AND pd.decided_at = ps.guard_tripped_since AND pd.detail = ps.guard_tripped_detail, false)
			FROM policy_decisions pd LEFT JOIN policy_site_state ps ON ps.site = pd.site
			WHERE pd.kind = 'QUARANTINE' AND pd.triggered_at BETWEEN $1 AND $2 ORDER BY pd.id`, from, to)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var d Decision
			if err := rows.Scan(&d.DeviceID, &d.Site, &d.TriggerID, &d.At, &d.Action, &d.Reason, &d.Rule, &d.Detail, &d.DryRun, &d.Trips); err != nil {
				return err
			}
			out = append(out, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("recorded decisions: %w", err)
	}
	return out, nil
}

// Diff compares recorded and replayed decisions by trigger: action,
// reason, rule, dry-run and guard trip (not the time or the detail, whose
// figures name the decision time). Sorted by trigger.
func Diff(recorded, replayed []Decision) []Difference {
	type key struct {
		dev string
		id  int64
	}
	byKey := map[key]*Difference{}
	for i := range recorded {
		d := &recorded[i]
		byKey[key{d.DeviceID, d.TriggerID}] = &Difference{DeviceID: d.DeviceID, TriggerID: d.TriggerID, Recorded: d}
	}
	for i := range replayed {
		d := &replayed[i]
		k := key{d.DeviceID, d.TriggerID}
		if byKey[k] == nil {
			byKey[k] = &Difference{DeviceID: d.DeviceID, TriggerID: d.TriggerID}
		}
		byKey[k].Replayed = d
	}
	var out []Difference
	for _, df := range byKey {
		if df.Recorded != nil && df.Replayed != nil && same(*df.Recorded, *df.Replayed) {
			continue
		}
		out = append(out, *df)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TriggerID < out[j].TriggerID })
	return out
}

func same(a, b Decision) bool {
	return a.Action == b.Action && a.Reason == b.Reason && a.Rule == b.Rule && a.DryRun == b.DryRun && a.Trips == b.Trips
}
