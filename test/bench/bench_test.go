// Package bench measures the link of one hub replica on this machine (issue
// 4 item 6): condition deltas committed per second from many concurrent
// satellite links, and quarantine latency (FleetService.QuarantineDevice →
// the satellite receives the Command and reports success → GetCommand shows
// SUCCEEDED) at p50/p99 while that load runs. See README.md.
package bench

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

var (
	flagLinks    = flag.Int("bench.links", 100, "concurrent scripted satellite links (one site each)")
	flagDuration = flag.Duration("bench.duration", 20*time.Second, "measured duration (after a 2 s warm-up)")
	flagDevices  = flag.Int("bench.devices", 20, "devices per site")
	flagBatch    = flag.Int("bench.batch", 10, "device updates (one condition delta each) per batch")
	flagWindow   = flag.Int("bench.window", 4, "unacked batches in flight per link")
	flagPoolMax  = flag.Int("bench.pool-max-conns", 0, "hub database pool size (pool_max_conns in the URL); 0 = the hub's default")
	flagQuar     = flag.Int("bench.quarantiners", 4, "concurrent operators issuing quarantines one after another")
	flagHubArgs  = flag.String("bench.hub-args", "", "extra ironlink-hub flags, space-separated")
	flagIngest   = flag.Bool("bench.ingest", true, "satellites send deltas during the measured duration (false: quarantine latency over idle links)")
	flagRawDur   = flag.Duration("bench.raw-duration", 5*time.Second, "how long the raw ceiling (plain pgx) is measured before the hub")
)

// Result is what one load run measured.
type Result struct {
	Links                 int
	Duration              time.Duration
	DeltasPerSec          float64
	BatchesPerSec         float64
	Quarantines           int
	P50, P90, P99, Max    time.Duration // API call → SUCCEEDED seen via GetCommand
	RecvP50, RecvP99      time.Duration // API call → satellite received the Command
	APIP50, APIP99        time.Duration // QuarantineDevice's own duration (the command written)
	DupAcks, LinkFailures int
	QuarantineErrors      int // QuarantineDevice calls that failed
}

func (r Result) String() string {
	return fmt.Sprintf("links=%d duration=%s deltas/s=%.0f batches/s=%.0f quarantines=%d latency p50=%s p90=%s p99=%s max=%s (call answered p50=%s p99=%s; command received by satellite p50=%s p99=%s) duplicate-acks=%d link-failures=%d quarantine-errors=%d",
		r.Links, r.Duration, r.DeltasPerSec, r.BatchesPerSec, r.Quarantines, r.P50, r.P90, r.P99, r.Max, r.APIP50, r.APIP99, r.RecvP50, r.RecvP99, r.DupAcks, r.LinkFailures, r.QuarantineErrors)
}

type load struct {
	links, devices, batch, window, poolMax int
	quarantiners                           int
	idle                                   bool // no deltas: the links only answer commands
	duration                               time.Duration
	hubArgs                                []string
}

var (
	buildOnce sync.Once
	bins      harness.Binaries
	buildErr  error
)

func TestMain(m *testing.M) {
	if os.Getenv(rawGRPCEnv) != "" {
		serveRawGRPC() // the raw link server's child process; never returns
	}
	flag.Parse()
	code := m.Run()
	if bins.Dir != "" {
		os.RemoveAll(bins.Dir)
	}
	os.Exit(code)
}

func binaries(tb testing.TB) harness.Binaries {
	buildOnce.Do(func() { bins, buildErr = harness.Build() })
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return bins
}

// run starts one hub over a fresh database, connects l.links scripted
// satellites, lets them send deltas as fast as acks allow, and quarantines
// one device after another (each waited for) while that load runs.
func run(tb testing.TB, l load) Result {
	bins := binaries(tb)
	db := pgtest.NewDatabase(tb)
	if l.poolMax > 0 {
		sep := "?"
		if strings.Contains(db, "?") {
			sep = "&"
		}
		db += fmt.Sprintf("%spool_max_conns=%d", sep, l.poolMax)
	}
	hub := harness.StartHub(tb, bins, db, "bench", append(append([]string{"--log-level", "warn"}, profileArgs()...), l.hubArgs...)...)
	fc := harness.Fleet(tb, hub.Addr)

	var mu sync.Mutex
	received := map[string]time.Time{}
	sats := make([]*satsim.Sat, l.links)
	for i := range sats {
		sats[i] = satsim.New(satsim.Config{Site: fmt.Sprintf("bench-%03d", i), Addr: hub.Addr, Devices: l.devices,
			DevicesPerBatch: l.batch, Window: l.window,
			OnCommand: func(c *ironlinkv1.Command) *ironlinkv1.CommandResult {
				mu.Lock()
				if _, ok := received[c.GetCommandId()]; !ok {
					received[c.GetCommandId()] = time.Now()
				}
				mu.Unlock()
				return nil // success
			}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range sats {
		wg.Add(1)
		go func() { defer wg.Done(); s.Run(ctx) }()
	}
	defer func() { cancel(); wg.Wait() }()
	harness.Eventually(tb, 60*time.Second, func() error {
		for _, s := range sats {
			if st := s.Stats(); !st.Connected || st.Unacked > 0 {
				return fmt.Errorf("site %s: connected=%v, snapshot unacked %d", s.Site(), st.Connected, st.Unacked)
			}
		}
		return nil
	})
	for _, s := range sats {
		s.Produce(!l.idle)
	}
	time.Sleep(2 * time.Second) // warm-up

	snap := func() (deltas int, batches uint64) {
		for _, s := range sats {
			st := s.Stats()
			deltas += st.AckedDeltas
			batches += st.LastAcked
		}
		return
	}
	d0, b0 := snap()
	name := fmt.Sprintf("link-%d", l.links)
	if l.idle {
		name += "-idle"
	}
	prof := startProfile(tb, hub.AdminAddr, name, l.duration)
	start := time.Now()
	var lat, recv, api []time.Duration
	apiErrs := 0
	qctx, qcancel := context.WithTimeout(context.Background(), l.duration)
	defer qcancel()
	var qwg sync.WaitGroup
	for w := range l.quarantiners {
		qwg.Add(1)
		go func() {
			defer qwg.Done()
			for qctx.Err() == nil {
				// Each operator has its own sites, so no quarantine supersedes another's.
				s := sats[w+l.quarantiners*rand.IntN(max(len(sats)/l.quarantiners, 1))]
				dev := s.Devices()[rand.IntN(l.devices)]
				t0 := time.Now()
				cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
				r, err := fc.QuarantineDevice(cctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: dev, Reason: "bench"})
				if err != nil {
					// Counted and reported (see the fault suite's
					// TestQuarantineDuringIngest for the cause).
					ccancel()
					mu.Lock()
					apiErrs++
					if apiErrs <= 3 {
						tb.Logf("QuarantineDevice: %v", err)
					}
					mu.Unlock()
					continue
				}
				answered := time.Since(t0)
				id := r.GetCommand().GetCommandId()
				for {
					g, err := fc.GetCommand(cctx, &ironlinkv1.GetCommandRequest{CommandId: id})
					if err != nil {
						ccancel()
						tb.Errorf("GetCommand: %v", err)
						return
					}
					if g.GetCommand().GetState() == ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED {
						break
					}
					time.Sleep(2 * time.Millisecond)
				}
				ccancel()
				mu.Lock()
				lat = append(lat, time.Since(t0))
				api = append(api, answered)
				if at, ok := received[id]; ok {
					recv = append(recv, at.Sub(t0))
				}
				mu.Unlock()
			}
		}()
	}
	<-qctx.Done() // the measured duration, also with no quarantiners
	qwg.Wait()
	elapsed := time.Since(start)
	d1, b1 := snap()
	prof.stop()
	res := Result{Links: l.links, Duration: elapsed.Round(time.Millisecond),
		DeltasPerSec: float64(d1-d0) / elapsed.Seconds(), BatchesPerSec: float64(b1-b0) / elapsed.Seconds(), Quarantines: len(lat)}
	res.P50, res.P90, res.P99, res.Max = pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 100)
	res.RecvP50, res.RecvP99 = pct(recv, 50), pct(recv, 99)
	res.APIP50, res.APIP99 = pct(api, 50), pct(api, 99)
	res.QuarantineErrors = apiErrs
	for _, s := range sats {
		st := s.Stats()
		res.DupAcks += st.DupAcks
		res.LinkFailures += st.Links - 1
		if st.Links > 1 {
			tb.Logf("site %s: links ended: %v", s.Site(), s.LinkErrors())
		}
		for _, e := range st.Errors {
			tb.Errorf("protocol violation: %v", e)
		}
	}
	return res
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	i = min(max(i-1, 0), len(s)-1)
	return s[i].Round(100 * time.Microsecond)
}

// BenchmarkLink is load (a) of issue 11: bench.links (100) links sending
// batches of bench.batch (10) deltas. It first measures the raw ceiling
// (rawDeltas, bench.raw-duration), then runs the hub's load once (it takes
// bench.duration however large b.N is) and reports deltas/s, the hub/raw
// ratio and quarantine latency percentiles during the load.
func BenchmarkLink(b *testing.B) { benchLinks(b, *flagLinks) }

// BenchmarkLinks1000 is load (c): BenchmarkLink with 1,000 links.
func BenchmarkLinks1000(b *testing.B) { benchLinks(b, 1000) }

func benchLinks(b *testing.B, links int) {
	var hubArgs []string
	if *flagHubArgs != "" {
		hubArgs = strings.Fields(*flagHubArgs)
	}
	raw, rawLat := rawDeltas(b, *flagRawDur, *flagQuar, *flagIngest)
	fmt.Println("ironlink raw ceiling (condition deltas):", raw)
	if len(rawLat) > 0 {
		fmt.Printf("ironlink raw quarantine (plain pgx + raw gRPC, during the raw ceiling): n=%d p50=%s p99=%s\n",
			len(rawLat), pct(rawLat, 50), pct(rawLat, 99))
	}
	res := run(b, load{links: links, devices: *flagDevices, batch: *flagBatch, window: *flagWindow,
		poolMax: *flagPoolMax, quarantiners: *flagQuar, idle: !*flagIngest, duration: *flagDuration, hubArgs: hubArgs})
	if !*flagIngest {
		if res.P99 > 0 && len(rawLat) > 0 {
			ratioLine(fmt.Sprintf("quarantine-idle-%d", links), float64(pct(rawLat, 99))/float64(res.P99))
		}
	} else if *flagQuar > 0 {
		ratioLine(fmt.Sprintf("link-%d", links), res.DeltasPerSec/raw.PerSec())
		if res.P99 > 0 && len(rawLat) > 0 {
			ratioLine(fmt.Sprintf("quarantine-%d", links), float64(pct(rawLat, 99))/float64(res.P99))
		}
	} else {
		ratioLine(fmt.Sprintf("ingest-%d", links), res.DeltasPerSec/raw.PerSec())
	}
	b.ReportMetric(res.DeltasPerSec, "deltas/s")
	b.ReportMetric(raw.PerSec(), "raw-deltas/s")
	if *flagIngest {
		b.ReportMetric(ratio(b, fmt.Sprintf("%d links x batches of %d", links, *flagBatch), res.DeltasPerSec, raw.PerSec()), "hub/raw-%")
	}
	b.ReportMetric(res.BatchesPerSec, "batches/s")
	b.ReportMetric(float64(res.P50.Microseconds())/1000, "quarantine-p50-ms")
	b.ReportMetric(float64(res.P99.Microseconds())/1000, "quarantine-p99-ms")
	b.ReportMetric(float64(res.Quarantines), "quarantines")
	b.Logf("%s", res)
	fmt.Println("ironlink link benchmark:", res)
}

// TestBenchSmoke keeps the machinery of loads (a) and (c) working: the raw
// ceiling for 1 s, then 10 links for 3 s, every quarantine answered,
// throughput above zero.
func TestBenchSmoke(t *testing.T) {
	raw, _ := rawDeltas(t, time.Second, 0, true)
	res := run(t, load{links: 10, devices: 10, batch: 5, window: 2, quarantiners: 2, duration: 3 * time.Second})
	t.Log(res)
	if res.DeltasPerSec <= 0 || res.Quarantines == 0 || raw.Units == 0 {
		t.Fatalf("no load measured: %s; raw %s", res, raw)
	}
	ratio(t, "smoke: 10 links x batches of 5", res.DeltasPerSec, raw.PerSec())
}

// TestManyLinksBenchSmoke keeps load (c) working at a size make test
// affords: 200 links for 2 s with one quarantiner, every link up, deltas
// committed.
func TestManyLinksBenchSmoke(t *testing.T) {
	raw, _ := rawDeltas(t, time.Second, 0, true)
	res := run(t, load{links: 200, devices: 10, batch: 10, window: 4, quarantiners: 1, duration: 2 * time.Second})
	t.Log(res)
	if res.DeltasPerSec <= 0 || res.LinkFailures > 0 {
		t.Fatalf("200 links: %s", res)
	}
	ratio(t, "smoke: 200 links x batches of 10", res.DeltasPerSec, raw.PerSec())
}
