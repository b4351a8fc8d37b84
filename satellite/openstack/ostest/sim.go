package ostest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/openstack"
)

// SimCloud is the cloud name written into the simulator's clouds.yaml.
const SimCloud = "sim"

// StartSim starts an openstacksim Cloud on 127.0.0.1 (closed when t ends)
// and writes its clouds.yaml into t.TempDir(); it returns the Cloud and the
// Config that connects to it.
func StartSim(t testing.TB, opts openstacksim.Options) (*openstacksim.Cloud, openstack.Config) {
	t.Helper()
	sim := openstacksim.New(opts)
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatalf("start simulator: %v", err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := sim.WriteCloudsYAML(path, SimCloud); err != nil {
		t.Fatalf("write clouds.yaml: %v", err)
	}
	return sim, openstack.Config{CloudsYAML: path, Cloud: SimCloud, Placement: openstack.PlacementAuto}
}

// ConnectSim starts a simulator (StartSim) and connects to it.
func ConnectSim(t testing.TB, opts openstacksim.Options) (*openstacksim.Cloud, *openstack.Clients) {
	t.Helper()
	sim, cfg := StartSim(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := openstack.Connect(ctx, cfg, Logger(t))
	if err != nil {
		t.Fatalf("connect to simulator: %v", err)
	}
	return sim, c
}

// FastRetry is a retry policy for tests: the same shape as the default
// (attempt bound and budget) with millisecond waits.
func FastRetry(attempts int) openstack.RetryPolicy {
	return openstack.RetryPolicy{
		InitialInterval: time.Millisecond,
		MaxInterval:     5 * time.Millisecond,
		MaxAttempts:     attempts,
		Budget:          10 * time.Second,
		AttemptTimeout:  5 * time.Second,
	}
}
