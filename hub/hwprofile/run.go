package hwprofile

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/logkey"
)

// DefaultInterval is how often a Runner looks for hardware stored since
// its last pass.
const DefaultInterval = 2 * time.Second

// pageSize is how many devices one read of a pass takes.
const pageSize = 1000

// commitLag is how far before its cursor a pass reads again (see Pass):
// longer than an ingest transaction between storing a device's hardware
// and its commit.
const commitLag = 5 * time.Second

// Store is what a Runner needs of hub/store.
type Store interface {
	HardwareSince(ctx context.Context, after time.Time, limit int) ([]store.DeviceHardware, error)
	SetHubConditions(ctx context.Context, byDevice map[string]condition.Condition) (int, error)
}

// Runner keeps HardwareMatchesProfile up to date: every Interval it checks
// the devices whose hardware was stored since its last pass, and after
// Reloaded every device with hardware. Each replica may run one: the
// writes are idempotent (a condition that says the same is not written).
type Runner struct {
	st       Store
	profiles func() *File
	interval time.Duration
	log      *slog.Logger
	reload   chan struct{}
	reset    atomic.Bool // set by Reloaded: the next pass starts from the beginning
	cursor   time.Time   // owned by Pass
}

// NewRunner returns a Runner over st with the profiles in force from
// profiles (nil answers: no profile); interval ≤ 0 means DefaultInterval.
func NewRunner(st Store, profiles func() *File, interval time.Duration, log *slog.Logger) *Runner {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Runner{st: st, profiles: profiles, interval: interval, log: log, reload: make(chan struct{}, 1)}
}

// Reloaded makes the next pass check every device (the profiles changed).
// It does not block.
func (r *Runner) Reloaded() {
	r.reset.Store(true)
	select {
	case r.reload <- struct{}{}:
	default:
	}
}

// Run passes every Interval, and at once after Reloaded, until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		if n, err := r.Pass(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("hardware profile check failed; trying again", "err", err)
		} else if n > 0 {
			r.log.Info("hardware profile conditions written", "count", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-r.reload:
		}
	}
}

// Pass checks the devices whose hardware was stored since the last pass
// (every device after Reloaded) and writes the conditions that changed; it returns how many.
func (r *Runner) Pass(ctx context.Context) (int, error) {
	if r.reset.Swap(false) {
		r.cursor = time.Time{}
	}
	f := r.profiles()
	written := 0
	// Each pass reads again the last commitLag before its cursor: a row's
	// updated_at is taken inside its transaction, so one that commits after
	// a pass read a later row has a time below that pass's cursor. Evaluating
	// a device again writes nothing unless its condition changed.
	from := r.cursor
	if !from.IsZero() {
		from = from.Add(-commitLag)
	}
	for {
		devs, err := r.st.HardwareSince(ctx, from, pageSize)
		if err != nil {
			return written, err
		}
		if len(devs) == 0 {
			return written, nil
		}
		now := time.Now().UTC()
		byDevice := make(map[string]condition.Condition, len(devs))
		for _, d := range devs {
			byDevice[d.DeviceID] = Evaluate(f, d, now, r.log).Condition
		}
		n, err := r.st.SetHubConditions(ctx, byDevice)
		written += n
		if err != nil {
			return written, fmt.Errorf("write hardware profile conditions: %w", err)
		}
		from = devs[len(devs)-1].UpdatedAt
		if from.After(r.cursor) {
			r.cursor = from
		}
		if len(devs) < pageSize {
			return written, nil
		}
	}
}

// Evaluate checks device d's stored hardware against the profile of f
// that applies to it. Without one the result has no profile and the
// condition is Unknown/NoProfile (written only over an earlier verdict).
func Evaluate(f *File, d store.DeviceHardware, now time.Time, log *slog.Logger) Result {
	p := f.Select(Device{Site: d.Site, Name: d.Name, ResourceClass: d.ResourceClass})
	if p == nil {
		return Result{Condition: condition.Condition{Type: condition.HardwareMatchesProfile, Status: condition.Unknown,
			Reason: condition.ReasonNoProfile, Message: "no hardware profile applies to the device", ObservedTime: now, LastTransitionTime: now}}
	}
	h, err := Decode(d.JSON)
	if err != nil {
		log.Warn("stored hardware undecodable", logkey.DeviceID, d.DeviceID, "err", err)
	}
	return Check(p, h, now)
}

// Decode decodes a stored hardware state (protobuf JSON); nil for none.
func Decode(b []byte) (*ironlinkv1.HardwareState, error) {
	if len(b) == 0 {
		return nil, nil
	}
	h := &ironlinkv1.HardwareState{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, h); err != nil {
		return nil, fmt.Errorf("decode hardware: %w", err)
	}
	return h, nil
}
