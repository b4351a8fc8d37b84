package validation_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// healthEvent is a checker's health event for device id: check, healthy
// or not, generated at at.
func healthEvent(id, check string, healthy bool, at time.Time, meta map[string]string) *ironlinkv1.HealthEvent {
	return &ironlinkv1.HealthEvent{DeviceId: id, Agent: "burnin-agent", ComponentClass: "GPU", CheckName: check, IsHealthy: healthy,
		Message: check + " says healthy=" + map[bool]string{true: "yes", false: "no"}[healthy], GeneratedTime: timestamppb.New(at), Metadata: meta}
}

// Checkers that report through the health intake (HealthService, or a
// satellite's door) record a validation run's checks: an event of a
// required check generated after the run started records its result
// (healthy PASS, the message as output, duration and artifacts link from
// the metadata, the agent as reporter) and the answer names the run; an
// event generated before the run, or of a check the run does not require,
// records nothing. A failing event fails the run naming its check.
func TestHealthEventsRecordValidationResults(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	id := f.a.IDs[0]
	before := time.Now().Add(-time.Minute)
	run := f.startRun(t, "site-a", id, "gpu-burn", "nccl")
	f.inspected(t, f.a, id)

	report := func(events ...*ironlinkv1.HealthEvent) *ironlinkv1.ReportHealthResponse {
		t.Helper()
		r, err := f.healthA.ReportHealth(ctx, &ironlinkv1.ReportHealthRequest{Site: "site-a", Events: events})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := report(healthEvent(id, "gpu-burn", true, before, nil), healthEvent(id, "xid-watch", true, time.Now(), nil))
	for _, res := range r.GetResults() {
		if res.GetValidationRunId() != "" {
			t.Errorf("an event before the run or of a check it does not require recorded a result: %v", res)
		}
	}
	if n := len(f.run(t, id).GetResults()); n != 0 {
		t.Fatalf("%d results after events that are not the run's, want 0", n)
	}

	r = report(healthEvent(id, "gpu-burn", true, time.Now(), map[string]string{"duration": "25m", "artifacts_url": "https://ci.example/burn/7"}))
	if got := r.GetResults()[0].GetValidationRunId(); got != run {
		t.Fatalf("validation_run_id %q, want %s", got, run)
	}
	f.runner.Pass(ctx)
	got := f.run(t, id)
	if got.GetState() != ironlinkv1.ValidationRunState_VALIDATION_RUN_STATE_AWAITING_RESULTS || got.GetMessage() != "waiting for results of: nccl" {
		t.Fatalf("after gpu-burn passed through the health intake: %v", got)
	}
	i := slices.IndexFunc(got.GetResults(), func(c *ironlinkv1.ValidationCheckResult) bool { return c.GetCheck() == "gpu-burn" })
	if i < 0 {
		t.Fatalf("no gpu-burn result: %v", got)
	}
	c := got.GetResults()[i]
	if c.GetResult() != ironlinkv1.ValidationResult_VALIDATION_RESULT_PASS || c.GetDuration().AsDuration() != 25*time.Minute ||
		c.GetArtifactsUrl() != "https://ci.example/burn/7" || c.GetOutputExcerpt() != "gpu-burn says healthy=yes" || c.GetReporter() != "burnin-agent" {
		t.Fatalf("gpu-burn result: %v", c)
	}

	// A non-fatal unhealthy nccl event fails the run, naming nccl.
	report(healthEvent(id, "nccl", false, time.Now(), map[string]string{"duration": "not a duration"}))
	f.runner.Pass(ctx)
	got = f.run(t, id)
	if got.GetState() != ironlinkv1.ValidationRunState_VALIDATION_RUN_STATE_FAILED || !slices.Equal(got.GetFailingChecks(), []string{"nccl"}) {
		t.Fatalf("after nccl failed through the health intake: %v", got)
	}
	// The run ended: a later event records nothing more.
	if r := report(healthEvent(id, "nccl", true, time.Now().Add(time.Second), nil)); r.GetResults()[0].GetValidationRunId() != "" {
		t.Fatalf("an event after the run ended names it: %v", r.GetResults()[0])
	}
}
