package partitions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// historyTables are the range-partitioned history tables (migration 00011)
// with their partition keys: the hub's time of recording.
var historyTables = []struct{ table, key string }{
	{"condition_history", "recorded_at"},
	{"status_history", "changed_at"},
}

// partitionLockKey is the PostgreSQL advisory lock (pg_try_advisory_xact_lock)
// under which one replica at a time creates and drops history partitions.
const partitionLockKey int64 = 0x69726f6e_70617274 // "ironpart"

// Policy defaults (hub flags --history-partition-interval and
// --history-partitions-ahead).
const (
	DefaultInterval = 7 * 24 * time.Hour
	DefaultAhead    = 4
	// maxSplitsPerRun bounds the partitions one Maintain
	// call creates per table (a hub that was down for years catches up over
	// several runs instead of holding the lock for long).
	maxSplitsPerRun = 520
)

// Policy says how the history partitions are kept.
type Policy struct {
	// Interval is the time range of each new partition (0: a week).
	// Partitions are contiguous: each new one starts where the last ended.
	Interval time.Duration
	// Ahead is how many intervals past now are covered by partitions of
	// their own (0: 4); rows past them land in the catch-all tail partition.
	Ahead int
	// Retention drops a whole partition once its upper bound is older than
	// now − Retention; 0 keeps history forever. A partition is never
	// dropped in part, so up to one Interval more than Retention is kept.
	Retention time.Duration
}

func (p Policy) withDefaults() Policy {
	if p.Interval <= 0 {
		p.Interval = DefaultInterval
	}
	if p.Ahead <= 0 {
		p.Ahead = DefaultAhead
	}
	return p
}

// Partition is one partition of a history table.
type Partition struct {
	// Table is the partitioned table ("condition_history", "status_history").
	Table string
	// Name is the partition's table name.
	Name string
	// From and To bound the partition's range [From, To) of the partition
	// key; nil means MINVALUE (From) or MAXVALUE (To).
	From, To *time.Time
}

// Result says what one Maintain call did.
type Result struct {
	// Skipped is true when another replica held the partition lock:
	// nothing was done.
	Skipped bool
	// Created and Dropped name the partitions created and dropped.
	Created, Dropped []string
}

// List returns the partitions of every history table, each table's in
// range order (the MINVALUE partition first, the MAXVALUE tail last), read
// through q (a pool, a connection or a transaction). Errors are database
// errors, wrapped.
func List(ctx context.Context, q Querier) ([]Partition, error) {
	var out []Partition
	for _, ht := range historyTables {
		ps, err := listPartitions(ctx, q, ht.table)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

// Querier is what List and Horizon read through: a *pgxpool.Pool, a
// *pgx.Conn or a pgx.Tx.
type Querier interface {
	// Query runs sql with args.
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// listPartitions returns table's partitions in range order.
func listPartitions(ctx context.Context, q Querier, table string) ([]Partition, error) {
	rows, err := q.Query(ctx, `
		SELECT c.relname,
			CASE WHEN b ~ 'FROM \(MINVALUE\)' THEN NULL ELSE (regexp_match(b, 'FROM \(''([^'']*)''\)'))[1]::timestamptz END,
			CASE WHEN b ~ 'TO \(MAXVALUE\)' THEN NULL ELSE (regexp_match(b, 'TO \(''([^'']*)''\)'))[1]::timestamptz END
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid,
			LATERAL pg_get_expr(c.relpartbound, c.oid) AS b
		WHERE i.inhparent = $1::regclass`, table)
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", table, err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Partition, error) {
		p := Partition{Table: table}
		err := r.Scan(&p.Name, &p.From, &p.To)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", table, err)
	}
	sort.Slice(ps, func(i, j int) bool {
		a, b := ps[i].From, ps[j].From
		return a == nil || (b != nil && a.Before(*b))
	})
	return ps, nil
}

// Horizon returns the oldest time from which every history table still
// holds all its rows: the lower bound of the oldest partition left after
// retention dropped older ones. It is the zero time when nothing has been
// dropped (the oldest partition starts at MINVALUE). Errors are database
// errors, wrapped.
func Horizon(ctx context.Context, q Querier) (time.Time, error) {
	tables := make([]string, len(historyTables))
	for i, ht := range historyTables {
		tables[i] = ht.table
	}
	// One statement for every table (an as_of read asks first): per table
	// the lower bound of its oldest partition, NULL when one starts at
	// MINVALUE; the horizon is the latest of them.
	rows, err := q.Query(ctx, `
		SELECT max(lo) FROM (
			SELECT CASE WHEN bool_or(b ~ 'FROM \(MINVALUE\)') THEN NULL
				ELSE min((regexp_match(b, 'FROM \(''([^'']*)''\)'))[1]::timestamptz) END AS lo
			FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid,
				LATERAL pg_get_expr(c.relpartbound, c.oid) AS b
			WHERE i.inhparent = ANY($1::text[]::regclass[])
			GROUP BY i.inhparent) t`, tables)
	if err != nil {
		return time.Time{}, fmt.Errorf("history horizon: %w", err)
	}
	h, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[*time.Time])
	if err != nil {
		return time.Time{}, fmt.Errorf("history horizon: %w", err)
	}
	if h == nil {
		return time.Time{}, nil
	}
	return *h, nil
}

// partitionName names the partition starting at from: <table>_pYYYYMMDD,
// with _HHMM added when from is not midnight UTC (intervals under a day).
func partitionName(table string, from time.Time) string {
	from = from.UTC()
	if from.Hour() == 0 && from.Minute() == 0 {
		return table + "_p" + from.Format("20060102")
	}
	return table + "_p" + from.Format("20060102_1504")
}

// Keeper creates and drops the history partitions of one database. Safe
// for concurrent use (and across replicas: see Maintain).
type Keeper struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

// NewKeeper returns a keeper working through pool, logging each partition
// created and each run's failures and drops to log.
func NewKeeper(pool *pgxpool.Pool, log *slog.Logger) *Keeper {
	return &Keeper{pool: pool, log: log}
}

// Maintain creates the history partitions ahead of now
// (the caller's clock: time.Now() in the hub, any time in tests) and
// drops the ones retention has expired, for every history table, in one
// transaction under an advisory lock: with several replicas one does the
// work and the others return Skipped. A new partition is split off the
// catch-all tail (FROM last bound TO MAXVALUE): rows already in the tail
// that fall into it are moved, so nothing is lost when the task did not
// run for a while. Nothing is locked when there is nothing to do; else
// devices and the history tables are locked ACCESS EXCLUSIVE for the
// transaction (waiting at most 1 s: a timeout is returned as an error and
// the next run tries again).
func (k *Keeper) Maintain(ctx context.Context, p Policy, now time.Time) (Result, error) {
	p = p.withDefaults()
	var res Result
	err := pgx.BeginFunc(ctx, k.pool, func(tx pgx.Tx) error {
		res = Result{}
		var got bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, partitionLockKey).Scan(&got); err != nil {
			return fmt.Errorf("partition lock: %w", err)
		}
		if !got {
			res.Skipped = true
			return nil
		}
		work := false
		for _, ht := range historyTables {
			ps, err := listPartitions(ctx, tx, ht.table)
			if err != nil {
				return err
			}
			work = work || needsWork(ps, now, p)
		}
		if !work {
			return nil
		}
		// Writers lock devices before the history tables (ApplyBatch and
		// SetDesiredImpairment write devices first), and partition DDL
		// locks devices too (ACCESS EXCLUSIVE while it moves the history
		// tables' foreign-key triggers): taking the same order here, all at
		// once, makes the DDL wait instead of deadlocking with ingest. Held
		// until commit, a few milliseconds per partition; waiting at most
		// lock_timeout (1 s) so that a long reader delays other queries by
		// no more than that.
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '1s'`); err != nil {
			return fmt.Errorf("set lock_timeout: %w", err)
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE devices, condition_history, status_history IN ACCESS EXCLUSIVE MODE`); err != nil {
			return fmt.Errorf("lock for partition DDL: %w", err)
		}
		for _, ht := range historyTables {
			created, err := k.createAhead(ctx, tx, ht.table, ht.key, now, p)
			res.Created = append(res.Created, created...)
			if err != nil {
				return err
			}
			if p.Retention > 0 {
				dropped, err := dropExpired(ctx, tx, ht.table, now.Add(-p.Retention))
				res.Dropped = append(res.Dropped, dropped...)
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("maintain history partitions: %w", err)
	}
	return res, nil
}

// needsWork reports whether a table with partitions ps needs a partition
// created ahead or dropped by retention at now.
func needsWork(ps []Partition, now time.Time, p Policy) bool {
	if len(ps) == 0 || ps[len(ps)-1].From == nil || ps[len(ps)-1].To != nil {
		return true // createAhead reports the broken layout
	}
	if ps[len(ps)-1].From.Before(now.Add(time.Duration(p.Ahead) * p.Interval)) {
		return true
	}
	if p.Retention > 0 {
		for _, pt := range ps {
			if pt.To != nil && !pt.To.After(now.Add(-p.Retention)) {
				return true
			}
		}
	}
	return false
}

// createAhead splits partitions of p.Interval off table's tail until the
// tail starts at or after now + p.Ahead·p.Interval.
func (k *Keeper) createAhead(ctx context.Context, tx pgx.Tx, table, key string, now time.Time, p Policy) ([]string, error) {
	ps, err := listPartitions(ctx, tx, table)
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 || ps[len(ps)-1].To != nil || ps[len(ps)-1].From == nil {
		return nil, fmt.Errorf("%s has no tail partition FROM (a time) TO (MAXVALUE): %w", table, errNoTail)
	}
	tail := ps[len(ps)-1]
	from := *tail.From
	target := now.Add(time.Duration(p.Ahead) * p.Interval)
	var created []string
	for i := 0; from.Before(target) && i < maxSplitsPerRun; i++ {
		to := from.Add(p.Interval)
		name := partitionName(table, from)
		// The tail keeps its name and indexes; it is detached, the new
		// partition created, rows moved, and the tail attached again past it.
		stmts := []string{
			fmt.Sprintf(`ALTER TABLE %s DETACH PARTITION %s`, ident(table), ident(tail.Name)),
			fmt.Sprintf(`CREATE TABLE %s PARTITION OF %s FOR VALUES FROM (%s) TO (%s)`, ident(name), ident(table), lit(from), lit(to)),
			fmt.Sprintf(`WITH moved AS (DELETE FROM %s WHERE %s < %s RETURNING *) INSERT INTO %s OVERRIDING SYSTEM VALUE SELECT * FROM moved`,
				ident(tail.Name), ident(key), lit(to), ident(table)),
			fmt.Sprintf(`ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%s) TO (MAXVALUE)`, ident(table), ident(tail.Name), lit(to)),
		}
		for _, q := range stmts {
			if _, err := tx.Exec(ctx, q); err != nil {
				return created, fmt.Errorf("create partition %s: %w", name, err)
			}
		}
		created = append(created, name)
		k.log.Info("history partition created", "partition", name, "from", from, "to", to)
		from = to
	}
	return created, nil
}

// dropExpired drops every partition of table, the tail excepted, whose
// upper bound is at or before cutoff.
func dropExpired(ctx context.Context, tx pgx.Tx, table string, cutoff time.Time) ([]string, error) {
	ps, err := listPartitions(ctx, tx, table)
	if err != nil {
		return nil, err
	}
	var dropped []string
	for _, p := range ps {
		if p.To == nil || p.To.After(cutoff) {
			continue
		}
		if _, err := tx.Exec(ctx, `DROP TABLE `+ident(p.Name)); err != nil {
			return dropped, fmt.Errorf("drop partition %s: %w", p.Name, err)
		}
		dropped = append(dropped, p.Name)
	}
	return dropped, nil
}

// errNoTail: a history table lacks its catch-all tail partition.
var errNoTail = errors.New("history table not partitioned as migration 00011 left it")

// ident quotes s as an SQL identifier.
func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

// lit renders t as a timestamptz literal (UTC, microseconds).
func lit(t time.Time) string {
	return "'" + t.UTC().Format("2006-01-02 15:04:05.999999Z07:00") + "'::timestamptz"
}

// Run calls Maintain now and then every interval until ctx ends, logging what each run did and any failure
// (the next run retries). Every replica runs it; the advisory lock makes
// one do the work.
func (k *Keeper) Run(ctx context.Context, p Policy, every time.Duration) {
	for {
		res, err := k.Maintain(ctx, p, time.Now())
		switch {
		case err != nil && ctx.Err() == nil:
			k.log.Error("history partitions", "err", err)
		case len(res.Dropped) > 0:
			k.log.Info("history partitions dropped by retention", "partitions", res.Dropped, "retention", p.Retention)
		}
		wait := every
		if err != nil && wait > time.Minute {
			wait = time.Minute // a lock timeout: try again soon
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
