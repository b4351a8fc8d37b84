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

// RemediationDifference is a quarantine (by its trigger) whose replayed
// remediation differs from the recorded one; Recorded or Replayed is nil
// when only the other has one.
type RemediationDifference struct {
	DeviceID  string
	TriggerID int64
	Recorded  *Remediation
	Replayed  *Remediation
}

// RecordedRemediations reads what the hub's ladders did for the
// quarantines of the triggers of [from, to] (remediation_ladders,
// remediation_steps, remediation_handoffs), read-only, as Remediations:
// each ladder or handoff belongs to the device's latest quarantine (a
// QUARANTINE decision, or an approved pending action) at its start. What
// happened after to counts as still running.
func RecordedRemediations(ctx context.Context, pool *pgxpool.Pool, from, to time.Time) ([]Remediation, error) {
	var out []Remediation
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var err error
		out, err = recordedRemediations(ctx, tx, from, to)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("recorded remediations: %w", err)
	}
	return out, nil
}

type quarantineAt struct {
	trigger int64
	at      time.Time
}

func recordedRemediations(ctx context.Context, tx pgx.Tx, from, to time.Time) ([]Remediation, error) {
	qs := map[string][]quarantineAt{}
	rows, err := tx.Query(ctx, `SELECT device_id::text, trigger_id, at FROM (
			SELECT device_id, trigger_id, decided_at AS at FROM policy_decisions
			WHERE kind = 'QUARANTINE' AND action = 'QUARANTINE' AND NOT dry_run AND triggered_at BETWEEN $1 AND $2
			UNION ALL
			SELECT p.device_id, pd.trigger_id, p.resolved_at FROM policy_pending_actions p JOIN policy_decisions pd ON pd.id = p.decision_id
			WHERE p.state = 'APPROVED' AND pd.triggered_at BETWEEN $1 AND $2) q ORDER BY at`, from, to)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var dev string
		var q quarantineAt
		if err := rows.Scan(&dev, &q.trigger, &q.at); err != nil {
			rows.Close()
			return nil, err
		}
		qs[dev] = append(qs[dev], q)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// of is the trigger of dev's latest quarantine at t.
	of := func(dev string, t time.Time) (int64, bool) {
		var id int64
		ok := false
		for _, q := range qs[dev] {
			if !q.at.After(t) {
				id, ok = q.trigger, true
			}
		}
		return id, ok
	}
	out, byLadder, err := recordedLadders(ctx, tx, from, to, of)
	if err != nil {
		return nil, err
	}
	if err := recordedSteps(ctx, tx, from, to, byLadder); err != nil {
		return nil, err
	}
	if out, err = recordedHandoffs(ctx, tx, from, to, of, out, byLadder); err != nil {
		return nil, err
	}
	res := make([]Remediation, len(out))
	for i, r := range out {
		res[i] = *r
	}
	return res, nil
}

// recordedLadders reads the ladders started in [from, to] of the
// quarantines of (of), by id too.
func recordedLadders(ctx context.Context, tx pgx.Tx, from, to time.Time, of func(string, time.Time) (int64, bool)) ([]*Remediation, map[int64]*Remediation, error) {
	var out []*Remediation
	byLadder := map[int64]*Remediation{}
	rows, err := tx.Query(ctx, `SELECT id, device_id::text, site, rule, state, COALESCE(fixed_step, 0), released, started_at, ended_at
		FROM remediation_ladders WHERE started_at BETWEEN $1 AND $2 ORDER BY started_at, id`, from, to)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var id int64
		var r Remediation
		var state string
		var ended *time.Time
		if err := rows.Scan(&id, &r.DeviceID, &r.Site, &r.Rule, &state, &r.FixedStep, &r.Released, &r.StartedAt, &ended); err != nil {
			rows.Close()
			return nil, nil, err
		}
		trig, ok := of(r.DeviceID, r.StartedAt)
		if !ok {
			continue
		}
		r.TriggerID, r.Outcome = trig, OutcomeRunning
		if ended != nil && !ended.After(to) {
			r.EndedAt = *ended
			switch state {
			case "SUCCEEDED":
				r.Outcome = OutcomeFixed
			case "HANDED_OFF":
				r.Outcome = OutcomeHandedOff
			case "ABANDONED":
				r.Outcome = OutcomeAbandoned
			}
		}
		if r.Outcome != OutcomeFixed {
			r.FixedStep, r.Released = 0, false
		}
		rp := &r
		out = append(out, rp)
		byLadder[id] = rp
	}
	rows.Close()
	return out, byLadder, rows.Err()
}

// recordedSteps adds their steps to the ladders of byLadder (what ended
// after to still running).
func recordedSteps(ctx context.Context, tx pgx.Tx, from, to time.Time, byLadder map[int64]*Remediation) error {
	rows, err := tx.Query(ctx, `SELECT s.ladder_id, s.step, s.kind, s.state, s.started_at, s.ended_at FROM remediation_steps s
		JOIN remediation_ladders l ON l.id = s.ladder_id WHERE l.started_at BETWEEN $1 AND $2 AND s.started_at <= $2
		ORDER BY s.ladder_id, s.step`, from, to)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int64
		var st Step
		var state string
		var ended *time.Time
		if err := rows.Scan(&id, &st.Step, &st.Kind, &state, &st.StartedAt, &ended); err != nil {
			rows.Close()
			return err
		}
		st.Step++ // stored 0-based
		st.Result = StepRunning
		if ended != nil && !ended.After(to) {
			switch state {
			case "SUCCEEDED":
				st.Result, st.EndedAt = StepSucceeded, *ended
			case "FAILED", "TIMED_OUT":
				st.Result, st.EndedAt = StepFailed, *ended
			}
		}
		if r := byLadder[id]; r != nil {
			r.Steps = append(r.Steps, st)
		}
	}
	rows.Close()
	return rows.Err()
}

// recordedHandoffs sets the handoffs of [from, to] on their ladders, and
// appends those without one to out.
func recordedHandoffs(ctx context.Context, tx pgx.Tx, from, to time.Time, of func(string, time.Time) (int64, bool),
	out []*Remediation, byLadder map[int64]*Remediation) ([]*Remediation, error) {
	rows, err := tx.Query(ctx, `SELECT device_id::text, site, rule, COALESCE(ladder_id, 0), reason, created_at
		FROM remediation_handoffs WHERE created_at BETWEEN $1 AND $2 ORDER BY created_at, id`, from, to)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var ladder int64
		var r Remediation
		if err := rows.Scan(&r.DeviceID, &r.Site, &r.Rule, &ladder, &r.Handoff, &r.StartedAt); err != nil {
			return nil, err
		}
		if l := byLadder[ladder]; l != nil {
			l.Handoff, l.Outcome, l.EndedAt = r.Handoff, OutcomeHandedOff, r.StartedAt
			continue
		}
		trig, ok := of(r.DeviceID, r.StartedAt)
		if !ok || ladder != 0 {
			continue
		}
		r.TriggerID, r.Outcome, r.EndedAt = trig, OutcomeHandedOff, r.StartedAt
		out = append(out, &r)
	}
	return out, rows.Err()
}

// DiffRemediations compares recorded and replayed remediations by the
// quarantine's trigger: the rule, the outcome, the step that fixed it,
// the release, the handoff's reason, and each step's kind and result (not
// the times: the replay's steps start when the history allows, the
// hub's on its next evaluator pass). Sorted by trigger.
func DiffRemediations(recorded, replayed []Remediation) []RemediationDifference {
	byKey := map[triggerKey]*RemediationDifference{}
	var keys []triggerKey
	get := func(r *Remediation) *RemediationDifference {
		k := triggerKey{r.DeviceID, r.TriggerID}
		if byKey[k] == nil {
			byKey[k] = &RemediationDifference{DeviceID: r.DeviceID, TriggerID: r.TriggerID}
			keys = append(keys, k)
		}
		return byKey[k]
	}
	for i := range recorded {
		get(&recorded[i]).Recorded = &recorded[i]
	}
	for i := range replayed {
		get(&replayed[i]).Replayed = &replayed[i]
	}
	var out []RemediationDifference
	for _, k := range keys {
		df := byKey[k]
		if df.Recorded != nil && df.Replayed != nil && sameRemediation(*df.Recorded, *df.Replayed) {
			continue
		}
		out = append(out, *df)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].TriggerID < out[j].TriggerID })
	return out
}

func sameRemediation(a, b Remediation) bool {
	if a.Rule != b.Rule || a.Outcome != b.Outcome || a.FixedStep != b.FixedStep || a.Released != b.Released ||
		a.Handoff != b.Handoff || len(a.Steps) != len(b.Steps) {
		return false
	}
	for i := range a.Steps {
		if a.Steps[i].Step != b.Steps[i].Step || a.Steps[i].Kind != b.Steps[i].Kind || a.Steps[i].Result != b.Steps[i].Result {
			return false
		}
	}
	return true
}
