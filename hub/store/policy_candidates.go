package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/internal/condition"
)

// PolicyCandidate is a device in FAULTED or MAINTENANCE with its triggering
// status change, read from status_history (see PolicyCandidates).
type PolicyCandidate struct {
	DeviceID, Site string
	// HistoryID is the status_history row where the device entered the
	// current run of FAULTED/MAINTENANCE (UNREACHABLE rows inside the run
	// are skipped); ChangedAt its time.
	HistoryID int64
	ChangedAt time.Time
	// From is the last status before that row other than UNREACHABLE ("" when
	// the history holds none within the rows read).
	From status.Status
	// To is the status of the triggering row; Current the device's status now.
	To, Current status.Status
	// UnreachableUntil is when the device last left UNREACHABLE before
	// HistoryID (zero when it did not within the rows read).
	UnreachableUntil time.Time
	// Cause is the condition behind Current (ProvisioningHealthy for
	// FAULTED, MaintenanceClear for MAINTENANCE).
	Cause condition.Condition
	// Quarantined is true when the desired impairment is QUARANTINED.
	Quarantined bool
	// SiteStale is the site's stale flag.
	SiteStale bool
	// AwaitingID is the open pending action of the trigger's PENDING
	// AwaitingFreshEvidence decision (0: the trigger has no decision yet):
	// the evaluator decides it again and resolves that action
	// (ResolveAwaiting) instead of recording a second decision.
	AwaitingID int64
}

// awaitingSQL is true for a decision pd that waits for fresh evidence:
// PENDING AwaitingFreshEvidence with its pending action still open. Such
// a decision does not count as deciding its trigger.
const awaitingSQL = `(pd.action = 'PENDING' AND pd.reason = '` + ReasonAwaitingFreshEvidence + `'
	AND EXISTS (SELECT 1 FROM policy_pending_actions pa WHERE pa.decision_id = pd.id AND pa.state = 'PENDING'
		AND pa.reason = '` + ReasonAwaitingFreshEvidence + `'))`

// healthFaultSQL is true for a health condition c that makes its device
// FAULTED (condition.Condition.Fault): False, fatal, and not store-only.
var healthFaultSQL = `(c.health IS NOT NULL AND c.status = 'False' AND COALESCE((c.health->>'fatal')::boolean, false)
	AND COALESCE((c.health->>'processing_strategy')::int, 0) <> ` + strconv.Itoa(int(condition.StrategyStoreOnly)) + `)`

// historyDepth bounds the status_history rows read per candidate.
const historyDepth = 32

// decidedSlack widens the decided check's time bound: status_history rows
// after a decision's trigger (by id) are searched from the trigger's
// changed_at (policy_decisions.triggered_at) less this. changed_at is the
// writing transaction's start and the id is taken at its insert, so two
// writes of one device can disagree on order by as long as a
// status-writing transaction lasts; those are short (one group, one
// quarantine), far under an hour.
const decidedSlack = "1 hour"

// historyRow is one status_history row of a candidate, as read.
type historyRow struct {
	id     int64
	status status.Status
	at     time.Time
}

// PolicyCandidates returns the devices of the sites in scope, not
// removed, whose status is FAULTED or MAINTENANCE and whose triggering
// status change has no QUARANTINE decision yet, or one that awaits fresh
// evidence (AwaitingID set), in site then id order; nothing, without a
// query, when the scope names no site. Errors are database errors.
func (s *Store) PolicyCandidates(ctx context.Context, scope SiteScope) ([]PolicyCandidate, error) {
	if scope.None() {
		return nil, nil
	}
	out, hist, err := s.readCandidates(ctx, scope)
	if err != nil {
		return nil, err
	}
	for i := range out {
		findTrigger(&out[i], hist[i])
	}
	return s.dropDecided(ctx, out)
}

// readCandidates reads the FAULTED and MAINTENANCE devices without a
// decision on their current run, each with its newest historyDepth
// status_history rows (newest first, hist[i] for out[i]).
func (s *Store) readCandidates(ctx context.Context, scope SiteScope) (out []PolicyCandidate, hist [][]historyRow, err error) {
	// JIT off: the plan spans every weekly partition of status_history
	// twice (the history and the decided check), its estimated cost is
	// past jit_above_cost with a few thousand candidates, and compiling it
	// took 7-14 s of an otherwise ~1 s read at 200,000 devices (EXPLAIN
	// ANALYZE, loaded machine; docs/design/performance.md). Off for this
	// transaction only.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("policy candidates: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only: nothing to keep
	if _, err := tx.Exec(ctx, `SELECT set_config('jit', 'off', true)`); err != nil {
		return nil, nil, fmt.Errorf("policy candidates: %w", err)
	}
	rows, err := tx.Query(ctx, `
		SELECT d.id::text, d.site, d.status, d.desired_impairment = 'QUARANTINED', s.stale,
			COALESCE(c.type, ''), COALESCE(c.status, 'Unknown'), COALESCE(c.reason, ''), COALESCE(c.message, ''),
			COALESCE(c.last_transition_time, 'epoch'::timestamptz), c.health::text,
			h.id, h.status, h.changed_at
		FROM devices d
		JOIN sites s ON s.name = d.site
		LEFT JOIN LATERAL (SELECT c.type, c.status, c.reason, c.message, c.last_transition_time, c.health
			FROM device_conditions c WHERE c.device_id = d.id
				AND (c.type = CASE d.status WHEN 'FAULTED' THEN 'ProvisioningHealthy' ELSE 'MaintenanceClear' END
					OR (d.status = 'FAULTED' AND `+healthFaultSQL+`))
			-- status.Derive's order: ProvisioningHealthy=False, then the
			-- health faults by type, then the fixed condition as it is.
			ORDER BY (c.health IS NULL AND c.status = 'False') DESC, (c.health IS NOT NULL) DESC, c.type
			LIMIT 1) c ON true
		JOIN LATERAL (SELECT id, status, changed_at FROM status_history
			WHERE device_id = d.id ORDER BY id DESC LIMIT $1) h ON true
		WHERE d.status IN ('FAULTED', 'MAINTENANCE') AND NOT d.removed AND `+scope.cond("d.site", 2)+`
			-- Already decided: a decision whose trigger starts the current run
			-- (no status other than FAULTED, MAINTENANCE, UNREACHABLE since).
			-- Rows after the trigger are searched from its time less
			-- decidedSlack on: only the partitions since then are probed
			-- (run-time pruning), not every week of the device's history.
			AND NOT EXISTS (SELECT 1 FROM policy_decisions pd WHERE pd.device_id = d.id AND pd.kind = 'QUARANTINE'
				AND NOT `+awaitingSQL+`
				AND NOT EXISTS (SELECT 1 FROM status_history x WHERE x.device_id = d.id AND x.id > pd.trigger_id
					AND x.changed_at >= COALESCE(pd.triggered_at - interval '`+decidedSlack+`', '-infinity')
					AND x.status NOT IN ('FAULTED', 'MAINTENANCE', 'UNREACHABLE')))
		ORDER BY d.site, d.id, h.id DESC`, historyDepth, scope.arg())
	if err != nil {
		return nil, nil, fmt.Errorf("policy candidates: %w", err)
	}
	for rows.Next() {
		var c PolicyCandidate
		var cur, ctype, cstatus, hst string
		var health pgtype.Text
		var h historyRow
		if err := rows.Scan(&c.DeviceID, &c.Site, &cur, &c.Quarantined, &c.SiteStale, &ctype, &cstatus, &c.Cause.Reason,
			&c.Cause.Message, &c.Cause.LastTransitionTime, &health, &h.id, &hst, &h.at); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("policy candidates: %w", err)
		}
		h.status = status.Status(hst)
		if n := len(out); n == 0 || out[n-1].DeviceID != c.DeviceID {
			c.Current = status.Status(cur)
			c.Cause.Type, c.Cause.Status, c.Cause.Health = condition.Type(ctype), condition.Status(cstatus), decodeHealth(health)
			if c.Cause.LastTransitionTime.Unix() == 0 {
				c.Cause.LastTransitionTime = time.Time{}
			}
			out = append(out, c)
			hist = append(hist, nil)
		}
		hist[len(hist)-1] = append(hist[len(hist)-1], h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("policy candidates: %w", err)
	}
	return out, hist, nil
}

// findTrigger walks c's history h newest first: the run of
// FAULTED/MAINTENANCE (and UNREACHABLE inside it), then the status before
// it; it sets HistoryID, ChangedAt, To, From and UnreachableUntil. It
// leaves HistoryID zero when the history lags the device row (next tick).
func findTrigger(c *PolicyCandidate, h []historyRow) {
	impaired := func(st status.Status) bool { return st == status.Faulted || st == status.Maintenance }
	trig := -1
	for j := 0; j < len(h); j++ {
		if impaired(h[j].status) {
			trig = j
		} else if h[j].status != status.Unreachable {
			break
		}
	}
	if trig < 0 {
		return // the history lags the device row: next tick
	}
	c.HistoryID, c.ChangedAt, c.To = h[trig].id, h[trig].at, h[trig].status
	// From: the first status older than the trigger other than UNREACHABLE;
	// UnreachableUntil: when the newest UNREACHABLE period before the
	// trigger ended (the time of the row after it).
	for k := trig + 1; k < len(h); k++ {
		if h[k].status == status.Unreachable {
			if c.UnreachableUntil.IsZero() {
				c.UnreachableUntil = h[k-1].at
			}
			continue
		}
		if c.From == "" {
			c.From = h[k].status
		}
		if !c.UnreachableUntil.IsZero() {
			break
		}
	}
}

// dropDecided keeps the candidates with a trigger (HistoryID) that has no
// QUARANTINE decision yet.
func (s *Store) dropDecided(ctx context.Context, out []PolicyCandidate) ([]PolicyCandidate, error) {
	ids := make([]string, 0, len(out))
	for _, c := range out {
		ids = append(ids, c.DeviceID)
	}
	rows, err := s.pool.Query(ctx, `SELECT device_id::text, trigger_id,
			COALESCE((SELECT pa.id FROM policy_pending_actions pa WHERE pa.decision_id = pd.id AND `+awaitingSQL+`), 0)
		FROM policy_decisions pd WHERE kind = 'QUARANTINE' AND device_id = ANY($1::uuid[])`, ids)
	if err != nil {
		return nil, fmt.Errorf("policy candidates: decided triggers: %w", err)
	}
	decided := map[string]map[int64]bool{}
	awaiting := map[string]map[int64]int64{}
	for rows.Next() {
		var id string
		var trig, pending int64
		if err := rows.Scan(&id, &trig, &pending); err != nil {
			rows.Close()
			return nil, fmt.Errorf("policy candidates: decided triggers: %w", err)
		}
		if pending != 0 {
			if awaiting[id] == nil {
				awaiting[id] = map[int64]int64{}
			}
			awaiting[id][trig] = pending
			continue
		}
		if decided[id] == nil {
			decided[id] = map[int64]bool{}
		}
		decided[id][trig] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("policy candidates: decided triggers: %w", err)
	}
	kept := out[:0]
	for _, c := range out {
		if c.HistoryID != 0 && !decided[c.DeviceID][c.HistoryID] {
			c.AwaitingID = awaiting[c.DeviceID][c.HistoryID]
			kept = append(kept, c)
		}
	}
	return kept, nil
}
