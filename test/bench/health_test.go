package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/ironlink/ironlink/gen/datamodels"
	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/healthsim"
	"github.com/ironlink/ironlink/internal/openstacksim"
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
	const reporters, devices, batch = 100, 10, intakeBatch
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
	hubLoad := drive(reporters, func(i, n int) error {
		_, err := hc.ReportHealth(ctx, hubBatch(sites[i], i, n, batch))
		return err
	})
	events, failures := &hubLoad.events, &hubLoad.failures
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
	hubLoad.stop()
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

// hubBatch is reporter i's n-th batch through the hub's door: batch
// non-fatal GPU events for the devices of its site s.
func hubBatch(s *storetest.Site, i, n, batch int) *ironlinkv1.ReportHealthRequest {
	req := &ironlinkv1.ReportHealthRequest{Site: s.Name}
	for j := range batch {
		req.Events = append(req.Events, &ironlinkv1.HealthEvent{DeviceId: s.IDs[(n+j)%len(s.IDs)], Agent: fmt.Sprintf("bench-%d", i),
			ComponentClass: "GPU", CheckName: fmt.Sprintf("Check%d", j), ErrorCodes: []string{"63"},
			GeneratedTime: timestamppb.Now(), EventId: fmt.Sprintf("%d-%d-%d", i, n, j)})
	}
	return req
}

// reporterLoad is reporters calling send in a loop (drive): events counts the
// events of the calls that succeeded, failures the calls that failed.
type reporterLoad struct {
	events, failures atomic.Int64
	done             chan struct{}
	wg               sync.WaitGroup
}

// drive starts reporters goroutines, reporter i calling send(i, n) for
// n = 0, 1, … (each call reporting batch events, counted when it
// succeeds) until stop.
func drive(reporters int, send func(i, n int) error) *reporterLoad {
	l := &reporterLoad{done: make(chan struct{})}
	for i := range reporters {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for n := 0; ; n++ {
				select {
				case <-l.done:
					return
				default:
				}
				if err := send(i, n); err != nil {
					l.failures.Add(1)
					continue
				}
				l.events.Add(intakeBatch)
			}
		}()
	}
	return l
}

// stop ends the reporters and waits for their last calls.
func (l *reporterLoad) stop() {
	close(l.done)
	l.wg.Wait()
}

// rate measures l's events/s over d after a warm-up of 2 s.
func (l *reporterLoad) rate(d time.Duration) float64 {
	time.Sleep(2 * time.Second)
	start, n := time.Now(), l.events.Load()
	time.Sleep(d)
	return float64(l.events.Load()-n) / time.Since(start).Seconds()
}

// intakeBatch is the events per call of the intake benchmarks.
const intakeBatch = 10

// BenchmarkHealthIntakeSatellite measures events/s through a real
// satellite's local door (NVSentinel's PlatformConnector on a Unix socket,
// which answers after the hub committed the batch it forwarded over the
// link) from 100 concurrent reporters (agents), batches of 10 non-fatal
// GPU events for the 400 devices of its site at the OpenStack simulator,
// and, in the same run, through the hub's own door (HealthService.
// ReportHealth, 100 reporters each of its own site, as
// BenchmarkHealthIntake loads it) on another hub: it prints both and
// their ratio. Neither door limits its reporters here (the limits are
// fairness guards, tested in satellite/healthdoor and hub/healthapi).
// Run: go test ./test/bench -run '^$' -bench HealthIntakeSatellite -benchtime 1x
func BenchmarkHealthIntakeSatellite(b *testing.B) {
	const reporters, devices = 100, 10
	const window = 10 * time.Second
	bins := binaries(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The hub's door.
	db := pgtest.NewDatabase(b)
	hub := harness.StartHub(b, bins, db, "bench", "--log-level", "warn", "--health-reporter-rate", "-1")
	st := storetest.Open(b, db, nil)
	sites := make([]*storetest.Site, reporters)
	for i := range sites {
		sites[i] = storetest.NewSite(b, st, fmt.Sprintf("hb-%03d", i), devices, nil)
	}
	hc := ironlinkv1.NewHealthServiceClient(harness.Dial(b, hub.Addr))
	b.ResetTimer()
	hubLoad := drive(reporters, func(i, n int) error {
		_, err := hc.ReportHealth(ctx, hubBatch(sites[i], i, n, intakeBatch))
		return err
	})
	hubRate := hubLoad.rate(window)
	hubLoad.stop()
	b.StopTimer()
	hub.Stop(5 * time.Second)

	// A satellite's door, its hub on a database of its own.
	dir := b.TempDir()
	sim := openstacksim.New(openstacksim.Options{})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sim.Close() })
	sim.SeedLikeTestbed(400)
	clouds := filepath.Join(dir, "clouds.yaml")
	if err := sim.WriteCloudsYAML(clouds, "sim"); err != nil {
		b.Fatal(err)
	}
	hub2 := harness.StartHub(b, bins, pgtest.NewDatabase(b), "bench", "--log-level", "warn", "--health-reporter-rate", "-1")
	sock := filepath.Join(dir, "health.sock")
	harness.Start(b, "satellite", bins.Satellite(), "--site", "hs", "--hub", hub2.Addr, "--clouds-yaml", clouds, "--cloud", "sim",
		"--no-auth", "--hub-plaintext", "--poll-interval", "5s", "--state-file", filepath.Join(dir, "state.json"),
		"--health-socket", sock, "--health-reporter-rate", "-1", "--log-level", "warn")
	fc := harness.Fleet(b, hub2.Addr)
	nodes := sim.Nodes()
	waitListed(b, fc, "hs", len(nodes))
	door, err := healthsim.Dial(sock)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = door.Close() }()
	thermal, err := healthsim.Lookup("thermal")
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	satLoad := drive(reporters, func(i, n int) error {
		evs := make([]*datamodels.HealthEvent, intakeBatch)
		for j := range evs {
			e := thermal.Event(nodes[(i*intakeBatch+n+j)%len(nodes)].Name, j%8, time.Now(), false)
			e.Agent, e.CheckName = fmt.Sprintf("bench-%d", i), fmt.Sprintf("Check%d", j)
			evs[j] = e
		}
		return door.Send(ctx, evs...)
	})
	satRate := satLoad.rate(window)
	satLoad.stop()
	b.StopTimer()
	b.ReportMetric(satRate, "events/s")
	b.ReportMetric(hubRate, "hub-door-events/s")
	b.ReportMetric(satRate/hubRate, "ratio")
	fmt.Printf("health intake: reporters=%d batch=%d window=%s: satellite door events/s=%.0f (failed calls %d); hub door events/s=%.0f (failed calls %d); satellite/hub = %.2f\n",
		reporters, intakeBatch, window, satRate, satLoad.failures.Load(), hubRate, hubLoad.failures.Load(), satRate/hubRate)
}
