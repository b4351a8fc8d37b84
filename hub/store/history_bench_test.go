package store_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/store/partitions"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/testlog"
)

// historyShape is the size of a seeded history: devices over sites, each
// with condPer condition_history and statusPer status_history rows spread
// evenly over weeks weekly partitions ending now.
type historyShape struct {
	devices, sites, condPer, statusPer, weeks int
}

func (h historyShape) String() string {
	return fmt.Sprintf("%d devices at %d sites, %d condition_history and %d status_history rows over %d weekly partitions",
		h.devices, h.sites, h.devices*h.condPer, h.devices*h.statusPer, h.weeks)
}

// recorder is a pgx tracer keeping the SELECTs the store sends while on.
type recorder struct {
	mu      sync.Mutex
	on      bool
	queries []recorded
}

type recorded struct {
	sql  string
	args []any
}

func (r *recorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := strings.ToUpper(strings.TrimSpace(d.SQL))
	if r.on && (strings.HasPrefix(q, "SELECT") || strings.HasPrefix(q, "WITH")) && !strings.Contains(q, "PG_INHERITS") {
		r.queries = append(r.queries, recorded{d.SQL, d.Args})
	}
	return ctx
}

func (r *recorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// historyStatuses cycle per device (row k of device g has status
// 1 + (k + g/sites) mod 5): at any time about one device in five of each
// site is FAULTED.
const historyStatuses = `(ARRAY['AVAILABLE','ALLOCATED','FAULTED','AVAILABLE','MAINTENANCE'])`

// seedHistory fills a fresh database with h (generate_series, set-based):
// the history tables are re-partitioned weekly over the last h.weeks weeks
// (the legacy partition ends where they start), devices are
// md5('dev'||g)::uuid named node-NNNNN at site-a, site-b, …, and row k of
// device g is recorded at start + (k + (g%97)/97)·span/rows. One device in
// ten has a quarantine in the middle of the span. It returns the span.
func seedHistory(tb testing.TB, s *store.Store, url string, h historyShape) (start, end time.Time) {
	tb.Helper()
	ctx := context.Background()
	week := 7 * 24 * time.Hour
	end = time.Now().UTC().Truncate(time.Hour)
	start = end.Add(-time.Duration(h.weeks) * week)
	for _, t := range []string{"condition_history", "status_history"} {
		pgtest.MustExec(tb, url, fmt.Sprintf(`DROP TABLE %[1]s_legacy, %[1]s_tail;
			CREATE TABLE %[1]s_legacy PARTITION OF %[1]s FOR VALUES FROM (MINVALUE) TO ('%[2]s');
			CREATE TABLE %[1]s_tail PARTITION OF %[1]s FOR VALUES FROM ('%[2]s') TO (MAXVALUE)`, t, start.Format(time.RFC3339)))
	}
	if _, err := keeper(s).Maintain(ctx, partitions.Policy{Interval: week, Ahead: 1}, end); err != nil {
		tb.Fatal(err)
	}
	span := end.Sub(start).Seconds() * 0.999
	at := func(perDevice int) string {
		return fmt.Sprintf(`'%s'::timestamptz + make_interval(secs => (k + (g %% 97) / 97.0) * %f / %d)`, start.Format(time.RFC3339), span, perDevice)
	}
	began := time.Now()
	pgtest.MustExec(tb, url, `INSERT INTO sites (name) SELECT 'site-' || chr(97 + i) FROM generate_series(0, $1 - 1) i`, h.sites)
	pgtest.MustExec(tb, url, fmt.Sprintf(`
		INSERT INTO devices (id, site, name, first_seen_at, status, status_reason, status_changed_at)
		SELECT md5('dev' || g)::uuid, 'site-' || chr(97 + g %% %d), 'node-' || lpad(g::text, 5, '0'), '%s',
			%s[1 + (k + g / %d) %% 5], 'Seeded', %s
		FROM generate_series(0, %d - 1) g, LATERAL (SELECT %d - 1 AS k) last`,
		h.sites, start.Format(time.RFC3339), historyStatuses, h.sites, at(h.statusPer), h.devices, h.statusPer))
	pgtest.MustExec(tb, url, fmt.Sprintf(`
		INSERT INTO status_history (device_id, status, reason, changed_at)
		SELECT md5('dev' || g)::uuid, %s[1 + (k + g / %d) %% 5], 'Seeded', %s
		FROM generate_series(0, %d - 1) k, generate_series(0, %d - 1) g`, historyStatuses, h.sites, at(h.statusPer), h.statusPer, h.devices))
	pgtest.MustExec(tb, url, fmt.Sprintf(`
		INSERT INTO condition_history (device_id, type, status, reason, message, last_transition_time, observed_time, recorded_at)
		SELECT md5('dev' || g)::uuid, t.type, CASE WHEN (k / 7 + g) %% 3 = 0 THEN 'False' ELSE 'True' END, 'Seeded', '',
			%[1]s, %[1]s, %[1]s
		FROM generate_series(0, %[2]d - 1) k, generate_series(0, %[3]d - 1) g,
			LATERAL (SELECT (ARRAY['Enrolled','ProvisioningHealthy','MaintenanceClear','InValidationPool','InstanceAllocated','CustomerAllocated','CustomerReady'])[1 + k %% 7] AS type) t`,
		at(h.condPer), h.condPer, h.devices))
	pgtest.MustExec(tb, url, `
		INSERT INTO device_conditions (device_id, type, status, reason, last_transition_time, observed_time)
		SELECT d.id, t, 'True', 'Seeded', now(), now() FROM devices d,
			unnest(ARRAY['Enrolled','ProvisioningHealthy','MaintenanceClear','InValidationPool','InstanceAllocated','CustomerAllocated','CustomerReady']) t`)
	mid := start.Add(end.Sub(start) / 2)
	pgtest.MustExec(tb, url, `
		WITH c AS (
			INSERT INTO commands (device_id, site, generation, desired, state, actor, reason, source, created_at, updated_at, completed_at)
			SELECT d.id, d.site, 1, 'QUARANTINED', 'SUCCEEDED', 'op', 'seeded', 'operator-api', $1, $1, $1
			FROM devices d WHERE d.name LIKE '%0' RETURNING id, device_id)
		INSERT INTO impairment_history (device_id, desired, generation, actor, reason, source, command_id, changed_at)
		SELECT device_id, 'QUARANTINED', 1, 'op', 'seeded', 'operator-api', id, $1 FROM c`, mid)
	pgtest.MustExec(tb, url, `UPDATE devices SET desired_impairment = 'QUARANTINED', desired_generation = 1, applied_generation = 1 WHERE name LIKE '%0'`)
	// Facts as a satellite writes them (~400 bytes); one device in a
	// hundred with an orphaned instance.
	pgtest.MustExec(tb, url, `UPDATE devices SET facts = jsonb_build_object('name', name, 'provision_state', 'active',
		'power_state', 'power on', 'resource_class', 'gpu-h100', 'instance_uuid', gen_random_uuid(), 'lessee', 'project-a',
		'owner', 'ops', 'conductor_group', 'rack-1', 'fault', '') ||
		CASE WHEN name LIKE '%07' THEN jsonb_build_object('instance_mismatches', jsonb_build_array(jsonb_build_object(
			'kind', 'NOVA_UNKNOWN', 'ironic_instance_uuid', gen_random_uuid(), 'first_seen_time', now()))) ELSE '{}' END`)
	pgtest.MustExec(tb, url, `VACUUM ANALYZE`)
	fmt.Fprintf(os.Stderr, "seeded %s in %s\n", h, time.Since(began).Round(time.Second))
	return start, end
}

// historyOp is one operator read measured by the history benchmark.
type historyOp struct {
	name string
	run  func(ctx context.Context) error
}

// historyOps are the reads measured: GetDevice's histories, a filtered
// ListDevices, and the same as of mid (the middle of the seeded span),
// plus the condition history newest first (what the web view reads) in
// both orders.
func historyOps(s *store.Store, dev string, mid time.Time) []historyOp {
	faulted := []status.Status{status.Faulted}
	return []historyOp{
		{"GetDevice (current) + histories", func(ctx context.Context) error {
			if _, err := s.GetDevice(ctx, dev); err != nil {
				return err
			}
			if _, err := s.StatusHistory(ctx, dev, 50); err != nil {
				return err
			}
			_, err := s.ImpairmentHistory(ctx, dev, 50)
			return err
		}},
		{"GetDevice as_of + histories", func(ctx context.Context) error {
			if _, err := s.GetDeviceAsOf(ctx, dev, mid); err != nil {
				return err
			}
			if _, err := s.StatusHistoryAsOf(ctx, dev, mid, 50); err != nil {
				return err
			}
			_, err := s.ImpairmentHistoryAsOf(ctx, dev, mid, 50)
			return err
		}},
		{"condition history newest first (recorded_at, id)", func(ctx context.Context) error {
			rows, err := s.Pool().Query(ctx, `SELECT type, status, reason, message, last_transition_time, observed_time, recorded_at
				FROM condition_history WHERE device_id = $1 ORDER BY recorded_at DESC, id DESC LIMIT 50`, dev)
			if err == nil {
				rows.Close()
			}
			return err
		}},
		{"condition history newest first (id)", func(ctx context.Context) error {
			rows, err := s.Pool().Query(ctx, `SELECT type, status, reason, message, last_transition_time, observed_time, recorded_at
				FROM condition_history WHERE device_id = $1 ORDER BY id DESC LIMIT 50`, dev)
			if err == nil {
				rows.Close()
			}
			return err
		}},
		{"ListDevices site-b FAULTED (current)", func(ctx context.Context) error {
			_, _, err := s.ListDevices(ctx, store.DeviceFilter{Site: "site-b", Statuses: faulted, Limit: 100})
			return err
		}},
		{"ListDevices site-b FAULTED as_of", func(ctx context.Context) error {
			_, _, err := s.ListDevices(ctx, store.DeviceFilter{Site: "site-b", Statuses: faulted, Limit: 100, AsOf: mid})
			return err
		}},
		{"ListDevices all QUARANTINED as_of", func(ctx context.Context) error {
			_, _, err := s.ListDevices(ctx, store.DeviceFilter{Impairments: []store.Impairment{store.ImpairmentQuarantined}, Limit: 100, AsOf: mid})
			return err
		}},
	}
}

// measured is one op's timing and plans.
type measured struct {
	name           string
	median, p90    time.Duration
	plans          []string
	executionTimes []string
}

// measureHistory runs each op runs times (after one warm-up) and EXPLAINs
// (ANALYZE, BUFFERS) every query the op sent, with its arguments.
func measureHistory(tb testing.TB, s *store.Store, rec *recorder, ops []historyOp, runs int) []measured {
	tb.Helper()
	ctx := context.Background()
	var out []measured
	for _, op := range ops {
		m := measured{name: op.name}
		rec.mu.Lock()
		rec.on, rec.queries = true, nil
		rec.mu.Unlock()
		if err := op.run(ctx); err != nil {
			tb.Fatalf("%s: %v", op.name, err)
		}
		rec.mu.Lock()
		rec.on = false
		qs := rec.queries
		rec.mu.Unlock()
		var ds []time.Duration
		for i := 0; i < runs; i++ {
			t0 := time.Now()
			if err := op.run(ctx); err != nil {
				tb.Fatalf("%s: %v", op.name, err)
			}
			ds = append(ds, time.Since(t0))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		m.median, m.p90 = ds[len(ds)/2], ds[len(ds)*9/10]
		for _, q := range qs {
			// jit off as the as-of listing sets it (the other queries cost
			// far less than jit_above_cost: no JIT either way).
			var lines []string
			err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SET LOCAL jit = off`); err != nil {
					return err
				}
				rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+q.sql, q.args...)
				if err != nil {
					return err
				}
				lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
				return err
			})
			if err != nil {
				tb.Fatalf("explain %s: %v", op.name, err)
			}
			plan := strings.Join(lines, "\n")
			m.plans = append(m.plans, plan)
			for _, l := range lines {
				if strings.HasPrefix(strings.TrimSpace(l), "Execution Time") {
					m.executionTimes = append(m.executionTimes, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "Execution Time:")))
				}
			}
		}
		out = append(out, m)
	}
	return out
}

func openRecorded(tb testing.TB, url string) (*store.Store, *recorder) {
	tb.Helper()
	rec := &recorder{}
	s, err := store.Open(context.Background(), url, testlog.Discard(), store.WithTracer(rec))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s, rec
}

func printMeasured(w io.Writer, h historyShape, ms []measured, withPlans bool) {
	fmt.Fprintf(w, "history queries at %s\n", h)
	byName := map[string]measured{}
	for _, m := range ms {
		byName[m.name] = m
		fmt.Fprintf(w, "  %-52s median %8.2f ms  p90 %8.2f ms  EXPLAIN execution: %s\n", m.name,
			float64(m.median.Microseconds())/1000, float64(m.p90.Microseconds())/1000, strings.Join(m.executionTimes, " + "))
	}
	ratio := func(a, b string) {
		fmt.Fprintf(w, "  ratio %s / %s: %.2f\n", a, b, float64(byName[a].median)/float64(byName[b].median))
	}
	ratio("GetDevice as_of + histories", "GetDevice (current) + histories")
	ratio("ListDevices site-b FAULTED as_of", "ListDevices site-b FAULTED (current)")
	if withPlans {
		for _, m := range ms {
			for i, p := range m.plans {
				fmt.Fprintf(w, "\n--- %s, query %d\n%s\n", m.name, i+1, p)
			}
		}
	}
}

// TestHistoryQueriesAtSmallSize is the quick variant of
// BenchmarkHistoryQueries: it seeds a small history, checks that the as_of
// listing agrees with a brute-force reading of the histories, that the
// as-of reads skip the partitions after as_of, and prints the figures.
func TestHistoryQueriesAtSmallSize(t *testing.T) {
	url := pgtest.MigratedDatabase(t)
	s, rec := openRecorded(t, url)
	h := historyShape{devices: 300, sites: 3, condPer: 70, statusPer: 10, weeks: 8}
	start, end := seedHistory(t, s, url, h)
	mid := start.Add(end.Sub(start) / 2)
	// Brute force: the newest status row at or before mid per device.
	want := pgtest.QueryString(t, url, `SELECT string_agg(x.id::text, ',' ORDER BY x.id) FROM (
		SELECT DISTINCT ON (device_id) device_id AS id, status FROM status_history WHERE changed_at <= $1
		ORDER BY device_id, changed_at DESC, id DESC) x JOIN devices d ON d.id = x.id WHERE x.status = 'FAULTED' AND d.site = 'site-b'`, mid)
	var got []string
	f := store.DeviceFilter{Site: "site-b", Statuses: []status.Status{status.Faulted}, Limit: 7, AsOf: mid}
	for {
		devs, more, err := s.ListDevices(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range devs {
			got = append(got, d.ID)
			f.After = d.ID
		}
		if !more {
			break
		}
	}
	if strings.Join(got, ",") != want || len(got) == 0 {
		t.Fatalf("FAULTED at site-b as of mid: %d devices %v, brute force %q", len(got), got, want)
	}
	dev := pgtest.QueryString(t, url, `SELECT id::text FROM devices WHERE name = 'node-00010'`)
	ms := measureHistory(t, s, rec, historyOps(s, dev, mid), 5)
	var last string
	for _, p := range partitionsOf(t, s, "condition_history") {
		if p.From != nil && p.From.After(mid) {
			last = p.Name
		}
	}
	for _, m := range ms {
		if strings.Contains(m.name, "as_of") {
			for _, p := range m.plans {
				if strings.Contains(p, "condition_history_tail") || (last != "" && strings.Contains(p, last)) {
					t.Errorf("%s reads a partition after as_of:\n%s", m.name, p)
				}
			}
		}
	}
	var b strings.Builder
	printMeasured(&b, h, ms, testing.Verbose())
	t.Log("\n" + b.String())
}

// BenchmarkHistoryQueries seeds IRONLINK_HISTORY_ROWS condition_history
// rows (default 10,000,000; 10,000 devices at 10 sites, a tenth as many
// status_history rows, 52 weekly partitions) in a private database and
// prints, for each operator read, the median and p90 time and the EXPLAIN
// (ANALYZE, BUFFERS) of every query it sends, and the ratio of each as_of
// read to the same read of the present (measured in the same run).
//
//	go test ./hub/store -run '^$' -bench HistoryQueries -benchtime 1x -timeout 60m
func BenchmarkHistoryQueries(b *testing.B) {
	rows := 10_000_000
	if v := os.Getenv("IRONLINK_HISTORY_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 70_000 {
			b.Fatalf("IRONLINK_HISTORY_ROWS=%q: want an integer ≥ 70000", v)
		}
		rows = n
	}
	url := pgtest.MigratedDatabase(b)
	s, rec := openRecorded(b, url)
	h := historyShape{devices: 10_000, sites: 10, condPer: rows / 10_000, statusPer: rows / 100_000, weeks: 52}
	start, end := seedHistory(b, s, url, h)
	mid := start.Add(end.Sub(start) / 2)
	dev := pgtest.QueryString(b, url, `SELECT id::text FROM devices WHERE name = 'node-00010'`)
	b.ResetTimer()
	var ms []measured
	for i := 0; i < b.N; i++ {
		ms = measureHistory(b, s, rec, historyOps(s, dev, mid), 21)
	}
	b.StopTimer()
	printMeasured(os.Stdout, h, ms, true)
}

// listSitesIndexes are the partial indexes of migration 00011 that serve
// ListSites' counts.
const listSitesIndexes = `CREATE INDEX devices_site_live ON devices (site) WHERE NOT removed;
	CREATE INDEX devices_instance_mismatch ON devices (site)
	WHERE NOT removed AND (CASE WHEN jsonb_typeof(facts->'instance_mismatches') = 'array'
		THEN jsonb_array_length(facts->'instance_mismatches') > 0 ELSE false END)`

// BenchmarkListSites10000 measures ListSites over 10,000 devices at 10
// sites (one in a hundred with an orphaned instance) with migration
// 00011's partial indexes, and without them (dropped in the same run: the
// raw reference), alternately, and prints both medians and their ratio.
//
//	go test ./hub/store -run '^$' -bench ListSites10000 -benchtime 1x
func BenchmarkListSites10000(b *testing.B) {
	url := pgtest.MigratedDatabase(b)
	s, _ := openRecorded(b, url)
	seedHistory(b, s, url, historyShape{devices: 10_000, sites: 10, condPer: 7, statusPer: 1, weeks: 1})
	listSites := func() time.Duration {
		var ds []time.Duration
		for i := 0; i < 21; i++ {
			t0 := time.Now()
			sites, err := s.ListSites(context.Background())
			devs, orphaned := 0, 0
			for _, st := range sites {
				devs, orphaned = devs+st.DeviceCount, orphaned+st.InstanceMismatchCount
			}
			if err != nil || devs != 10_000 || orphaned != 100 {
				b.Fatalf("ListSites: %v: %d devices, %d orphaned; want 10000, 100", err, devs, orphaned)
			}
			ds = append(ds, time.Since(t0))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	b.ResetTimer()
	var with, without time.Duration
	for i := 0; i < b.N; i++ {
		// Alternate, so that the load of the moment hits both.
		for round := 0; round < 3; round++ {
			with += listSites()
			pgtest.MustExec(b, url, `DROP INDEX devices_site_live, devices_instance_mismatch`)
			without += listSites()
			pgtest.MustExec(b, url, listSitesIndexes)
		}
	}
	with, without = with/time.Duration(3*b.N), without/time.Duration(3*b.N)
	b.ReportMetric(float64(with.Microseconds())/1000, "ms/ListSites")
	fmt.Printf("ListSites at 10000 devices: median %.2f ms with the partial indexes, %.2f ms without (ratio %.3f)\n",
		float64(with.Microseconds())/1000, float64(without.Microseconds())/1000, float64(with)/float64(without))
}
