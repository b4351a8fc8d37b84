package bench

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

var (
	flagSnapSites   = flag.Int("bench.snapshot-sites", 10, "sites snapshotting at once (load b)")
	flagSnapDevices = flag.Int("bench.snapshot-devices", 10000, "devices per snapshotting site (load b)")
)

// snapshotResult is what one snapshot run measured.
type snapshotResult struct {
	Sites, Devices int
	// Elapsed runs from the satellites' start until every snapshot part
	// of every site was acked.
	Elapsed time.Duration
}

// DevicesPerSec is devices (with seven conditions each) committed per second.
func (r snapshotResult) DevicesPerSec() float64 {
	return float64(r.Sites*r.Devices) / r.Elapsed.Seconds()
}

func (r snapshotResult) String() string {
	return fmt.Sprintf("sites=%d devices/site=%d devices=%d all committed in %s (%.0f devices/s)",
		r.Sites, r.Devices, r.Sites*r.Devices, r.Elapsed.Round(time.Millisecond), r.DevicesPerSec())
}

// runSnapshot starts one hub over a fresh database and sites scripted
// satellites of devices devices each at once; each sends its full first
// snapshot (all seven conditions per device, parts of 500 devices, up to 4
// unacked). It returns when every part is acked, and checks that every
// device and condition reached the database exactly once.
func runSnapshot(tb testing.TB, sites, devices int) snapshotResult {
	bins := binaries(tb)
	db := pgtest.NewDatabase(tb)
	hub := harness.StartHub(tb, bins, db, "bench", "--log-level", "warn")
	sats := make([]*satsim.Sat, sites)
	for i := range sats {
		sats[i] = satsim.New(satsim.Config{Site: fmt.Sprintf("snap-%02d", i), Addr: hub.Addr, Devices: devices, Window: 4})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	start := time.Now()
	for _, s := range sats {
		wg.Add(1)
		go func() { defer wg.Done(); s.Run(ctx) }()
	}
	harness.Eventually(tb, 10*time.Minute, func() error {
		for _, s := range sats {
			if st := s.Stats(); st.Unacked > 0 || st.LastAcked == 0 {
				return fmt.Errorf("site %s: %d snapshot parts unacked", s.Site(), st.Unacked)
			}
		}
		return nil
	})
	res := snapshotResult{Sites: sites, Devices: devices, Elapsed: time.Since(start)}
	pool := harness.Pool(tb, db)
	var devs, hist int
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM devices), (SELECT count(*) FROM condition_history)`).Scan(&devs, &hist); err != nil {
		tb.Fatal(err)
	}
	if devs != sites*devices || hist != sites*devices*len(condition.Types) {
		tb.Fatalf("after the snapshots: %d devices, %d history rows; want %d, %d", devs, hist, sites*devices, sites*devices*len(condition.Types))
	}
	for _, s := range sats {
		if st := s.Stats(); st.Links != 1 || len(st.Errors) > 0 {
			tb.Errorf("site %s: %d links (%v), protocol violations %v", s.Site(), st.Links, s.LinkErrors(), st.Errors)
		}
	}
	return res
}

// BenchmarkSnapshot is load (b) of issue 11: bench.snapshot-sites (10)
// sites of bench.snapshot-devices (10,000) devices snapshotting at once.
// It first measures the raw ceiling for the same number of devices
// (rawSnapshot), then the hub, and reports the time until all committed,
// devices/s and the hub/raw ratio (of devices/s).
func BenchmarkSnapshot(b *testing.B) {
	sites, devices := *flagSnapSites, *flagSnapDevices
	raw := rawSnapshot(b, sites*devices)
	fmt.Println("ironlink raw ceiling (snapshot devices, 7 conditions each):", raw)
	res := runSnapshot(b, sites, devices)
	fmt.Println("ironlink snapshot benchmark:", res)
	b.ReportMetric(res.Elapsed.Seconds(), "s-to-commit-all")
	b.ReportMetric(raw.Elapsed.Seconds(), "raw-s")
	b.ReportMetric(res.DevicesPerSec(), "devices/s")
	b.ReportMetric(ratio(b, fmt.Sprintf("%d sites x %d devices snapshot", sites, devices), res.DevicesPerSec(), raw.PerSec()), "hub/raw-%")
	ratioLine(fmt.Sprintf("snapshot-%dx%d", sites, devices), res.DevicesPerSec()/raw.PerSec())
}

// TestSnapshotBenchSmoke keeps load (b) working: 3 sites of 1,000 devices.
func TestSnapshotBenchSmoke(t *testing.T) {
	raw := rawSnapshot(t, 3000)
	res := runSnapshot(t, 3, 1000)
	t.Log(res)
	ratio(t, "smoke: 3 sites x 1000 devices snapshot", res.DevicesPerSec(), raw.PerSec())
}
