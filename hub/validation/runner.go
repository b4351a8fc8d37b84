package validation

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/ironlink/ironlink/hub/hwprofile"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/internal/periodic"
)

// SourceValidation is the source recorded on the OFFER command of a
// passing run.
const SourceValidation = "validation"

// RunnerStore is the part of hub/store the Runner uses.
type RunnerStore interface {
	// OpenValidationRuns: see store.Store.OpenValidationRuns.
	OpenValidationRuns(ctx context.Context, limit int) ([]store.ValidationRun, error)
	// DeviceHardwareOf: see store.Store.DeviceHardwareOf.
	DeviceHardwareOf(ctx context.Context, id string) (store.DeviceHardware, *time.Time, error)
	// AdvanceValidationRun: see store.Store.AdvanceValidationRun.
	AdvanceValidationRun(ctx context.Context, id string, v store.RunVerdict, a store.ImpairmentAction) (store.ValidationRun, error)
}

// Runner decides the open runs: every Interval and when woken.
type Runner struct {
	st       RunnerStore
	profiles func() *hwprofile.File
	log      *slog.Logger
	wake     chan struct{}
	// Interval between passes (0: 2 s).
	Interval time.Duration
	// Timeout fails a run still waiting for its hardware read or checks
	// this long after it started, naming the missing checks (0: never;
	// the hub's --validation-timeout, default DefaultTimeout).
	Timeout time.Duration
}

// DefaultTimeout is the hub's default --validation-timeout.
const DefaultTimeout = 2 * time.Hour

// NewRunner returns a Runner over st with the profiles in force.
func NewRunner(st RunnerStore, profiles func() *hwprofile.File, log *slog.Logger) *Runner {
	return &Runner{st: st, profiles: profiles, log: log, wake: make(chan struct{}, 1)}
}

// Wake asks for a pass soon; never blocks.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run passes over the open runs until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	every := r.Interval
	if every == 0 {
		every = 2 * time.Second
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.wake:
				r.Pass(ctx)
			}
		}
	}()
	periodic.NowAndEvery(ctx, every, func() { r.Pass(ctx) })
	return nil
}

// Pass decides every open run once (at most 500) and writes the changed
// verdicts.
func (r *Runner) Pass(ctx context.Context) {
	runs, err := r.st.OpenValidationRuns(ctx, 500)
	if err != nil {
		r.log.Warn("open validation runs unreadable", "err", err)
		return
	}
	for _, run := range runs {
		if err := r.decide(ctx, run); err != nil && !errors.Is(err, store.ErrRunFinished) && ctx.Err() == nil {
			r.log.Warn("validation run not advanced", "run_id", run.ID, logkey.DeviceID, run.DeviceID, "err", err)
		}
	}
}

func (r *Runner) decide(ctx context.Context, run store.ValidationRun) error {
	now := time.Now().UTC()
	in := Input{Run: run, Now: now, Timeout: r.Timeout}
	if run.OpState == "SUCCEEDED" {
		hw, inspected, err := r.st.DeviceHardwareOf(ctx, run.DeviceID)
		if err != nil {
			return err
		}
		var f *hwprofile.File
		if r.profiles != nil {
			f = r.profiles()
		}
		in.InspectedAt, in.Profile = inspected, hwprofile.Evaluate(f, hw, now, r.log)
	}
	v := Decide(in)
	if unchanged(run, v) {
		return nil
	}
	a := store.ImpairmentAction{Actor: run.OpActor, Reason: "validation run " + run.ID + " passed", Source: SourceValidation}
	out, err := r.st.AdvanceValidationRun(ctx, run.ID, v, a)
	if err != nil {
		return err
	}
	r.log.Info("validation run advanced", "run_id", run.ID, logkey.DeviceID, run.DeviceID, "state", out.State,
		"message", out.Message, "failing", out.FailingChecks, "command_id", out.OfferCommandID)
	return nil
}

// unchanged: v says what run says (state, message) and the hub's check
// is recorded with the same outcome.
func unchanged(run store.ValidationRun, v store.RunVerdict) bool {
	if run.State != v.State || run.Message != v.Message {
		return false
	}
	if v.HubResult == nil {
		return true
	}
	i := slices.IndexFunc(run.Results, func(x store.ValidationResult) bool { return x.Check == store.HubCheck })
	return i >= 0 && run.Results[i].Pass == v.HubResult.Pass && run.Results[i].OutputExcerpt == v.HubResult.OutputExcerpt
}
