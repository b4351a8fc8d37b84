package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/healthsim"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

var (
	flagPolicyInterval = flag.Duration("bench.policy-interval", 0, "BenchmarkHealthDoorLatency: the hub's --policy-interval (0: its default, 1 s)")
	flagPolicyPollOnly = flag.Bool("bench.policy-poll-only", false, "BenchmarkHealthDoorLatency: run the hub with --policy-poll-only (its evaluator not woken by new faults)")
)

// healthDoorPolicy quarantines every device a fatal GPU event makes
// FAULTED, with no hold-down and a guard that never holds back.
const healthDoorPolicy = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 100000, maxPercent: 100, window: 1h}
    rules:
      - name: gpu-fatal
        to: [FAULTED]
        health: {componentClasses: [GPU]}
        holdDown: 0s
`

// BenchmarkHealthDoorLatency measures, through a real satellite's local
// health door (NVSentinel's PlatformConnector on a Unix socket, events
// built by internal/healthsim as the demo sends them) with a real hub over
// PostgreSQL and the OpenStack simulator, all on this machine:
//
//   - report → FAULTED: one fatal XID 79 event's door call, which answers
//     after the hub committed it and derived FAULTED (checked with
//     GetDevice), then a healthy event clears it; one device, 200 times;
//   - report → quarantine applied: one fatal XID 79 event per device
//     offered to customers (every 150 ms, so they land at every phase of
//     the policy evaluator's --policy-interval, the hub's default 1 s;
//     -args -bench.policy-interval 200ms sets another; the evaluator is
//     woken by each new fault unless -bench.policy-poll-only)
//     until the simulator shows the ready trait gone from the device's
//     resource provider (polled every 2 ms), with where the time went
//     (stages: the commit → the policy's decision → the command sent to
//     the satellite → its result, from the hub's database).
//
// There is no raw ceiling to compare with (the path is the product), so the
// figures are reported as metrics, not as a ratio. Run:
// go test ./test/bench -run '^$' -bench HealthDoorLatency -benchtime 1x
func BenchmarkHealthDoorLatency(b *testing.B) {
	bins := binaries(b)
	dir := b.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(healthDoorPolicy), 0o600); err != nil {
		b.Fatal(err)
	}
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
	db := pgtest.NewDatabase(b)
	hubArgs := []string{"--policy-file", policy, "--log-level", "warn"}
	if *flagPolicyInterval > 0 {
		hubArgs = append(hubArgs, "--policy-interval", flagPolicyInterval.String())
	}
	if *flagPolicyPollOnly {
		hubArgs = append(hubArgs, "--policy-poll-only")
	}
	hub := harness.StartHub(b, bins, db, "bench", hubArgs...)
	sock := filepath.Join(dir, "health.sock")
	harness.Start(b, "satellite", bins.Satellite(), "--site", "hd", "--hub", hub.Addr, "--clouds-yaml", clouds, "--cloud", "sim",
		"--no-auth", "--hub-plaintext", "--poll-interval", "1s", "--state-file", filepath.Join(dir, "state.json"),
		"--health-socket", sock, "--log-level", "warn")
	fc := harness.Fleet(b, hub.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	nodes := sim.Nodes()
	waitListed(b, fc, "hd", len(nodes))
	door, err := healthsim.Dial(sock)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = door.Close() }()
	xid79, err := healthsim.Lookup("xid79")
	if err != nil {
		b.Fatal(err)
	}
	var ready []openstacksim.Node
	for _, n := range nodes {
		if tr, _, ok := sim.ProviderTraits(n.UUID); ok && slices.Contains(tr, openstacksim.ReadyTrait) && !n.Maintenance {
			ready = append(ready, n)
		}
	}
	if len(ready) < 2 {
		b.Fatalf("%d devices offered to customers", len(ready))
	}
	b.ResetTimer()

	// report → FAULTED, on a device that is not offered (no quarantine)
	target := nodes[slices.IndexFunc(nodes, func(n openstacksim.Node) bool {
		return !slices.ContainsFunc(ready, func(r openstacksim.Node) bool { return r.UUID == n.UUID })
	})]
	var faulted []time.Duration
	for range 200 {
		t0 := time.Now()
		if err := door.Send(ctx, xid79.Event(target.Name, 3, t0, false)); err != nil {
			b.Fatal(err)
		}
		faulted = append(faulted, time.Since(t0))
		d, err := fc.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: target.UUID})
		if err != nil || d.GetDevice().GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED {
			b.Fatalf("%s after the door answered: %v %v, want FAULTED", target.Name, d.GetDevice().GetStatus(), err)
		}
		if err := door.Send(ctx, xid79.Event(target.Name, 3, time.Now(), true)); err != nil {
			b.Fatal(err)
		}
	}

	// report → quarantine applied, one device every 150 ms
	applied := make([]time.Duration, len(ready))
	var wg sync.WaitGroup
	for i, n := range ready {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			if err := door.Send(ctx, xid79.Event(n.Name, 3, t0, false)); err != nil {
				b.Errorf("%s: %v", n.Name, err)
				return
			}
			for ctx.Err() == nil {
				if tr, _, _ := sim.ProviderTraits(n.UUID); !slices.Contains(tr, openstacksim.ReadyTrait) {
					applied[i] = time.Since(t0)
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			b.Errorf("%s: never quarantined", n.Name)
		}()
		time.Sleep(150 * time.Millisecond)
	}
	wg.Wait()
	b.StopTimer()
	if b.Failed() {
		return
	}
	slices.Sort(faulted)
	slices.Sort(applied)
	interval := "1s, the hub's default"
	if *flagPolicyInterval > 0 {
		interval = flagPolicyInterval.String()
	}
	if *flagPolicyPollOnly {
		interval += ", poll only"
	} else {
		interval += ", woken by new faults"
	}
	pct := func(ds []time.Duration, p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(pct(faulted, 0.5)), "faulted-p50-ms")
	b.ReportMetric(ms(pct(faulted, 0.99)), "faulted-p99-ms")
	b.ReportMetric(ms(pct(applied, 0.5)), "quarantined-p50-ms")
	b.ReportMetric(ms(pct(applied, 0.99)), "quarantined-p99-ms")
	stages(b, db)
	fmt.Printf("health door: report→FAULTED n=%d p50=%s p99=%s max=%s; report→quarantine applied n=%d p50=%s p99=%s max=%s (policy interval: %s)\n",
		len(faulted), pct(faulted, 0.5), pct(faulted, 0.99), faulted[len(faulted)-1],
		len(applied), pct(applied, 0.5), pct(applied, 0.99), applied[len(applied)-1], interval)
}

// stages prints where report → quarantine applied went, from the hub's
// database: the FAULTED commit → the policy decision (the evaluator), the
// decision → the command sent to the satellite (the link), and sent → the
// satellite's result (Ironic and Placement at the simulator), p50/p99 of
// the policy's quarantines.
func stages(b *testing.B, db string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	rows, err := conn.Query(ctx, `SELECT extract(epoch FROM pd.decided_at - pd.triggered_at)::float8, extract(epoch FROM c.sent_at - pd.decided_at)::float8,
		extract(epoch FROM c.completed_at - c.sent_at)::float8
		FROM policy_decisions pd JOIN commands c ON c.id = pd.command_id
		WHERE pd.action = 'QUARANTINE' AND c.sent_at IS NOT NULL AND c.completed_at IS NOT NULL`)
	if err != nil {
		b.Fatal(err)
	}
	var decide, send, apply []time.Duration
	for rows.Next() {
		var d, s, a float64
		if err := rows.Scan(&d, &s, &a); err != nil {
			b.Fatal(err)
		}
		sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
		decide, send, apply = append(decide, sec(d)), append(send, sec(s)), append(apply, sec(a))
	}
	if err := rows.Err(); err != nil || len(decide) == 0 {
		b.Fatalf("stages: %d quarantines (%v)", len(decide), err)
	}
	pct := func(ds []time.Duration, p float64) time.Duration {
		slices.Sort(ds)
		return ds[min(len(ds)-1, int(p*float64(len(ds))))]
	}
	fmt.Printf("health door stages (n=%d, p50/p99): FAULTED committed → decision %s/%s; decision → command sent %s/%s; sent → result %s/%s\n",
		len(decide), pct(decide, 0.5), pct(decide, 0.99), pct(send, 0.5), pct(send, 0.99), pct(apply, 0.5), pct(apply, 0.99))
}

// waitListed waits up to 60 s until ListDevices of site lists want
// devices (the satellite's first poll reached the hub).
func waitListed(b *testing.B, fc ironlinkv1.FleetServiceClient, site string, want int) {
	b.Helper()
	harness.Eventually(b, 60*time.Second, func() error {
		r, err := fc.ListDevices(context.Background(), &ironlinkv1.ListDevicesRequest{Site: site, PageSize: 1000})
		if err != nil || len(r.GetDevices()) < want {
			return fmt.Errorf("devices at the hub: %d of %d (%v)", len(r.GetDevices()), want, err)
		}
		return nil
	})
}
