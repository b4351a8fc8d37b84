package faults

import (
	"os"
	"slices"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/test/harness"
)

// TestReplacedSatelliteRestoresDesiredState: a device is quarantined
// (SUCCEEDED); the satellite's machine is replaced (its state file is
// gone) and, while it is down, Nova's driver copies the ready trait back
// onto the provider and the node (drift). The desired state is the truth
// (SPEC "The link"): the new satellite says in its Hello that it applied
// nothing, so the hub must send the device's current desired state again
// (or the satellite's resync must converge it) — the trait must be absent
// again shortly, and CustomerReady must say Quarantined.
func TestReplacedSatelliteRestoresDesiredState(t *testing.T) { repeat(t, scenarioResync) }

func scenarioResync(t *testing.T) {
	db, pool := newDatabase(t)
	hub := startHub(t, db, "hub-a")
	fc := harness.Fleet(t, hub.Addr)
	s := newSite(t, "resync", 20)
	sat := s.startSatellite(t, "#1", s.via(t, hub.Addr))
	waitDevices(t, pool, s, 30*time.Second)

	target := s.readyNodes()[0]
	s.addNodeTrait(t, target)
	q := quarantine(t, fc, target, "fault suite: replaced satellite", 10*time.Second)
	waitCommand(t, fc, q, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 20*time.Second)
	sat.Kill()
	if err := os.Remove(s.stateFile); err != nil {
		t.Fatal(err)
	}
	// Drift while no satellite runs.
	s.addNodeTrait(t, target)
	pt, _, _ := s.sim.ProviderTraits(target)
	if err := s.sim.SetProviderTraits(target, append(pt, readyTrait)); err != nil {
		t.Fatal(err)
	}

	s.startSatellite(t, "#2", s.via(t, hub.Addr))
	err := harness.Within(20*time.Second, func() error {
		n, _ := s.sim.Node(target)
		pt, _, _ := s.sim.ProviderTraits(target)
		if slices.Contains(n.Traits, readyTrait) || slices.Contains(pt, readyTrait) {
			return errorf("device %s is quarantined but %s is back: node %v, provider %v", target, readyTrait, n.Traits, pt)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("desired state not restored after the satellite was replaced: %v", err)
	}
	waitTruth(t, pool, s, 15*time.Second)
	s.checkLinkHistory(t, pool)
	checkCommands(t, pool, s)
}
