package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/ironic/ironictest"
	"github.com/ironlink/ironlink/test/harness"
)

const valSite = "valbed"

// valEnv is the running system of the validation run on the real bed.
type valEnv struct {
	fleet   ironlinkv1.FleetServiceClient
	ops     ironlinkv1.OperationServiceClient
	hw      ironlinkv1.HardwareServiceClient
	checker ironlinkv1.ValidationServiceClient
	// health is the site's health intake (HealthService), for checkers
	// that report health events.
	health ironlinkv1.HealthServiceClient
}

// valNode enrols a hwtest-val-* node (fake hardware, fake inspection,
// resource class hwtest-val: the satellite's validation pool), stores
// seed-inventory's matching machine and takes it to manageable (deleted
// after).
func valNode(ctx context.Context, t *testing.T, ir *ironic.Client, seed string) string {
	t.Helper()
	name := fmt.Sprintf("hwtest-val-%06d", time.Now().UnixNano()%1000000)
	node, err := ir.CreateNode(ctx, map[string]any{"name": name, "driver": "fake-hardware", "inspect_interface": "fake", "resource_class": "hwtest-val"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		defer dcancel()
		if err := ir.DeleteNode(dctx, node.UUID); err != nil {
			t.Errorf("delete %s: %v", name, err)
		}
	})
	ironictest.RunSeed(t, seed, node.UUID)
	ironictest.Inspect(ctx, t, ir, node.UUID)
	return node.UUID
}

// waitRun waits until the device's newest run is in state want.
func (e *valEnv) waitRun(t *testing.T, id string, want ironlinkv1.ValidationRunState) *ironlinkv1.ValidationRun {
	t.Helper()
	var run *ironlinkv1.ValidationRun
	harness.Eventually(t, 3*time.Minute, func() error {
		r, err := e.hw.ListValidationRuns(context.Background(), &ironlinkv1.ListValidationRunsRequest{Device: id})
		if err != nil || len(r.GetRuns()) == 0 {
			return fmt.Errorf("runs of %s: %v %v", id, r, err)
		}
		run = r.GetRuns()[0]
		if run.GetState() != want || (want == ironlinkv1.ValidationRunState_VALIDATION_RUN_STATE_AWAITING_RESULTS &&
			!strings.HasPrefix(run.GetMessage(), "waiting for results")) {
			return fmt.Errorf("run of %s is %v (%s), want %v", id, run.GetState(), run.GetMessage(), want)
		}
		return nil
	})
	return run
}

func (e *valEnv) record(t *testing.T, run, check string, pass bool) {
	t.Helper()
	res := ironlinkv1.ValidationResult_VALIDATION_RESULT_FAIL
	if pass {
		res = ironlinkv1.ValidationResult_VALIDATION_RESULT_PASS
	}
	if _, err := e.checker.RecordValidationResult(context.Background(), &ironlinkv1.RecordValidationResultRequest{RunId: run, Check: check, Result: res,
		Duration: durationpb.New(42 * time.Second), OutputExcerpt: check + ": done", ArtifactsUrl: "https://ci.example/" + check}); err != nil {
		t.Fatalf("record %s: %v", check, err)
	}
}

// reportHealth reports check's result for device as a health event
// (non-fatal when unhealthy) and checks that it recorded a result of run.
func (e *valEnv) reportHealth(t *testing.T, device, run, check string, healthy bool) {
	t.Helper()
	r, err := e.health.ReportHealth(context.Background(), &ironlinkv1.ReportHealthRequest{Site: valSite, Events: []*ironlinkv1.HealthEvent{{
		DeviceId: device, Agent: "nccl-tests", ComponentClass: "GPU", CheckName: check, IsHealthy: healthy,
		Message: check + ": all_reduce bus bandwidth", GeneratedTime: timestamppb.Now(),
		Metadata: map[string]string{"duration": "3m", "artifacts_url": "https://ci.example/" + check}}}})
	if err != nil || r.GetResults()[0].GetValidationRunId() != run {
		t.Fatalf("health event of %s for run %s: %v %v", check, run, r, err)
	}
}

// TestValidationRealCloud runs validation runs on the real test bed (under
// its lock): two pool nodes are not offered by hand; a VALIDATE of each
// inspects them and cleans them (bios.factory_reset) for real, the hub
// checks the inspected hardware against its profile and waits for two
// checks, one reported through RecordValidationResult, one as a health
// event; the node whose checks pass is
// offered (an OFFER command that the satellite applies), the one with a
// failing check stays held with the check named.
func TestValidationRealCloud(t *testing.T) {
	c := realCloud(t)
	seed, oc := os.Getenv("IRONLINK_E2E_SEED_INVENTORY"), os.Getenv("IRONLINK_E2E_OPERATIONS_CLOUD")
	if seed == "" || oc == "" {
		if os.Getenv("IRONLINK_E2E_REQUIRE_REAL") == "1" {
			t.Fatal("IRONLINK_E2E_REQUIRE_REAL=1 but IRONLINK_E2E_SEED_INVENTORY or IRONLINK_E2E_OPERATIONS_CLOUD is not set")
		}
		t.Skip("set IRONLINK_E2E_SEED_INVENTORY and IRONLINK_E2E_OPERATIONS_CLOUD")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ir := ironic.New(c.bm, nil)
	good, bad := valNode(ctx, t, ir, seed), valNode(ctx, t, ir, seed)

	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{valSite}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	profiles := filepath.Join(t.TempDir(), "profiles.yaml")
	if err := os.WriteFile(profiles, []byte(strings.Replace(e2eProfiles, "gpu-h100}", "hwtest-val}", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	hubAddr, _ := startHub(t, db, id, "--hardware-profiles-file", profiles)
	harness.Start(t, "ironlink-satellite", bins.Satellite(), append([]string{"--site", valSite, "--hub", hubAddr, "--clouds-yaml", c.cloudsYAML,
		"--cloud", c.name, "--operations-cloud", oc, "--operations-poll-interval", "500ms", "--validation-pool", "resource_class=hwtest-val",
		"--state-file", filepath.Join(t.TempDir(), "state.json"), "--poll-interval", "3s", "--max-backoff", "2s", "--auth-backoff", "1s",
		"--log-level", "debug"}, id.satelliteArgs(valSite)...)...)
	admin := id.dialAs(t, hubAddr, "ops-admin")
	e := &valEnv{fleet: ironlinkv1.NewFleetServiceClient(admin), ops: ironlinkv1.NewOperationServiceClient(admin),
		hw: ironlinkv1.NewHardwareServiceClient(admin),
		// The site's own identity holds device-health:create, bound to the site.
		checker: ironlinkv1.NewValidationServiceClient(id.dialAs(t, hubAddr, auth.SatelliteClientID(valSite)))}
	e.health = ironlinkv1.NewHealthServiceClient(id.dialAs(t, hubAddr, auth.SatelliteClientID(valSite)))

	// Until a run passed, a pool node is not offered by hand.
	harness.Eventually(t, time.Minute, func() error {
		_, err := e.fleet.OfferDevice(ctx, &ironlinkv1.OfferDeviceRequest{DeviceId: good, Reason: "e2e", ValidateOnly: true})
		if status.Code(err) == codes.FailedPrecondition && strings.Contains(status.Convert(err).Message(), "validation pool") {
			return nil
		}
		return fmt.Errorf("offer of a pool node before a run: %v", err)
	})
	var r *ironlinkv1.StartOperationResponse
	harness.Eventually(t, time.Minute, func() error {
		var err error
		r, err = e.ops.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_VALIDATE,
			Devices: []string{good, bad}, Reason: "e2e validation", Params: &ironlinkv1.OperationParams{ValidationChecks: []string{"burn-in", "nccl"},
				// The clean step fake-hardware has (the bed's burn-in).
				CleanSteps: []*ironlinkv1.CleanStep{{Interface: "bios", Step: "factory_reset"}}}})
		return err // until the satellite announced operations
	})
	began := time.Now()
	for _, dev := range []string{good, bad} {
		run := e.waitRun(t, dev, ironlinkv1.ValidationRunState_VALIDATION_RUN_STATE_AWAITING_RESULTS)
		if run.GetMessage() != "waiting for results of: burn-in, nccl" {
			t.Fatalf("run of %s after its operation: %s (hardware-profile: want passed)", dev, run.GetMessage())
		}
	}
	t.Logf("VALIDATE started to both runs awaiting the checks (inspected, hardware-profile passed): %s", time.Since(began).Round(10*time.Millisecond))
	runs := map[string]string{r.GetOperations()[0].GetDeviceId(): r.GetOperations()[0].GetOperationId(),
		r.GetOperations()[1].GetDeviceId(): r.GetOperations()[1].GetOperationId()}
	// burn-in reports through RecordValidationResult, nccl as a health
	// event through the health intake.
	e.record(t, runs[good], "burn-in", true)
	e.reportHealth(t, good, runs[good], "nccl", true)
	e.record(t, runs[bad], "burn-in", true)
	e.reportHealth(t, bad, runs[bad], "nccl", false)

	passed := e.waitRun(t, good, ironlinkv1.ValidationRunState_VALIDATION_RUN_STATE_PASSED)
	if passed.GetOfferCommandId() == "" || len(passed.GetResults()) != 3 {
		t.Fatalf("passed run: %v", passed)
	}
	harness.Eventually(t, 2*time.Minute, func() error {
		cmd, err := e.fleet.GetCommand(ctx, &ironlinkv1.GetCommandRequest{CommandId: passed.GetOfferCommandId()})
		if err != nil || cmd.GetCommand().GetState() != ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED {
			return fmt.Errorf("offer command: %v %v", cmd, err)
		}
		return nil
	})
	failed := e.waitRun(t, bad, ironlinkv1.ValidationRunState_VALIDATION_RUN_STATE_FAILED)
	if !slices.Equal(failed.GetFailingChecks(), []string{"nccl"}) || failed.GetOfferCommandId() != "" || !strings.Contains(failed.GetMessage(), "nccl") {
		t.Fatalf("failed run: %v", failed)
	}
	for _, c := range failed.GetResults() {
		if c.GetCheck() == "nccl" && (c.GetReporter() != "nccl-tests" || c.GetArtifactsUrl() != "https://ci.example/nccl" || c.GetDuration().AsDuration() != 3*time.Minute) {
			t.Fatalf("nccl result from the health intake: %v", c)
		}
	}
	// The run cleaned the node: the bed's Ironic ran its clean step.
	o, err := e.ops.GetOperation(ctx, &ironlinkv1.GetOperationRequest{OperationId: runs[good]})
	if err != nil || !slices.ContainsFunc(o.GetOperation().GetSteps(), func(s *ironlinkv1.OperationStep) bool { return strings.Contains(s.GetName(), "clean") }) {
		t.Fatalf("VALIDATE of %s did not clean: %v %v", good, o, err)
	}
	d, err := e.fleet.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: bad})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetDevice().GetDesiredImpairment() == ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED {
		t.Fatal("the node with a failing check was offered")
	}
}
