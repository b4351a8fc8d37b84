package remediation

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/novatemplate"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/logkey"
)

func itoa(n int) string { return strconv.Itoa(n) }

// stepNamespace derives a step's operation id from (ladder id, step): the
// same step always names the same operation.
var stepNamespace = uuid.MustParse("6d0b8c1e-3f0a-4d5e-9a61-6c6164646572")

// OperationID is the operation id of step (0-based) of ladder id.
func OperationID(ladder int64, step int) string {
	return uuid.NewSHA1(stepNamespace, []byte(fmt.Sprintf("%d/%d", ladder, step))).String()
}

// advance moves device d's open ladder one step of the level-triggered
// reconcile: l is its rule's ladder (nil: the rule is gone, has no ladder
// any more, or its policy is dry-run). A disabled site policy pauses it.
func (e *Engine) advance(ctx context.Context, ps *pass, p policy.SitePolicy, l *policy.Ladder, d store.RemediationDevice) error {
	lr := *d.Ladder
	resumed := false
	switch {
	case l == nil:
		return e.abandon(ctx, ps, lr, "rule "+lr.Rule+" has no live ladder any more (policy changed or dry-run)")
	case d.Rule != lr.Rule || d.HoldGeneration != lr.HoldGeneration:
		return e.abandon(ctx, ps, lr, "the quarantine by rule "+lr.Rule+" was released")
	case d.Removed:
		return e.abandon(ctx, ps, lr, "the device was removed from Ironic")
	case !p.Enabled:
		return e.pause(ctx, ps, d, lr)
	case lr.Waiting == WaitPolicyDisabled: // enabled again: on from where it was paused
		if err := e.st.SetLadderWaiting(ctx, lr, "", ""); err != nil {
			return err
		}
		lr.Waiting = ""
		d.Ladder = &lr
		resumed = true
	}
	if a, ok := HandoffAction(l, d.Recommended); ok {
		return e.handoff(ctx, ps, d, &lr, store.HandoffRecommendedAction, "the fault recommends "+actionName(a))
	}
	cur, started := lr.Current()
	if !started {
		return e.startStep(ctx, ps, p, l, d, lr)
	}
	step := l.Steps[min(lr.Position, len(l.Steps)-1)]
	r, _ := rule(p, lr.Rule)
	if resumed && cur.State == store.StepSettling && cur.GoodSince != nil {
		// Nothing was judged while paused: a relapse then went unseen, so
		// the settle time starts again from now rather than counting the
		// pause as good.
		_, err := e.st.UpdateStep(ctx, lr, cur, store.StepUpdate{State: store.StepSettling,
			Detail: "resumed after the site's policy was disabled: settling again"})
		return err
	}
	switch {
	case cur.State == store.StepStarting:
		return e.ensureOperation(ctx, ps, d, lr, cur, step, l.ActOnCustomerInstances)
	case cur.State == store.StepRunning:
		return e.running(ctx, ps, d, lr, cur, step, r.Validation != nil)
	case cur.State == store.StepSettling && r.Validation != nil:
		return e.revalidating(ctx, ps, l, d, lr, cur, step)
	case cur.State == store.StepSettling:
		return e.settling(ctx, ps, l, d, lr, cur, step)
	}
	return nil
}

// startStep starts the ladder's step at its position when the safety
// check passes (else records why it waits), or hands the device off when
// no step is left.
func (e *Engine) startStep(ctx context.Context, ps *pass, p policy.SitePolicy, l *policy.Ladder, d store.RemediationDevice, lr store.RemediationLadder) error {
	if lr.Position >= len(l.Steps) {
		return e.handoff(ctx, ps, d, &lr, store.HandoffLadderExhausted,
			fmt.Sprintf("all %d steps tried, the fault persists (%s)", len(l.Steps), d.StatusReason))
	}
	if reason, detail := Blocked(p, d, ps.safety(p, l, d), ps.now); reason != "" {
		ps.stats.Waiting++
		return e.st.SetLadderWaiting(ctx, lr, reason, detail)
	}
	step := l.Steps[lr.Position]
	opID := OperationID(lr.ID, lr.Position)
	detail := fmt.Sprintf("%s %s now, step %d of %d", step.Verb(), name(d), lr.Position+1, len(l.Steps))
	ok, err := e.st.StartStep(ctx, lr, lr.Position, step.Kind, opID, detail, ps.now)
	if err != nil || !ok {
		return err
	}
	ps.started(d)
	ps.stats.Steps++
	e.log.Info("remediation step started", logkey.DeviceID, d.DeviceID, logkey.Site, d.Site, "rule", lr.Rule,
		"ladder", lr.ID, "step", lr.Position+1, "kind", step.Kind, "operation_id", opID)
	cur := store.RemediationStep{Step: lr.Position, Kind: step.Kind, OperationID: opID, State: store.StepStarting, StartedAt: ps.now}
	return e.ensureOperation(ctx, ps, d, lr, cur, step, l.ActOnCustomerInstances)
}

// params is the OperationParams of step on device d as protojson. A
// NOVA_CREATE step's template is expanded for d's site (the server named
// after the device); a template the site does not have is an error the
// step fails with.
func (e *Engine) params(d store.RemediationDevice, s policy.LadderStep) ([]byte, error) {
	p := &ironlinkv1.OperationParams{Soft: s.Soft, PowerTimeoutSeconds: uint32(s.PowerTimeout / time.Second), MaintenanceReason: s.MaintenanceReason}
	if s.Template != "" {
		var f *novatemplate.File
		if e.cfg.NovaTemplates != nil {
			f = e.cfg.NovaTemplates()
		}
		t, ok := f.Lookup(d.Site, s.Template)
		if !ok {
			return nil, fmt.Errorf("no Nova create template %q for site %q", s.Template, d.Site)
		}
		p.NovaCreate = novatemplate.Expand(t, &ironlinkv1.NovaCreateParams{Name: name(d), Template: s.Template})
	}
	b, err := protojson.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode the step's params: %w", err)
	}
	return b, nil
}

// ensureOperation creates the step's operation under its stored id unless
// it exists, then marks the step RUNNING. An operation of someone else
// active on the device makes the ladder wait. customer: the ladder acts on
// customer instances; an operation on a device with one is forced
// (recorded).
func (e *Engine) ensureOperation(ctx context.Context, ps *pass, d store.RemediationDevice, lr store.RemediationLadder, cur store.RemediationStep, step policy.LadderStep, customer bool) error {
	_, err := e.st.GetOperation(ctx, cur.OperationID)
	if errors.Is(err, store.ErrNotFound) {
		if refused, err := e.refused(ctx, ps, d, lr, cur, step, customer); refused || err != nil {
			return err
		}
		p, perr := e.params(d, step)
		if perr != nil {
			_, err = e.st.UpdateStep(ctx, lr, cur, store.StepUpdate{State: store.StepFailed, Advance: true, Event: "STEP_FAILED", Detail: perr.Error()})
			return err
		}
		_, _, err = e.st.CreateOperations(ctx, []store.NewOperation{{ID: cur.OperationID, Site: d.Site, DeviceID: d.DeviceID,
			DeviceName: d.Name, Kind: store.OperationKind(step.Kind), Params: p, Actor: "remediation", Forced: customer && d.CustomerAllocated,
			Reason: fmt.Sprintf("remediation ladder of rule %s, step %d of %d", lr.Rule, cur.Step+1, lr.StepsTotal), Source: store.SourcePolicy}})
		if errors.Is(err, store.ErrOperationActive) {
			ps.stats.Waiting++
			return e.st.SetLadderWaiting(ctx, lr, WaitOperationActive, "another operation of the device is active")
		}
	}
	if err != nil {
		return fmt.Errorf("operation %s of ladder %d: %w", cur.OperationID, lr.ID, err)
	}
	_, err = e.st.UpdateStep(ctx, lr, cur, store.StepUpdate{State: store.StepRunning, Detail: "operation " + cur.OperationID + " created"})
	return err
}

// refused runs the operator's checks (Config.Check) on a step whose
// operation is not created yet. A refusal makes the ladder wait
// (WaitPrecondition, the detail naming the refusal's reason and message)
// and is tried again every pass; still refused at the step's timeout
// (counted from the step's start), the step fails with the refusal and the
// ladder moves on, no operation created. refused=false: create it.
func (e *Engine) refused(ctx context.Context, ps *pass, d store.RemediationDevice, lr store.RemediationLadder, cur store.RemediationStep, step policy.LadderStep, customer bool) (bool, error) {
	if e.cfg.Check == nil {
		return false, nil
	}
	reason, msg, err := e.cfg.Check(ctx, d.DeviceID, store.OperationKind(step.Kind), customer)
	if err != nil || reason == "" {
		return false, err
	}
	if reason == grpcerr.ReasonOperationActive { // someone else's operation: wait for it, as ever
		ps.stats.Waiting++
		return true, e.st.SetLadderWaiting(ctx, lr, WaitOperationActive, msg)
	}
	why := reason + ": " + msg
	if ps.now.Sub(cur.StartedAt) > step.Timeout {
		e.log.Warn("remediation step refused past its timeout: the ladder moves on", logkey.DeviceID, d.DeviceID, logkey.Site, d.Site,
			"rule", lr.Rule, "ladder", lr.ID, "step", cur.Step+1, "kind", step.Kind, "refusal", reason, "why", msg)
		_, err := e.st.UpdateStep(ctx, lr, cur, store.StepUpdate{State: store.StepFailed, Advance: true, Event: "STEP_FAILED",
			Detail: fmt.Sprintf("refused for %s (its timeout), no operation created: %s", step.Timeout, why)})
		return true, err
	}
	ps.stats.Waiting++
	if lr.Waiting != WaitPrecondition {
		e.log.Info("remediation step refused by the operations' preconditions: waiting", logkey.DeviceID, d.DeviceID, logkey.Site, d.Site,
			"rule", lr.Rule, "ladder", lr.ID, "step", cur.Step+1, "kind", step.Kind, "refusal", reason, "why", msg)
	}
	return true, e.st.SetLadderWaiting(ctx, lr, WaitPrecondition, why)
}

// running follows the step's operation: failed or cancelled → the next
// step; succeeded → the next step for a step that continues, else
// settling (a validation ladder's step: validating again); still running
// past the timeout → cancelled and the next step.
func (e *Engine) running(ctx context.Context, ps *pass, d store.RemediationDevice, lr store.RemediationLadder, cur store.RemediationStep, step policy.LadderStep, validation bool) error {
	op, err := e.st.GetOperation(ctx, cur.OperationID)
	if err != nil {
		return fmt.Errorf("operation %s of ladder %d: %w", cur.OperationID, lr.ID, err)
	}
	var u store.StepUpdate
	switch {
	case op.State == store.OperationSucceeded && step.Continue:
		u = store.StepUpdate{State: store.StepSucceeded, Advance: true, Event: "STEP_SUCCEEDED",
			Detail: "operation succeeded; the ladder continues with the next step (continue: no success test)"}
	case op.State == store.OperationSucceeded && validation:
		return e.ensureRevalidation(ctx, ps, d, lr, cur)
	case op.State == store.OperationSucceeded && Good(d.Status):
		u = store.StepUpdate{State: store.StepSettling, GoodSince: &ps.now, Detail: "operation succeeded, conditions good; settling"}
	case op.State == store.OperationSucceeded:
		u = store.StepUpdate{State: store.StepSettling, Detail: "operation succeeded; waiting for the device's conditions to be good"}
	case op.State.Final():
		u = store.StepUpdate{State: store.StepFailed, Advance: true, Event: "STEP_FAILED",
			Detail: fmt.Sprintf("operation %s: %s", op.State, op.LastError)}
	case ps.now.Sub(cur.StartedAt) > step.Timeout:
		if _, err := e.st.CancelOperation(ctx, op.ID, "remediation", "step timed out", e.cfg.Abortable); err != nil {
			e.log.Warn("cancelling a timed-out remediation step failed", logkey.DeviceID, lr.DeviceID, "operation_id", op.ID, logkey.Err, err)
		}
		u = store.StepUpdate{State: store.StepTimedOut, Advance: true, Event: "STEP_TIMED_OUT",
			Detail: fmt.Sprintf("operation still %s after %s", op.State, step.Timeout)}
	default:
		return nil
	}
	_, err = e.st.UpdateStep(ctx, lr, cur, u)
	return err
}

// settling applies the success test: the device's conditions good since
// GoodSince for the settle time → fixed; faulty past the step's timeout →
// the next step.
func (e *Engine) settling(ctx context.Context, ps *pass, l *policy.Ladder, d store.RemediationDevice, lr store.RemediationLadder, cur store.RemediationStep, step policy.LadderStep) error {
	if !Good(d.Status) {
		if ps.now.Sub(cur.StartedAt) > step.Timeout {
			_, err := e.st.UpdateStep(ctx, lr, cur, store.StepUpdate{State: store.StepFailed, Advance: true, Event: "STEP_FAILED",
				Detail: fmt.Sprintf("the fault persists after %s (%s %s)", step.Timeout, d.Status, d.StatusReason)})
			return err
		}
		if cur.GoodSince != nil { // good for a while, faulty again: start over
			_, err := e.st.UpdateStep(ctx, lr, cur, store.StepUpdate{State: store.StepSettling, Detail: "faulty again: " + d.StatusReason})
			return err
		}
		return nil
	}
	good := ps.now // first seen good in this pass (at most one pass late)
	if cur.GoodSince != nil {
		good = *cur.GoodSince
	}
	if ps.now.Sub(good) < l.Settle {
		if cur.GoodSince == nil {
			_, err := e.st.UpdateStep(ctx, lr, cur, store.StepUpdate{State: store.StepSettling, GoodSince: &good,
				Detail: "conditions good; settling " + l.Settle.String()})
			return err
		}
		return nil
	}
	return e.fixed(ctx, ps, l, d, lr, cur, good, "conditions good for "+l.Settle.String(), false)
}

// fixed ends the ladder SUCCEEDED by step cur (good since good; why says
// how it was judged), released as its ladder says; a validation rule's
// released device is offered (offer: its re-validation run passed).
func (e *Engine) fixed(ctx context.Context, ps *pass, l *policy.Ladder, d store.RemediationDevice, lr store.RemediationLadder, cur store.RemediationStep, good time.Time, why string, offer bool) error {
	if _, err := e.st.UpdateStep(ctx, lr, cur, store.StepUpdate{State: store.StepSucceeded, GoodSince: &good, Event: "STEP_SUCCEEDED",
		Detail: why}); err != nil {
		return err
	}
	release := l.Release == policy.ReleaseAutomatic
	detail := fmt.Sprintf("fixed by step %d of %d (%s) of rule %s's ladder", cur.Step+1, len(l.Steps), cur.Kind, lr.Rule)
	if !release {
		detail += "; left quarantined for an operator"
	}
	ok, err := e.st.FinishLadder(ctx, lr, store.LadderSucceeded, cur.Step+1, cur.Kind, "FIXED", detail, release)
	if ok {
		ps.stats.Fixed++
		ps.inFlight[d.Site]--
		ps.count(d, -1)
		e.log.Info("remediation ladder fixed the device", logkey.DeviceID, d.DeviceID, logkey.Site, d.Site, "rule", lr.Rule,
			"step", cur.Step+1, "kind", cur.Kind, "released", release)
	}
	if err != nil || !ok || !release || !offer || d.Validation == nil {
		return err
	}
	if _, err := e.st.Offer(ctx, d.DeviceID, store.ImpairmentAction{Actor: "remediation", Source: SourceValidation,
		Reason: fmt.Sprintf("validation run %s passed; %s", d.Validation.ID, detail)}, false); err != nil {
		// Held by another hold, or no longer in a state to offer: the
		// operator offers it (the run passed, the gate lets it through).
		e.log.Warn("device fixed by a validation ladder not offered", logkey.DeviceID, d.DeviceID, logkey.Err, err)
	}
	return nil
}

func (e *Engine) abandon(ctx context.Context, ps *pass, lr store.RemediationLadder, why string) error {
	ok, err := e.st.FinishLadder(ctx, lr, store.LadderAbandoned, 0, "", "ABANDONED", why, false)
	if ok {
		ps.stats.Abandoned++
		e.log.Info("remediation ladder abandoned", logkey.DeviceID, lr.DeviceID, logkey.Site, lr.Site, "rule", lr.Rule, "why", why)
	}
	return err
}

// handoff hands device d off for repair (its open ladder lr, nil when none
// ran).
func (e *Engine) handoff(ctx context.Context, ps *pass, d store.RemediationDevice, lr *store.RemediationLadder, reason, detail string) error {
	h, created, err := e.st.CreateHandoff(ctx, store.NewHandoff{Device: d, Ladder: lr, Reason: reason, Detail: detail, Webhook: e.cfg.Webhook})
	if err != nil || !created {
		return err
	}
	ps.stats.HandedOff++
	e.log.Warn("device handed off for repair", logkey.DeviceID, d.DeviceID, logkey.Site, d.Site, "rule", d.Rule,
		"handoff", h.ID, "reason", reason, "detail", detail)
	return nil
}
