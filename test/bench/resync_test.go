package bench

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// Issue 26 item 2 (b): one site of 100,000 devices × 7 conditions resynced
// through a real hub (the satellite's full snapshot, parts of 500 devices,
// up to 4 unacked), against a COPY-based raw ceiling: the same rows (devices
// with their facts, their condition rows and one history row per condition)
// COPYed into a fresh database migrated like the hub's, on the same
// PostgreSQL, in the same run.

var (
	flagResyncDevices = flag.Int("bench.resync-devices", 100000, "devices of the resyncing site (BenchmarkResync)")
	flagResyncProfile = flag.Duration("bench.resync-profile", 15*time.Second, "how long the hub's CPU profile of BenchmarkResync runs from the satellite's start (with -bench.profile)")
)

// copyResult is the COPY ceiling: Devices written (with every condition and
// history row) in Elapsed.
type copyResult struct {
	Devices int
	Elapsed time.Duration
}

func (r copyResult) String() string {
	return fmt.Sprintf("%d devices (%d condition and %d history rows) COPYed in %s (%.0f devices/s, one connection, one transaction)",
		r.Devices, r.Devices*len(condition.Types), r.Devices*len(condition.Types), r.Elapsed.Round(time.Millisecond),
		float64(r.Devices)/r.Elapsed.Seconds())
}

// rawCopy measures COPYing devices new devices, their seven condition rows
// each and one history row per condition into a fresh migrated database
// (the raw ceiling of BenchmarkResync): three COPY FROM STDIN (binary, pgx
// CopyFrom) in one transaction on one connection. The rows are built
// before the clock starts.
func rawCopy(tb testing.TB, devices int) copyResult {
	tb.Helper()
	ctx := context.Background()
	pool, _ := rawDatabase(tb)
	now := time.Now().UTC()
	devRows := make([][]any, devices)
	condRows := make([][]any, 0, devices*len(condition.Types))
	histRows := make([][]any, 0, devices*len(condition.Types))
	for i := range devRows {
		id := uuid.New()
		name := fmt.Sprintf("raw-%06d", i)
		devRows[i] = []any{id, "raw", name, map[string]any{"name": name, "provision_state": "available"}, now, "raw", "AVAILABLE", "Raw", now}
		for _, t := range condition.Types {
			condRows = append(condRows, []any{id, string(t), "True", "Initial", "initial snapshot", now, now})
			histRows = append(histRows, []any{id, string(t), "True", "Initial", "initial snapshot", now, now})
		}
	}
	condCols := []string{"device_id", "type", "status", "reason", "message", "last_transition_time", "observed_time"}
	start := time.Now()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"devices"},
			[]string{"id", "site", "name", "facts", "observed_at", "snapshot_id", "status", "status_reason", "status_changed_at"},
			pgx.CopyFromRows(devRows)); err != nil {
			return fmt.Errorf("copy devices: %w", err)
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"device_conditions"}, condCols, pgx.CopyFromRows(condRows)); err != nil {
			return fmt.Errorf("copy device_conditions: %w", err)
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"condition_history"}, condCols, pgx.CopyFromRows(histRows)); err != nil {
			return fmt.Errorf("copy condition_history: %w", err)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return copyResult{Devices: devices, Elapsed: time.Since(start)}
}

// runResync starts one hub over a fresh database and one scripted
// satellite of devices devices, which sends its full snapshot; it returns
// when every part is acked and checks that every device and history row
// reached the database exactly once. With -bench.profile, the hub's CPU
// profile covers -bench.resync-profile from the satellite's start.
func runResync(tb testing.TB, devices int) snapshotResult {
	bins := binaries(tb)
	db := pgtest.NewDatabase(tb)
	hub := harness.StartHub(tb, bins, db, "bench", append([]string{"--log-level", "warn"}, profileArgs()...)...)
	sat := satsim.New(satsim.Config{Site: "resync", Addr: hub.Addr, Devices: devices, Window: 4})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	prof := startProfile(tb, hub.AdminAddr, fmt.Sprintf("resync-%d", devices), *flagResyncProfile)
	start := time.Now()
	wg.Add(1)
	go func() { defer wg.Done(); sat.Run(ctx) }()
	harness.Eventually(tb, 20*time.Minute, func() error {
		if st := sat.Stats(); st.Unacked > 0 || st.LastAcked == 0 {
			return fmt.Errorf("%d snapshot parts unacked", st.Unacked)
		}
		return nil
	})
	res := snapshotResult{Sites: 1, Devices: devices, Elapsed: time.Since(start)}
	prof.stop()
	pool := harness.Pool(tb, db)
	var devs, hist, conds int
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM devices), (SELECT count(*) FROM condition_history),
		(SELECT count(*) FROM device_conditions)`).Scan(&devs, &hist, &conds); err != nil {
		tb.Fatal(err)
	}
	want := devices * len(condition.Types)
	if devs != devices || hist != want || conds != want {
		tb.Fatalf("after the resync: %d devices, %d history rows, %d condition rows; want %d, %d, %d", devs, hist, conds, devices, want, want)
	}
	if st := sat.Stats(); st.Links != 1 || len(st.Errors) > 0 {
		tb.Errorf("%d links (%v), protocol violations %v", st.Links, sat.LinkErrors(), st.Errors)
	}
	return res
}

// BenchmarkResync is issue 26 item 2 (b): one site of
// bench.resync-devices (100,000) devices × 7 conditions resynced through
// one hub, the COPY ceiling of the same rows measured first. It prints
// both times and the ratio line resync-<devices> (COPY seconds / hub
// seconds, higher is better).
func BenchmarkResync(b *testing.B) {
	devices := *flagResyncDevices
	raw := rawCopy(b, devices)
	fmt.Println("ironlink raw ceiling (COPY):", raw)
	res := runResync(b, devices)
	fmt.Println("ironlink resync benchmark:", res)
	b.ReportMetric(res.Elapsed.Seconds(), "s-to-commit-all")
	b.ReportMetric(raw.Elapsed.Seconds(), "copy-s")
	b.ReportMetric(res.DevicesPerSec(), "devices/s")
	fmt.Printf("ironlink benchmark: resync of %d devices: hub %s, COPY %s: COPY/hub = %.3f\n", devices,
		res.Elapsed.Round(time.Millisecond), raw.Elapsed.Round(time.Millisecond), raw.Elapsed.Seconds()/res.Elapsed.Seconds())
	ratioLine(fmt.Sprintf("resync-%d", devices), raw.Elapsed.Seconds()/res.Elapsed.Seconds())
}

// TestResyncBenchSmoke keeps BenchmarkResync working: 2,000 devices.
func TestResyncBenchSmoke(t *testing.T) {
	raw := rawCopy(t, 2000)
	res := runResync(t, 2000)
	t.Log(raw, res)
}
