package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ironlink/ironlink/internal/periodic"
	"github.com/ironlink/ironlink/internal/pgprimary"
)

// Database is what readiness asks of PostgreSQL (*store.Store implements it).
type Database interface {
	// Ping fails when PostgreSQL does not answer within ctx, with an error
	// wrapping ErrStandby when it answers only as a standby.
	Ping(ctx context.Context) error
	// SchemaVersion returns the applied and the embedded migration versions.
	SchemaVersion(ctx context.Context) (have, want int64, err error)
}

// Reasons a replica is not ready; Check returns them wrapped with detail.
var (
	// ErrDatabase: PostgreSQL did not answer within the timeout.
	ErrDatabase = errors.New("database unreachable")
	// ErrSchemaBehind: the schema lacks migrations this binary needs.
	ErrSchemaBehind = errors.New("database schema behind this binary (run ironlink-hub migrate)")
	// ErrDraining: the replica is shutting down.
	ErrDraining = errors.New("replica draining")
	// ErrStandby: PostgreSQL answered, but only as a standby (read-only):
	// no primary is reachable, as between a primary's failure and a
	// standby's promotion. The same sentinel as pgprimary.ErrStandby.
	ErrStandby = pgprimary.ErrStandby
)

// Checker evaluates readiness and mirrors it into a gRPC health server.
// Safe for concurrent use.
type Checker struct {
	db       Database
	timeout  time.Duration
	grpc     *health.Server
	services []string
	log      *slog.Logger
	onChange func(ready bool)

	draining atomic.Bool
	mu       sync.Mutex
	last     error
	lastAt   time.Time
	known    bool
}

// Options tune a Checker; zero values take the defaults.
type Options struct {
	// Timeout bounds each database check (default 2 s).
	Timeout time.Duration
	// GRPC, when set, gets SERVING or NOT_SERVING for every name in
	// Services ("" is the whole server) after each check.
	GRPC     *health.Server
	Services []string
	// OnChange, when set, is called with the new readiness after each
	// check that changed the state: ready, or the kind of reason (database
	// unreachable, standby only, schema behind, draining); the first check
	// counts as a change. The change is also logged, one line each.
	OnChange func(ready bool)
}

// NewChecker returns a checker of db. Nothing runs until Run or Check.
func NewChecker(db Database, o Options, log *slog.Logger) *Checker {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	return &Checker{db: db, timeout: o.Timeout, grpc: o.GRPC, services: o.Services, log: log, onChange: o.OnChange}
}

// SetDraining marks the replica as shutting down: readiness fails from now
// on and the gRPC health turns NOT_SERVING at once.
func (c *Checker) SetDraining() {
	c.draining.Store(true)
	c.record(ErrDraining)
}

// Check evaluates readiness now (at most Timeout spent on PostgreSQL),
// records the result for the gRPC health service and returns nil when
// ready, else an error wrapping ErrDraining, ErrDatabase, ErrStandby or
// ErrSchemaBehind.
func (c *Checker) Check(ctx context.Context) error {
	err := c.evaluate(ctx)
	c.record(err)
	return err
}

func (c *Checker) evaluate(ctx context.Context) error {
	if c.draining.Load() {
		return ErrDraining
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := c.db.Ping(ctx); err != nil {
		if errors.Is(err, ErrStandby) {
			return fmt.Errorf("no primary: %w", err)
		}
		return fmt.Errorf("%w: %w", ErrDatabase, err)
	}
	have, want, err := c.db.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDatabase, err)
	}
	if have < want {
		return fmt.Errorf("%w: schema at version %d, this binary needs %d", ErrSchemaBehind, have, want)
	}
	if c.draining.Load() { // drained while the database was asked
		return ErrDraining
	}
	return nil
}

// record stores err as the latest verdict, logs a change and moves the
// gRPC health status.
func (c *Checker) record(err error) {
	c.mu.Lock()
	if c.draining.Load() && !errors.Is(err, ErrDraining) {
		err = ErrDraining // a check that began before SetDraining must not undo it
	}
	changed := !c.known || reason(c.last) != reason(err)
	c.last, c.lastAt, c.known = err, time.Now(), true
	if changed {
		st := healthpb.HealthCheckResponse_SERVING
		if err != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		if c.grpc != nil {
			for _, s := range c.services {
				c.grpc.SetServingStatus(s, st)
			}
		}
	}
	c.mu.Unlock()
	if !changed {
		return
	}
	if err != nil {
		c.log.Warn("replica not ready", "err", err)
	} else {
		c.log.Info("replica ready")
	}
	if c.onChange != nil {
		c.onChange(err == nil)
	}
}

// reason is the sentinel err wraps (nil for nil): the state whose changes
// record logs, one line each, however many checks see the same state.
func reason(err error) error {
	for _, r := range []error{ErrDraining, ErrStandby, ErrSchemaBehind, ErrDatabase} {
		if errors.Is(err, r) {
			return r
		}
	}
	return err
}

// Last returns when the latest verdict was reached, whether any check ran
// yet, and the verdict itself (nil: ready).
func (c *Checker) Last() (at time.Time, ok bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastAt, c.known, c.last
}

// Run checks at once and then every interval (default 2 s) until ctx ends.
func (c *Checker) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = 2 * time.Second
	}
	periodic.NowAndEvery(ctx, interval, func() { _ = c.Check(ctx) })
}
