package remediation_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/store/feed"
	"github.com/ironlink/ironlink/hub/validation"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

const validationPolicy = `
policy:
  default:
    enabled: true
    remediation: {maxInFlight: 2}
    rules:
      - name: faulted
        to: [FAULTED]
        remediation:
          steps: [{action: REBOOT, timeout: 1m}]
      - name: burn-in-failed
        validation: {checks: [gpu-burn]}
        remediation:
          steps:
            - {action: REBOOT, timeout: 1h}
            - {action: REPROVISION, timeout: 2h}
`

// pool puts the rig's devices in the validation pool, not offered
// (InValidationPool True, CustomerReady False): status VALIDATING.
func (r *rig) pool() {
	r.t.Helper()
	at := r.site.Now()
	var ups []store.DeviceUpdate
	for _, id := range r.site.IDs {
		c := storetest.Healthy(at)
		for i := range c {
			switch c[i].Type {
			case condition.InValidationPool:
				c[i].Status = condition.True
			case condition.CustomerReady:
				c[i].Status, c[i].Reason = condition.False, "TraitAbsent"
			}
		}
		ups = append(ups, store.DeviceUpdate{DeviceID: id, Conditions: c, ObservedTime: at})
	}
	r.site.Send(ups)
}

// validate runs a validation of dev requiring checks to its end: the
// VALIDATE operation (id, or a new one) SUCCEEDED, the hardware read
// after it stored, each check reported (pass), and the runner's verdict.
func (r *rig) validate(id, dev string, pass bool, checks ...string) string {
	r.t.Helper()
	ctx := context.Background()
	if id == "" {
		params, _ := protojson.Marshal(&ironlinkv1.OperationParams{ValidationChecks: checks})
		_, ops, err := r.st.CreateOperations(ctx, []store.NewOperation{{ID: uuid.NewString(), Site: "site-a", DeviceID: dev, Kind: "VALIDATE",
			Params: params, Actor: "ops", Reason: "back from RMA"}})
		if err != nil {
			r.t.Fatal(err)
		}
		id = ops[0].ID
	}
	if _, err := r.st.Pool().Exec(ctx, `UPDATE operations SET state = 'SUCCEEDED', started_at = now(), ended_at = now() WHERE id = $1`, id); err != nil {
		r.t.Fatal(err)
	}
	now := time.Now().UTC()
	h := &ironlinkv1.HardwareState{CpuModel: "Xeon", CpuCount: 224, MemoryMib: 2 << 20, InventoryAvailable: true, InventoryStatus: "Read",
		ReadAt: timestamppb.New(now), InspectionFinishedAt: timestamppb.New(now)}
	b, _ := protojson.Marshal(h)
	r.site.Send([]store.DeviceUpdate{{DeviceID: dev, ObservedTime: r.site.Now(), Hardware: &store.Hardware{JSON: b, ReadAt: now, InspectionFinishedAt: &now}}})
	for _, c := range checks {
		if _, err := r.st.RecordValidationResult(ctx, id, "site-a", store.ValidationResult{Check: c, Pass: pass, OutputExcerpt: c + " output", Reporter: "burnin"}); err != nil {
			r.t.Fatal(err)
		}
	}
	validation.NewRunner(r.st, nil, testlog.New(r.t)).Pass(ctx)
	return id
}

func (r *rig) explain(doc, dev string) *ironlinkv1.GetDeviceRemediationResponse {
	r.t.Helper()
	f, err := policy.Parse([]byte(doc))
	if err != nil {
		r.t.Fatal(err)
	}
	api := remediation.NewAPI(r.st, func() *policy.File { return f }, func(context.Context) string { return "ops" }, testlog.New(r.t))
	out, err := api.GetDeviceRemediation(context.Background(), &ironlinkv1.GetDeviceRemediationRequest{Device: dev})
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// A validation run whose required check gpu-burn fails: the rule
// burn-in-failed quarantines the device and its ladder issues step 1
// (REBOOT), named by explain and in the change feed; the reboot is
// followed by a validation run again (the same checks) which fails, so
// step 2 (REPROVISION) runs, and its validation run passes: the ladder
// ends fixed by step 2, the hold is released and the device offered.
func TestFailedValidationStartsTheLadder(t *testing.T) {
	r := newRig(t, validationPolicy, 2, false)
	r.pool()
	dev := r.site.IDs[0]
	run := r.validate("", dev, false, "gpu-burn")
	if n := r.count(`SELECT count(*) FROM validation_runs WHERE id = $1 AND state = 'FAILED'`, run); n != 1 {
		t.Fatal("the run did not fail")
	}
	if e := r.explain(validationPolicy, dev); e.GetRule() != "burn-in-failed" || !strings.Contains(e.GetPlan(), "would quarantine") ||
		!strings.Contains(e.GetPlan(), "failed: gpu-burn") {
		t.Errorf("explain before the pass: rule %q plan %q", e.GetRule(), e.GetPlan())
	}
	s := r.tick()
	if s.ValidationQuarantines != 1 || s.Started != 1 || s.Steps != 1 {
		t.Fatalf("first pass: %+v", s)
	}
	if n := r.count(`SELECT count(*) FROM quarantine_holds WHERE device_id = $1 AND holder = 'policy:burn-in-failed' AND source = 'policy'
		AND reason LIKE '%validation run ' || $2 || ' failed: gpu-burn%'`, dev, run); n != 1 {
		t.Fatal("not quarantined by the rule naming the run and the check")
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1 AND kind = 'REBOOT' AND source = 'policy'`, dev); n != 1 {
		t.Fatalf("%d REBOOT operations, want step 1 issued", n)
	}
	e := r.explain(validationPolicy, dev)
	if e.GetRule() != "burn-in-failed" || e.GetLadderRun().GetState() != store.LadderRunning || len(e.GetLadderRun().GetSteps()) != 1 ||
		e.GetLadderRun().GetSteps()[0].GetKind() != "REBOOT" || !strings.Contains(e.GetPlan(), "step 1 of 2 (REBOOT)") {
		t.Fatalf("explain: %v", e)
	}
	// The feed: the run's REMEDIATION event names the rule and step 1;
	// the ladder's events follow.
	evs, _, _, err := feed.NewReader(r.st.Pool()).Read(context.Background(), feed.Cursor{}, feed.Filter{Kinds: []feed.Kind{feed.EventValidation, feed.EventRemediation}}, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		switch {
		case ev.Validation != nil && ev.Validation.Event == store.ValidationRemediation:
			got = append(got, "REMEDIATION "+ev.Validation.Detail)
		case ev.Remediation != nil:
			got = append(got, ev.Remediation.Event)
		}
	}
	if len(got) != 3 || !strings.HasPrefix(got[0], "REMEDIATION rule burn-in-failed: validation run "+run+" failed: gpu-burn; its ladder starts with REBOOT (step 1 of 2") ||
		got[1] != "LADDER_STARTED" || got[2] != "STEP_STARTED" {
		t.Fatalf("feed %q", got)
	}

	// Step 1's reboot succeeds: the device is validated again, fails.
	r.finishOps(dev, "SUCCEEDED")
	r.tick()
	var ladder int64
	if err := r.st.Pool().QueryRow(context.Background(), `SELECT id FROM remediation_ladders WHERE device_id = $1`, dev).Scan(&ladder); err != nil {
		t.Fatal(err)
	}
	again := remediation.RevalidationID(ladder, 0)
	if n := r.count(`SELECT count(*) FROM validation_runs WHERE id = $1 AND required_checks = '{gpu-burn}'`, again); n != 1 {
		t.Fatal("no validation again after step 1")
	}
	r.tick() // nothing new while it runs
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1 AND kind = 'VALIDATE'`, dev); n != 2 {
		t.Fatalf("%d VALIDATE operations, want 2 (no second re-validation)", n)
	}
	r.validate(again, dev, false, "gpu-burn")
	r.tick() // step 1 failed
	r.tick() // step 2
	if n := r.count(`SELECT count(*) FROM operations WHERE device_id = $1 AND kind = 'REPROVISION' AND state = 'PENDING'`, dev); n != 1 {
		t.Fatalf("%d REPROVISION operations pending", n)
	}
	if n := r.count(`SELECT count(*) FROM validation_runs WHERE device_id = $1 AND remediation_rule <> ''`, dev); n != 1 {
		t.Fatal("the ladder's own failed re-validation was taken as a new failure")
	}
	r.finishOps(dev, "SUCCEEDED")
	r.tick()
	r.validate(remediation.RevalidationID(ladder, 1), dev, true, "gpu-burn")
	if s := r.tick(); s.Fixed != 1 {
		t.Fatalf("not fixed: %+v", s)
	}
	if n := r.count(`SELECT count(*) FROM remediation_ladders WHERE id = $1 AND state = 'SUCCEEDED' AND fixed_step = 2 AND fixed_kind = 'REPROVISION' AND released`, ladder); n != 1 {
		t.Fatal("the ladder does not say step 2 fixed it")
	}
	if n := r.count(`SELECT count(*) FROM quarantine_holds WHERE device_id = $1`, dev); n != 0 {
		t.Fatalf("%d holds after the fix", n)
	}
	if n := r.count(`SELECT count(*) FROM devices WHERE id = $1 AND desired_impairment = 'RELEASED'`, dev); n != 1 {
		t.Fatal("the fixed device is not offered")
	}
	if n := r.count(`SELECT count(*) FROM commands WHERE device_id = $1 AND action = 'OFFER' AND source = 'validation'`, dev); n != 1 {
		t.Fatal("no OFFER command of source validation")
	}
}

// A failed run no validation rule matches (its failing check is not
// gpu-burn, or the policy has none) leaves the device held by the
// validation gate only: no quarantine, no ladder, no operation.
func TestFailedValidationWithoutARuleStaysHeld(t *testing.T) {
	r := newRig(t, validationPolicy, 2, false)
	r.pool()
	dev := r.site.IDs[0]
	r.validate("", dev, false, "nccl")
	for range 2 {
		if s := r.tick(); s.ValidationQuarantines != 0 || s.Started != 0 {
			t.Fatalf("pass: %+v", s)
		}
	}
	for _, table := range []string{"quarantine_holds", "remediation_ladders", "remediation_events"} {
		if n := r.count(`SELECT count(*) FROM ` + table); n != 0 {
			t.Errorf("%s has %d rows", table, n)
		}
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE kind <> 'VALIDATE'`); n != 0 {
		t.Errorf("%d operations besides the run", n)
	}
	if n := r.count(`SELECT count(*) FROM devices WHERE id = $1 AND status = 'VALIDATING'`, dev); n != 1 {
		t.Error("the device is not held VALIDATING")
	}
	if e := r.explain(validationPolicy, dev); e.GetRule() != "" || e.GetLadderRun() != nil {
		t.Errorf("explain names rule %q", e.GetRule())
	}
}

// In dry-run the pass plans the quarantine and the ladder's first step
// and writes nothing, pass after pass.
func TestFailedValidationDryRunPlansOnly(t *testing.T) {
	doc := strings.Replace(validationPolicy, "    enabled: true\n", "    enabled: true\n    dryRun: true\n", 1)
	r := newRig(t, doc, 2, false)
	r.pool()
	dev := r.site.IDs[1]
	r.validate("", dev, false, "gpu-burn")
	for range 2 {
		s := r.tick()
		if len(s.Plans) != 1 || s.ValidationQuarantines != 0 || s.Started != 0 {
			t.Fatalf("pass: %+v", s)
		}
		if p := s.Plans[0].Text; !strings.HasPrefix(p, "would quarantine "+r.name(dev)+" by rule burn-in-failed (validation run ") ||
			!strings.HasSuffix(p, "failed: gpu-burn), then: would reboot "+r.name(dev)+" now, step 1 of 2") {
			t.Fatalf("plan %q", p)
		}
	}
	if e := r.explain(doc, dev); !e.GetDryRun() || !strings.HasPrefix(e.GetPlan(), "would quarantine") {
		t.Errorf("explain: dry-run %v plan %q", e.GetDryRun(), e.GetPlan())
	}
	for _, table := range []string{"quarantine_holds", "remediation_ladders", "remediation_steps", "remediation_events"} {
		if n := r.count(`SELECT count(*) FROM ` + table); n != 0 {
			t.Errorf("%s has %d rows", table, n)
		}
	}
	if n := r.count(`SELECT count(*) FROM operations WHERE kind <> 'VALIDATE'`); n != 0 {
		t.Errorf("%d operations besides the run", n)
	}
	if n := r.count(`SELECT count(*) FROM validation_runs WHERE remediation_rule <> ''`); n != 0 {
		t.Error("the run is marked taken")
	}
	if n := r.count(`SELECT count(*) FROM validation_events WHERE event = 'REMEDIATION'`); n != 0 {
		t.Error("a REMEDIATION event was written")
	}
}

func (r *rig) name(id string) string {
	r.t.Helper()
	var n string
	if err := r.st.Pool().QueryRow(context.Background(), `SELECT name FROM devices WHERE id = $1`, id).Scan(&n); err != nil {
		r.t.Fatal(err)
	}
	if n == "" {
		return id
	}
	return n
}
