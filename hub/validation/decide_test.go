package validation_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/hub/hwprofile"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/validation"
	"github.com/ironlink/ironlink/internal/condition"
)

// A run whose checks never all report fails once the timeout has passed,
// naming the checks that never came (the hub's own check when the
// hardware read after the inspection never came); before it, it waits.
func TestDecideTimeout(t *testing.T) {
	start := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	inspected := start.Add(10 * time.Minute)
	noProfile := hwprofile.Result{Condition: condition.Condition{Type: condition.HardwareMatchesProfile, Status: condition.Unknown, Reason: condition.ReasonNoProfile}}
	run := store.ValidationRun{ID: "r1", State: store.RunAwaiting, OpState: "SUCCEEDED", CreatedAt: start,
		RequiredChecks: []string{"gpu-burn", "nccl"},
		Results:        []store.ValidationResult{{Check: "gpu-burn", Pass: true}}}
	for _, tc := range []struct {
		name      string
		at        time.Duration
		inspected *time.Time
		state     store.ValidationRunState
		failing   []string
	}{
		{"within the timeout", 119 * time.Minute, &inspected, store.RunAwaiting, nil},
		{"past it: the missing check", 121 * time.Minute, &inspected, store.RunFailed, []string{"nccl"}},
		{"past it, no hardware read", 121 * time.Minute, nil, store.RunFailed, []string{store.HubCheck}},
	} {
		v := validation.Decide(validation.Input{Run: run, InspectedAt: tc.inspected, Profile: noProfile, Now: start.Add(tc.at), Timeout: 2 * time.Hour})
		if v.State != tc.state || !slices.Equal(v.FailingChecks, tc.failing) {
			t.Errorf("%s: %s %v (%s), want %s %v", tc.name, v.State, v.FailingChecks, v.Message, tc.state, tc.failing)
		}
		if tc.state == store.RunFailed && !strings.HasPrefix(v.Message, "timed out after 2h0m0s waiting for") {
			t.Errorf("%s: message %q, want it to say it timed out", tc.name, v.Message)
		}
	}
	// No timeout configured: it waits.
	if v := validation.Decide(validation.Input{Run: run, InspectedAt: &inspected, Profile: noProfile, Now: start.Add(48 * time.Hour)}); v.State != store.RunAwaiting {
		t.Errorf("without a timeout: %s, want AWAITING_RESULTS", v.State)
	}
}

// A required check reported FAIL fails the run at once, even before the
// hardware read after the inspection came (a node that is never read
// again must not leave a failed run waiting forever).
func TestDecideFailsOnAFailedCheckBeforeTheHardwareRead(t *testing.T) {
	start := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	run := store.ValidationRun{ID: "r1", State: store.RunAwaiting, OpState: "SUCCEEDED", CreatedAt: start,
		RequiredChecks: []string{"gpu-burn", "nccl"},
		Results:        []store.ValidationResult{{Check: "nccl"}, {Check: "gpu-burn", Pass: true}}}
	v := validation.Decide(validation.Input{Run: run, Now: start.Add(time.Minute), Timeout: 2 * time.Hour})
	if v.State != store.RunFailed || !slices.Equal(v.FailingChecks, []string{"nccl"}) || v.Message != "failed: nccl" {
		t.Errorf("%s %v (%s), want FAILED [nccl]", v.State, v.FailingChecks, v.Message)
	}
	run.Results = []store.ValidationResult{{Check: "gpu-burn", Pass: true}}
	if v := validation.Decide(validation.Input{Run: run, Now: start.Add(time.Minute), Timeout: 2 * time.Hour}); v.State != store.RunAwaiting {
		t.Errorf("only passes so far: %s, want AWAITING_RESULTS", v.State)
	}
}
