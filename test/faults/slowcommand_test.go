package faults

import (
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// TestSlowCommandIsNotAppliedTwice: applying a quarantine takes longer than
// the hub's --command-resend-after because Placement keeps answering 409
// (a satellite retries a conflict for up to 8 rounds, and a 503 for up to
// 45 s, per write). The hub sends the command again while the first
// application is still running; the satellite must not queue a second
// application of the same command behind the first: when the first ends
// FAILED, the hub's failure backoff must hold — no provider write in the
// next second (backoff 3 s), and the command is attempted again only after it.
func TestSlowCommandIsNotAppliedTwice(t *testing.T) { repeat(t, scenarioSlowCommand) }

func scenarioSlowCommand(t *testing.T) {
	db := pgtest.NewDatabase(t)
	pool := harness.Pool(t, db)
	hub := harness.StartHub(t, bins, db, "hub-a", fastHub("--command-resend-after", "2s", "--command-failure-backoff", "3s")...)
	fc := harness.Fleet(t, hub.Addr)
	s := newSite(t, "slowcmd", 20)
	s.startSatellite(t, "", hub.Addr)
	waitDevices(t, pool, s, 30*time.Second)
	dev := s.readyNodes()[0]
	path := "/resource_providers/" + dev + "/traits"
	s.sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServicePlacement, Method: "PUT", PathContains: path, Status: 409, Times: -1,
		Before: func() { _ = s.sim.BumpProviderGeneration(dev) }})
	c := quarantine(t, fc, dev, "fault suite: slow command", 10*time.Second)
	failed := waitCommand(t, fc, c, ironlinkv1.CommandState_COMMAND_STATE_FAILED, 30*time.Second)
	puts := func() int {
		n := 0
		for _, r := range s.sim.Requests() {
			if r.Method == "PUT" && r.Path == path {
				n++
			}
		}
		return n
	}
	p0 := puts()
	time.Sleep(time.Second)
	if p1 := puts(); p1 != p0 {
		t.Errorf("%d provider writes within a second of the command failing (attempts %d), want none before the 3 s backoff: "+
			"the command was applied again behind the first application", p1-p0, failed.GetAttempts())
	}
	s.sim.ClearFaults()
	waitCommand(t, fc, c, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	checkCommands(t, pool, s)
}
