package remediation

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/logkey"
)

// Validation rules (docs/reference/policy.md "Validation rules"): a
// failed validation run that a live rule with `validation` and a ladder
// matches is quarantined by that rule (once per run), and the rule's
// ladder runs; each step whose operation succeeded is followed by a
// validation run again (the failed run's checks and params), and that run
// judges the step: PASSED fixes the device (no settle time: the run is
// the evidence), FAILED or not passed within the step's timeout moves on.

// SourceValidation is the source of the offer a fixed validation ladder
// makes (as hub/validation's passing run).
const SourceValidation = "validation"

// FaultyFor reports whether device d shows the fault rule r's ladder
// remediates: for a validation rule, its newest validation run FAILED;
// else its status is FAULTED or MAINTENANCE.
func FaultyFor(r policy.Rule, d store.RemediationDevice) bool {
	if r.Validation != nil {
		return d.Validation != nil && d.Validation.State == store.RunFailed
	}
	return Faulty(d.Status)
}

// validationCause is what a validation ladder remediates, in words.
func validationCause(v *store.ValidationBrief) string {
	if v == nil {
		return "no validation run"
	}
	return fmt.Sprintf("validation run %s failed: %s", v.ID, strings.Join(v.FailingChecks, ", "))
}

// revalidationNamespace derives a step's re-validation operation id.
var revalidationNamespace = uuid.MustParse("0b7e3c52-6a1d-4f0e-8c2b-76616c696461")

// RevalidationID is the id of the validation run (its VALIDATE
// operation) that judges step (0-based) of validation ladder id.
func RevalidationID(ladder int64, step int) string {
	return uuid.NewSHA1(revalidationNamespace, []byte(fmt.Sprintf("%d/%d", ladder, step))).String()
}

// ValidationPlan is the plan for a failed run no rule has taken yet,
// matched by rule r with ladder l: quarantine by the rule, then the
// ladder's start (StartPlan).
func ValidationPlan(r policy.Rule, f store.ValidationFailure, used int, blocked string) Plan {
	d := f.Device
	d.Rule = r.Name
	p := StartPlan(r.Ladder, d, used, blocked)
	p.Text = fmt.Sprintf("would quarantine %s by rule %s (%s), then: %s", name(d), r.Name, validationCause(&f.Run), p.Text)
	return p
}

// validationFailures quarantines by their rule the failed validation runs
// a live validation rule with a ladder matches (or, in dry-run, plans
// it); the device loop of the same pass then starts the ladder.
func (e *Engine) validationFailures(ctx context.Context, ps *pass) error {
	fs, err := e.st.ValidationFailures(ctx)
	if err != nil || len(fs) == 0 {
		return err
	}
	ids := make([]string, len(fs))
	for i, f := range fs {
		ids[i] = f.Device.DeviceID
	}
	holds, err := e.st.DeviceHolds(ctx, ids)
	if err != nil {
		return err
	}
	for _, f := range fs {
		p := ps.file.Effective(f.Device.Site)
		r, ok := policy.MatchValidation(p, f.Run.FailingChecks)
		if !p.Enabled || !ok {
			continue // no rule: the device stays held by the validation gate
		}
		d := f.Device
		d.Rule = r.Name
		if p.DryRun || r.DryRun || r.Ladder.DryRun {
			used, err := e.st.LaddersSince(ctx, d.DeviceID, ps.now.Add(-r.Ladder.Budget.Window))
			if err != nil {
				return err
			}
			blocked, _ := Blocked(p, d, Safety{Excluded: exclusion(holds[d.DeviceID]), Tripped: ps.tripped[d.Site], InFlight: ps.inFlight[d.Site]}, ps.now)
			plan := ValidationPlan(r, f, used, blocked)
			ps.stats.Plans = append(ps.stats.Plans, plan)
			if plan.Step == 1 && blocked == "" {
				ps.inFlight[d.Site]++
			}
			e.log.Info("remediation plan (dry-run: nothing done)", logkey.DeviceID, d.DeviceID, logkey.Site, d.Site, "rule", r.Name, "plan", plan.Text)
			continue
		}
		cause := validationCause(&f.Run)
		detail := fmt.Sprintf("rule %s: %s; its ladder starts with %s", r.Name, cause, r.Ladder.Describe(0))
		_, err := e.st.QuarantineForValidation(ctx, f.Run.ID, r.Name, detail,
			store.ImpairmentAction{Actor: store.ActorPolicy, Reason: fmt.Sprintf("policy rule %s: %s", r.Name, cause)})
		if errors.Is(err, store.ErrRunTaken) {
			continue
		}
		if err != nil {
			return err
		}
		ps.stats.ValidationQuarantines++
		e.log.Info("failed validation run quarantined for its ladder", logkey.DeviceID, d.DeviceID, logkey.Site, d.Site,
			"rule", r.Name, "run_id", f.Run.ID, "failing", f.Run.FailingChecks)
	}
	return nil
}

// revalidating judges a validation ladder's step whose operation
// succeeded by its re-validation run: created if missing, PASSED → fixed,
// FAILED → the next step, neither by the step's timeout → the next step.
func (e *Engine) revalidating(ctx context.Context, ps *pass, l *policy.Ladder, d store.RemediationDevice, lr store.RemediationLadder, cur store.RemediationStep, step policy.LadderStep) error {
	id := RevalidationID(lr.ID, cur.Step)
	if v := d.Validation; v != nil && v.ID == id {
		switch v.State {
		case store.RunPassed:
			return e.fixed(ctx, ps, l, d, lr, cur, ps.now, "validation run "+id+" passed", true)
		case store.RunFailed:
			_, err := e.st.UpdateStep(ctx, lr, cur, store.StepUpdate{State: store.StepFailed, Advance: true, Event: "STEP_FAILED",
				Detail: validationCause(v) + " (" + v.Message + ")"})
			return err
		}
	} else if err := e.ensureRevalidation(ctx, ps, d, lr, cur); err != nil {
		return err
	}
	if ps.now.Sub(cur.StartedAt) > step.Timeout {
		_, err := e.st.UpdateStep(ctx, lr, cur, store.StepUpdate{State: store.StepTimedOut, Advance: true, Event: "STEP_TIMED_OUT",
			Detail: fmt.Sprintf("validation run %s did not pass within %s", id, step.Timeout)})
		return err
	}
	return nil
}

// ensureRevalidation creates the step's re-validation run (a VALIDATE
// operation under its derived id, the params of the device's newest run)
// unless it exists.
func (e *Engine) ensureRevalidation(ctx context.Context, ps *pass, d store.RemediationDevice, lr store.RemediationLadder, cur store.RemediationStep) error {
	id := RevalidationID(lr.ID, cur.Step)
	_, err := e.st.GetOperation(ctx, id)
	if err == nil || !errors.Is(err, store.ErrNotFound) {
		return err
	}
	params := []byte("{}")
	if d.Validation != nil && len(d.Validation.Params) > 0 {
		params = d.Validation.Params
	}
	_, _, err = e.st.CreateOperations(ctx, []store.NewOperation{{ID: id, Site: d.Site, DeviceID: d.DeviceID, DeviceName: d.Name,
		Kind: "VALIDATE", Params: params, Actor: "remediation", Source: store.SourcePolicy,
		Reason: fmt.Sprintf("validation again after step %d of %d of rule %s's ladder", cur.Step+1, lr.StepsTotal, lr.Rule)}})
	if errors.Is(err, store.ErrOperationActive) {
		ps.stats.Waiting++
		return e.st.SetLadderWaiting(ctx, lr, WaitOperationActive, "another operation of the device is active")
	}
	if err != nil {
		return fmt.Errorf("re-validation %s of ladder %d: %w", id, lr.ID, err)
	}
	_, err = e.st.UpdateStep(ctx, lr, cur, store.StepUpdate{State: store.StepSettling, Detail: "operation succeeded; validating again (run " + id + ")"})
	return err
}
