package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/promtest"
	"github.com/ironlink/ironlink/test/harness"
)

// get fetches url and returns its status code and body.
func get(url string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func wantStatus(url string, code int, body string) func() error {
	return func() error {
		got, b, err := get(url)
		if err != nil {
			return err
		}
		if got != code || !strings.Contains(b, body) {
			return fmt.Errorf("%s: %d %q, want %d with %q", url, got, b, code, body)
		}
		return nil
	}
}

// The real binaries answer their probes truthfully: a satellite whose
// Keystone refuses it is not ready (and says why) while the hub is; once
// OpenStack answers both are ready and their metrics show the link; a
// satellite whose hub went away is still ready while it retries.
func TestProbesAndMetricsOfRealProcesses(t *testing.T) {
	sim := openstacksim.New(openstacksim.Options{})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	for i := range 3 {
		sim.AddNode(openstacksim.Node{Name: fmt.Sprintf("ops-%d", i), ProvisionState: "available", PowerState: "power off", ResourceClass: "gpu"})
	}
	path := t.TempDir() + "/clouds.yaml"
	if err := sim.WriteCloudsYAML(path, "ops"); err != nil {
		t.Fatal(err)
	}
	hub := harness.StartHub(t, bins, pgtest.NewDatabase(t), "r1")
	hubAdmin := "http://" + hub.AdminAddr
	satAdmin := "http://" + harness.FreeAddr(t)

	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceIdentity, Method: "POST", PathContains: "/auth/tokens", Status: 401, Times: -1})
	harness.Start(t, "ironlink-satellite", bins.Satellite(), "--site", "ops", "--hub", hub.Addr, "--hub-plaintext", "--no-auth",
		"--clouds-yaml", path, "--cloud", "ops", "--poll-interval", "1s", "--max-backoff", "1s", "--auth-backoff", "1s",
		"--metrics-addr", strings.TrimPrefix(satAdmin, "http://"))
	harness.Eventually(t, 30*time.Second, wantStatus(hubAdmin+"/readyz", http.StatusOK, "ready"))
	harness.Eventually(t, 30*time.Second, wantStatus(satAdmin+"/readyz", http.StatusServiceUnavailable, "no recent poll"))
	if code, _, err := get(satAdmin + "/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("satellite /healthz %d %v while Keystone refuses, want 200", code, err)
	}

	sim.ClearFaults()
	harness.Eventually(t, 60*time.Second, wantStatus(satAdmin+"/readyz", http.StatusOK, "ready"))
	harness.Eventually(t, 30*time.Second, func() error {
		h, err := promtest.TryScrape(hubAdmin + "/metrics")
		if err != nil {
			return err
		}
		s, err := promtest.TryScrape(satAdmin + "/metrics")
		if err != nil {
			return err
		}
		linked, _ := h.Value("ironlink_hub_site_linked", "site", "ops", "link_replica", "r1")
		updates, _ := h.Value("ironlink_hub_device_updates_committed_total")
		up, _ := s.Value("ironlink_satellite_link_up")
		polls, _ := s.Value("ironlink_satellite_poll_duration_seconds")
		if linked != 1 || updates < 3 || up != 1 || polls < 1 {
			return fmt.Errorf("hub site_linked %v, device updates %v; satellite link_up %v, polls timed %v; want 1, >= 3, 1, >= 1", linked, updates, up, polls)
		}
		return nil
	})

	hub.Kill()
	harness.Eventually(t, 30*time.Second, func() error {
		s, err := promtest.TryScrape(satAdmin + "/metrics")
		if err != nil {
			return err
		}
		if up, _ := s.Value("ironlink_satellite_link_up"); up != 0 {
			return fmt.Errorf("link_up %v after the hub died, want 0", up)
		}
		return nil
	})
	if err := wantStatus(satAdmin+"/readyz", http.StatusOK, "ready")(); err != nil {
		t.Errorf("satellite retrying its link within bounds: %v", err)
	}
}
