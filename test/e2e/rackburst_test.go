package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/healthsim"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/promtest"
	"github.com/ironlink/ironlink/internal/tlsutil"
	"github.com/ironlink/ironlink/test/harness"
)

// rackBurstPolicy quarantines a device a fatal GPU event makes FAULTED,
// at most 2 per rack (the site's own limits far away).
const rackBurstPolicy = `
policy:
  default:
    enabled: true
    guard:
      maxDevices: 100
      maxPercent: 100
      window: 1h
      perLabel: [{label: rack, maxDevices: 2}]
    rules:
      - name: gpu-fatal
        to: [FAULTED]
        health: {componentClasses: [GPU]}
        holdDown: 0s
`

// TestHealthRackBurstRealProcesses is the burst on real
// processes: a hub (policy file with a per-rack guard of 2, labels file
// giving rack r12's nodes switch s3, fleet view) and a satellite over the
// simulator mapping Ironic's extra.rack to the label rack; 40 devices
// offered to customers, 32 in rack r12. Thirty XID 79 events for rack
// r12's nodes arrive through the satellite's local door in one batch:
// every device turns FAULTED, the policy quarantines exactly 2 (the ready
// trait gone from their resource providers at the simulator), holds the
// other 28 for an operator (HeldByGuard), and names what the faults have
// in common — "30 of 30 new faults are in rack r12, switch s3" — in the
// API, the CLI (ironlink policy guard), the web policy page and the hub's
// metrics. A fault in rack r7 afterwards is quarantined.
func TestHealthRackBurstRealProcesses(t *testing.T) {
	const site = "burst"
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	sim := openstacksim.New(openstacksim.Options{})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	sim.DefineTrait(openstacksim.ReadyTrait)
	var r12, r7 []openstacksim.Node
	for i := range 40 {
		rack := "r12"
		if i >= 32 {
			rack = "r7"
		}
		n := sim.AddNode(openstacksim.Node{Name: fmt.Sprintf("gpu-%s-%02d", rack, i), ProvisionState: "available", PowerState: "power off",
			ResourceClass: "gpu-h100", Traits: []string{readyTrait}, Extra: map[string]any{"rack": rack}})
		sim.AddProvider(n.UUID, n.UUID, []string{openstacksim.ReadyTrait})
		if rack == "r12" {
			r12 = append(r12, n)
		} else {
			r7 = append(r7, n)
		}
	}
	clouds, pol, labels := filepath.Join(dir, "clouds.yaml"), filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "labels.yaml")
	if err := sim.WriteCloudsYAML(clouds, "sim"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pol, []byte(rackBurstPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(labels, []byte("labels:\n  - {site: burst, name: 'gpu-r12-*', labels: {switch: s3}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{site}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	admin, web := harness.FreeAddr(t), harness.FreeAddr(t)
	hubAddr, _ := startHub(t, db, id, "--policy-file", pol, "--labels-file", labels, "--admin-addr", admin,
		"--web-addr", web, "--web-auth", "proxy", "--web-trusted-proxies", "127.0.0.1")
	sock := filepath.Join(dir, "health.sock")
	harness.Start(t, "ironlink-satellite", bins.Satellite(), append([]string{"--site", site, "--hub", hubAddr, "--clouds-yaml", clouds,
		"--cloud", "sim", "--poll-interval", "1s", "--max-backoff", "1s", "--auth-backoff", "1s", "--health-socket", sock,
		"--label-map", "rack=extra.rack", "--state-file", filepath.Join(dir, "state.json")}, id.satelliteArgs(site)...)...)
	cc := id.dialAs(t, hubAddr, "ops-admin")
	fc, pc := ironlinkv1.NewFleetServiceClient(cc), ironlinkv1.NewPolicyServiceClient(cc)
	harness.Eventually(t, 60*time.Second, func() error {
		r, err := fc.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: site, PageSize: 100, Labels: map[string]string{"rack": "r12", "switch": "s3"},
			Statuses: []ironlinkv1.OperationalStatus{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_AVAILABLE}})
		if err != nil || len(r.GetDevices()) != len(r12) {
			return fmt.Errorf("AVAILABLE devices with rack=r12,switch=s3: %d of %d (%v)", len(r.GetDevices()), len(r12), err)
		}
		return nil
	})

	door, err := healthsim.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = door.Close() }()
	xid79, err := healthsim.Lookup("xid79")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var burst []string
	for _, n := range r12[:30] {
		burst = append(burst, n.UUID)
		if err := door.Send(ctx, xid79.Event(n.Name, 0, now, false)); err != nil {
			t.Fatalf("door: %v", err)
		}
	}
	harness.Eventually(t, 60*time.Second, func() error {
		if n := pgtest.Count(t, db, `SELECT count(*) FROM policy_decisions WHERE device_id = ANY($1)`, burst); n != 30 {
			return fmt.Errorf("%d decisions on the burst, want 30", n)
		}
		return nil
	})
	harness.Eventually(t, 30*time.Second, func() error {
		var gone []string
		for _, n := range sim.Nodes() {
			if tr, _, _ := sim.ProviderTraits(n.UUID); !slices.Contains(tr, openstacksim.ReadyTrait) {
				gone = append(gone, n.Name)
			}
		}
		if len(gone) != 2 || !strings.HasPrefix(gone[0], "gpu-r12-") || !strings.HasPrefix(gone[1], "gpu-r12-") {
			return fmt.Errorf("providers without the ready trait: %v, want 2 of rack r12", gone)
		}
		return nil
	})
	pend, err := pc.ListPendingActions(ctx, &ironlinkv1.ListPendingActionsRequest{Site: site, PageSize: 100})
	if err != nil || len(pend.GetActions()) != 28 {
		t.Fatalf("pending actions: %d (%v), want 28", len(pend.GetActions()), err)
	}
	for _, p := range pend.GetActions() {
		if p.GetReason() != "HeldByGuard" {
			t.Fatalf("pending action %v, want HeldByGuard", p)
		}
	}
	const cause = "30 of 30 new faults are in rack r12, switch s3"
	states, err := pc.ListSitePolicyStates(ctx, &ironlinkv1.ListSitePolicyStatesRequest{Site: site})
	if err != nil || len(states.GetStates()) != 1 {
		t.Fatalf("policy states: %v %v", states, err)
	}
	st := states.GetStates()[0]
	if doms := st.GetTrippedDomains(); st.GetGuardTripped() || len(doms) != 1 || doms[0].GetLabel() != "rack" || doms[0].GetValue() != "r12" ||
		doms[0].GetPendingHeldCount() != 28 || st.GetCommonCause().GetSummary() != cause {
		t.Fatalf("guard: site tripped %v, domains %v, cause %q; want the site armed, rack=r12 tripped holding 28, %q",
			st.GetGuardTripped(), doms, st.GetCommonCause().GetSummary(), cause)
	}
	page := promtest.Scrape(t, "http://"+admin+"/metrics")
	if v, _ := page.Value("ironlink_policy_label_guard_tripped", "site", site, "label", "rack", "value", "r12"); v != 1 {
		t.Errorf("ironlink_policy_label_guard_tripped{rack=r12} = %v, want 1", v)
	}
	if v, _ := page.Value("ironlink_policy_guard_common_cause", "site", site, "label", "rack", "value", "r12"); v != 30 {
		t.Errorf("ironlink_policy_guard_common_cause{rack=r12} = %v, want 30", v)
	}

	// The CLI and the web policy page name the cause.
	cfg := filepath.Join(dir, "ironlink.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "current-context: admin\ncontexts:\n  - name: admin\n    hub: %s\n    ca: %s\n    client-id: ops-admin\n    key: %s\n",
		hubAddr, id.ca, id.keyFiles["ops-admin"]), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bins.Dir, "ironlink"), "policy", "guard", site)
	cmd.Env = append(os.Environ(), "IRONLINK_CONFIG="+cfg, "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "TRIPPED rack=r12") || !strings.Contains(string(out), cause) {
		t.Errorf("ironlink policy guard %s: %v, want TRIPPED rack=r12 and %q:\n%s", site, err, cause, out)
	}
	tc, err := tlsutil.ClientConfig(id.ca, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if body := webPage(ctx, t, tc, "https://"+web+"/policy"); !strings.Contains(body, "common cause: "+cause) || !strings.Contains(body, "tripped for rack=r12 only") {
		t.Errorf("the web policy page lacks the tripped rack and %q:\n%.3000s", cause, body)
	}

	// Rack r7 is not held: its fault is quarantined.
	if err := door.Send(ctx, xid79.Event(r7[0].Name, 0, time.Now(), false)); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, func() error {
		if tr, _, _ := sim.ProviderTraits(r7[0].UUID); slices.Contains(tr, openstacksim.ReadyTrait) {
			return fmt.Errorf("%s (rack r7) still offered", r7[0].Name)
		}
		return nil
	})
}

// webPage GETs url from the fleet view as ops-admin (proxy mode) and
// returns its body; anything but 200 fails the test.
func webPage(ctx context.Context, t *testing.T, tc *tls.Config, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-User", "ops-admin")
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: tc}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", url, resp.StatusCode, b)
	}
	return string(b)
}
