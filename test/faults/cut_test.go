package faults

import (
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// TestCutLinkDuringChurn cuts every link (both TCP sides closed, as a load
// balancer restart does) five times while the fleet churns, deltas stream
// and quarantines/releases are in flight; after each cut the satellites
// reconnect through a fresh connection. Nothing may be lost or doubled.
func TestCutLinkDuringChurn(t *testing.T) { repeat(t, scenarioCut) }

func scenarioCut(t *testing.T) {
	db, pool := newDatabase(t)
	a := startHub(t, db, "hub-a")
	b := startHub(t, db, "hub-b")
	s := newSite(t, "cut", 60)
	lb := newProxy(t, s.via(t, a.Addr), s.via(t, b.Addr))
	fc := harness.Fleet(t, a.Addr)

	s.startSatellite(t, "", lb.Addr())
	sat := satsim.New(satsim.Config{Site: "cut-scripted", Addr: lb.Addr(), Devices: 40, DevicesPerBatch: 10, Window: 4, Logf: t.Logf})
	runSats(t, sat)
	waitDevices(t, pool, s, 30*time.Second)
	s.churn(t, 150*time.Millisecond)
	sat.Produce(true)

	ready := s.readyNodes()
	if len(ready) < 3 {
		t.Fatalf("need 3 ready nodes, have %d", len(ready))
	}
	for _, id := range ready[:3] {
		s.addNodeTrait(t, id)
	}
	last := map[string]string{} // device → its latest command
	for i := range 5 {
		time.Sleep(time.Duration(700+i*150) * time.Millisecond)
		switch i {
		case 0, 1, 2:
			last[ready[i]] = quarantine(t, fc, ready[i], "fault suite: cut", 10*time.Second)
		case 3:
			last[ready[0]] = release(t, fc, ready[0], "fault suite: cut", 10*time.Second)
		}
		accepted := lb.Accepted()
		lb.Cut()
		t.Logf("cut %d (connections so far %d, scripted acked %d)", i+1, accepted, sat.Stats().LastAcked)
	}
	// The links come back through fresh connections.
	harness.Eventually(t, 20*time.Second, func() error {
		if st := sat.Stats(); !st.Connected || st.Links < 6 {
			return errorf("scripted satellite: connected=%v after %d links, want ≥ 6", st.Connected, st.Links)
		}
		if linkReplica(pool, s.name) == "" {
			return errorf("real satellite not connected")
		}
		return nil
	})
	flowing(t, pool, []*site{s}, sat)
	s.stopChurn()
	drainAndVerify(t, pool, 30*time.Second, sat)
	for _, id := range last {
		waitCommand(t, fc, id, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	}
	s.verify(t, pool, 15*time.Second)
	t.Logf("connections through the balancer: %d; scripted: %d links, %d acked deltas, %d duplicate acks",
		lb.Accepted(), sat.Stats().Links, sat.Stats().AckedDeltas, sat.Stats().DupAcks)
}
