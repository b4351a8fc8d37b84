package app_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/app"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
)

// A satellite started while Keystone refuses its credential asks for a
// token once per --auth-backoff (doubling), not on its own faster connect
// schedule.
func TestRefusedCredentialAtStartIsAskedWithBackoff(t *testing.T) {
	sim, oc := ostest.StartSim(t, openstacksim.Options{})
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceIdentity, Method: http.MethodPost, PathContains: "/auth/tokens",
		Status: http.StatusUnauthorized, Times: -1})
	cfg := app.Options{Site: "refused", HubAddr: "127.0.0.1:1", OpenStack: oc, AuthBackoff: 2 * time.Second,
		Identity: app.Identity{NoAuth: true, Plaintext: true}}
	cfg.Agent.PollInterval = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Second)
	defer cancel()
	if err := app.Run(ctx, validated(t, cfg), ostest.Logger(t)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range sim.Requests() {
		if r.Service == openstacksim.ServiceIdentity && r.Method == http.MethodPost {
			n++
		}
	}
	// Backoff 2 s ±50 %, then ~4 s: at most 3 requests in 7 s (without the
	// guard the connect schedule alone made ~5).
	if n < 1 || n > 3 {
		t.Fatalf("%d token requests in 7 s with --auth-backoff 2s, want 1 to 3", n)
	}
	t.Logf("%d token requests in 7 s", n)
}

// A clouds.yaml that cannot authenticate (a password cloud without a user
// domain) is reported as OpenStackAuthenticated=False/ConfigInvalid, the
// satellite keeps running (no crash loop) and asks Keystone nothing, ever
// (before the fix: Unknown/KeystoneUnreachable and a token request per
// backoff). Seen on /metrics, as an operator would.
func TestIncompleteCloudsYAMLIsConfigInvalidAndNotRetried(t *testing.T) {
	sim, oc := ostest.StartSim(t, openstacksim.Options{})
	doc, err := os.ReadFile(oc.CloudsYAML)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(doc), "auth_url: ")
	authURL, _, _ := strings.Cut(rest, "\n")
	oc.CloudsYAML = filepath.Join(t.TempDir(), "clouds.yaml")
	if err := os.WriteFile(oc.CloudsYAML, []byte("clouds:\n  sim:\n    auth_type: password\n    auth:\n      auth_url: "+authURL+
		"\n      username: ops\n      password: pw\n      project_id: p1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := app.Options{Site: "badcloud", HubAddr: "127.0.0.1:1", OpenStack: oc, AuthBackoff: 200 * time.Millisecond, MetricsAddr: addr,
		Identity: app.Identity{NoAuth: true, Plaintext: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, validated(t, cfg), ostest.Logger(t)) }()
	want := `ironlink_satellite_site_condition{reason="ConfigInvalid",status="False",type="OpenStackAuthenticated"} 1`
	var body string
	for ctx.Err() == nil && !strings.Contains(body, want) {
		time.Sleep(100 * time.Millisecond)
		if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
	}
	if !strings.Contains(body, want) {
		t.Fatalf("/metrics lacks %s:\n%s", want, grepLines(body, "ironlink_satellite_site_condition"))
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned before its context ended: %v", err)
	case <-ctx.Done():
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := len(sim.Requests()); n != 0 {
		t.Fatalf("%d requests reached the cloud in 4 s with --auth-backoff 200ms, want none", n)
	}
}

// grepLines returns the lines of s containing sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// validated returns o validated, failing the test on a problem.
func validated(t *testing.T, o app.Options) app.Config {
	t.Helper()
	cfg, err := o.Validate()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Run takes only a Config that Options.Validate made without an error: a
// zero Config, or the one returned with Validate's error, is refused
// before anything starts.
func TestRunRefusesAConfigNotValidated(t *testing.T) {
	bad, err := app.Options{}.Validate()
	if err == nil {
		t.Fatal("empty Options validated")
	}
	for name, cfg := range map[string]app.Config{"zero": {}, "invalid": bad} {
		if err := app.Run(context.Background(), cfg, ostest.Logger(t)); err == nil || !strings.Contains(err.Error(), "Options.Validate") {
			t.Errorf("%s Config: Run returned %v, want a refusal naming Options.Validate", name, err)
		}
	}
}

// The health door's settings: a spool smaller than one batch and a
// negative wait are refused naming their flags; unset ones get the defaults.
func TestValidateHealthDoor(t *testing.T) {
	base := app.Options{Site: "s", HubAddr: "h:1", Identity: app.Identity{NoAuth: true, Plaintext: true}}
	cfg := validated(t, base)
	if cfg.Health.SpoolEvents != 4096 || cfg.Health.Wait != 30*time.Second {
		t.Errorf("defaults: %+v, want 4096 events and 30s", cfg.Health)
	}
	bad := base
	bad.Health = app.HealthDoor{SpoolEvents: 10, Wait: -time.Second}
	_, err := bad.Validate()
	for _, want := range []string{"--health-spool-events 10", "--health-wait -1s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want it to name %s", err, want)
		}
	}
}
