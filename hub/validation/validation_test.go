package validation_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/validation"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
	"github.com/ironlink/ironlink/test/grpctest"
)

type fixture struct {
	st       *store.Store
	a, b     *storetest.Site
	checkerA ironlinkv1.ValidationServiceClient
	checkerB ironlinkv1.ValidationServiceClient
	healthA  ironlinkv1.HealthServiceClient
	fleet    ironlinkv1.FleetServiceClient
	hw       ironlinkv1.HardwareServiceClient
	runner   *validation.Runner
}

func setup(t *testing.T) *fixture {
	t.Helper()
	log := testlog.New(t)
	st, _ := storetest.New(t, log)
	hub := grpctest.Start(t, st, grpctest.Options{})
	f := &fixture{st: st, a: storetest.NewSite(t, st, "site-a", 2, nil), b: storetest.NewSite(t, st, "site-b", 1, nil)}
	checkerA := hub.HealthChecker(t, "burnin-a", "site-a")
	f.checkerA, f.healthA = ironlinkv1.NewValidationServiceClient(checkerA), ironlinkv1.NewHealthServiceClient(checkerA)
	f.checkerB = ironlinkv1.NewValidationServiceClient(hub.HealthChecker(t, "burnin-b", "site-b"))
	op := hub.Operator(t, "ops")
	f.fleet, f.hw = ironlinkv1.NewFleetServiceClient(op), ironlinkv1.NewHardwareServiceClient(op)
	f.runner = validation.NewRunner(st, nil, log)
	// Both devices of site-a are in the validation pool and not offered.
	at := f.a.Now()
	conds := storetest.Healthy(at)
	for i := range conds {
		if conds[i].Type == condition.InValidationPool {
			conds[i].Status = condition.True
		}
	}
	f.a.Send([]store.DeviceUpdate{{DeviceID: f.a.IDs[0], Conditions: conds, ObservedTime: at}, {DeviceID: f.a.IDs[1], Conditions: conds, ObservedTime: at}})
	return f
}

// startRun stores a VALIDATE operation of device id waiting for checks and
// marks it SUCCEEDED, as the satellite would after inspect and clean.
func (f *fixture) startRun(t *testing.T, site, id string, checks ...string) string {
	t.Helper()
	ctx := context.Background()
	params, _ := protojson.Marshal(&ironlinkv1.OperationParams{ValidationChecks: checks})
	_, ops, err := f.st.CreateOperations(ctx, []store.NewOperation{{ID: uuid.NewString(), Site: site, DeviceID: id, Kind: "VALIDATE",
		Params: params, Actor: "ops", Reason: "back from RMA"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Pool().Exec(ctx, `UPDATE operations SET state = 'SUCCEEDED', started_at = now(), ended_at = now() WHERE id = $1`, ops[0].ID); err != nil {
		t.Fatal(err)
	}
	return ops[0].ID
}

// inspected stores the hardware read after the run's inspection.
func (f *fixture) inspected(t *testing.T, site *storetest.Site, id string) {
	t.Helper()
	now := time.Now().UTC()
	h := &ironlinkv1.HardwareState{CpuModel: "Xeon", CpuCount: 224, MemoryMib: 2 << 20, InventoryAvailable: true, InventoryStatus: "Read",
		ReadAt: timestamppb.New(now), InspectionFinishedAt: timestamppb.New(now)}
	b, _ := protojson.Marshal(h)
	site.Send([]store.DeviceUpdate{{DeviceID: id, ObservedTime: now, Hardware: &store.Hardware{JSON: b, ReadAt: now, InspectionFinishedAt: &now}}})
}

func (f *fixture) record(t *testing.T, c ironlinkv1.ValidationServiceClient, run, check string, pass bool) error {
	t.Helper()
	res := ironlinkv1.ValidationResult_VALIDATION_RESULT_FAIL
	if pass {
		res = ironlinkv1.ValidationResult_VALIDATION_RESULT_PASS
	}
	_, err := c.RecordValidationResult(context.Background(), &ironlinkv1.RecordValidationResultRequest{RunId: run, Check: check, Result: res,
		Duration: durationpb.New(90 * time.Second), OutputExcerpt: check + " output", ArtifactsUrl: "https://artifacts.example/" + check})
	return err
}

func (f *fixture) run(t *testing.T, device string) *ironlinkv1.ValidationRun {
	t.Helper()
	r, err := f.hw.ListValidationRuns(context.Background(), &ironlinkv1.ListValidationRunsRequest{Device: device})
	if err != nil || len(r.GetRuns()) == 0 {
		t.Fatalf("runs of %s: %v %v", device, r, err)
	}
	return r.GetRuns()[0]
}

// A pool device is not offered by hand before a run passed; a run waits
// for the inspected hardware and both checks, then passes, and the device
// is offered through an OFFER command; GetDevice shows the run with its
// three results (two checks and the hub's hardware-profile).
func TestValidationRunPassesAndOffers(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	id := f.a.IDs[0]
	_, err := f.fleet.OfferDevice(ctx, &ironlinkv1.OfferDeviceRequest{DeviceId: id, Reason: "try"})
	if status.Code(err) != codes.FailedPrecondition || grpcerr.Reason(err) != grpcerr.ReasonValidationRequired {
		t.Fatalf("offer of a pool device without a run: %v, want FailedPrecondition VALIDATION_REQUIRED", err)
	}
	run := f.startRun(t, "site-a", id, "gpu-burn", "nccl")
	f.runner.Pass(ctx)
	if r := f.run(t, id); r.GetState() != ironlinkv1.ValidationRunState_VALIDATION_RUN_STATE_AWAITING_RESULTS {
		t.Fatalf("before the inspected hardware: %v", r)
	}
	f.inspected(t, f.a, id)
	if err := f.record(t, f.checkerA, run, "gpu-burn", true); err != nil {
		t.Fatal(err)
	}
	f.runner.Pass(ctx)
	if r := f.run(t, id); r.GetState() != ironlinkv1.ValidationRunState_VALIDATION_RUN_STATE_AWAITING_RESULTS || r.GetMessage() != "waiting for results of: nccl" {
		t.Fatalf("one check missing: %v", r)
	}
	if err := f.record(t, f.checkerA, run, "nccl", true); err != nil {
		t.Fatal(err)
	}
	f.runner.Pass(ctx)
	d, err := f.fleet.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id})
	if err != nil {
		t.Fatal(err)
	}
	r := d.GetValidationRuns()[0]
	if r.GetState() != ironlinkv1.ValidationRunState_VALIDATION_RUN_STATE_PASSED || r.GetOfferCommandId() == "" || len(r.GetResults()) != 3 {
		t.Fatalf("passed run: %v", r)
	}
	if d.GetDevice().GetDesiredImpairment() != ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED {
		t.Fatalf("desired %v after the pass, want RELEASED", d.GetDevice().GetDesiredImpairment())
	}
	if err := f.record(t, f.checkerA, run, "nccl", false); grpcerr.Reason(err) != grpcerr.ReasonRunFinished {
		t.Fatalf("result after the run ended: %v, want RUN_FINISHED", err)
	}
}

// One failing check ends the run FAILED naming it; the device stays not
// offered. A checker of another site is refused (PermissionDenied) and
// bad input is InvalidArgument naming the field.
func TestValidationRunFailsAndRefusesOtherSites(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	id := f.a.IDs[1]
	run := f.startRun(t, "site-a", id, "gpu-burn", "nccl")
	if err := f.record(t, f.checkerB, run, "gpu-burn", true); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a checker of site-b: %v, want PermissionDenied", err)
	}
	for field, req := range map[string]*ironlinkv1.RecordValidationResultRequest{
		"run_id":        {RunId: "nope", Check: "x", Result: ironlinkv1.ValidationResult_VALIDATION_RESULT_PASS},
		"check":         {RunId: run, Check: "bad name!", Result: ironlinkv1.ValidationResult_VALIDATION_RESULT_PASS},
		"result":        {RunId: run, Check: "x"},
		"artifacts_url": {RunId: run, Check: "x", Result: ironlinkv1.ValidationResult_VALIDATION_RESULT_PASS, ArtifactsUrl: "file:///etc/passwd"},
	} {
		_, err := f.checkerA.RecordValidationResult(ctx, req)
		if status.Code(err) != codes.InvalidArgument || !slices.Contains(grpcerr.Fields(err), field) {
			t.Errorf("%s: %v, want InvalidArgument naming it", field, err)
		}
	}
	// The hub's own check names and a check the run does not require
	// (a typo) are refused naming check, nothing written.
	for _, check := range []string{"operation", "hardware-profile", "gpu-brun"} {
		if err := f.record(t, f.checkerA, run, check, true); status.Code(err) != codes.InvalidArgument || !slices.Contains(grpcerr.Fields(err), "check") {
			t.Errorf("check %s: %v, want InvalidArgument naming check", check, err)
		}
	}
	if n := len(f.run(t, id).GetResults()); n != 0 {
		t.Errorf("%d check results after refused reports, want 0", n)
	}
	f.inspected(t, f.a, id)
	if err := f.record(t, f.checkerA, run, "gpu-burn", true); err != nil {
		t.Fatal(err)
	}
	if err := f.record(t, f.checkerA, run, "nccl", false); err != nil {
		t.Fatal(err)
	}
	f.runner.Pass(ctx)
	r := f.run(t, id)
	if r.GetState() != ironlinkv1.ValidationRunState_VALIDATION_RUN_STATE_FAILED || !slices.Equal(r.GetFailingChecks(), []string{"nccl"}) || r.GetOfferCommandId() != "" {
		t.Fatalf("failed run: %v", r)
	}
	d, err := f.fleet.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetDevice().GetDesiredImpairment() == ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED {
		t.Fatal("a failed run offered the device")
	}
}

// An operation that changes the node (here ADOPT) started while a run is
// open fails the run (check operation): it must not later judge, and
// offer, a machine it no longer describes. A hardware re-read does not.
func TestOperationSupersedesAnOpenRun(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	id := f.a.IDs[0]
	run := f.startRun(t, "site-a", id, "gpu-burn")
	reread := func(kind string) string {
		t.Helper()
		_, ops, err := f.st.CreateOperations(ctx, []store.NewOperation{{ID: uuid.NewString(), Site: "site-a", DeviceID: id, Kind: store.OperationKind(kind),
			Params: []byte(`{}`), Actor: "ops", Reason: "test"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.Pool().Exec(ctx, `UPDATE operations SET state = 'SUCCEEDED', started_at = now(), ended_at = now() WHERE id = $1`, ops[0].ID); err != nil {
			t.Fatal(err)
		}
		return ops[0].ID
	}
	reread("HARDWARE_REREAD")
	if r := f.run(t, id); r.GetState() == ironlinkv1.ValidationRunState_VALIDATION_RUN_STATE_FAILED {
		t.Fatalf("a hardware re-read ended the run: %v", r)
	}
	adopt := reread("ADOPT")
	r := f.run(t, id)
	if r.GetRunId() != run || r.GetState() != ironlinkv1.ValidationRunState_VALIDATION_RUN_STATE_FAILED ||
		!slices.Equal(r.GetFailingChecks(), []string{"operation"}) || !strings.Contains(r.GetMessage(), adopt) {
		t.Fatalf("run after an ADOPT: %v, want FAILED naming the operation", r)
	}
	if err := f.record(t, f.checkerA, run, "gpu-burn", true); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a result for the superseded run: %v, want FailedPrecondition", err)
	}
}
