package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/healthsim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// healthLatencyPolicy quarantines a device a fatal GPU event makes
// FAULTED at once (no hold-down), under a guard that never holds back: its
// window (1 s) holds one sample's quarantine at most, since every sample
// quarantines the same device again and a site's guard counts at most
// 100 % of its devices.
const healthLatencyPolicy = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 100000, maxPercent: 100, window: 1s}
    rules:
      - name: gpu-fatal
        to: [FAULTED]
        health: {componentClasses: [GPU]}
        holdDown: 0s
`

// TestHealthQuarantineLatencySimulator runs the measurement below on the
// simulator, 3 samples (IRONLINK_E2E_HEALTH_SAMPLES sets another count,
// for figures to compare with the real cloud's): it proves the path works
// on every run.
func TestHealthQuarantineLatencySimulator(t *testing.T) {
	runHealthLatency(t, simCloud(t), healthSamples(t, 3))
}

// TestHealthQuarantineLatencyRealCloud measures report → quarantine
// applied on the real test bed (under its lock; fails without a cloud when
// IRONLINK_E2E_REQUIRE_REAL=1): IRONLINK_E2E_HEALTH_SAMPLES samples
// (default 40) of one fatal XID 79 event through the satellite's local
// door until Placement shows CUSTOM_CUSTOMER_READY gone from the node's
// resource provider; p50/p99 and the stages are logged (run with -v).
func TestHealthQuarantineLatencyRealCloud(t *testing.T) {
	c := realCloud(t)
	runHealthLatency(t, c, healthSamples(t, 40))
}

// healthSamples is IRONLINK_E2E_HEALTH_SAMPLES, else def.
func healthSamples(t *testing.T, def int) int {
	s := os.Getenv("IRONLINK_E2E_HEALTH_SAMPLES")
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		t.Fatalf("IRONLINK_E2E_HEALTH_SAMPLES=%q: want a positive count", s)
	}
	return v
}

// runHealthLatency starts a hub with healthLatencyPolicy and a satellite
// serving its health door over c, picks a device the hub shows AVAILABLE,
// and n times: sends a fatal XID 79 event for it through the door (by its
// Ironic node name, as NVSentinel would) and polls Placement every 10 ms
// until the ready trait is gone from its resource provider (report →
// quarantine applied), then sends the healthy event, releases the device
// through the API and waits until the trait is back and the hub shows it
// AVAILABLE before the next sample. Each sample must be quarantined by
// a command of the policy.
func runHealthLatency(t *testing.T, c *cloud, n int) {
	const site = "healthlat"
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n)*40*time.Second+2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte(healthLatencyPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{site}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	hubAddr, _ := startHub(t, db, id, "--policy-file", pol)
	sock := filepath.Join(dir, "health.sock")
	harness.Start(t, "ironlink-satellite", bins.Satellite(), append([]string{"--site", site, "--hub", hubAddr, "--clouds-yaml", c.cloudsYAML,
		"--cloud", c.name, "--poll-interval", "3s", "--max-backoff", "2s", "--auth-backoff", "1s", "--health-socket", sock,
		"--state-file", filepath.Join(dir, "state.json"), "--log-level", "info"}, id.satelliteArgs(site)...)...)
	fc := ironlinkv1.NewFleetServiceClient(id.dialAs(t, hubAddr, "ops-admin"))
	target := availableDevice(t, c, fc, site)
	door, err := healthsim.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = door.Close() }()
	xid79, err := healthsim.Lookup("xid79")
	if err != nil {
		t.Fatal(err)
	}
	load0 := loadAvg()
	var applied []time.Duration
	for i := range n {
		t0 := time.Now()
		if err := door.Send(ctx, xid79.Event(target.GetName(), 3, t0, false)); err != nil {
			t.Fatalf("sample %d: door: %v", i, err)
		}
		for slices.Contains(c.rpTraits(t, target.GetDeviceId()), readyTrait) {
			if ctx.Err() != nil || time.Since(t0) > 30*time.Second {
				t.Fatalf("sample %d: %s still has %s in Placement %s after the report (%v)", i, target.GetName(), readyTrait, time.Since(t0), ctx.Err())
			}
			time.Sleep(10 * time.Millisecond)
		}
		applied = append(applied, time.Since(t0))
		if err := door.Send(ctx, xid79.Event(target.GetName(), 3, time.Now(), true)); err != nil {
			t.Fatalf("sample %d: healthy event: %v", i, err)
		}
		releaseAndWait(ctx, t, c, fc, target.GetDeviceId(), i)
	}
	load1 := loadAvg()
	// Each sample's trait went by the policy's command (its result may
	// reach the hub after the release superseded it).
	if got := pgtest.Count(t, db, `SELECT count(*) FROM commands c JOIN policy_decisions pd ON pd.command_id = c.id
		WHERE pd.action = 'QUARANTINE' AND c.device_id = $1`, target.GetDeviceId()); got != n {
		t.Errorf("%d policy quarantine commands, want %d (one a sample)", got, n)
	}
	sorted := slices.Clone(applied)
	slices.Sort(sorted)
	pct := func(p float64) time.Duration { return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))] }
	t.Logf("report → quarantine applied (cloud %s, node %s, trait gone from its Placement provider): n=%d p50=%s p99=%s max=%s min=%s; load average %s → %s",
		c.name, target.GetName(), n, pct(0.5), pct(0.99), sorted[len(sorted)-1], sorted[0], load0, load1)
	t.Logf("%s", quarantineStages(t, db))
}

// availableDevice waits until the hub shows a named device of site
// AVAILABLE whose provider has the ready trait, and returns it.
func availableDevice(t *testing.T, c *cloud, fc ironlinkv1.FleetServiceClient, site string) *ironlinkv1.Device {
	t.Helper()
	var found *ironlinkv1.Device
	harness.Eventually(t, 90*time.Second, func() error {
		r, err := fc.ListDevices(context.Background(), &ironlinkv1.ListDevicesRequest{Site: site, PageSize: 1000,
			Statuses: []ironlinkv1.OperationalStatus{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE}})
		if err != nil {
			return err
		}
		for _, d := range r.GetDevices() {
			if d.GetName() != "" && slices.Contains(c.rpTraits(t, d.GetDeviceId()), readyTrait) {
				found = d
				return nil
			}
		}
		return fmt.Errorf("no named AVAILABLE device with %s at the hub among %d", readyTrait, len(r.GetDevices()))
	})
	return found
}

// releaseAndWait releases device id (its policy quarantine) through the
// API and waits until Placement has the ready trait again and the hub
// shows it AVAILABLE with no health fault.
func releaseAndWait(ctx context.Context, t *testing.T, c *cloud, fc ironlinkv1.FleetServiceClient, id string, sample int) {
	t.Helper()
	harness.Eventually(t, 60*time.Second, func() error {
		d, err := fc.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id})
		if err != nil {
			return err
		}
		if s := d.GetDevice().GetStatus(); s != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_QUARANTINED {
			return fmt.Errorf("sample %d: device %v (%s), want QUARANTINED with the fault cleared before the release", sample, s, d.GetDevice().GetStatusReason())
		}
		return nil
	})
	r, err := fc.ReleaseDevice(ctx, &ironlinkv1.ReleaseDeviceRequest{DeviceId: id, Reason: "e2e: GPU reseated", AllHolds: true})
	if err != nil {
		t.Fatalf("sample %d: release: %v", sample, err)
	}
	waitCommand(t, fc, r.GetCommand().GetCommandId(), ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED)
	harness.Eventually(t, 60*time.Second, func() error {
		if !slices.Contains(c.rpTraits(t, id), readyTrait) {
			return fmt.Errorf("sample %d: provider lacks %s after the release", sample, readyTrait)
		}
		if s := getDevice(t, fc, id).GetDevice().GetStatus(); s != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE {
			return fmt.Errorf("sample %d: device %v after the release, want AVAILABLE", sample, s)
		}
		return nil
	})
}

// quarantineStages says where the policy's quarantines spent their time,
// from the hub's database (p50/p99): FAULTED committed → the policy's
// decision, decision → command sent to the satellite, sent → the
// satellite's result (Ironic and Placement written).
func quarantineStages(t *testing.T, db string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var decide, send, apply []float64
	rows, err := conn.Query(ctx, `SELECT extract(epoch FROM pd.decided_at - pd.triggered_at)::float8, extract(epoch FROM c.sent_at - pd.decided_at)::float8,
		extract(epoch FROM c.completed_at - c.sent_at)::float8
		FROM policy_decisions pd JOIN commands c ON c.id = pd.command_id
		WHERE pd.action = 'QUARANTINE' AND c.sent_at IS NOT NULL AND c.completed_at IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var d, s, a float64
		if err := rows.Scan(&d, &s, &a); err != nil {
			t.Fatal(err)
		}
		decide, send, apply = append(decide, d), append(send, s), append(apply, a)
	}
	if err := rows.Err(); err != nil || len(decide) == 0 {
		t.Fatalf("stages: %d quarantines (%v)", len(decide), err)
	}
	q := func(xs []float64) string {
		slices.Sort(xs)
		p := func(f float64) time.Duration {
			return time.Duration(xs[min(len(xs)-1, int(f*float64(len(xs))))] * float64(time.Second)).Round(time.Millisecond)
		}
		return p(0.5).String() + "/" + p(0.99).String()
	}
	return fmt.Sprintf("stages (n=%d, p50/p99): FAULTED committed → decision %s; decision → command sent %s; sent → result %s",
		len(decide), q(decide), q(send), q(apply))
}

// loadAvg is the machine's 1-, 5- and 15-minute load average.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
