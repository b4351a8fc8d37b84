package faults

import (
	"context"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

// TestKillHubMidBatch kills (SIGKILL) the hub replica holding the links
// twice: first while a real satellite is sending the first snapshot of a
// 1,500-node site (three batches of 500), then while a stream of deltas
// flows. Two replicas sit behind the load balancer; the satellites resume
// on the other one and nothing is lost or doubled.
func TestKillHubMidBatch(t *testing.T) { repeat(t, scenarioKillHub) }

func scenarioKillHub(t *testing.T) {
	ctx := context.Background()
	db, pool := newDatabase(t)
	a := startHub(t, db, "hub-a")
	b := startHub(t, db, "hub-b")
	lb := newProxy(t, a.Addr) // every link starts on hub-a
	fcB := harness.Fleet(t, b.Addr)

	sat := satsim.New(satsim.Config{Site: "kill-scripted", Addr: lb.Addr(), Devices: 200, DevicesPerBatch: 50, Window: 8, Logf: t.Logf})
	runSats(t, sat)
	sat.Produce(true)
	harness.Eventually(t, 20*time.Second, func() error {
		if st := sat.Stats(); st.LastAcked < 30 {
			return errorf("scripted satellite acked %d batches", st.LastAcked)
		}
		return nil
	})

	// Kill 1: hub-a dies while the real satellite's first snapshot is on its way.
	s := newSite(t, "kill", 1500)
	s.churn(t, 100*time.Millisecond)
	s.startSatellite(t, "", lb.Addr())
	// Poll tightly until the first part of the snapshot is committed, so
	// the kill lands between its parts.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		_ = pool.QueryRow(ctx, `SELECT count(*) FROM devices WHERE site = $1`, s.name).Scan(&n)
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the real satellite's snapshot did not start within 30s")
		}
		time.Sleep(2 * time.Millisecond)
	}
	lb.SetBackends([]string{a.Addr, b.Addr})
	before := sat.Stats()
	a.Kill()
	var devs int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM devices WHERE site = $1`, s.name).Scan(&devs)
	t.Logf("kill 1: hub-a killed with %d of 1500 devices of the snapshot committed; scripted had %d unacked batches (sent %d, acked %d)",
		devs, before.Unacked, before.LastSent, before.LastAcked)

	harness.Eventually(t, 30*time.Second, func() error {
		if r := linkReplica(pool, s.name); r != "hub-b" {
			return errorf("real satellite's link on %q, want hub-b", r)
		}
		if st := sat.Stats(); !st.Connected || st.Replicas["hub-b"] == 0 {
			return errorf("scripted satellite not on hub-b: %+v", st.Replicas)
		}
		return nil
	})
	waitDevices(t, pool, s, 30*time.Second)

	// A quarantine and a release in flight during the second kill.
	ready := s.readyNodes()
	if len(ready) < 2 {
		t.Fatalf("need 2 ready nodes, have %d", len(ready))
	}
	s.addNodeTrait(t, ready[0])
	q := quarantine(t, fcB, ready[0], "fault suite: kill hub", 10*time.Second)
	r1 := quarantine(t, fcB, ready[1], "fault suite: kill hub", 10*time.Second)
	waitCommand(t, fcB, r1, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 20*time.Second)
	r := release(t, fcB, ready[1], "fault suite: kill hub", 10*time.Second)

	// Kill 2: hub-a comes back; hub-b dies in the middle of the delta stream.
	a = harness.StartHubAt(t, bins, a.Addr, db, "hub-a", fastHub()...)
	fcA := harness.Fleet(t, a.Addr)
	flowing(t, pool, []*site{s}, sat) // on hub-b, before it dies
	before = sat.Stats()
	b.Kill()
	t.Logf("kill 2: hub-b killed; scripted had %d unacked batches (sent %d, acked %d)", before.Unacked, before.LastSent, before.LastAcked)
	harness.Eventually(t, 30*time.Second, func() error {
		if r := linkReplica(pool, s.name); r != "hub-a" {
			return errorf("real satellite's link on %q, want hub-a", r)
		}
		if st := sat.Stats(); !st.Connected || st.Replicas["hub-a"] < 2 {
			return errorf("scripted satellite not back on hub-a: %+v", st.Replicas)
		}
		return nil
	})
	flowing(t, pool, []*site{s}, sat)
	s.stopChurn()
	drainAndVerify(t, pool, 30*time.Second, sat)
	waitCommand(t, fcA, q, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	waitCommand(t, fcA, r, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	waitTruth(t, pool, s, 20*time.Second)
	checkHistory(t, pool)
	checkCommands(t, pool, s)
	st := sat.Stats()
	t.Logf("scripted: %d links %v, %d acked deltas, %d duplicate acks", st.Links, st.Replicas, st.AckedDeltas, st.DupAcks)
}
