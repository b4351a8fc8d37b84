package bench

// Reads at a million devices (issue 26 item 4): a real hub over a fleet
// generated straight into PostgreSQL (test/bench/fleetseed), each operator
// read timed against a raw pgx query of the same rows, alternately, in the
// same run. See README.md "Reads at a million devices".

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/policyrun"
	"github.com/ironlink/ironlink/hub/web/webtest"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/migrations"
	"github.com/ironlink/ironlink/test/bench/fleetseed"
	"github.com/ironlink/ironlink/test/harness"
)

var (
	flagMillionDB = flag.String("bench.million-db", "ironlink_bench_million",
		"database of BenchmarkMillionReads: reused as it is when it exists (and then never dropped), else created and filled by fleetseed")
	flagMillionKeep = flag.Bool("bench.million-keep", false,
		"keep the database BenchmarkMillionReads created (reuse it with the same -bench.million-db); default: drop it at the end")
	flagMillionRuns     = flag.Int("bench.million-runs", 200, "timed calls of each read of BenchmarkMillionReads (after 5 untimed ones)")
	flagMillionCLIRuns  = flag.Int("bench.million-cli-runs", 50, "timed runs of the ironlink CLI (a process each)")
	flagMillionPerSite  = flag.Int("bench.million-devices-per-site", fleetseed.Million.DevicesPerSite, "devices per site (100 sites) when the database is created")
	flagMillionExplain  = flag.Bool("bench.million-explain", false, "print EXPLAIN (ANALYZE, BUFFERS) of each raw query")
	flagMillionOnly     = flag.String("bench.million-only", "", "measure only the reads whose name contains one of these (comma-separated)")
	flagMillionPolicy   = flag.Bool("bench.million-policy", false, "let the hub's policy evaluator run (default: the benchmark holds its lock, so its pass over every FAULTED device does not run through the measurement)")
	flagMillionSeedOnly = flag.Bool("bench.million-seed-only", false, "create and fill the database, measure nothing")
)

// millionRead is one operator read and its raw counterpart.
type millionRead struct {
	name string
	hub  func(ctx context.Context, i int) error
	raw  func(ctx context.Context, i int) error
	// explain is the raw query (and its arguments) printed with -bench.million-explain.
	explain func(i int) (string, []any)
	runs    int
}

// BenchmarkMillionReads measures, at 1,000,000 devices over 100 sites
// with a year of history, p50 and p99 of: ListDevices' first page, a
// site+status page, a label page and a site page as of a month ago;
// GetDevice with its histories, now and as of a month ago; ListSites (the
// site summary); the fleet view's overview, site page and device list;
// and `ironlink get devices -l site=…,rack=…`. Each is timed alternately
// with a raw pgx query of the same rows, and printed as
// "ironlink million read: …" and "ironlink ratio: million-<name> <raw p99 / hub p99>".
//
//	go test ./test/bench -run '^$' -bench '^BenchmarkMillionReads$' -benchtime 1x -timeout 90m
func BenchmarkMillionReads(b *testing.B) {
	ctx := context.Background()
	server := pgtest.ServerURL()
	url, err := fleetseed.DatabaseURL(server, *flagMillionDB)
	if err != nil {
		b.Fatal(err)
	}
	if !databaseExists(b, server, *flagMillionDB) {
		sh := fleetseed.Million
		sh.DevicesPerSite = *flagMillionPerSite
		if _, err := fleetseed.CreateDatabase(ctx, server, *flagMillionDB); err != nil {
			b.Fatal(err)
		}
		if !*flagMillionKeep {
			b.Cleanup(func() {
				if err := fleetseed.DropDatabase(context.Background(), server, *flagMillionDB); err != nil {
					b.Error(err)
				}
			})
		}
		if _, err := fleetseed.Seed(ctx, url, sh, os.Stderr); err != nil {
			b.Fatal(err)
		}
	} else {
		fmt.Fprintf(os.Stderr, "reusing database %s (kept)\n", *flagMillionDB)
	}
	if *flagMillionSeedOnly {
		return
	}
	bins := binaries(b)
	cli := filepath.Join(b.TempDir(), "ironlink")
	build := exec.Command("go", "build", "-o", cli, "./hub/cmd/ironlink")
	build.Dir = harness.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build ironlink: %v\n%s", err, out)
	}
	roster, _ := webtest.WriteRoster(b, b.TempDir(), map[string][]string{"ops-read": {auth.ScopeOperationsRead}})
	webAddr := harness.FreeAddr(b)
	raw, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	// Pending migrations first (the hub would apply them before serving,
	// longer than StartHub waits at this size), timed.
	t0 := time.Now()
	if applied, err := migrations.Up(ctx, url); err != nil {
		b.Fatal(err)
	} else if len(applied) > 0 {
		fmt.Fprintf(os.Stderr, "ironlink million reads: migrations %v applied in %s\n", applied, time.Since(t0).Round(time.Millisecond))
	}
	if !*flagMillionPolicy {
		// The policy evaluator's pass reads every FAULTED and MAINTENANCE
		// device with its status history (store.PolicyCandidates: 60,000
		// devices here, over 7 minutes on the project's machine, see
		// docs/design/performance.md); it starts with the hub and would run
		// through the whole measurement. Holding its advisory lock keeps
		// this replica from leading it, as another replica would.
		lock, err := raw.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer lock.Release()
		if _, err := lock.Exec(ctx, `SELECT pg_advisory_lock($1)`, policyrun.LockKey); err != nil {
			b.Fatal(err)
		}
		defer lock.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, policyrun.LockKey) //nolint:errcheck // the session ends anyway
	}
	// No satellite ever connects: --stale-after keeps the seeded sites
	// from turning UNREACHABLE (a write of every device) while we read.
	hub := harness.StartHub(b, bins, url, "bench-million", "--log-level", "warn", "--roster", roster,
		"--web-addr", webAddr, "--web-auth", "proxy", "--web-trusted-proxies", "127.0.0.1", "--stale-after", "8760h")
	fc := harness.Fleet(b, hub.Addr)

	// 64 devices of site-042 (rotated through), the first quarantined ones
	// first so GetDevice reads a quarantine history too.
	var devs []string
	rows, _ := raw.Query(ctx, `SELECT id::text FROM devices WHERE site = 'site-042' ORDER BY desired_impairment = 'NONE', id LIMIT 64`)
	if devs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || len(devs) == 0 {
		b.Fatalf("pick devices: %v (%d)", err, len(devs))
	}
	dev := func(i int) string { return devs[i%len(devs)] }
	monthAgo := time.Now().Add(-30 * 24 * time.Hour)
	asOf := timestamppb.New(monthAgo)

	query := func(ctx context.Context, q string, args ...any) error {
		rows, err := raw.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		n := 0
		for rows.Next() {
			if _, err := rows.Values(); err != nil {
				return err
			}
			n++
		}
		return rows.Err()
	}
	const cols = `d.id::text, d.site, d.name, d.facts, d.removed, d.status, d.status_reason, d.status_changed_at,
		d.desired_impairment, d.desired_generation, d.applied_generation, d.facts->'labels'`
	qFirst := `SELECT ` + cols + ` FROM devices d WHERE NOT d.removed ORDER BY d.id LIMIT 101`
	qSiteStatus := `SELECT ` + cols + ` FROM devices d WHERE NOT d.removed AND d.site = $1 AND d.status = $2 ORDER BY d.id LIMIT 101`
	qLabel := `SELECT ` + cols + ` FROM devices d WHERE NOT d.removed AND d.facts->'labels' @> $1::jsonb ORDER BY d.id LIMIT 101`
	qSiteLabel := `SELECT ` + cols + ` FROM devices d WHERE NOT d.removed AND d.site = $1 AND d.facts->'labels' @> $2::jsonb ORDER BY d.id`
	qAsOf := `SELECT ` + cols + `, sh.status FROM devices d
		CROSS JOIN LATERAL (SELECT h.status FROM status_history h WHERE h.device_id = d.id AND h.changed_at <= $2
			ORDER BY h.changed_at DESC, h.id DESC LIMIT 1) sh
		WHERE d.site = $1 AND d.first_seen_at <= $2 ORDER BY d.id LIMIT 101`
	// The counts' raw ceiling reads the rows the hub reads for them: the
	// deltas migration 00052's triggers keep (counting the device rows
	// instead takes 1.7-10 s a read here; docs/design/performance.md).
	qSites := `SELECT site, sum(n) FROM device_status_counts GROUP BY site`
	qSiteStatusCounts := `SELECT site, status, sum(n) FROM device_status_counts GROUP BY site, status`
	qOneSiteCounts := `SELECT status, sum(n) FROM device_status_counts WHERE site = $1 GROUP BY status`
	qWebList := `SELECT d.id::text, d.site, d.name, d.status, d.status_reason, d.status_changed_at, d.desired_impairment, d.removed
		FROM devices d WHERE NOT d.removed ORDER BY d.name, d.id LIMIT 101`
	getDevice := func(ctx context.Context, id string, at *time.Time) error {
		batch := &pgx.Batch{}
		batch.Queue(`SELECT `+cols+` FROM devices d WHERE d.id = $1`, id)
		if at == nil {
			batch.Queue(`SELECT type, status, reason, message, last_transition_time, observed_time FROM device_conditions WHERE device_id = $1`, id)
			batch.Queue(`SELECT status, reason, changed_at FROM status_history WHERE device_id = $1 ORDER BY changed_at DESC, id DESC LIMIT 50`, id)
			batch.Queue(`SELECT desired, generation, actor, reason, changed_at FROM impairment_history WHERE device_id = $1 ORDER BY id DESC LIMIT 50`, id)
		} else {
			batch.Queue(`SELECT DISTINCT ON (type) type, status, reason, message, last_transition_time, observed_time FROM condition_history
				WHERE device_id = $1 AND recorded_at <= $2 ORDER BY type, recorded_at DESC, id DESC`, id, *at)
			batch.Queue(`SELECT status, reason, changed_at FROM status_history WHERE device_id = $1 AND changed_at <= $2
				ORDER BY changed_at DESC, id DESC LIMIT 50`, id, *at)
			batch.Queue(`SELECT desired, generation, actor, reason, changed_at FROM impairment_history WHERE device_id = $1 AND changed_at <= $2
				ORDER BY changed_at DESC, id DESC LIMIT 50`, id, *at)
		}
		return raw.SendBatch(ctx, batch).Close()
	}
	httpc := &http.Client{Timeout: time.Minute}
	page := func(ctx context.Context, path string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+webAddr+path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-Forwarded-User", "ops-read")
		resp, err := httpc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return nil
	}
	fixed := func(q string, args ...any) func(int) (string, []any) {
		return func(int) (string, []any) { return q, args }
	}
	labelR07 := `{"rack":"r07"}`
	reads := []millionRead{
		{name: "list-first-page",
			hub: func(ctx context.Context, _ int) error {
				_, err := fc.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{PageSize: 100})
				return err
			},
			raw: func(ctx context.Context, _ int) error { return query(ctx, qFirst) }, explain: fixed(qFirst)},
		{name: "list-site-status",
			hub: func(ctx context.Context, _ int) error {
				_, err := fc.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "site-042",
					Statuses: []ironlinkv1.OperationalStatus{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED}, PageSize: 100})
				return err
			},
			raw:     func(ctx context.Context, _ int) error { return query(ctx, qSiteStatus, "site-042", "FAULTED") },
			explain: fixed(qSiteStatus, "site-042", "FAULTED")},
		{name: "list-label",
			hub: func(ctx context.Context, _ int) error {
				_, err := fc.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Labels: map[string]string{"rack": "r07"}, PageSize: 100})
				return err
			},
			raw: func(ctx context.Context, _ int) error { return query(ctx, qLabel, labelR07) }, explain: fixed(qLabel, labelR07)},
		{name: "list-site-as-of-month",
			hub: func(ctx context.Context, _ int) error {
				_, err := fc.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "site-042", AsOf: asOf, PageSize: 100})
				return err
			},
			raw: func(ctx context.Context, _ int) error { return query(ctx, qAsOf, "site-042", monthAgo) }, explain: fixed(qAsOf, "site-042", monthAgo)},
		{name: "get-device",
			hub: func(ctx context.Context, i int) error {
				_, err := fc.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: dev(i)})
				return err
			},
			raw: func(ctx context.Context, i int) error { return getDevice(ctx, dev(i), nil) }},
		{name: "get-device-as-of-month",
			hub: func(ctx context.Context, i int) error {
				_, err := fc.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: dev(i), AsOf: asOf})
				return err
			},
			raw: func(ctx context.Context, i int) error { return getDevice(ctx, dev(i), &monthAgo) }},
		{name: "list-sites",
			hub: func(ctx context.Context, _ int) error {
				_, err := fc.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
				return err
			},
			raw: func(ctx context.Context, _ int) error { return query(ctx, qSites) }, explain: fixed(qSites)},
		{name: "web-overview",
			hub: func(ctx context.Context, _ int) error { return page(ctx, "/") },
			raw: func(ctx context.Context, _ int) error { return query(ctx, qSiteStatusCounts) }, explain: fixed(qSiteStatusCounts)},
		{name: "web-site",
			hub: func(ctx context.Context, _ int) error { return page(ctx, "/sites/site-042") },
			raw: func(ctx context.Context, _ int) error { return query(ctx, qOneSiteCounts, "site-042") }, explain: fixed(qOneSiteCounts, "site-042")},
		{name: "web-devices",
			hub: func(ctx context.Context, _ int) error { return page(ctx, "/devices") },
			raw: func(ctx context.Context, _ int) error { return query(ctx, qWebList) }, explain: fixed(qWebList)},
		{name: "web-devices-site-status",
			hub: func(ctx context.Context, _ int) error { return page(ctx, "/devices?site=site-042&status=FAULTED") },
			raw: func(ctx context.Context, _ int) error { return query(ctx, qSiteStatus, "site-042", "FAULTED") }},
		{name: "web-devices-selector",
			hub: func(ctx context.Context, _ int) error {
				return page(ctx, "/devices?selector="+neturl.QueryEscape("site=site-042,rack=r07"))
			},
			raw: func(ctx context.Context, _ int) error {
				return query(ctx, qSiteLabel+` LIMIT 101`, "site-042", labelR07)
			}},
		{name: "cli-get-devices-l", runs: *flagMillionCLIRuns,
			hub: func(ctx context.Context, _ int) error {
				out, err := exec.CommandContext(ctx, cli, "--hub", hub.Addr, "--plaintext", "--no-auth",
					"get", "devices", "-l", "site=site-042,rack=r07", "-o", "name").CombinedOutput()
				if err != nil {
					return fmt.Errorf("%w: %s", err, out)
				}
				if n := strings.Count(string(out), "\n"); n != *flagMillionPerSite/fleetseed.Racks {
					return fmt.Errorf("ironlink get devices -l: %d devices, want %d", n, *flagMillionPerSite/fleetseed.Racks)
				}
				return nil
			},
			raw: func(ctx context.Context, _ int) error { return query(ctx, qSiteLabel, "site-042", labelR07) }, explain: fixed(qSiteLabel, "site-042", labelR07)},
	}
	fmt.Fprintf(os.Stderr, "ironlink million reads: %d devices, %d runs per read (CLI %d), as_of %s, on a machine with load %s\n",
		count(b, raw, `SELECT count(*) FROM devices`), *flagMillionRuns, *flagMillionCLIRuns, monthAgo.Format(time.RFC3339), loadAvg())
	b.ResetTimer()
	for _, r := range reads {
		if *flagMillionOnly != "" && !slices.ContainsFunc(strings.Split(*flagMillionOnly, ","), func(s string) bool { return strings.Contains(r.name, s) }) {
			continue
		}
		runs := r.runs
		if runs == 0 {
			runs = *flagMillionRuns
		}
		var hubT, rawT []time.Duration
		for i := 0; i < runs+5; i++ {
			t0 := time.Now()
			if err := r.raw(ctx, i); err != nil {
				b.Fatalf("%s raw: %v", r.name, err)
			}
			t1 := time.Now()
			if err := r.hub(ctx, i); err != nil {
				b.Fatalf("%s: %v", r.name, err)
			}
			if i >= 5 {
				rawT, hubT = append(rawT, t1.Sub(t0)), append(hubT, time.Since(t1))
			}
		}
		hp50, hp99 := nearestRank(hubT, 50), nearestRank(hubT, 99)
		rp50, rp99 := nearestRank(rawT, 50), nearestRank(rawT, 99)
		fmt.Printf("ironlink million read: %-24s p50 %7.1f ms  p99 %7.1f ms   raw p50 %7.1f ms  p99 %7.1f ms  (%d runs)\n",
			r.name, ms(hp50), ms(hp99), ms(rp50), ms(rp99), runs)
		fmt.Printf("ironlink ratio: million-%s %.3f\n", r.name, float64(rp99)/float64(hp99))
		b.ReportMetric(ms(hp99), r.name+"-p99-ms")
		if *flagMillionExplain && r.explain != nil {
			q, args := r.explain(0)
			fmt.Printf("--- EXPLAIN raw %s\n%s\n", r.name, explain(b, raw, q, args...))
		}
	}
	b.StopTimer()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct is the p-th percentile of ds (nearest rank).
func nearestRank(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

func count(tb testing.TB, pool *pgxpool.Pool, q string) int {
	var n int
	if err := pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

func explain(tb testing.TB, pool *pgxpool.Pool, q string, args ...any) string {
	rows, err := pool.Query(context.Background(), "EXPLAIN (ANALYZE, BUFFERS) "+q, args...)
	if err != nil {
		tb.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		tb.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

func databaseExists(tb testing.TB, server, name string) bool {
	conn, err := pgx.Connect(context.Background(), server)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		tb.Fatal(err)
	}
	return n > 0
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
