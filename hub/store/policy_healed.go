package store

import (
	"context"
	"fmt"
	"time"

	"github.com/ironlink/ironlink/hub/status"
)

// HealedTrigger is a trigger (a device's change into FAULTED or
// MAINTENANCE) whose run ended — the device left FAULTED/MAINTENANCE for
// another status than UNREACHABLE — before the policy decided it: a fault
// healed inside its rule's hold-down, or between two passes.
type HealedTrigger struct {
	DeviceID, Site string
	// HistoryID, ChangedAt, From and To are the trigger as in
	// PolicyCandidate.
	HistoryID int64
	ChangedAt time.Time
	From, To  status.Status
	// HealedTo is the status that ended the run, HealedAt its time.
	HealedTo status.Status
	HealedAt time.Time
}

// HealedTriggers returns the triggers of the sites in scope changed after
// since whose run has ended and that have no QUARANTINE decision, in site
// then device order (nothing, without a query, when the scope names no
// site):
// for each device whose status changed after since and that has a
// FAULTED or MAINTENANCE status_history row changed after since, its newest
// historyDepth status_history rows are walked for ended runs. Errors are
// database errors.
func (s *Store) HealedTriggers(ctx context.Context, since time.Time, scope SiteScope) ([]HealedTrigger, error) {
	if scope.None() {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT d.id::text, d.site, h.id, h.status, h.changed_at
		FROM devices d
		JOIN LATERAL (SELECT id, status, changed_at FROM status_history
			WHERE device_id = d.id ORDER BY id DESC LIMIT $2) h ON true
		WHERE d.status_changed_at > $1 AND `+scope.cond("d.site", 3)+`
			-- A trigger is a FAULTED or MAINTENANCE row changed after $1:
			-- devices without one (a resync's 100,000 new devices, each
			-- UNKNOWN → AVAILABLE) are not walked (issue 26 item 2).
			AND EXISTS (SELECT 1 FROM status_history x WHERE x.device_id = d.id AND x.changed_at > $1
				AND x.status IN ('FAULTED', 'MAINTENANCE'))
		ORDER BY d.site, d.id, h.id DESC`, since, historyDepth, scope.arg())
	if err != nil {
		return nil, fmt.Errorf("healed triggers: %w", err)
	}
	type dev struct {
		id, site string
		hist     []historyRow
	}
	var devs []dev
	for rows.Next() {
		var id, site, st string
		var h historyRow
		if err := rows.Scan(&id, &site, &h.id, &st, &h.at); err != nil {
			rows.Close()
			return nil, fmt.Errorf("healed triggers: %w", err)
		}
		h.status = status.Status(st)
		if n := len(devs); n == 0 || devs[n-1].id != id {
			devs = append(devs, dev{id: id, site: site})
		}
		devs[len(devs)-1].hist = append(devs[len(devs)-1].hist, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("healed triggers: %w", err)
	}
	var out []HealedTrigger
	for _, d := range devs {
		for _, t := range endedRuns(d.hist) {
			if t.ChangedAt.After(since) {
				t.DeviceID, t.Site = d.id, d.site
				out = append(out, t)
			}
		}
	}
	return s.dropDecidedHealed(ctx, out)
}

// endedRuns finds, in h (newest first), every run of FAULTED/MAINTENANCE
// (UNREACHABLE inside it looked through) that a newer row of another
// status ended; the run's oldest impaired row is the trigger. A run whose
// start or status before lies beyond the rows read is left out.
func endedRuns(h []historyRow) []HealedTrigger {
	impaired := func(st status.Status) bool { return st == status.Faulted || st == status.Maintenance }
	var out []HealedTrigger
	inRun := func(st status.Status) bool { return impaired(st) || st == status.Unreachable }
	for j := 1; j < len(h); j++ {
		if inRun(h[j-1].status) || !inRun(h[j].status) {
			continue // h[j-1] does not end a run that h[j] belongs to
		}
		healed := h[j-1]
		trig, k := -1, j
		for ; k < len(h) && inRun(h[k].status); k++ {
			if impaired(h[k].status) {
				trig = k
			}
		}
		if trig < 0 {
			j = k - 1
			continue // an UNREACHABLE period alone
		}
		if k >= len(h) {
			continue // the run's start (or what came before) is beyond the rows read
		}
		var from status.Status
		for m := trig + 1; m < len(h); m++ {
			if h[m].status != status.Unreachable {
				from = h[m].status
				break
			}
		}
		out = append(out, HealedTrigger{HistoryID: h[trig].id, ChangedAt: h[trig].at, To: h[trig].status, From: from,
			HealedTo: healed.status, HealedAt: healed.at})
		j = k - 1
	}
	return out
}

// dropDecidedHealed keeps the triggers without a QUARANTINE decision.
func (s *Store) dropDecidedHealed(ctx context.Context, ts []HealedTrigger) ([]HealedTrigger, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(ts))
	for i, t := range ts {
		ids[i] = t.HistoryID
	}
	rows, err := s.pool.Query(ctx, `SELECT trigger_id FROM policy_decisions WHERE kind = 'QUARANTINE' AND trigger_id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("healed triggers: decided: %w", err)
	}
	decided := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("healed triggers: decided: %w", err)
		}
		decided[id] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("healed triggers: decided: %w", err)
	}
	kept := ts[:0]
	for _, t := range ts {
		if !decided[t.HistoryID] {
			kept = append(kept, t)
		}
	}
	return kept, nil
}
