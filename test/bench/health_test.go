package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/test/harness"
)

// BenchmarkHealthIntake measures HealthService.ReportHealth on one real hub
// process over PostgreSQL: events/s from 100 concurrent reporters (one site
// each, batches of 10 non-fatal events), and report → FAULTED latency
// (a single fatal event's ReportHealth call, which answers after the
// transaction that stored the condition and derived FAULTED committed;
// each checked FAULTED afterwards with GetDevice) at p50/p99 while that
// load runs. Run: go test ./test/bench -run '^$' -bench HealthIntake -benchtime 1x
func BenchmarkHealthIntake(b *testing.B) {
	const reporters, devices, batch = 100, 10, 10
	bins := binaries(b)
	db := pgtest.NewDatabase(b)
	// No per-reporter limit: this measures the intake itself (the limit,
	// --health-reporter-rate, is a fairness guard, tested in hub/healthapi).
	hub := harness.StartHub(b, bins, db, "bench", "--log-level", "warn", "--health-reporter-rate", "-1")
	st := storetest.Open(b, db, nil)
	sites := make([]*storetest.Site, reporters)
	for i := range sites {
		sites[i] = storetest.NewSite(b, st, fmt.Sprintf("hb-%03d", i), devices, nil)
	}
	hc := ironlinkv1.NewHealthServiceClient(harness.Dial(b, hub.Addr))
	fc := harness.Fleet(b, hub.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b.ResetTimer()
	var events, failures atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range sites {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				req := &ironlinkv1.ReportHealthRequest{Site: s.Name}
				for j := range batch {
					req.Events = append(req.Events, &ironlinkv1.HealthEvent{DeviceId: s.IDs[(n+j)%devices], Agent: fmt.Sprintf("bench-%d", i),
						ComponentClass: "GPU", CheckName: fmt.Sprintf("Check%d", j), ErrorCodes: []string{"63"},
						GeneratedTime: timestamppb.Now(), EventId: fmt.Sprintf("%d-%d-%d", i, n, j)})
				}
				if _, err := hc.ReportHealth(ctx, req); err != nil {
					failures.Add(1)
					continue
				}
				events.Add(batch)
			}
		}()
	}
	time.Sleep(2 * time.Second) // warm-up
	start, startEvents := time.Now(), events.Load()
	var lat []time.Duration
	var faulted []string
	for k := 0; time.Since(start) < 15*time.Second; k++ {
		s := sites[k%reporters]
		id := s.IDs[(k/reporters)%devices]
		t0 := time.Now()
		_, err := hc.ReportHealth(ctx, &ironlinkv1.ReportHealthRequest{Site: s.Name, Events: []*ironlinkv1.HealthEvent{{
			DeviceId: id, Agent: "bench", ComponentClass: "GPU", CheckName: "GpuXidError", IsFatal: true, ErrorCodes: []string{"79"},
			GeneratedTime: timestamppb.Now(), EventId: fmt.Sprintf("fatal-%d", k)}}})
		if err != nil {
			b.Fatalf("fatal report: %v", err)
		}
		lat = append(lat, time.Since(t0))
		faulted = append(faulted, id)
	}
	elapsed, got := time.Since(start), events.Load()-startEvents
	close(stop)
	wg.Wait()
	b.StopTimer()
	for _, id := range faulted[:min(len(faulted), 50)] {
		d, err := fc.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id})
		if err != nil || d.GetDevice().GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED {
			b.Fatalf("device %s after its fatal report: %v %v", id, d.GetDevice().GetStatus(), err)
		}
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	eps := float64(got) / elapsed.Seconds()
	b.ReportMetric(eps, "events/s")
	b.ReportMetric(float64(pct(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-ms")
	fmt.Printf("health intake: reporters=%d batch=%d duration=%s events/s=%.0f batches/s=%.0f failed-calls=%d; report→FAULTED n=%d p50=%s p99=%s max=%s\n",
		reporters, batch, elapsed.Round(time.Millisecond), eps, eps/batch, failures.Load(), len(lat), pct(0.5), pct(0.99), lat[len(lat)-1])
}
