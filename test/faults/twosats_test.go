package faults

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/test/harness"
)

// TestTwoSatellitesSameSite runs two real satellite processes for the same
// site against the same OpenStack at once, through two hub replicas. Each
// new link supersedes the other (fencing): the older one is closed with
// Aborted and reconnects, so the two take turns. Meanwhile the fleet
// churns and a quarantine and a release go through. No device may ever be
// marked removed (sampled every 20 ms), the conditions must end equal to
// the simulator's, and the commands must succeed.
func TestTwoSatellitesSameSite(t *testing.T) { repeat(t, scenarioTwoSats) }

func scenarioTwoSats(t *testing.T) {
	db, pool := newDatabase(t)
	a := startHub(t, db, "hub-a")
	b := startHub(t, db, "hub-b")
	lb := newProxy(t, a.Addr, b.Addr)
	fc := harness.Fleet(t, a.Addr)
	s := newSite(t, "twosats", 600) // two snapshot batches per link
	sat1 := s.startSatellite(t, "#1", lb.Addr())
	waitDevices(t, pool, s, 30*time.Second)

	// Sample "removed" devices all along.
	var removedSeen atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for ctx.Err() == nil {
			var n int64
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM devices WHERE removed`).Scan(&n); err == nil && n > removedSeen.Load() {
				removedSeen.Store(n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() { cancel(); <-sampled }()

	s.churn(t, 200*time.Millisecond)
	sat2 := s.startSatellite(t, "#2", lb.Addr())
	ready := s.readyNodes()
	s.addNodeTrait(t, ready[0])
	q := quarantine(t, fc, ready[0], "fault suite: two satellites", 10*time.Second)
	r0 := quarantine(t, fc, ready[1], "fault suite: two satellites", 10*time.Second)
	waitCommand(t, fc, r0, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	r := release(t, fc, ready[1], "fault suite: two satellites", 10*time.Second)

	// Both processes must have been fenced at least once: the newest link wins.
	harness.Eventually(t, 30*time.Second, func() error {
		n1, n2 := sat1.Count("code = Aborted"), sat2.Count("code = Aborted")
		if n1 == 0 || n2 == 0 {
			return errorf("superseded links: satellite #1 %d, #2 %d; want both ≥ 1", n1, n2)
		}
		var epoch int64
		_ = pool.QueryRow(context.Background(), `SELECT link_epoch FROM sites WHERE name = $1`, s.name).Scan(&epoch)
		if epoch < 12 {
			return errorf("%d links opened for the site so far, want ≥ 12 turns", epoch)
		}
		return nil
	})
	waitCommand(t, fc, q, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	waitCommand(t, fc, r, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 30*time.Second)
	time.Sleep(time.Second)
	s.stopChurn()
	waitTruth(t, pool, s, 20*time.Second)
	cancel()
	<-sampled
	if n := removedSeen.Load(); n > 0 {
		t.Errorf("up to %d devices were marked removed while both satellites ran; none was deleted", n)
	}
	checkHistory(t, pool)
	checkCommands(t, pool, s)
	var epoch int64
	_ = pool.QueryRow(context.Background(), `SELECT link_epoch FROM sites WHERE name = $1`, s.name).Scan(&epoch)
	t.Logf("links opened for the site: %d; fenced: satellite #1 %d, #2 %d", epoch, sat1.Count("code = Aborted"), sat2.Count("code = Aborted"))
}
