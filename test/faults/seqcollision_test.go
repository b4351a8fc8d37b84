package faults

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/test/harness"
)

// TestResumeAfterAnotherWriterKeepsDeltas is the deterministic form of what
// TestTwoSatellitesSameSite finds by chance: two processes of one site
// number their batches from the same per-site sequence, so a satellite
// that resumes after another process committed "its" sequence number
// mistakes the other's batch for its own and drops its unacked deltas.
//
//  1. The real satellite has committed up to sequence N. The link is frozen
//     and a node goes into maintenance; the satellite sends that delta as
//     batch N+1 into the frozen link.
//  2. Another link of the same site (a second satellite process, here a
//     few lines of client) opens — fencing the first — and commits its own
//     batch N+1.
//  3. The frozen connection is cut; the satellite reconnects, hears "last
//     committed N+1", drops its batch N+1 as already committed and resumes
//     at N+2. The maintenance change never reaches the hub (the
//     satellite's tracker already has it, so no later poll resends it).
//
// Expected: the hub shows the node in MAINTENANCE within a few polls.
func TestResumeAfterAnotherWriterKeepsDeltas(t *testing.T) { repeat(t, scenarioSeqCollision) }

func scenarioSeqCollision(t *testing.T) {
	db, pool := newDatabase(t)
	hub := startHub(t, db, "hub-a")
	lb := newProxy(t, hub.Addr)
	fc := harness.Fleet(t, hub.Addr)
	s := newSite(t, "collide", 20)
	sat := s.startSatellite(t, "", lb.Addr())
	waitDevices(t, pool, s, 30*time.Second)
	settled(t, pool, s, sat)

	var target string
	for _, n := range s.sim.Nodes() {
		if !n.Maintenance && n.ProvisionState == "available" {
			target = n.UUID
			break
		}
	}
	var last int64
	if err := pool.QueryRow(context.Background(), `SELECT last_sequence FROM sites WHERE name = $1`, s.name).Scan(&last); err != nil {
		t.Fatal(err)
	}
	lb.Freeze()
	if err := s.sim.UpdateNode(target, func(n *openstacksim.Node) {
		n.Maintenance, n.MaintenanceReason = true, "fault suite: fan failure"
	}); err != nil {
		t.Fatal(err)
	}
	sent := fmt.Sprintf("sequence=%d ", last+1)
	harness.Eventually(t, 10*time.Second, func() error {
		for _, l := range sat.Lines(`msg="batch sent"`) {
			if strings.Contains(l, sent) {
				return nil
			}
		}
		return errorf("satellite has not sent batch %d yet", last+1)
	})

	// Another process of the site links up and commits its own batch N+1.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := ironlinkv1.NewLinkServiceClient(harness.Dial(t, hub.Addr)).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: &ironlinkv1.Hello{
		Site: s.name, BootId: "second-process", Version: "test"}}}); err != nil {
		t.Fatal(err)
	}
	w, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := w.GetWelcome().GetLastCommittedSequence(); got != uint64(last) {
		t.Fatalf("second link: hub last committed %d, want %d", got, last)
	}
	if err := stream.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: &ironlinkv1.ConditionBatch{
		Sequence: uint64(last) + 1}}}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("second link: waiting for the ack: %v", err)
		}
		if a := m.GetAck(); a != nil {
			if a.GetSequence() != uint64(last)+1 {
				t.Fatalf("second link: ack %v", a)
			}
			break
		}
	}
	_ = stream.CloseSend()
	cancel()

	lb.Cut() // the frozen connection dies; what it held is gone
	lb.Thaw()
	harness.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(sat.Output(), "hub_last_sequence="+strconv.FormatInt(last+1, 10)) {
			return errorf("satellite has not reconnected yet")
		}
		return nil
	})
	err = harness.Within(6*time.Second, func() error {
		d, err := fc.GetDevice(context.Background(), &ironlinkv1.GetDeviceRequest{DeviceId: target})
		if err != nil {
			return err
		}
		if st := d.GetDevice().GetStatus(); st != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_MAINTENANCE {
			return errorf("device %s is %v; Ironic has had it in maintenance for %d+ polls", target, st, 3)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("maintenance change lost after resuming behind another writer's batch %d: %v", last+1, err)
	}
}
