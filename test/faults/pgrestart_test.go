package faults

import (
	"context"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// TestPostgresRestart stops PostgreSQL (pg_ctl -m fast) while batches and
// commands flow through two hub replicas, keeps it down for 3 s, and starts
// it again. The hubs must not exit, their pools and LISTEN connections must
// reconnect, the satellites must resume, and nothing may be lost or doubled.
// The command sweep is set to 30 s, so a quarantine asked after the restart
// that completes within 5 s proves the LISTEN/NOTIFY path is back.
//
// It runs on a private cluster started for the test from Debian's
// PostgreSQL binaries (the shared server is never restarted).
func TestPostgresRestart(t *testing.T) { repeat(t, scenarioPGRestart) }

func scenarioPGRestart(t *testing.T) {
	pg := pgtest.StartCluster(t)
	db := pg.NewDatabase(t, "ironlink")
	pool := harness.Pool(t, db)
	hubFlags := fastHub("--command-sweep", "30s")
	a := harness.StartHub(t, bins, db, "hub-a", hubFlags...)
	b := harness.StartHub(t, bins, db, "hub-b", hubFlags...)
	s := newSite(t, "pgrestart", 60)
	lb := newProxy(t, s.via(t, a.Addr), s.via(t, b.Addr))
	fcA, fcB := harness.Fleet(t, a.Addr), harness.Fleet(t, b.Addr)

	s.startSatellite(t, "", lb.Addr())
	sat := satsim.New(satsim.Config{Site: "pgrestart-scripted", Addr: lb.Addr(), Devices: 40, DevicesPerBatch: 10, Window: 4, Logf: t.Logf})
	runSats(t, sat)
	waitDevices(t, pool, s, 30*time.Second)
	s.churn(t, 150*time.Millisecond)
	sat.Produce(true)
	ready := s.readyNodes()
	if len(ready) < 4 {
		t.Fatalf("need 4 ready nodes, have %d", len(ready))
	}
	for _, id := range ready[:4] {
		s.addNodeTrait(t, id)
	}
	q0 := quarantine(t, fcA, ready[0], "fault suite: pg restart", 10*time.Second)
	waitCommand(t, fcA, q0, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 15*time.Second)
	flowing(t, pool, []*site{s}, sat)

	// Commands in flight when PostgreSQL goes away.
	q1 := quarantine(t, fcB, ready[1], "fault suite: pg restart", 10*time.Second)
	r0 := release(t, fcA, ready[0], "fault suite: pg restart", 10*time.Second)
	before := sat.Stats()
	pg.Stop(t)
	t.Logf("PostgreSQL stopped; scripted satellite had %d unacked batches (sent %d, acked %d)", before.Unacked, before.LastSent, before.LastAcked)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, err := fcA.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: ready[2], Reason: "fault suite: while PostgreSQL is down"})
	cancel()
	if err == nil {
		t.Error("a quarantine was accepted while PostgreSQL was down")
	} else {
		t.Logf("quarantine while PostgreSQL is down: %v", err)
	}
	time.Sleep(3 * time.Second)
	pg.Start(t)
	t.Log("PostgreSQL started again")

	harness.Eventually(t, 30*time.Second, func() error {
		if a.Exited() || b.Exited() {
			t.Fatalf("a hub exited during the PostgreSQL restart: hub-a %v, hub-b %v", a.ExitErr(), b.ExitErr())
		}
		if st := sat.Stats(); !st.Connected || st.LastAcked <= before.LastSent {
			return errorf("scripted satellite: connected=%v acked %d (sent before the stop %d)", st.Connected, st.LastAcked, before.LastSent)
		}
		if linkReplica(pool, s.name) == "" {
			return errorf("real satellite not connected")
		}
		return nil
	})
	waitCommand(t, fcA, q1, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	waitCommand(t, fcA, r0, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)

	// LISTEN is back (both replicas' command listeners): with a 30 s sweep
	// only a notification delivers this fast.
	listening(t, pool, 2)
	asked := time.Now()
	q3 := quarantine(t, fcB, ready[3], "fault suite: after pg restart", 5*time.Second)
	waitCommand(t, fcB, q3, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 5*time.Second)
	t.Logf("quarantine after the restart succeeded in %s (command sweep 30 s)", time.Since(asked).Round(time.Millisecond))

	flowing(t, pool, []*site{s}, sat)
	s.stopChurn()
	drainAndVerify(t, pool, 30*time.Second, sat)
	s.verify(t, pool, 20*time.Second)
	st := sat.Stats()
	t.Logf("scripted: %d links %v, %d acked deltas, %d duplicate acks", st.Links, st.Replicas, st.AckedDeltas, st.DupAcks)
}
