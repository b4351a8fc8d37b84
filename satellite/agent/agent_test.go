package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
	"github.com/ironlink/ironlink/satellite/placement"
)

func newAgent(t *testing.T, opts openstacksim.Options, nodes int) (*openstacksim.Cloud, *agent.Agent, *link.Outbox) {
	t.Helper()
	sim, c := ostest.ConnectSim(t, opts)
	for i := range nodes {
		n := sim.AddNode(openstacksim.Node{Name: fmt.Sprintf("n-%05d", i), ProvisionState: "available", PowerState: "power off", ResourceClass: "gpu-h100"})
		sim.AddProvider(n.UUID, n.UUID, []string{"CUSTOM_CUSTOMER_READY"})
	}
	sim.DefineTrait("CUSTOM_CUSTOMER_READY")
	ir := ironic.New(c.Baremetal, ostest.Logger(t))
	ir.ReadRetry = ostest.FastRetry(3)
	pl := placement.New(c.Placement, ostest.Logger(t))
	pl.ReadRetry = ostest.FastRetry(3)
	out := link.NewOutbox()
	out.MaxBatches = 1 << 20
	return sim, agent.New(agent.Config{PollInterval: time.Second}, agent.Clients{Ironic: ir, Placement: pl}, out, nil, ostest.Logger(t)), out
}

func snapshotOf(t *testing.T, out *link.Outbox, a *agent.Agent) []*ironlinkv1.DeviceUpdate {
	t.Helper()
	out.Restart(0, true)
	var devs []*ironlinkv1.DeviceUpdate
	for _, b := range out.Take(a.Snapshot) {
		devs = append(devs, b.GetDevices()...)
	}
	return devs
}

// A listing of 1,003 nodes over two pages yields 1,003 devices, each with all
// seven conditions.
func TestListingOver1003NodesYields1003Devices(t *testing.T) {
	_, a, out := newAgent(t, openstacksim.Options{IronicMaxLimit: 1000}, 1003)
	if err := a.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	devs := snapshotOf(t, out, a)
	if len(devs) != 1003 {
		t.Fatalf("snapshot has %d devices, want 1003", len(devs))
	}
	seen := map[string]bool{}
	for _, d := range devs {
		if seen[d.GetDeviceId()] {
			t.Fatalf("device %s twice", d.GetDeviceId())
		}
		seen[d.GetDeviceId()] = true
		if len(d.GetConditions()) != 7 {
			t.Fatalf("device %s has %d conditions", d.GetDeviceId(), len(d.GetConditions()))
		}
	}
}

// A listing that fails half-way marks nothing removed and changes no
// condition; the next good listing catches up.
func TestListingFailingHalfWayChangesNothing(t *testing.T) {
	ctx := context.Background()
	sim, a, out := newAgent(t, openstacksim.Options{IronicMaxLimit: 1000}, 1003)
	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	before := snapshotOf(t, out, a)
	out.Restart(0, true)
	out.Take(a.Snapshot) // the link now streams deltas
	nodes := sim.Nodes()
	// Behind the agent's back: one node goes into maintenance, one is deleted.
	if err := sim.UpdateNode(nodes[0].UUID, func(n *openstacksim.Node) { n.Maintenance, n.MaintenanceReason = true, "PSU" }); err != nil {
		t.Fatal(err)
	}
	if err := sim.DeleteNode(nodes[1002].UUID); err != nil {
		t.Fatal(err)
	}
	// Page 2 fails past the retry budget.
	sim.InjectFault(openstacksim.Fault{Service: "baremetal", Method: "GET", PathContains: "marker=", Status: 503, Times: 10})
	if err := a.Poll(ctx); err == nil {
		t.Fatal("poll with a failed page 2 succeeded")
	}
	if got := out.Take(a.Snapshot); len(got) != 0 {
		t.Fatalf("a failed poll queued %d batches: %v", len(got), got)
	}
	if after := snapshotOf(t, out, a); len(after) != len(before) {
		t.Fatalf("device count moved from %d to %d after a failed poll", len(before), len(after))
	}
	if st := a.Stats(); st.FailedPolls != 1 {
		t.Fatalf("failed polls %d, want 1", st.FailedPolls)
	}
	sim.ClearFaults()
	out.Restart(0, true)
	out.Take(a.Snapshot)
	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	var removed, maint int
	for _, b := range out.Take(a.Snapshot) {
		for _, d := range b.GetDevices() {
			if d.GetRemoved() && d.GetDeviceId() == nodes[1002].UUID {
				removed++
			}
			for _, c := range d.GetConditions() {
				if d.GetDeviceId() == nodes[0].UUID && c.GetType() == "MaintenanceClear" && c.GetStatus() == ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE {
					maint++
				}
			}
		}
	}
	if removed != 1 || maint != 1 {
		t.Fatalf("after recovery: removed=%d maintenance deltas=%d, want 1 and 1", removed, maint)
	}
}

// A token that expires during a long run is renewed without a failed poll.
func TestTokenExpiryDuringRunFailsNoPoll(t *testing.T) {
	sim, a, _ := newAgent(t, openstacksim.Options{TokenTTL: 2 * time.Second}, 30)
	ctx := context.Background()
	deadline := time.Now().Add(7 * time.Second)
	polls := 0
	for time.Now().Before(deadline) {
		if err := a.Poll(ctx); err != nil {
			t.Fatalf("poll %d failed: %v", polls, err)
		}
		polls++
		time.Sleep(300 * time.Millisecond)
	}
	if st := a.Stats(); st.FailedPolls != 0 || st.Polls != polls {
		t.Fatalf("stats %+v after %d polls", st, polls)
	}
	if n := sim.TokensIssued(); n < 3 {
		t.Fatalf("%d tokens issued over 7 s of 2 s tokens; renewal did not happen", n)
	}
}
