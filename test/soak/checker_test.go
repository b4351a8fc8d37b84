package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/internal/condition"
)

// The invariants the checker asserts (docs/howto/soak.md).
const (
	invHistoryOnce = "history: every delta exactly once"
	invStatus      = "status = Derive(stored conditions)"
	invCommands    = "commands reach a final state"
	invTraits      = "trait = desired within one resync"
	invFlat        = "hub memory, goroutines flat (±10 %)"
)

// checker is the soak's independent checker: it reads PostgreSQL and the
// simulators directly, never the hub's API, and counts each invariant's
// checks and violations.
type checker struct {
	pool  *pgxpool.Pool
	sites []*site
	// faultEnded is when the last fault that stops commands from being
	// applied (an outage) ended; a trait difference is timed from the
	// later of it and the difference's first sighting.
	faultEnded time.Time
	// traitGrace is how long a node's trait may differ from the desired
	// state: one resync interval plus the time a fault may keep the
	// satellite from resyncing.
	traitGrace time.Duration
	// commandGrace is how long a command may stay unfinished.
	commandGrace time.Duration

	mu         sync.Mutex
	checked    map[string]int
	violations map[string][]string
	mismatch   map[string]time.Time // device → first seen with trait ≠ desired
}

func newChecker(pool *pgxpool.Pool, sites []*site, traitGrace, commandGrace time.Duration) *checker {
	return &checker{pool: pool, sites: sites, traitGrace: traitGrace, commandGrace: commandGrace,
		checked: map[string]int{}, violations: map[string][]string{}, mismatch: map[string]time.Time{}}
}

func (c *checker) record(inv string, n int, violations ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checked[inv] += n
	c.violations[inv] = append(c.violations[inv], violations...)
}

// statuses checks, in one snapshot of the database, that every live
// device's stored status is hub/status.Derive of its stored conditions and
// desired impairment. UNREACHABLE depends on the site's silence, not the
// conditions: such devices are counted but only checked to belong to a
// site the hub has marked stale.
func (c *checker) statuses(ctx context.Context) error {
	tx, err := c.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	type dev struct {
		status, desired string
		conds           map[condition.Type]condition.Condition
	}
	devs := map[string]*dev{}
	rows, err := tx.Query(ctx, `SELECT id::text, status, desired_impairment FROM devices WHERE NOT removed`)
	if err != nil {
		return fmt.Errorf("devices: %w", err)
	}
	for rows.Next() {
		var id string
		d := &dev{conds: map[condition.Type]condition.Condition{}}
		if err := rows.Scan(&id, &d.status, &d.desired); err != nil {
			rows.Close()
			return fmt.Errorf("devices: %w", err)
		}
		devs[id] = d
	}
	rows.Close()
	rows, err = tx.Query(ctx, `SELECT c.device_id::text, c.type, c.status, c.reason, c.message, c.observed_generation, c.health
		FROM device_conditions c JOIN devices d ON d.id = c.device_id WHERE NOT d.removed`)
	if err != nil {
		return fmt.Errorf("conditions: %w", err)
	}
	for rows.Next() {
		var id, typ, st, reason, msg string
		var gen int64
		var health []byte
		if err := rows.Scan(&id, &typ, &st, &reason, &msg, &gen, &health); err != nil {
			rows.Close()
			return fmt.Errorf("conditions: %w", err)
		}
		cd := condition.Condition{Type: condition.Type(typ), Status: condition.Status(st), Reason: reason, Message: msg, ObservedGeneration: gen}
		if len(health) > 0 {
			cd.Health = &condition.Health{}
			if err := json.Unmarshal(health, cd.Health); err != nil {
				rows.Close()
				return fmt.Errorf("health of %s: %w", id, err)
			}
		}
		if d := devs[id]; d != nil {
			d.conds[cd.Type] = cd
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("conditions: %w", err)
	}
	var bad []string
	for id, d := range devs {
		if d.status == string(status.Unreachable) {
			continue
		}
		r := status.Derive(status.Input{Reported: len(d.conds) > 0, Quarantined: d.desired == "QUARANTINED", Conditions: d.conds})
		if string(r.Status) != d.status {
			bad = append(bad, fmt.Sprintf("device %s: stored status %s, its stored conditions derive %s (%s)", id, d.status, r.Status, r.Reason))
		}
	}
	c.record(invStatus, len(devs), bad...)
	return nil
}

// historyRepeats checks that no two consecutive condition_history rows of
// a (device, type) say the same thing: a change recorded twice. (The exact
// check, every change sent recorded once and in order, is made for the
// scripted sites at the end, when what they sent is known: satsim.Verify.)
func (c *checker) historyRepeats(ctx context.Context) error {
	var rowsN int
	if err := c.pool.QueryRow(ctx, `SELECT count(*) FROM condition_history`).Scan(&rowsN); err != nil {
		return fmt.Errorf("count history: %w", err)
	}
	rows, err := c.pool.Query(ctx, `
		SELECT device_id::text, type, status, reason, id FROM (
			SELECT h.*, lag(status) OVER w AS pstatus, lag(reason) OVER w AS preason, lag(message) OVER w AS pmessage
			FROM condition_history h WINDOW w AS (PARTITION BY device_id, type ORDER BY id)) x
		WHERE status = pstatus AND reason = preason AND message = pmessage AND type <> 'CustomerReady' LIMIT 10`)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var dev, typ, st, reason string
		var id int64
		if err := rows.Scan(&dev, &typ, &st, &reason, &id); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		bad = append(bad, fmt.Sprintf("condition_history row %d repeats the previous one of %s %s (%s/%s)", id, dev, typ, st, reason))
	}
	c.record(invHistoryOnce, rowsN, c.newOnly(invHistoryOnce, bad)...)
	return rows.Err()
}

// newOnly drops violations already recorded (a repeated row stays in the
// table and would be found by every round).
func (c *checker) newOnly(inv string, bad []string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, b := range bad {
		if !slices.Contains(c.violations[inv], b) {
			out = append(out, b)
		}
	}
	return out
}

// traits checks that each commanded node's provider trait in the
// simulator equals the hub's desired state: live, a difference may last at
// most traitGrace; final, none may remain.
func (c *checker) traits(ctx context.Context, final bool) error {
	rows, err := c.pool.Query(ctx, `SELECT id::text, desired_impairment FROM devices WHERE desired_impairment <> 'NONE' AND NOT removed`)
	if err != nil {
		return fmt.Errorf("devices: %w", err)
	}
	defer rows.Close()
	now := time.Now()
	var bad []string
	n := 0
	for rows.Next() {
		var id, desired string
		if err := rows.Scan(&id, &desired); err != nil {
			return fmt.Errorf("devices: %w", err)
		}
		for _, s := range c.sites {
			has, ok := s.hasTrait(id)
			if !ok {
				continue
			}
			n++
			c.mu.Lock()
			if has == (desired == "RELEASED") {
				delete(c.mismatch, id)
			} else if first, seen := c.mismatch[id]; !seen {
				c.mismatch[id] = now
			} else if since := later(first, c.faultEnded); final || now.Sub(since) > c.traitGrace {
				bad = append(bad, fmt.Sprintf("device %s desired %s: trait present=%v for %s (since the last outage ended)", id, desired, has, now.Sub(since).Round(time.Second)))
				c.mismatch[id] = now // one violation per grace period
			}
			c.mu.Unlock()
		}
	}
	c.record(invTraits, n, bad...)
	return rows.Err()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
