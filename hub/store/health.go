package store

import (
	"context"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/internal/pgprimary"
	"github.com/ironlink/ironlink/migrations"
)

// Option changes how Open builds the pool.
type Option func(*pgxpool.Config)

// WithTracer installs t on every connection of the pool (pgx's query
// tracer); when t also implements pgxpool.AcquireTracer it sees failed
// connection acquisitions too. hub/metrics uses it to count database errors.
func WithTracer(t pgx.QueryTracer) Option {
	return func(c *pgxpool.Config) { c.ConnConfig.Tracer = t }
}

// Ping checks that PostgreSQL answers a query within ctx and is a primary.
// It is a query (not a protocol ping) so that the pool's tracer sees its
// failures. A server in recovery (a standby, reached through a connection
// string that allows one) gives an error wrapping pgprimary.ErrStandby, as
// does a pool whose every host refused as read-only.
func (s *Store) Ping(ctx context.Context) error {
	var standby bool
	if err := s.pool.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&standby); err != nil {
		return fmt.Errorf("ping PostgreSQL: %w", err)
	}
	if standby {
		return fmt.Errorf("ping PostgreSQL: %w", pgprimary.ErrStandby)
	}
	return nil
}

// SchemaVersion returns the highest migration version applied to the
// database (goose's goose_db_version table; 0 when none) and the highest
// version this binary embeds. have < want means the schema is behind this
// binary (run `ironlink-hub migrate`); have > want means a newer release
// migrated it (migrations are additive, so this binary still works).
func (s *Store) SchemaVersion(ctx context.Context) (have, want int64, err error) {
	want, err = EmbeddedSchemaVersion()
	if err != nil {
		return 0, 0, err
	}
	err = s.pool.QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied`).Scan(&have)
	if err != nil {
		return 0, want, fmt.Errorf("read schema version: %w", err)
	}
	return have, want, nil
}

// EmbeddedSchemaVersion is the highest migration version (the NNNNN prefix
// of the file names in package migrations) this binary carries.
func EmbeddedSchemaVersion() (int64, error) {
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		return 0, fmt.Errorf("list migrations: %w", err)
	}
	var maxV int64
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		if !ok || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("migration %s: version prefix: %w", e.Name(), err)
		}
		maxV = max(maxV, v)
	}
	return maxV, nil
}

// SiteLink is one site's link as the sites table records it, for metrics.
type SiteLink struct {
	// Site is the site name.
	Site string
	// Replica holds the site's link; "" when no link is open.
	Replica string
	// Stale: the site was silent for longer than stale_after.
	Stale bool
	// LastSeen is when anything last arrived from the site (zero: never).
	LastSeen time.Time
}

// SiteLinks lists every site with its link holder and liveness, by name.
func (s *Store) SiteLinks(ctx context.Context) ([]SiteLink, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, coalesce(link_replica, ''), stale, last_seen_at FROM sites ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list site links: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (SiteLink, error) {
		var l SiteLink
		var seen *time.Time
		if err := r.Scan(&l.Site, &l.Replica, &l.Stale, &seen); err != nil {
			return l, err
		}
		if seen != nil {
			l.LastSeen = *seen
		}
		return l, nil
	})
}

// OpenCommands counts the unfinished commands (PENDING, SENT, FAILED and
// waiting for its retry) per state, with the creation time of the oldest
// of each state.
type OpenCommands struct {
	// State is PENDING, SENT or FAILED.
	State CommandState
	// Count is the number of commands in State.
	Count int64
	// OldestCreated is when the oldest of them was asked for.
	OldestCreated time.Time
}

// OpenCommandStats returns one OpenCommands per state that has any (the
// commands_open partial index serves it; finished commands are not read).
func (s *Store) OpenCommandStats(ctx context.Context) ([]OpenCommands, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT state, count(*), min(created_at) FROM commands
		WHERE state IN ('PENDING', 'SENT', 'FAILED') GROUP BY state ORDER BY state`)
	if err != nil {
		return nil, fmt.Errorf("count open commands: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (OpenCommands, error) {
		var o OpenCommands
		err := r.Scan(&o.State, &o.Count, &o.OldestCreated)
		return o, err
	})
}
