package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
)

// The raw ceiling (issue 11 item 7): what plain pgx gets out of the same
// PostgreSQL for the same data, with none of the hub around it — a fresh
// database on the same server, migrated exactly like the hub's (same
// tables, indexes and foreign keys), written by rawConns connections, each
// committing transactions of rawBatch condition rows: one unnest() upsert
// into device_conditions and one unnest() append to condition_history
// (plus, for snapshots, one unnest() insert of the devices those rows
// belong to). Every benchmark measures it first, in the same run, and
// prints the hub's figure as a fraction of it.
const (
	rawConns = 2
	rawBatch = 1000
)

// rawResult is a raw ceiling measurement: Units (condition deltas or
// devices) written in Elapsed.
type rawResult struct {
	Units   int
	Elapsed time.Duration
}

// PerSec is units per second.
func (r rawResult) PerSec() float64 { return float64(r.Units) / r.Elapsed.Seconds() }

func (r rawResult) String() string {
	return fmt.Sprintf("%d in %s (%.0f/s, %d connections, batches of %d condition rows)",
		r.Units, r.Elapsed.Round(time.Millisecond), r.PerSec(), rawConns, rawBatch)
}

// rawDatabase returns a pool of rawConns connections on a fresh migrated
// database with one site, and the database's URL.
func rawDatabase(tb testing.TB) (*pgxpool.Pool, string) {
	tb.Helper()
	ctx := context.Background()
	url := pgtest.MigratedDatabase(tb)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.MaxConns = rawConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `INSERT INTO sites (name) VALUES ('raw')`); err != nil {
		tb.Fatal(err)
	}
	return pool, url
}

// rawRows are condition rows as unnest() arrays.
type rawRows struct {
	ids, types, statuses, reasons, messages []string
	at                                      []time.Time
}

func (r *rawRows) add(id string, t condition.Type, msg string, at time.Time) {
	r.ids = append(r.ids, id)
	r.types = append(r.types, string(t))
	r.statuses = append(r.statuses, "True")
	r.reasons = append(r.reasons, "Raw")
	r.messages = append(r.messages, msg)
	r.at = append(r.at, at)
}

const (
	rawUpsert = `
		INSERT INTO device_conditions (device_id, type, status, reason, message, last_transition_time, observed_time)
		SELECT u.id, u.type, u.status, u.reason, u.message, u.at, u.at
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[]) AS u(id, type, status, reason, message, at)
		ON CONFLICT (device_id, type) DO UPDATE SET status = EXCLUDED.status, reason = EXCLUDED.reason,
			message = EXCLUDED.message, last_transition_time = EXCLUDED.last_transition_time, observed_time = EXCLUDED.observed_time`
	rawHistory = `
		INSERT INTO condition_history (device_id, type, status, reason, message, last_transition_time, observed_time)
		SELECT u.id, u.type, u.status, u.reason, u.message, u.at, u.at
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[]) AS u(id, type, status, reason, message, at)`
	rawDevices = `
		INSERT INTO devices (id, site, name, facts, observed_at, snapshot_id)
		SELECT u.id, 'raw', u.name, jsonb_build_object('name', u.name, 'provision_state', 'available'), u.at, 'raw'
		FROM unnest($1::uuid[], $2::text[], $3::timestamptz[]) AS u(id, name, at)`
)

// rawCommit writes rows (and devices, when ids is non-empty) in one
// transaction.
func rawCommit(ctx context.Context, pool *pgxpool.Pool, r *rawRows, ids, names []string, at []time.Time) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		if len(ids) > 0 {
			b.Queue(rawDevices, ids, names, at)
		}
		b.Queue(rawUpsert, r.ids, r.types, r.statuses, r.reasons, r.messages, r.at)
		b.Queue(rawHistory, r.ids, r.types, r.statuses, r.reasons, r.messages, r.at)
		return tx.SendBatch(ctx, b).Close()
	})
}

// rawDeltas measures condition deltas per second for d: each connection
// owns its devices and cycles through their seven conditions, every row a
// change (upsert of an existing row, one history row). With quarantiners
// > 0, that many raw operators (rawQuarantiners) quarantine those devices
// meanwhile, as the hub's benchmark does during its load; their latencies
// are returned. With ingest false, no delta is written: the raw
// quarantiners run alone for d.
func rawDeltas(tb testing.TB, d time.Duration, quarantiners int, ingest bool) (rawResult, []time.Duration) {
	tb.Helper()
	ctx := context.Background()
	pool, url := rawDatabase(tb)
	per := (rawBatch + len(condition.Types) - 1) / len(condition.Types)
	devs := make([][]string, rawConns)
	now := time.Now().UTC()
	for w := range devs {
		var names []string
		var at []time.Time
		var r rawRows
		for i := range per {
			id := uuid.NewString()
			devs[w] = append(devs[w], id)
			names = append(names, fmt.Sprintf("raw-%d-%d", w, i))
			at = append(at, now)
			for _, t := range condition.Types {
				r.add(id, t, "seed", now)
			}
		}
		if err := rawCommit(ctx, pool, &r, devs[w], names, at); err != nil {
			tb.Fatal(err)
		}
	}
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, rawConns)
	start := time.Now()
	deadline := start.Add(d)
	quarantines := func() []time.Duration { return nil }
	if quarantiners > 0 {
		quarantines = rawQuarantiners(tb, url, slices.Concat(devs...), quarantiners, deadline)
	}
	for w := range rawConns {
		if !ingest {
			time.Sleep(d)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(deadline); n++ {
				var r rawRows
				at := time.Now().UTC()
				for i := range rawBatch {
					r.add(devs[w][i/len(condition.Types)], condition.Types[i%len(condition.Types)], fmt.Sprint("raw change ", n), at)
				}
				if err := rawCommit(ctx, pool, &r, nil, nil, nil); err != nil {
					errs <- err
					return
				}
				total.Add(rawBatch)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	lat := quarantines()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return rawResult{Units: int(total.Load()), Elapsed: elapsed}, lat
}

// rawSnapshot measures how long writing devices new devices with all
// seven conditions each (device row, condition rows, history rows) takes.
func rawSnapshot(tb testing.TB, devices int) rawResult {
	tb.Helper()
	ctx := context.Background()
	pool, _ := rawDatabase(tb)
	per := rawBatch / len(condition.Types)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, rawConns)
	start := time.Now()
	for range rawConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				first := int(next.Add(int64(per))) - per
				if first >= devices {
					return
				}
				n := min(per, devices-first)
				var r rawRows
				ids, names, at := make([]string, n), make([]string, n), make([]time.Time, n)
				now := time.Now().UTC()
				for i := range n {
					ids[i], names[i], at[i] = uuid.NewString(), fmt.Sprintf("raw-%06d", first+i), now
					for _, t := range condition.Types {
						r.add(ids[i], t, "initial snapshot", now)
					}
				}
				if err := rawCommit(ctx, pool, &r, ids, names, at); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return rawResult{Units: devices, Elapsed: time.Since(start)}
}

// ratio prints and returns hub/raw in percent.
func ratio(tb testing.TB, what string, hub, raw float64) float64 {
	tb.Helper()
	pct := 100 * hub / raw
	line := fmt.Sprintf("%s: hub %.0f/s, raw %.0f/s: hub/raw = %.1f %%", what, hub, raw, pct)
	tb.Log(line)
	fmt.Println("ironlink benchmark:", line)
	return pct
}

// ratioLine prints the figure's machine-readable line, the one
// scripts/bench-check.sh compares with test/bench/baseline:
// "ironlink ratio: <name> <ours/raw>", where raw is the plain-pgx or
// raw-gRPC ceiling measured in the same run, so that higher is better
// (a throughput's hub/raw; a latency's or a memory figure's raw/hub).
func ratioLine(name string, r float64) {
	fmt.Printf("ironlink ratio: %s %.3f\n", name, r)
}
