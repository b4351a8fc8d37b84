package faults

import (
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/test/harness"
)

// TestPlacementFaultsDuringQuarantine quarantines two devices while
// Placement misbehaves. Device 1: its provider's trait reads answer 503
// twice and writes answer 503 twice, then 409 (a concurrent writer bumped
// the generation) three times: the satellite retries within the command and
// it ends SUCCEEDED on the first attempt. Device 2: every provider write
// answers 409 (with the generation bumped) until the test clears the fault:
// the command ends FAILED with the error visible to operators, is not
// retried in a tight loop, and after the hub's failure backoff goes out
// again and ends SUCCEEDED. Both devices end with the trait absent from the
// node and the provider.
func TestPlacementFaultsDuringQuarantine(t *testing.T) { repeat(t, scenarioPlacement) }

func scenarioPlacement(t *testing.T) {
	db, pool := newDatabase(t)
	// Resend-after above the time a command may spend retrying Placement
	// (TestSlowCommandIsNotAppliedTwice covers a resend while applying).
	hub := startHub(t, db, "hub-a", "--command-failure-backoff", "2s", "--command-resend-after", "20s")
	fc := harness.Fleet(t, hub.Addr)
	s := newSite(t, "placement", 20)
	s.startSatellite(t, "", s.via(t, hub.Addr))
	waitDevices(t, pool, s, 30*time.Second)

	ready := s.readyNodes()
	dev1, dev2 := ready[0], ready[1]
	s.addNodeTrait(t, dev1)
	s.addNodeTrait(t, dev2)
	bump := func(id string) func() {
		return func() { _ = s.sim.BumpProviderGeneration(id) }
	}
	traits1, traits2 := "/resource_providers/"+dev1+"/traits", "/resource_providers/"+dev2+"/traits"
	s.sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServicePlacement, Method: "GET", PathContains: traits1, Status: 503, Times: 2})
	s.sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServicePlacement, Method: "PUT", PathContains: traits1, Status: 503, Times: 2})
	s.sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServicePlacement, Method: "PUT", PathContains: traits1, Status: 409, Times: 3, Before: bump(dev1)})
	s.sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServicePlacement, Method: "PUT", PathContains: traits2, Status: 409, Times: -1, Before: bump(dev2)})

	c1 := quarantine(t, fc, dev1, "fault suite: placement 503/409", 10*time.Second)
	c2 := quarantine(t, fc, dev2, "fault suite: placement 409 until cleared", 10*time.Second)

	// Device 2 first: the no-tight-retry window below is measured from its
	// failure, which must not wait for device 1's slower retries (under
	// load they outlast the 2 s backoff).
	failed := waitCommand(t, fc, c2, ironlinkv1.CommandState_COMMAND_STATE_FAILED, 30*time.Second)
	failedAt := time.Now()
	if failed.GetLastError() == "" {
		t.Error("device 2: FAILED without last_error")
	}
	d, err := fc.GetDevice(t.Context(), &ironlinkv1.GetDeviceRequest{DeviceId: dev2})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetDevice().GetLastCommandError() == "" {
		t.Error("device 2: GetDevice shows no last_command_error while its command is FAILED")
	}
	t.Logf("device 2 failed after %d attempt(s): %s", failed.GetAttempts(), failed.GetLastError())
	// No tight retry loop: nothing is written during the first second of the 2 s backoff.
	puts := func() int {
		n := 0
		for _, r := range s.sim.Requests() {
			if r.Method == "PUT" && r.Path == traits2 {
				n++
			}
		}
		return n
	}
	p0 := puts()
	time.Sleep(time.Until(failedAt.Add(time.Second)))
	if p1 := puts(); p1 != p0 {
		t.Errorf("device 2: %d provider writes within a second of the failure, want none before the backoff", p1-p0)
	}
	cmd1 := waitCommand(t, fc, c1, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	if cmd1.GetAttempts() != 1 {
		t.Errorf("device 1: %d attempts, want 1 (transient errors are retried inside the command)", cmd1.GetAttempts())
	}
	t.Logf("device 1: %q", cmd1.GetResultDetail())
	s.sim.ClearFaults() // Placement heals
	cmd2 := waitCommand(t, fc, c2, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	if cmd2.GetAttempts() != failed.GetAttempts()+1 {
		t.Errorf("device 2: %d attempts after healing, want %d", cmd2.GetAttempts(), failed.GetAttempts()+1)
	}
	d, err = fc.GetDevice(t.Context(), &ironlinkv1.GetDeviceRequest{DeviceId: dev2})
	if err != nil {
		t.Fatal(err)
	}
	if e := d.GetDevice().GetLastCommandError(); e != "" {
		t.Errorf("device 2: last_command_error %q after success, want it cleared", e)
	}
	s.verify(t, pool, 15*time.Second)
}
