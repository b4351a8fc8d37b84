package validation

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ironlink/ironlink/hub/hwprofile"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
)

// Input is what Decide reads of one open run.
type Input struct {
	Run store.ValidationRun
	// InspectedAt is the stored hardware's inspection_finished_at (nil:
	// none); Profile the hardware checked against its profile.
	InspectedAt *time.Time
	Profile     hwprofile.Result
	Now         time.Time
	// Timeout, when positive, is how long after its start (the run's
	// created time) a run whose operation succeeded may wait for its
	// hardware read and checks; past it the run fails naming the missing
	// checks (--validation-timeout).
	Timeout time.Duration
}

// Decide is the run's verdict (pure): RUNNING while its operation is
// not finished; FAILED when the operation did not succeed; once it did,
// AWAITING_RESULTS until the hardware read after the run's inspection is
// stored and every required check reported, then FAILED naming every
// failing check (the hub's "hardware-profile" among them) or PASSED.
// A run still awaiting after in.Timeout fails naming what never came.
func Decide(in Input) store.RunVerdict {
	v, missing := decide(in)
	if v.State != store.RunAwaiting || in.Timeout <= 0 || in.Now.Sub(in.Run.CreatedAt) <= in.Timeout {
		return v
	}
	v.State = store.RunFailed
	v.Message = fmt.Sprintf("timed out after %s %s", in.Timeout, v.Message)
	v.FailingChecks = missing
	if len(v.FailingChecks) == 0 {
		v.FailingChecks = []string{store.HubCheck} // no hardware read after the inspection
	}
	return v
}

// OperationCheck names the run's VALIDATE operation among the failing
// checks when it failed or was cancelled; checkers may not report it.
const OperationCheck = "operation"

// failedChecks are the required external checks of r reported FAIL, in
// the order r requires them.
func failedChecks(r store.ValidationRun) []string {
	failed := map[string]bool{}
	for _, v := range r.Results {
		if v.Check != store.HubCheck && !v.Pass {
			failed[v.Check] = true
		}
	}
	var out []string
	for _, c := range r.RequiredChecks {
		if failed[c] {
			out = append(out, c)
		}
	}
	return out
}

// decide is Decide without the timeout; missing names the checks not yet
// reported while AWAITING_RESULTS.
func decide(in Input) (v store.RunVerdict, missing []string) {
	r := in.Run
	switch r.OpState {
	case "PENDING", "RUNNING":
		return store.RunVerdict{State: store.RunRunning, Message: "the validation operation is " + strings.ToLower(string(r.OpState))}, nil
	case "FAILED", "CANCELLED":
		return store.RunVerdict{State: store.RunFailed, FailingChecks: []string{OperationCheck},
			Message: fmt.Sprintf("the validation operation %s: %s", strings.ToLower(string(r.OpState)), r.OpLastError)}, nil
	}
	if failing := failedChecks(r); len(failing) > 0 {
		// A required check failed: the run fails now, without waiting
		// for the hardware read or the other checks.
		return store.RunVerdict{State: store.RunFailed, FailingChecks: failing, Message: "failed: " + strings.Join(failing, ", ")}, nil
	}
	if in.InspectedAt == nil || in.InspectedAt.Before(r.CreatedAt) {
		return store.RunVerdict{State: store.RunAwaiting, Message: "waiting for the hardware read after the run's inspection"}, nil
	}
	hub := hubResult(in.Profile, in.Now)
	results := map[string]bool{store.HubCheck: hub.Pass}
	for _, v := range r.Results {
		if v.Check != store.HubCheck {
			results[v.Check] = v.Pass
		}
	}
	var failing []string
	for _, c := range append([]string{store.HubCheck}, r.RequiredChecks...) {
		pass, ok := results[c]
		switch {
		case !ok:
			missing = append(missing, c)
		case !pass:
			failing = append(failing, c)
		}
	}
	v = store.RunVerdict{HubResult: &hub}
	switch {
	case len(failing) > 0:
		v.State, v.FailingChecks = store.RunFailed, failing
		v.Message = "failed: " + strings.Join(failing, ", ")
		if slices.Contains(failing, store.HubCheck) {
			v.Message += " (" + hub.OutputExcerpt + ")"
		}
	case len(missing) > 0:
		v.State, v.Message = store.RunAwaiting, "waiting for results of: "+strings.Join(missing, ", ")
	default:
		v.State, v.Message = store.RunPassed, fmt.Sprintf("passed: %d checks", len(r.RequiredChecks)+1)
	}
	return v, missing
}

// hubResult is the hub's own check: the inspected hardware against its
// profile. No profile passes (nothing to compare); no inventory fails.
func hubResult(p hwprofile.Result, now time.Time) store.ValidationResult {
	v := store.ValidationResult{Check: store.HubCheck, Reporter: "hub", RecordedAt: now}
	c := p.Condition
	switch {
	case c.Status == condition.True:
		v.Pass, v.OutputExcerpt = true, "matches profile "+p.Profile
	case c.Reason == condition.ReasonNoProfile:
		v.Pass, v.OutputExcerpt = true, "no hardware profile applies"
	case len(p.Differences) > 0:
		v.OutputExcerpt = "profile " + p.Profile + ": " + strings.Join(p.Differences, "; ")
	default:
		v.OutputExcerpt = c.Reason + ": " + c.Message
	}
	return v
}
