package faults

import (
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/test/harness"
)

// TestCommandTimeoutFlag: a satellite started with --command-timeout 3s,
// whose Ironic answers every trait write in 30 s, reports a quarantine
// FAILED with the deadline as its error well before the 2-minute default
// would have ended it; once Ironic is fast again the hub's backed-off
// resend SUCCEEDS and the trait is on the node.
func TestCommandTimeoutFlag(t *testing.T) { repeat(t, scenarioCommandTimeout) }

func scenarioCommandTimeout(t *testing.T) {
	db, pool := newDatabase(t)
	hub := startHub(t, db, "hub-a", fastHub()...)
	fc := harness.Fleet(t, hub.Addr)
	s := newSite(t, "cmdtimeout", 5)
	sat := s.startSatellite(t, "", hub.Addr, "--command-timeout", "3s")
	waitDevices(t, pool, s, 30*time.Second)
	target := s.readyNodes()[0]

	s.addNodeTrait(t, target)
	for _, m := range []string{"PUT", "DELETE"} {
		s.sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, Method: m, PathContains: "/traits", Times: -1, Delay: 30 * time.Second})
	}
	asked := time.Now()
	cmd := quarantine(t, fc, target, "fault suite: command timeout", 10*time.Second)
	failed := waitCommand(t, fc, cmd, ironlinkv1.CommandState_COMMAND_STATE_FAILED, 60*time.Second)
	took := time.Since(asked)
	t.Logf("quarantine FAILED %s after it was asked (--command-timeout 3s, Ironic trait writes taking 30s): %q", took.Round(100*time.Millisecond), failed.GetLastError())
	if !strings.Contains(failed.GetLastError(), "deadline exceeded") {
		t.Errorf("the failed command's error %q does not name the deadline", failed.GetLastError())
	}
	if took >= 30*time.Second {
		t.Errorf("the command failed %s after it was asked: not at its 3s timeout", took)
	}
	s.sim.ClearFaults()
	waitCommand(t, fc, cmd, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 90*time.Second)
	if sat.Exited() {
		t.Fatalf("satellite exited: %v", sat.ExitErr())
	}
	checkCommands(t, pool, s)
}
