// Package remediation runs the remediation ladders of the quarantine
// policy (docs/reference/policy.md "Remediation ladders"): for each device
// a rule with a ladder quarantined, and that still shows its fault, it
// starts the ladder's steps in order as operations, judges each by the
// device's conditions (good again and staying good for the settle time),
// releases a fixed device or leaves it quarantined as the rule says, and
// hands a device off for repair when the ladder is exhausted, its budget
// spent or its fault recommends it (handoff.go; the webhook in webhook.go).
//
// The engine is level-triggered and runs inside the policy evaluator's
// pass, so only the replica holding the evaluator's advisory lock advances
// ladders; every position is stored before it is acted on, and a step's
// operation id is chosen and stored before the operation is created, so a
// failover or a guard trip never loses or repeats a step.
package remediation

import (
	"context"
	"log/slog"
	"time"

	"github.com/ironlink/ironlink/hub/novatemplate"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/logkey"
)

// Store is what the engine reads and writes (*store.Store implements it).
type Store interface {
	RemediationDevices(ctx context.Context) ([]store.RemediationDevice, error)
	RemediationsInFlight(ctx context.Context) (map[string]int, error)
	LaddersSince(ctx context.Context, id string, since time.Time) (int, error)
	StartLadder(ctx context.Context, d store.RemediationDevice, steps int, cause string) (store.RemediationLadder, bool, error)
	StartStep(ctx context.Context, l store.RemediationLadder, step int, kind, opID, detail string, at time.Time) (bool, error)
	UpdateStep(ctx context.Context, l store.RemediationLadder, st store.RemediationStep, u store.StepUpdate) (bool, error)
	SetLadderWaiting(ctx context.Context, l store.RemediationLadder, reason, detail string) error
	FinishLadder(ctx context.Context, l store.RemediationLadder, state string, fixedStep int, fixedKind, event, detail string, release bool) (bool, error)
	CreateHandoff(ctx context.Context, n store.NewHandoff) (store.Handoff, bool, error)
	DeviceHolds(ctx context.Context, ids []string) (map[string][]store.DeviceHold, error)
	PolicySites(ctx context.Context, since time.Time) ([]store.PolicySite, error)
	GetOperation(ctx context.Context, id string) (store.Operation, error)
	CreateOperations(ctx context.Context, ops []store.NewOperation) (string, []store.Operation, error)
	CancelOperation(ctx context.Context, id, actor, reason string, abortable func(provisionState string) bool) (store.Operation, error)
	ValidationFailures(ctx context.Context) ([]store.ValidationFailure, error)
	QuarantineForValidation(ctx context.Context, runID, rule, detail string, a store.ImpairmentAction) (store.Command, error)
	Offer(ctx context.Context, deviceID string, a store.ImpairmentAction, validateOnly bool) (store.Command, error)
}

// Config configures an Engine.
type Config struct {
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Webhook is true when a handoff webhook is configured (a handoff's
	// webhook is then PENDING until delivered; NONE otherwise).
	Webhook bool
	// Abortable says whether Ironic can abort from a provision state (a
	// timed-out step's operation is cancelled; hub/operations.Abortable).
	Abortable func(provisionState string) bool
	// NovaTemplates is the --nova-templates-file in force, for NOVA_CREATE
	// steps (nil, or a nil result: none; such a step fails).
	NovaTemplates func() *novatemplate.File
	// Check runs an operator's operation checks on a step before its
	// operation is created (hub/operations.Server.CheckStep; force: the
	// ladder acts on customer instances, so the customer guard is passed
	// as a forced request passes it): reason is ""
	// when the step may start, else the refusal's ErrorInfo reason with
	// msg; err is a failure to read. nil: no check.
	Check func(ctx context.Context, deviceID string, kind store.OperationKind, force bool) (reason, msg string, err error)
}

// Engine advances the ladders; call Tick from the policy evaluator's pass.
type Engine struct {
	st  Store
	cfg Config
	log *slog.Logger
}

// New returns an engine over st.
func New(st Store, cfg Config, log *slog.Logger) *Engine {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Abortable == nil {
		cfg.Abortable = func(string) bool { return false }
	}
	return &Engine{st: st, cfg: cfg, log: log}
}

// Stats counts what one pass did.
type Stats struct {
	Started, Steps, Fixed, HandedOff, Abandoned, Waiting int
	// ValidationQuarantines counts failed validation runs a validation
	// rule quarantined for its ladder.
	ValidationQuarantines int
	// Plans are the dry-run plans of the pass (nothing written for them).
	Plans []Plan
}

// pass is one Tick's view: the policy, the clock and the site figures.
type pass struct {
	file     *policy.File
	now      time.Time
	inFlight map[string]int
	// domains counts steps in flight per (site, label, value): domainKey.
	domains map[string]int
	tripped map[string]bool
	holds   map[string][]store.DeviceHold
	stats   Stats
}

// Tick runs one pass under file: it starts, advances, ends and hands off
// ladders, and returns what it did.
func (e *Engine) Tick(ctx context.Context, file *policy.File) (Stats, error) {
	ps := &pass{file: file, now: e.cfg.Now(), tripped: map[string]bool{}, domains: map[string]int{}}
	var err error
	if ps.inFlight, err = e.st.RemediationsInFlight(ctx); err != nil {
		return ps.stats, err
	}
	sites, err := e.st.PolicySites(ctx, ps.now)
	if err != nil {
		return ps.stats, err
	}
	for _, s := range sites {
		ps.tripped[s.Name] = s.TrippedSince != nil
	}
	if err := e.validationFailures(ctx, ps); err != nil {
		return ps.stats, err
	}
	devs, err := e.st.RemediationDevices(ctx)
	if err != nil || len(devs) == 0 {
		return ps.stats, err
	}
	ids := make([]string, len(devs))
	for i, d := range devs {
		ids[i] = d.DeviceID
		if d.Ladder != nil && d.Ladder.State == store.LadderRunning {
			if cur, ok := d.Ladder.Current(); ok && cur.InFlight() {
				ps.count(d, 1)
			}
		}
	}
	if ps.holds, err = e.st.DeviceHolds(ctx, ids); err != nil {
		return ps.stats, err
	}
	for _, d := range devs {
		if err := e.device(ctx, ps, d); err != nil {
			return ps.stats, err
		}
	}
	return ps.stats, nil
}

// rule returns the rule named name of site policy p and its ladder (nil
// when the rule is gone or has none).
func rule(p policy.SitePolicy, name string) (policy.Rule, *policy.Ladder) {
	for _, r := range p.Rules {
		if r.Name == name {
			return r, r.Ladder
		}
	}
	return policy.Rule{}, nil
}

func (e *Engine) device(ctx context.Context, ps *pass, d store.RemediationDevice) error {
	p := ps.file.Effective(d.Site)
	if d.Ladder != nil {
		r, l := rule(p, d.Ladder.Rule)
		if r.Validation != nil {
			d.StatusReason = validationCause(d.Validation)
		}
		if l != nil && (p.DryRun || r.DryRun || l.DryRun) {
			l = nil // a ladder started live ends when its policy turns dry-run
		}
		return e.advance(ctx, ps, p, l, d)
	}
	r, l := rule(p, d.Rule)
	if r.Validation != nil {
		d.StatusReason = validationCause(d.Validation)
	}
	if l == nil || !p.Enabled || d.Removed || d.OpenHandoff || !FaultyFor(r, d) || d.SiteStale {
		return nil
	}
	return e.begin(ctx, ps, p, l, p.DryRun || r.DryRun || l.DryRun, d)
}

// pause holds device d's open ladder where it is while its site's policy
// is disabled (enabled: false): no step starts, no operation is created,
// cancelled or judged and nothing is released; the position is kept and
// the ladder goes on from it once the policy is enabled again.
func (e *Engine) pause(ctx context.Context, ps *pass, d store.RemediationDevice, lr store.RemediationLadder) error {
	ps.stats.Waiting++
	if lr.Waiting == WaitPolicyDisabled {
		return nil
	}
	e.log.Info("remediation ladder paused: the site's policy is disabled", logkey.DeviceID, d.DeviceID, logkey.Site, d.Site,
		"rule", lr.Rule, "ladder", lr.ID, "step", lr.Position+1)
	return e.st.SetLadderWaiting(ctx, lr, WaitPolicyDisabled,
		"the site's policy is disabled (enabled: false): the ladder is paused at step "+itoa(lr.Position+1)+" until it is enabled again")
}

// domainKey keys pass.domains: a site's label value.
func domainKey(site, label, value string) string { return site + "\x00" + label + "\x00" + value }

// count adds n to the per-label in-flight counts of device d (every label
// it carries; only the policy's perLabel keys are ever read).
func (ps *pass) count(d store.RemediationDevice, n int) {
	for k, v := range d.Labels {
		ps.domains[domainKey(d.Site, k, v)] += n
	}
}

// started counts a step of device d started in this pass.
func (ps *pass) started(d store.RemediationDevice) {
	ps.inFlight[d.Site]++
	ps.count(d, 1)
}

// safety is the safety input of device d in this pass under policy p and
// its ladder l.
func (ps *pass) safety(p policy.SitePolicy, l *policy.Ladder, d store.RemediationDevice) Safety {
	excl := exclusion(ps.holds[d.DeviceID])
	s := Safety{Excluded: excl, Tripped: ps.tripped[d.Site], InFlight: ps.inFlight[d.Site], CustomerAllowed: l.ActOnCustomerInstances}
	for _, g := range p.Remediation.PerLabel {
		if v, ok := d.Labels[g.Label]; ok {
			if s.DomainInFlight == nil {
				s.DomainInFlight = map[string]int{}
			}
			s.DomainInFlight[g.Label] = ps.domains[domainKey(d.Site, g.Label, v)]
		}
	}
	return s
}

// exclusion returns the device's exclusion hold as the policy reads it.
func exclusion(hs []store.DeviceHold) *policy.Exclusion {
	for _, h := range hs {
		if h.Kind != store.HoldExclusion {
			continue
		}
		x := &policy.Exclusion{Reason: h.Reason, Author: h.Author, Start: h.StartsAt}
		if h.EndsAt != nil {
			x.End = *h.EndsAt
		}
		return x
	}
	return nil
}

// begin starts a ladder for device d (no open ladder, its fault present):
// or hands it off at once, or, in dry-run, only plans.
func (e *Engine) begin(ctx context.Context, ps *pass, p policy.SitePolicy, l *policy.Ladder, dryRun bool, d store.RemediationDevice) error {
	used, err := e.st.LaddersSince(ctx, d.DeviceID, ps.now.Add(-l.Budget.Window))
	if err != nil {
		return err
	}
	blocked, _ := Blocked(p, d, ps.safety(p, l, d), ps.now)
	if dryRun {
		plan := StartPlan(l, d, used, blocked)
		ps.stats.Plans = append(ps.stats.Plans, plan)
		if plan.Step == 1 && blocked == "" {
			ps.started(d) // as if started: the next plans see the guard fill up
		}
		e.log.Info("remediation plan (dry-run: nothing done)", logkey.DeviceID, d.DeviceID, logkey.Site, d.Site, "rule", d.Rule, "plan", plan.Text)
		return nil
	}
	if a, ok := HandoffAction(l, d.Recommended); ok {
		return e.handoff(ctx, ps, d, nil, store.HandoffRecommendedAction, "the fault recommends "+actionName(a))
	}
	if used >= l.Budget.Ladders {
		return e.handoff(ctx, ps, d, nil, store.HandoffBudgetSpent,
			budgetText(used, l.Budget))
	}
	lr, started, err := e.st.StartLadder(ctx, d, len(l.Steps), d.StatusReason)
	if err != nil || !started {
		return err
	}
	ps.stats.Started++
	e.log.Info("remediation ladder started", logkey.DeviceID, d.DeviceID, logkey.Site, d.Site, "rule", d.Rule,
		"ladder", lr.ID, "steps", len(l.Steps), "cause", d.StatusReason)
	d.Ladder = &lr
	return e.advance(ctx, ps, p, l, d)
}

func budgetText(used int, b policy.Budget) string {
	return "budget spent: " + itoa(used) + " of " + itoa(b.Ladders) + " ladders in " + b.Window.String()
}
