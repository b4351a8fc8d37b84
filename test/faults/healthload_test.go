package faults

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironlink/ironlink/gen/datamodels"
	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/test/harness"
)

var healthLoad = flag.Bool("faults.healthload", false, "run TestHealthDoorFigures: throughput and latency of the satellite's health door (figures logged, nothing asserted on time)")

// quantile is the q-quantile of sorted ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// TestHealthDoorFigures measures, on one real hub and one real satellite
// over the simulator (all on this machine): events/s through the door from
// 100 concurrent reporters (batches of 10 non-fatal events), report →
// FAULTED (the door's answer to one fatal event, which comes after the
// commit that derived FAULTED; checked with GetDevice) at p50/p99 under
// that load, and report → quarantine decided and → trait removed in the
// simulator for one XID 79 event per device with a health rule at the
// default --policy-interval 1s. Figures go to the log; only correctness is
// asserted. Run: go test ./test/faults -run TestHealthDoorFigures -v -args -faults.healthload
func TestHealthDoorFigures(t *testing.T) {
	if !*healthLoad {
		t.Skip("figures only: -args -faults.healthload")
	}
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(healthPolicy, "maxDevices: 5", "maxDevices: 50", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	hub, db, s, door := healthSite(t, "health-load", 40, "--policy-file", path, "--log-level", "warn")
	fc := harness.Fleet(t, hub.Addr)
	nodes := s.sim.Nodes()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	target := nodes[0]
	idle := faultLatency(t, ctx, fc, door, target, 3*time.Second)
	t.Logf("report → FAULTED, idle: n=%d p50=%s p99=%s max=%s", len(idle), quantile(idle, 0.5), quantile(idle, 0.99), idle[len(idle)-1])

	var events, failures atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				var evs []*datamodels.HealthEvent
				for j := range 10 {
					e := xid(nodes[2+(i+j)%(len(nodes)-2)].Name, "63", false)
					e.CheckName = fmt.Sprintf("Load%d", j)
					e.Message = fmt.Sprintf("reporter %d round %d", i, n)
					evs = append(evs, e)
				}
				if err := report(ctx, door, evs...); err != nil {
					failures.Add(1)
					continue
				}
				events.Add(10)
			}
		}()
	}
	time.Sleep(2 * time.Second)
	start, from := time.Now(), events.Load()
	lat := faultLatency(t, ctx, fc, door, target, 15*time.Second)
	rate := float64(events.Load()-from) / time.Since(start).Seconds()
	close(stop)
	wg.Wait()
	t.Logf("door: %.0f events/s from 100 reporters (batches of 10), %d failed calls; report → FAULTED under that load: n=%d p50=%s p99=%s max=%s",
		rate, failures.Load(), len(lat), quantile(lat, 0.5), quantile(lat, 0.99), lat[len(lat)-1])
	quarantineFigures(t, ctx, s, db, door)
}

// faultLatency sends a fatal XID 79 event for target through the door,
// checks FAULTED, clears it with a healthy event, for d; it returns the
// fatal calls' durations, sorted.
func faultLatency(t *testing.T, ctx context.Context, fc ironlinkv1.FleetServiceClient, door datamodels.PlatformConnectorClient, target openstacksim.Node, d time.Duration) []time.Duration {
	var lat []time.Duration
	for start := time.Now(); time.Since(start) < d; {
		t0 := time.Now()
		if err := report(ctx, door, xid(target.Name, "79", true)); err != nil {
			t.Fatalf("fatal report: %v", err)
		}
		lat = append(lat, time.Since(t0))
		if st := device(t, fc, target.UUID).GetStatus(); st != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED {
			t.Fatalf("after the door answered: %v, want FAULTED", st)
		}
		healthy := xid(target.Name, "79", false)
		healthy.IsHealthy = true
		if err := report(ctx, door, healthy); err != nil {
			t.Fatalf("healthy report: %v", err)
		}
	}
	slices.Sort(lat)
	return lat
}

// quarantineFigures sends XID 79 for each device offered to customers, one
// at a time, and measures report → quarantine decided and → trait removed.
func quarantineFigures(t *testing.T, ctx context.Context, s *site, db string, door datamodels.PlatformConnectorClient) {
	pool := harness.Pool(t, db)
	names := map[string]string{}
	for _, n := range s.sim.Nodes() {
		names[n.UUID] = n.Name
	}
	var decided, applied []time.Duration
	for _, id := range s.readyNodes()[1:] {
		if len(decided) == 20 {
			break
		}
		t0 := time.Now()
		if err := report(ctx, door, xid(names[id], "79", true)); err != nil {
			t.Fatalf("report: %v", err)
		}
		harness.Eventually(t, 20*time.Second, func() error {
			var n int
			_ = pool.QueryRow(ctx, `SELECT count(*) FROM policy_decisions WHERE device_id = $1 AND action = 'QUARANTINE'`, id).Scan(&n)
			if n == 0 {
				var a, r, d string
				_ = pool.QueryRow(ctx, `SELECT action, reason, detail FROM policy_decisions WHERE device_id = $1 ORDER BY id DESC LIMIT 1`, id).Scan(&a, &r, &d)
				return errorf("no quarantine decision for %s (last: %s %s %s)", id, a, r, d)
			}
			return nil
		})
		decided = append(decided, time.Since(t0))
		harness.Eventually(t, 20*time.Second, func() error {
			if tr, _, _ := s.sim.ProviderTraits(id); slices.Contains(tr, readyTrait) {
				return errorf("%s still has the trait", id)
			}
			return nil
		})
		applied = append(applied, time.Since(t0))
	}
	slices.Sort(decided)
	slices.Sort(applied)
	t.Logf("report → quarantine decided: n=%d p50=%s max=%s; → trait removed in the simulator: p50=%s max=%s (policy interval 1s)",
		len(decided), quantile(decided, 0.5), decided[len(decided)-1], quantile(applied, 0.5), applied[len(applied)-1])
}
