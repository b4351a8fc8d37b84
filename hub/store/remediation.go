package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/hub/status"
)

// Remediation ladders' durable state (migrations/00029, 00030;
// docs/reference/policy.md "Remediation ladders"): one ladder per
// quarantine by a rule, its position and the operation id of each step it
// started, written by the one policy evaluator (hub/remediation) and read
// by explain.

// Ladder states.
const (
	LadderRunning   = "RUNNING"
	LadderSucceeded = "SUCCEEDED"
	LadderHandedOff = "HANDED_OFF"
	LadderAbandoned = "ABANDONED"
)

// Ladder step states: STARTING (operation id chosen, the operation maybe
// not created yet), RUNNING (the operation exists), SETTLING (it succeeded;
// the device's conditions must stay good), then SUCCEEDED, FAILED or
// TIMED_OUT.
const (
	StepStarting  = "STARTING"
	StepRunning   = "RUNNING"
	StepSettling  = "SETTLING"
	StepSucceeded = "SUCCEEDED"
	StepFailed    = "FAILED"
	StepTimedOut  = "TIMED_OUT"
)

// RemediationLadder is one stored ladder.
type RemediationLadder struct {
	ID                     int64
	DeviceID, Site, Rule   string
	HoldGeneration         int64
	State                  string
	Position, StepsTotal   int
	FixedStep              int // 1-based; 0 unless SUCCEEDED
	FixedKind              string
	Waiting, Detail, Cause string
	Released               bool
	StartedAt, UpdatedAt   time.Time
	EndedAt                *time.Time
	Steps                  []RemediationStep // in order
}

// RemediationStep is one step a ladder started.
type RemediationStep struct {
	Step               int // 0-based
	Kind, OperationID  string
	State, Detail      string
	StartedAt          time.Time
	GoodSince, EndedAt *time.Time
}

// InFlight reports whether the step counts against the ladders'
// blast-radius guard: STARTING, RUNNING or SETTLING (as
// RemediationsInFlight counts).
func (s RemediationStep) InFlight() bool {
	return s.State == StepStarting || s.State == StepRunning || s.State == StepSettling
}

// Current returns the ladder's step at Position, if it was started.
func (l *RemediationLadder) Current() (RemediationStep, bool) {
	for _, s := range l.Steps {
		if s.Step == l.Position {
			return s, true
		}
	}
	return RemediationStep{}, false
}

// RemediationDevice is a device the ladder engine looks at: held by a
// policy rule, or with an open ladder.
type RemediationDevice struct {
	DeviceID, Site, Name string
	Status               status.Status
	StatusReason         string
	StatusChangedAt      time.Time
	Removed, SiteStale   bool
	// Rule and HoldGeneration: the device's policy hold ("" when none).
	Rule           string
	HoldGeneration int64
	// CustomerAllocated: the CustomerAllocated condition is True.
	CustomerAllocated bool
	// Recommended are the recommended actions of its fatal unhealthy
	// health conditions.
	Recommended []int32
	// OpenHandoff: the device has an open repair handoff.
	OpenHandoff bool
	// Labels are its effective failure-domain labels (docs/reference/labels.md).
	Labels map[string]string
	// Ladder is its open ladder (nil when none).
	Ladder *RemediationLadder
	// Validation is its newest validation run (nil when none): a
	// validation rule's ladder judges its steps by it.
	Validation *ValidationBrief
}

const ladderColumns = `l.id, l.device_id::text, l.site, l.rule, l.hold_generation, l.state, l.position, l.steps_total,
	COALESCE(l.fixed_step, 0), l.fixed_kind, l.waiting, l.detail, l.cause, l.released, l.started_at, l.updated_at, l.ended_at`

func scanLadder(r pgx.Row, l *RemediationLadder) error {
	return r.Scan(&l.ID, &l.DeviceID, &l.Site, &l.Rule, &l.HoldGeneration, &l.State, &l.Position, &l.StepsTotal,
		&l.FixedStep, &l.FixedKind, &l.Waiting, &l.Detail, &l.Cause, &l.Released, &l.StartedAt, &l.UpdatedAt, &l.EndedAt)
}

// RemediationDevices returns the devices held by a policy rule (hold
// policy:<rule>) or with an open ladder, oldest status change first, each
// with its open ladder and that ladder's steps.
func (s *Store) RemediationDevices(ctx context.Context) ([]RemediationDevice, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT d.id::text, d.site, d.name, d.status, d.status_reason, d.status_changed_at, d.removed, st.stale,
			COALESCE(h.holder, ''), COALESCE(h.generation, 0),
			EXISTS (SELECT 1 FROM device_conditions c WHERE c.device_id = d.id AND c.type = 'CustomerAllocated' AND c.status = 'True'),
			ARRAY(SELECT (c.health->>'recommended_action')::int FROM device_conditions c
				WHERE c.device_id = d.id AND c.health IS NOT NULL AND c.status = 'False'
				  AND COALESCE((c.health->>'fatal')::boolean, false) AND c.health ? 'recommended_action'),
			EXISTS (SELECT 1 FROM remediation_handoffs o WHERE o.device_id = d.id AND o.state = 'OPEN'),
			COALESCE(l.id, 0), `+labelsExpr+`
		FROM devices d
		JOIN sites st ON st.name = d.site
		LEFT JOIN LATERAL (SELECT holder, generation FROM quarantine_holds q
			WHERE q.device_id = d.id AND q.holder LIKE 'policy:%' ORDER BY q.created_at, q.holder LIMIT 1) h ON true
		LEFT JOIN remediation_ladders l ON l.device_id = d.id AND l.state = 'RUNNING'
		WHERE (h.holder IS NOT NULL OR l.id IS NOT NULL)
			-- The same devices, named first from the two small sets, so that
			-- the query does not walk every device row (a resync of 100,000
			-- devices made it a full scan with a lateral probe each, issue
			-- 26 item 2).
			AND d.id IN (SELECT q.device_id FROM quarantine_holds q WHERE q.holder LIKE 'policy:%'
				UNION SELECT r.device_id FROM remediation_ladders r WHERE r.state = 'RUNNING')
		ORDER BY d.status_changed_at, d.id`)
	if err != nil {
		return nil, fmt.Errorf("remediation devices: %w", err)
	}
	var out []RemediationDevice
	var ladders []int64
	for rows.Next() {
		var d RemediationDevice
		var st, holder string
		var ladder int64
		if err := rows.Scan(&d.DeviceID, &d.Site, &d.Name, &st, &d.StatusReason, &d.StatusChangedAt, &d.Removed, &d.SiteStale,
			&holder, &d.HoldGeneration, &d.CustomerAllocated, &d.Recommended, &d.OpenHandoff, &ladder, &d.Labels); err != nil {
			rows.Close()
			return nil, fmt.Errorf("scan remediation device: %w", err)
		}
		d.Status, d.Rule = status.Status(st), strings.TrimPrefix(holder, "policy:")
		out = append(out, d)
		ladders = append(ladders, ladder)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("remediation devices: %w", err)
	}
	ids := make([]string, len(out))
	for i, d := range out {
		ids[i] = d.DeviceID
	}
	runs, err := newestRuns(ctx, s.pool, ids)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if b, ok := runs[out[i].DeviceID]; ok {
			out[i].Validation = &b
		}
	}
	for i, id := range ladders {
		if id == 0 {
			continue
		}
		l, err := s.GetLadder(ctx, id)
		if err != nil {
			return nil, err
		}
		out[i].Ladder = &l
	}
	return out, nil
}

// GetLadder returns ladder id with its steps. Errors: ErrNotFound.
func (s *Store) GetLadder(ctx context.Context, id int64) (RemediationLadder, error) {
	var l RemediationLadder
	err := scanLadder(s.pool.QueryRow(ctx, `SELECT `+ladderColumns+` FROM remediation_ladders l WHERE l.id = $1`, id), &l)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, fmt.Errorf("ladder %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return l, fmt.Errorf("ladder %d: %w", id, err)
	}
	rows, err := s.pool.Query(ctx, `SELECT step, kind, operation_id::text, state, detail, started_at, good_since, ended_at
		FROM remediation_steps WHERE ladder_id = $1 ORDER BY step`, id)
	if err != nil {
		return l, fmt.Errorf("steps of ladder %d: %w", id, err)
	}
	l.Steps, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (RemediationStep, error) {
		var st RemediationStep
		err := r.Scan(&st.Step, &st.Kind, &st.OperationID, &st.State, &st.Detail, &st.StartedAt, &st.GoodSince, &st.EndedAt)
		return st, err
	})
	if err != nil {
		return l, fmt.Errorf("steps of ladder %d: %w", id, err)
	}
	return l, nil
}

// DeviceLadders returns device id's ladders started after since, newest
// first, with their steps.
func (s *Store) DeviceLadders(ctx context.Context, id string, since time.Time) ([]RemediationLadder, error) {
	rows, err := s.pool.Query(ctx, `SELECT l.id FROM remediation_ladders l WHERE l.device_id = $1 AND l.started_at > $2
		ORDER BY l.started_at DESC, l.id DESC`, id, since)
	if err != nil {
		return nil, fmt.Errorf("ladders of %s: %w", id, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("ladders of %s: %w", id, err)
	}
	out := make([]RemediationLadder, 0, len(ids))
	for _, lid := range ids {
		l, err := s.GetLadder(ctx, lid)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// LadderEvent is one remediation change-feed row to record.
type LadderEvent struct {
	DeviceID, Site, Rule string
	LadderID, HandoffID  int64
	Event                string
	Step                 int
	Kind, OperationID    string
	Detail               string
}

func recordLadderEvent(ctx context.Context, tx pgx.Tx, e LadderEvent) error {
	var op any
	if e.OperationID != "" {
		op = e.OperationID
	}
	var ladder, handoff any
	if e.LadderID != 0 {
		ladder = e.LadderID
	}
	if e.HandoffID != 0 {
		handoff = e.HandoffID
	}
	_, err := tx.Exec(ctx, `INSERT INTO remediation_events (device_id, site, rule, ladder_id, handoff_id, event, step, kind, operation_id, detail)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		e.DeviceID, e.Site, e.Rule, ladder, handoff, e.Event, e.Step, e.Kind, op, e.Detail)
	if err != nil {
		return fmt.Errorf("record remediation event %s of %s: %w", e.Event, e.DeviceID, err)
	}
	return nil
}

// StartLadder stores a new RUNNING ladder for the quarantine generation gen
// of device by rule (LADDER_STARTED event). started=false when a ladder
// for that quarantine exists already (nothing written).
func (s *Store) StartLadder(ctx context.Context, d RemediationDevice, steps int, cause string) (RemediationLadder, bool, error) {
	var l RemediationLadder
	started := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		err := scanLadder(tx.QueryRow(ctx, `
			INSERT INTO remediation_ladders AS l (device_id, site, rule, hold_generation, steps_total, cause)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (device_id, hold_generation) DO NOTHING
			RETURNING `+ladderColumns, d.DeviceID, d.Site, d.Rule, d.HoldGeneration, steps, cause), &l)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if isUniqueViolation(err) {
			return nil // another ladder of the device is open
		}
		if err != nil {
			return fmt.Errorf("start ladder of %s: %w", d.DeviceID, err)
		}
		started = true
		return recordLadderEvent(ctx, tx, LadderEvent{DeviceID: d.DeviceID, Site: d.Site, Rule: d.Rule, LadderID: l.ID,
			Event: "LADDER_STARTED", Detail: cause})
	})
	return l, started, err
}

// LaddersSince counts device id's ladders started after since (its spent
// budget).
func (s *Store) LaddersSince(ctx context.Context, id string, since time.Time) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM remediation_ladders WHERE device_id = $1 AND started_at > $2`, id, since).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count ladders of %s: %w", id, err)
	}
	return n, nil
}

// RemediationsInFlight counts, per site, the open ladders whose current
// step has started and not ended (STARTING, RUNNING, SETTLING).
func (s *Store) RemediationsInFlight(ctx context.Context) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT l.site, count(*) FROM remediation_ladders l
		JOIN remediation_steps s ON s.ladder_id = l.id AND s.step = l.position
		WHERE l.state = 'RUNNING' AND s.state IN ('STARTING', 'RUNNING', 'SETTLING') GROUP BY l.site`)
	if err != nil {
		return nil, fmt.Errorf("remediations in flight: %w", err)
	}
	out := map[string]int{}
	for rows.Next() {
		var site string
		var n int
		if err := rows.Scan(&site, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("remediations in flight: %w", err)
		}
		out[site] = n
	}
	return out, rows.Err()
}

// StartStep records step (0-based) of ladder l as STARTING at at (the
// engine's clock: its timeout counts from it) with operation id opID,
// chosen before the operation is created (STEP_STARTED event).
// started=false when the step exists already (nothing written).
func (s *Store) StartStep(ctx context.Context, l RemediationLadder, step int, kind, opID, detail string, at time.Time) (bool, error) {
	started := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO remediation_steps (ladder_id, step, kind, operation_id, detail, started_at)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (ladder_id, step) DO NOTHING`, l.ID, step, kind, opID, detail, at)
		if err != nil {
			return fmt.Errorf("start step %d of ladder %d: %w", step+1, l.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		started = true
		if _, err := tx.Exec(ctx, `UPDATE remediation_ladders SET waiting = '', detail = $2, updated_at = now() WHERE id = $1`, l.ID, detail); err != nil {
			return fmt.Errorf("ladder %d: %w", l.ID, err)
		}
		return recordLadderEvent(ctx, tx, LadderEvent{DeviceID: l.DeviceID, Site: l.Site, Rule: l.Rule, LadderID: l.ID,
			Event: "STEP_STARTED", Step: step + 1, Kind: kind, OperationID: opID, Detail: detail})
	})
	return started, err
}

// StepUpdate is a change of a ladder's current step.
type StepUpdate struct {
	// State is the step's new state; GoodSince its good-since time (nil
	// clears it).
	State     string
	GoodSince *time.Time
	Detail    string
	// Event, when set, is recorded in the feed with Detail.
	Event string
	// Advance moves the ladder to the next step (after a failed step).
	Advance bool
}

// UpdateStep changes the current step of ladder l as u says, only while
// the ladder is still RUNNING at that position (false otherwise: a stale
// pass wrote nothing).
func (s *Store) UpdateStep(ctx context.Context, l RemediationLadder, st RemediationStep, u StepUpdate) (bool, error) {
	done := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE remediation_ladders SET position = position + $3::int, detail = $4, waiting = '', updated_at = now()
			WHERE id = $1 AND state = 'RUNNING' AND position = $2`, l.ID, st.Step, boolInt(u.Advance), u.Detail)
		if err != nil {
			return fmt.Errorf("ladder %d: %w", l.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		done = true
		final := u.State == StepSucceeded || u.State == StepFailed || u.State == StepTimedOut
		if _, err := tx.Exec(ctx, `UPDATE remediation_steps SET state = $3, good_since = $4, detail = $5,
			ended_at = CASE WHEN $6 THEN now() ELSE ended_at END WHERE ladder_id = $1 AND step = $2`,
			l.ID, st.Step, u.State, u.GoodSince, u.Detail, final); err != nil {
			return fmt.Errorf("step %d of ladder %d: %w", st.Step+1, l.ID, err)
		}
		if u.Event == "" {
			return nil
		}
		return recordLadderEvent(ctx, tx, LadderEvent{DeviceID: l.DeviceID, Site: l.Site, Rule: l.Rule, LadderID: l.ID,
			Event: u.Event, Step: st.Step + 1, Kind: st.Kind, OperationID: st.OperationID, Detail: u.Detail})
	})
	return done, err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SetLadderWaiting records why ladder l waits (reason ” = it no longer
// waits), with a WAITING event when the reason changed.
func (s *Store) SetLadderWaiting(ctx context.Context, l RemediationLadder, reason, detail string) error {
	if reason == l.Waiting {
		return nil
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE remediation_ladders SET waiting = $2, detail = $3, updated_at = now()
			WHERE id = $1 AND state = 'RUNNING'`, l.ID, reason, detail); err != nil {
			return fmt.Errorf("ladder %d: %w", l.ID, err)
		}
		if reason == "" {
			return nil
		}
		return recordLadderEvent(ctx, tx, LadderEvent{DeviceID: l.DeviceID, Site: l.Site, Rule: l.Rule, LadderID: l.ID,
			Event: "WAITING", Step: l.Position + 1, Detail: reason + ": " + detail})
	})
}

// FinishLadder ends ladder l (while RUNNING) in state (SUCCEEDED with
// fixedStep 1-based and its kind, or ABANDONED), with event and detail.
// With release, the device's hold policy:<rule> is released in the same
// transaction (actor "remediation", the detail as reason) and a RELEASED
// event follows. false when the ladder had ended already.
func (s *Store) FinishLadder(ctx context.Context, l RemediationLadder, state string, fixedStep int, fixedKind, event, detail string, release bool) (bool, error) {
	done := false
	err := s.inTxOn(ctx, s.commandPool(), func(tx pgx.Tx) error {
		var fixed any
		if fixedStep > 0 {
			fixed = fixedStep
		}
		tag, err := tx.Exec(ctx, `UPDATE remediation_ladders SET state = $2, fixed_step = $3, fixed_kind = $4, detail = $5,
			waiting = '', released = $6, ended_at = now(), updated_at = now() WHERE id = $1 AND state = 'RUNNING'`,
			l.ID, state, fixed, fixedKind, detail, release)
		if err != nil {
			return fmt.Errorf("finish ladder %d: %w", l.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		done = true
		ev := LadderEvent{DeviceID: l.DeviceID, Site: l.Site, Rule: l.Rule, LadderID: l.ID, Event: event, Step: fixedStep, Kind: fixedKind, Detail: detail}
		if err := recordLadderEvent(ctx, tx, ev); err != nil {
			return err
		}
		if !release {
			return nil
		}
		a := ImpairmentAction{Actor: "remediation", Reason: detail, Source: SourcePolicy}
		p, _, err := s.releaseTx(ctx, tx, l.DeviceID, PolicyHolder(l.Rule), false, a, false)
		if err != nil {
			return fmt.Errorf("release %s after its ladder: %w", l.DeviceID, err)
		}
		ev.Event, ev.Detail = "RELEASED", fmt.Sprintf("%s (%s)", detail, p.Outcome)
		return recordLadderEvent(ctx, tx, ev)
	})
	return done, err
}
