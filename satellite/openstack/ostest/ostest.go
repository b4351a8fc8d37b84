// Package ostest holds test helpers for the satellite's OpenStack packages:
// connecting to a real cloud named by environment variables, for tests that
// are skipped when those are unset.
package ostest

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/ironlink/ironlink/satellite/openstack"
)

// Environment variables naming the real cloud for gated tests: the same
// ones the end-to-end suite reads (docs/howto/test-against-openstack.md).
const (
	// EnvCloudsYAML is the path of a clouds.yaml (e.g. the test bed's).
	EnvCloudsYAML = "IRONLINK_E2E_CLOUDS_YAML"
	// EnvCloud is the cloud entry in it (e.g. "testbed").
	EnvCloud = "IRONLINK_E2E_CLOUD"
	// EnvRequireReal set to "1" turns a missing cloud into a failure (CI).
	EnvRequireReal = "IRONLINK_E2E_REQUIRE_REAL"
)

// RealCloudConfig returns the Config named by EnvCloudsYAML and EnvCloud.
// When either is unset it skips t with a clear message, or fails t when
// EnvRequireReal is "1".
func RealCloudConfig(t testing.TB) openstack.Config {
	t.Helper()
	path, cloud := os.Getenv(EnvCloudsYAML), os.Getenv(EnvCloud)
	if path == "" || cloud == "" {
		if os.Getenv(EnvRequireReal) == "1" {
			t.Fatalf("%s=1 but %s / %s are not set: no real cloud to test against", EnvRequireReal, EnvCloudsYAML, EnvCloud)
		}
		t.Skipf("real-cloud test skipped: set %s (clouds.yaml path) and %s (cloud name) to run it against a cloud", EnvCloudsYAML, EnvCloud)
	}
	return openstack.Config{CloudsYAML: path, Cloud: cloud, Placement: openstack.PlacementAuto}
}

// RealCloud connects to the cloud named by the environment (see
// RealCloudConfig) or skips t; a connection failure fails t.
func RealCloud(t testing.TB) *openstack.Clients {
	t.Helper()
	cfg := RealCloudConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := openstack.Connect(ctx, cfg, Logger(t))
	if err != nil {
		t.Fatalf("connect to %s in %s: %v", cfg.Cloud, cfg.CloudsYAML, err)
	}
	return c
}

// Logger returns a slog.Logger writing to t.Log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	s := string(p)
	if n := len(s); n > 0 && s[n-1] == '\n' {
		s = s[:n-1]
	}
	w.t.Log(s)
	return len(p), nil
}

// ServiceRequired reports whether a real-cloud test must fail, not skip,
// when the cloud lacks service ("Placement" or "Nova"): under
// EnvRequireReal=1 (CI, whose test bed runs both) it must, except Nova when
// EnvNovaIronic=0 says explicitly that the cloud runs no Nova Ironic driver.
func ServiceRequired(service string) bool {
	if os.Getenv(EnvRequireReal) != "1" {
		return false
	}
	return service != "Nova" || os.Getenv(EnvNovaIronic) != "0"
}

// MissingService skips t because the real cloud has no service, or fails
// it when the service is required (ServiceRequired); why says what the test
// needed it for.
func MissingService(t testing.TB, service, why string) {
	t.Helper()
	if ServiceRequired(service) {
		t.Fatalf("the cloud has no %s (%s), and %s=1 makes that a failure (%s=0 would say Nova's Ironic driver is absent)", service, why, EnvRequireReal, EnvNovaIronic)
	}
	t.Skipf("the cloud has no %s: %s", service, why)
}
