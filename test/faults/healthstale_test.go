package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/test/harness"
)

// TestHealthCheckTurnsStale: a checker that stops reporting. A fatal
// XID 79 through the satellite's door from an agent whose TTL is 3 s
// (--health-agent-ttl, the hub sweeping every 500 ms) makes the device
// FAULTED; with no report after it, the condition turns Unknown with
// reason Stale within the TTL and a sweep, and the device is no longer
// FAULTED (never FAULTED for a silent check). Another agent's warning
// with the default TTL (10 m) on another device stays as it was.
func TestHealthCheckTurnsStale(t *testing.T) {
	hub, _, s, door := healthSite(t, "health-stale", 2, "--health-agent-ttl", "gpu-health-monitor=3s", "--health-sweep-interval", "500ms")
	fc := harness.Fleet(t, hub.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes := s.sim.Nodes()
	fatal := xid(nodes[0].Name, "79", true)
	other := xid(nodes[1].Name, "63", false)
	other.Agent = "syslog-health-monitor"
	if err := report(ctx, door, fatal, other); err != nil {
		t.Fatal(err)
	}
	reported := time.Now()
	if d := device(t, fc, nodes[0].UUID); d.GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED {
		t.Fatalf("after the report: %v, want FAULTED", d.GetStatus())
	}
	cond := func(id string) *ironlinkv1.Condition {
		for _, c := range device(t, fc, id).GetConditions() {
			if c.GetType() == "health.GPU/GpuXidError" {
				return c
			}
		}
		return nil
	}
	harness.Eventually(t, 20*time.Second, func() error {
		c := cond(nodes[0].UUID)
		if c.GetStatus() != ironlinkv1.ConditionStatus_CONDITION_STATUS_UNKNOWN || c.GetReason() != "Stale" {
			return fmt.Errorf("%s after %s: %v", c.GetType(), time.Since(reported).Round(time.Millisecond), c)
		}
		return nil
	})
	if since := time.Since(reported); since < 3*time.Second {
		t.Errorf("turned Stale %s after the report, before its 3 s TTL", since)
	}
	if d := device(t, fc, nodes[0].UUID); d.GetStatus() == ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED {
		t.Errorf("a stale check keeps the device FAULTED (%s)", d.GetStatusReason())
	}
	if c := cond(nodes[1].UUID); c.GetStatus() != ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE || c.GetReason() != "NonFatalError" {
		t.Errorf("the other agent's warning (default TTL): %v, want still False/NonFatalError", c)
	}
}
