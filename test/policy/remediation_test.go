package policy_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/app"
	"github.com/ironlink/ironlink/hub/ctl"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/policyrun"
	"github.com/ironlink/ironlink/hub/remediation"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

const ladderDoc = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 50, maxPercent: 100, window: 1h}
    remediation: {maxInFlight: 2}
    rules:
      - name: faulted
        to: [FAULTED]
        remediation:
          steps:
            - {action: REBOOT, timeout: 3s}
            - {action: REPROVISION, timeout: 1m}
          settle: 2s
          budget: {ladders: 1, window: 1h}
`

// webhookReceiver verifies each POST's signature; it answers 500 to the
// first and 204 after.
type webhookReceiver struct {
	mu       sync.Mutex
	secret   []byte
	n        int
	verified int
}

func (rc *webhookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.n++
	if remediation.Verify(rc.secret, body, r.Header.Get(remediation.SignatureHeader)) {
		rc.verified++
	}
	if rc.n == 1 {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (rc *webhookReceiver) counts() (int, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.n, rc.verified
}

// startLadderHub runs the evaluator with the ladder engine on its lock,
// the handoff webhook sender, and FleetService and RemediationService
// over TCP; it returns the store's URL and the gRPC address.
func startLadderHub(t *testing.T, rc *webhookReceiver) (*storetest.Site, string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := testlog.New(t)
	st, url := storetest.New(t, log)
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(ladderDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := policy.NewWatcher(path, 0, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := remediation.New(st, remediation.Config{Webhook: true}, log)
	ev := policyrun.New(st, policyrun.Config{Replica: "r1", Policy: w.Policy, Interval: 200 * time.Millisecond,
		Remediate: func(ctx context.Context, f *policy.File) error { _, err := eng.Tick(ctx, f); return err }}, log)
	srvHook := httptest.NewServer(rc)
	t.Cleanup(srvHook.Close)
	sender := remediation.NewWebhookSender(st, remediation.WebhookConfig{URL: srvHook.URL, Secret: rc.secret,
		Interval: 50 * time.Millisecond, InitialInterval: 50 * time.Millisecond, MaxInterval: 200 * time.Millisecond}, log)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = ev.Run(ctx) }()
	go func() { defer wg.Done(); sender.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	cfg, err := app.Options{DatabaseURL: "postgres://unused/", NoAuth: true, Plaintext: true}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	srv := app.NewGRPCServer(cfg, log, grpc.ChainUnaryInterceptor())
	ironlinkv1.RegisterFleetServiceServer(srv, app.NewFleetServer(st, log))
	ironlinkv1.RegisterRemediationServiceServer(srv, remediation.NewAPI(st, w.Policy, func(context.Context) string { return "alice" }, log))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return storetest.NewSite(t, st, "site-a", 10, nil), url, lis.Addr().String()
}

// The ladder end to end at the evaluator's own pace, over gRPC and the
// CLI: fault → quarantine → reboot (the fault persists) → reprovision →
// healthy → released after the settle time, `ironlink explain` saying step
// 2 fixed it; a second fault with the budget spent → handed off, the
// webhook verified and its 500 retried; `ironlink handoffs close` releases
// the device to validation; `ironlink events --kind remediation` shows
// every step.
func TestLadderEndToEnd(t *testing.T) {
	rc := &webhookReceiver{secret: []byte("0123456789abcdef")}
	site, url, addr := startLadderHub(t, rc)
	run := func(args ...string) (string, int) {
		var out, errb strings.Builder
		code := ctl.Execute(context.Background(), ctl.Options{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }},
			append([]string{"--hub", addr, "--plaintext", "--no-auth"}, args...))
		return out.String() + errb.String(), code
	}
	count := func(sql string, args ...any) int { return pgtest.Count(t, url, sql, args...) }
	// finish ends dev's active operation of kind in state once it exists
	// (the satellite's part, at the store's level).
	finish := func(dev, kind, state string) {
		t.Helper()
		waitFor(t, "a "+kind+" operation", func() bool {
			return count(`SELECT count(*) FROM operations WHERE device_id = $1 AND kind = $2 AND state = 'PENDING'`, dev, kind) == 1
		})
		if n := count(`WITH u AS (UPDATE operations SET state = $3, ended_at = now() WHERE device_id = $1 AND kind = $2
			AND state = 'PENDING' RETURNING 1) SELECT count(*) FROM u`, dev, kind, state); n != 1 {
			t.Fatalf("finished %d %s operations", n, kind)
		}
	}
	dev := site.IDs[0]
	site.Fault([]string{dev}, "DeployFailed", time.Now())
	finish(dev, "REBOOT", "SUCCEEDED") // the fault persists
	if out, code := run("explain", dev); code != 0 || !strings.Contains(out, "1. REBOOT (timeout 3s), 2. REPROVISION (timeout 1m0s)") ||
		!strings.Contains(out, "1 used, 0 left in 1h0m0s") {
		t.Fatalf("explain during step 1: %d\n%s", code, out)
	}
	finish(dev, "REPROVISION", "SUCCEEDED")
	site.Heal(dev)
	waitFor(t, "the release after the settle time", func() bool {
		return count(`SELECT count(*) FROM quarantine_holds WHERE device_id = $1`, dev) == 0
	})
	if out, code := run("explain", dev); code != 0 || !strings.Contains(out, "SUCCEEDED") || !strings.Contains(out, "fixed by step 2 (REPROVISION)") {
		t.Fatalf("explain after the fix: %d\n%s", code, out)
	}
	if n := count(`SELECT count(*) FROM operations WHERE device_id = $1`, dev); n != 2 {
		t.Fatalf("%d operations, want 2 (no step repeated)", n)
	}

	// Fault again: one ladder per hour is spent, so the device is handed off.
	site.Heal(dev)
	site.Fault([]string{dev}, "DeployFailed", time.Now())
	waitFor(t, "the webhook delivered", func() bool {
		return count(`SELECT count(*) FROM remediation_handoffs WHERE device_id = $1 AND reason = 'BudgetSpent' AND webhook_state = 'DELIVERED'`, dev) == 1
	})
	if n, ok := rc.counts(); n != 2 || ok != 2 {
		t.Fatalf("webhook: %d requests, %d verified; want 2 (a 500 retried)", n, ok)
	}
	out, code := run("handoffs", "--open")
	if code != 0 || !strings.Contains(out, "BudgetSpent") || !strings.Contains(out, "DELIVERED") || !strings.Contains(out, "LAST ATTEMPT") ||
		!strings.Contains(out, "2: 204 in ") {
		t.Fatalf("handoffs: %d\n%s", code, out)
	}
	// explain names the device and shows every webhook attempt: the 500,
	// then the 204.
	if out, code := run("explain", dev); code != 0 || !strings.Contains(out, "site-a/site-a-000 ("+dev+")") ||
		!regexp.MustCompile(`Attempt 1:\s+500 Internal Server Error in [0-9.]+[µm]?s, `).MatchString(out) ||
		!regexp.MustCompile(`Attempt 2:\s+204 in [0-9.]+[µm]?s, `).MatchString(out) {
		t.Fatalf("explain after the handoff: %d\n%s", code, out)
	}
	id := strings.Fields(strings.Split(out, "\n")[1])[0]
	if out, code := run("handoffs", "close", id); code != 2 {
		t.Fatalf("close without a note: %d %s", code, out)
	}
	if out, code := run("handoffs", "close", id, "--note", "replaced the DIMM"); code != 0 || !strings.Contains(out, "released to validation") {
		t.Fatalf("close: %d %s", code, out)
	}
	if out, code := run("handoffs", "close", id, "--note", "again"); code != 8 {
		t.Fatalf("second close: %d %s", code, out)
	}
	if n := count(`SELECT count(*) FROM devices WHERE id = $1 AND desired_impairment = 'RELEASED_UNOFFERED'`, dev); n != 1 {
		t.Fatal("the closed handoff did not release the device to validation")
	}
	out, code = run("events", "--kind", "remediation", "--since", "10m")
	for _, want := range []string{"LADDER_STARTED", "STEP_STARTED step 1 REBOOT", "STEP_FAILED step 1 REBOOT", "STEP_STARTED step 2 REPROVISION",
		"FIXED step 2 REPROVISION", "RELEASED", "HANDED_OFF", "HANDOFF_CLOSED"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("events lack %q: %d\n%s", want, code, out)
		}
	}
}
