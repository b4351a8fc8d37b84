package faults

import (
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// TestLoadBalancerIdleTimeout puts a load balancer that closes idle
// connections (tcpproxy.SetIdleTimeout; 60 s on many clouds, 3 s here
// against heartbeats of 1 s — the defaults' 20 s against 60 s, shortened)
// between the satellites and the hub. First the heartbeats alone must keep
// every link up: no connection is cut in four idle timeouts. Then the
// timeout drops below the heartbeat interval (300 ms, a balancer set
// tighter than the link's heartbeat): links are cut between heartbeats
// again and again while deltas come in bursts and a quarantine is issued;
// every cut heals, nothing is lost or doubled, the quarantine completes.
func TestLoadBalancerIdleTimeout(t *testing.T) { repeat(t, scenarioIdle) }

func scenarioIdle(t *testing.T) {
	db, pool := newDatabase(t)
	hub := startHub(t, db, "hub-a") // hub heartbeat 1 s
	s := newSite(t, "idle", 20)
	lb := newProxy(t, s.via(t, hub.Addr))
	lb.SetIdleTimeout(3 * time.Second)
	fc := harness.Fleet(t, hub.Addr)

	sat := s.startSatellite(t, "", lb.Addr()) // satellite heartbeat 1 s
	scripted := satsim.New(satsim.Config{Site: "idle-scripted", Addr: lb.Addr(), Devices: 20, DevicesPerBatch: 5, Window: 4, Logf: t.Logf})
	runSats(t, scripted)
	waitDevices(t, pool, s, 30*time.Second)
	harness.Eventually(t, 20*time.Second, func() error {
		if st := scripted.Stats(); !st.Connected || st.Unacked > 0 {
			return errorf("scripted satellite: connected=%v, %d unacked", st.Connected, st.Unacked)
		}
		return nil
	})

	// Phase 1: idle links, heartbeats only.
	accepted, downs := lb.Accepted(), sat.Count("link down; reconnecting")
	time.Sleep(12 * time.Second)
	if cuts := lb.IdleCuts(); cuts != 0 || lb.Accepted() != accepted || scripted.Stats().Links != 1 || sat.Count("link down; reconnecting") != downs {
		t.Fatalf("heartbeats did not keep the links up through a 3 s idle timeout: %d idle cuts, %d new connections, scripted links %d, satellite reconnects %d",
			cuts, lb.Accepted()-accepted, scripted.Stats().Links, sat.Count("link down; reconnecting")-downs)
	}
	t.Logf("phase 1: 12 s idle behind a 3 s idle timeout: no cut, no reconnect")

	// Phase 2: the balancer cuts between heartbeats.
	lb.SetIdleTimeout(300 * time.Millisecond)
	target := s.readyNodes()[0]
	s.addNodeTrait(t, target)
	var cmd string
	for i := range 10 {
		scripted.AddDeltas(3)
		if i == 3 {
			cmd = quarantine(t, fc, target, "fault suite: idle timeout", 10*time.Second)
		}
		time.Sleep(700 * time.Millisecond)
	}
	cuts := lb.IdleCuts()
	if cuts < 2 {
		t.Fatalf("only %d idle cuts in phase 2: the scenario did not cut links", cuts)
	}
	lb.SetIdleTimeout(3 * time.Second) // let the links settle for the checks
	drainAndVerify(t, pool, 30*time.Second, scripted)
	waitCommand(t, fc, cmd, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	s.verify(t, pool, 15*time.Second)
	t.Logf("phase 2: %d idle cuts; scripted: %d links, %d acked deltas, %d duplicate acks; satellite reconnects %d",
		cuts, scripted.Stats().Links, scripted.Stats().AckedDeltas, scripted.Stats().DupAcks, sat.Count("link down; reconnecting")-downs)
}
