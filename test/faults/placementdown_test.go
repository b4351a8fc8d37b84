package faults

import (
	"slices"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/test/harness"
)

// The Placement outage scenario, at production times divided by 60: a
// 10-minute outage is 10 s, the satellite's 15-minute resync 15 s
// (--resync-interval) and its 2-minute command timeout 2 s
// (--command-timeout). The hub's failure backoff is set beyond the test
// (--command-failure-backoff 10m, capped at 5 min by the hub) so that no
// resent command heals the devices: what heals them is the resync alone.
// (With the hub's default backoff, 10 s doubling to at most 5 min, a
// resend usually comes first after a real 10-minute outage.)
const (
	placementOutage = 10 * time.Second // 10 min / 60
	scaledResync    = 15 * time.Second // 15 min / 60
)

// TestPlacementDownDuringQuarantines: Placement answers 503 to everything
// for placementOutage while three devices are quarantined. Each
// quarantine is half applied (the ready trait gone from the Ironic node,
// still on the resource provider) and its command FAILED; once Placement
// is back the satellite's periodic resync removes the trait from the
// providers within one resync interval and the hub's conditions equal the
// truth. The time to heal is printed, also in production terms (×60).
func TestPlacementDownDuringQuarantines(t *testing.T) { repeat(t, scenarioPlacementDown) }

func scenarioPlacementDown(t *testing.T) {
	db, pool := newDatabase(t)
	hub := startHub(t, db, "hub-a", "--command-failure-backoff", "10m")
	fc := harness.Fleet(t, hub.Addr)
	s := newSite(t, "placementdown", 20)
	sat := s.startSatellite(t, "", s.via(t, hub.Addr), "--resync-interval", scaledResync.String(), "--command-timeout", "2s")
	waitDevices(t, pool, s, 30*time.Second)
	devs := s.readyNodes()[:3]
	for _, id := range devs {
		s.addNodeTrait(t, id)
	}

	s.sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServicePlacement, Status: 503, Times: -1})
	down := time.Now()
	var cmds []string
	for _, id := range devs {
		cmds = append(cmds, quarantine(t, fc, id, "fault suite: Placement down", 10*time.Second))
	}
	for i, c := range cmds {
		failed := waitCommand(t, fc, c, ironlinkv1.CommandState_COMMAND_STATE_FAILED, placementOutage)
		n, _ := s.sim.Node(devs[i])
		pt, _, _ := s.sim.ProviderTraits(devs[i])
		if slices.Contains(n.Traits, readyTrait) || !slices.Contains(pt, readyTrait) {
			t.Errorf("device %s while Placement is down: node traits %v, provider traits %v; want the quarantine half applied (node without %s, provider with it)",
				devs[i], n.Traits, pt, readyTrait)
		}
		if i == 0 {
			t.Logf("quarantine FAILED while Placement is down, half applied: %.160s", failed.GetLastError())
		}
	}
	time.Sleep(time.Until(down.Add(placementOutage)))
	s.sim.ClearFaults()
	back := time.Now()
	t.Logf("Placement back after %s", back.Sub(down).Round(100*time.Millisecond))
	bound := scaledResync + 10*time.Second
	if err := harness.Within(bound, func() error {
		for _, id := range devs {
			if pt, _, _ := s.sim.ProviderTraits(id); slices.Contains(pt, readyTrait) {
				return errorf("device %s's provider still has %s %s after Placement came back", id, readyTrait, time.Since(back).Round(100*time.Millisecond))
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("%v: not healed within one resync interval (%s) and 10 s", err, scaledResync)
	}
	heal := time.Since(back)
	t.Logf("half-applied quarantines healed %s after Placement came back (resync every %s; %s in production terms, resync 15m); resyncs done: %d, asked early by a poll: %d",
		heal.Round(100*time.Millisecond), scaledResync, (heal * 60).Round(time.Second), sat.Count("resync done"),
		sat.Count("asking the hub for a resync"))
	for _, id := range devs {
		if n, _ := s.sim.Node(id); slices.Contains(n.Traits, readyTrait) {
			t.Errorf("device %s's node has %s again after healing", id, readyTrait)
		}
	}
	waitTruth(t, pool, s, 30*time.Second)
	for _, c := range cmds {
		r, err := fc.GetCommand(t.Context(), &ironlinkv1.GetCommandRequest{CommandId: c})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("command %s after healing: %v, %d attempt(s)", c, r.GetCommand().GetState(), r.GetCommand().GetAttempts())
	}
	if sat.Exited() {
		t.Fatalf("satellite exited: %v", sat.ExitErr())
	}
}
