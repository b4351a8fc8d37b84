package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/test/faults/satsim"
	"github.com/ironlink/ironlink/test/harness"
)

const drainLinks = 100

// TestDrainReplicaWith100Links drains (SIGTERM) a hub replica while it
// holds 100 links — 100 scripted satellites, one site each, streaming
// deltas through the load balancer. All 100 must move to the other replica,
// the drained one must exit cleanly within its grace, and every batch each
// satellite sent must be committed exactly once (per-site last_sequence
// equals what it sent, history rows equal the changes sent, no gaps).
func TestDrainReplicaWith100Links(t *testing.T) { repeat(t, scenarioDrain) }

func scenarioDrain(t *testing.T) {
	db, pool := newDatabase(t)
	a := startHub(t, db, "hub-a", "--log-level", "info")
	b := startHub(t, db, "hub-b", "--log-level", "info")
	lb := newProxy(t, a.Addr) // every link starts on hub-a
	fcB := harness.Fleet(t, b.Addr)

	sats := make([]*satsim.Sat, drainLinks)
	for i := range sats {
		sats[i] = satsim.New(satsim.Config{Site: fmt.Sprintf("drain-%03d", i), Addr: lb.Addr(), Devices: 5, DevicesPerBatch: 2, Window: 2})
	}
	runSats(t, sats...)
	harness.Eventually(t, 30*time.Second, func() error {
		if n := sitesOn(pool, "hub-a"); n != drainLinks {
			return errorf("%d of %d links on hub-a", n, drainLinks)
		}
		return nil
	})
	for _, s := range sats {
		s.Produce(true)
	}
	flowing(t, pool, nil, sats...)
	lb.SetBackends([]string{a.Addr, b.Addr})

	// A command for every tenth site, answered on whichever replica holds the link.
	var cmds []string
	for i := 0; i < drainLinks; i += 10 {
		cmds = append(cmds, quarantine(t, fcB, sats[i].Devices()[0], "fault suite: drain", 10*time.Second))
	}
	before := 0
	for _, s := range sats {
		before += s.Stats().Unacked
	}
	drained := time.Now()
	a.Term()
	t.Logf("hub-a drained with %d links and %d unacked batches in flight", drainLinks, before)
	harness.Eventually(t, 30*time.Second, func() error {
		if n := sitesOn(pool, "hub-b"); n != drainLinks {
			return errorf("%d of %d links on hub-b", n, drainLinks)
		}
		return nil
	})
	moved := time.Since(drained)
	if !a.WaitExit(15 * time.Second) {
		t.Fatal("hub-a did not exit within 15 s of SIGTERM")
	}
	if err := a.ExitErr(); err != nil {
		t.Errorf("hub-a exited with %v after the drain", err)
	}
	if !contains(a.Output(), "draining links") {
		t.Error("hub-a did not log the drain")
	}
	t.Logf("all %d links on hub-b %s after SIGTERM", drainLinks, moved.Round(time.Millisecond))
	flowing(t, pool, nil, sats...)
	drainAndVerify(t, pool, 30*time.Second, sats...)
	for _, id := range cmds {
		waitCommand(t, fcB, id, ironlinkv1.CommandState_COMMAND_STATE_SUCCEEDED, 20*time.Second)
	}
	checkCommands(t, pool)
	sites, err := fcB.ListSites(context.Background(), &ironlinkv1.ListSitesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	connected := 0
	for _, s := range sites.GetSites() {
		if s.GetLinkState() == ironlinkv1.LinkState_LINK_STATE_CONNECTED && s.GetReplica() == "hub-b" {
			connected++
		}
	}
	if connected != drainLinks {
		t.Errorf("ListSites shows %d sites connected to hub-b, want %d", connected, drainLinks)
	}
	total, dups, links := 0, 0, 0
	for _, s := range sats {
		st := s.Stats()
		total += st.AckedDeltas
		dups += st.DupAcks
		links += st.Links
	}
	t.Logf("%d links over the run, %d acked deltas, %d duplicate acks", links, total, dups)
}
