package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/conditions"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
	"github.com/ironlink/ironlink/satellite/placement"
)

// fieldSite is a 20-node site listed in pages of 3 whose nodes exercise
// every field a condition depends on: maintenance with an Ironic fault and
// a reason, a failed deploy with last_error, a validation pool selected by
// resource_class, lessees, instances and the gate trait.
func fieldSite(t *testing.T) (*openstacksim.Cloud, func() *agent.Agent, *link.Outbox) {
	t.Helper()
	sim, c := ostest.ConnectSim(t, openstacksim.Options{})
	sim.DefineTrait(agent.ReadyTrait)
	for i := range 20 {
		n := openstacksim.Node{Name: fmt.Sprintf("f-%02d", i), ProvisionState: "available", PowerState: "power off",
			ResourceClass: "baremetal", Traits: []string{agent.ReadyTrait}}
		switch i % 4 {
		case 0:
			n.Maintenance, n.Fault, n.MaintenanceReason = true, "power failure", "BMC unreachable after 3 tries"
		case 1:
			n.ProvisionState, n.LastError = "deploy failed", "Timeout reached while waiting for callback"
		case 2:
			n.ResourceClass = "gpu-h100" // the validation pool
		case 3:
			n.ProvisionState, n.InstanceUUID, n.Lessee = "active", fmt.Sprintf("00000000-0000-4000-8000-0000000000%02d", i), "customer-project"
		}
		n = sim.AddNode(n)
		sim.AddProvider(n.UUID, n.UUID, []string{agent.ReadyTrait})
	}
	ir := ironic.New(c.Baremetal, ostest.Logger(t))
	ir.ReadRetry = ostest.FastRetry(3)
	ir.PageLimit = 3
	pl := placement.New(c.Placement, ostest.Logger(t))
	pl.ReadRetry = ostest.FastRetry(3)
	out := link.NewOutbox()
	out.MaxBatches = 1 << 20
	cfg := agent.Config{PollInterval: time.Hour, Conditions: conditions.Config{
		ValidationPool: conditions.Selector{ResourceClass: "gpu-h100"}, InternalProjects: []string{"ops"}}}
	return sim, func() *agent.Agent {
		return agent.New(cfg, agent.Clients{Ironic: ir, Placement: pl}, out, nil, ostest.Logger(t))
	}, out
}

// freshSnapshot builds a new snapshot of a (never a replay of queued
// batches) and leaves the outbox streaming deltas.
func freshSnapshot(t *testing.T, out *link.Outbox, a *agent.Agent) []*ironlinkv1.DeviceUpdate {
	t.Helper()
	out.Restart(0, false) // not ours: always a snapshot
	var devs []*ironlinkv1.DeviceUpdate
	for _, b := range out.Take(a.Snapshot) {
		if b.GetSnapshot() == nil {
			t.Fatalf("batch %d is not part of a snapshot", b.GetSequence())
		}
		devs = append(devs, b.GetDevices()...)
	}
	return devs
}

// byDevice indexes a snapshot.
func byDevice(devs []*ironlinkv1.DeviceUpdate) map[string]*ironlinkv1.DeviceUpdate {
	m := map[string]*ironlinkv1.DeviceUpdate{}
	for _, d := range devs {
		m[d.GetDeviceId()] = d
	}
	return m
}

// When Ironic leaves fields out of pages 2+ (as some Ironic versions and
// proxies do), no condition and no fact of any node changes: the poll
// pushes nothing, and the snapshot still shows PowerFailure with its
// maintenance reason, DeployFailed with last_error, the validation pool and
// the customer lessee; the same when the fields come back. (Before the fix
// the absent fields decoded as "": PowerFailure became Manual, last_error
// vanished and InValidationPool flipped on the pool's nodes of pages 2+.)
func TestFieldsLeftOutOfLaterPagesFlipNothing(t *testing.T) {
	ctx := context.Background()
	sim, newA, out := fieldSite(t)
	a := newA()
	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	before := byDevice(freshSnapshot(t, out, a))
	if len(before) != 20 {
		t.Fatalf("snapshot has %d devices, want 20", len(before))
	}
	// The complete listing is what later answers are checked against.
	for _, d := range before {
		for _, c := range d.GetConditions() {
			if c.GetReason() == conditions.ReasonFieldUnavailable {
				t.Fatalf("complete listing: %s %s is FieldUnavailable: %s", d.GetFacts().GetName(), c.GetType(), c.GetMessage())
			}
		}
	}

	for _, phase := range []struct {
		name string
		loss openstacksim.FieldLoss
	}{
		{"default field set on pages 2+", openstacksim.FieldLoss{LaterPages: true}},
		{"condition fields dropped on pages 2+", openstacksim.FieldLoss{LaterPages: true,
			Drop: []string{"maintenance_reason", "fault", "last_error", "resource_class", "owner", "lessee", "traits", "target_provision_state", "provision_updated_at"}}},
		{"fields back", openstacksim.FieldLoss{}},
	} {
		sim.SetFieldLoss(phase.loss)
		held := a.Stats().HeldConditions
		if err := a.Poll(ctx); err != nil {
			t.Fatalf("%s: %v", phase.name, err)
		}
		if got := out.Take(a.Snapshot); len(got) != 0 {
			for _, b := range got {
				for _, d := range b.GetDevices() {
					t.Errorf("%s: delta for %s: facts %v conditions %v", phase.name, before[d.GetDeviceId()].GetFacts().GetName(), d.GetFacts(), d.GetConditions())
				}
			}
			t.Fatalf("%s: the poll pushed %d batches; want none (nothing changed in Ironic)", phase.name, len(got))
		}
		after := byDevice(freshSnapshot(t, out, a))
		for id, want := range before {
			got := after[id]
			if !proto.Equal(got.GetFacts(), want.GetFacts()) {
				t.Errorf("%s: facts of %s changed: %v → %v", phase.name, want.GetFacts().GetName(), want.GetFacts(), got.GetFacts())
			}
			for i, c := range want.GetConditions() {
				g := got.GetConditions()[i]
				if g.GetStatus() != c.GetStatus() || g.GetReason() != c.GetReason() || g.GetMessage() != c.GetMessage() {
					t.Errorf("%s: %s %s: %v/%s %q → %v/%s %q", phase.name, want.GetFacts().GetName(), c.GetType(),
						c.GetStatus(), c.GetReason(), c.GetMessage(), g.GetStatus(), g.GetReason(), g.GetMessage())
				}
			}
		}
		if phase.loss.LaterPages && a.Stats().HeldConditions == held {
			t.Errorf("%s: no condition reported held", phase.name)
		}
	}
}

// A satellite whose very first listing lacks fields has no last known
// value: the conditions that need them are Unknown/FieldUnavailable (never
// False, never a guess), the others are computed; when the fields come back
// they get their real value.
func TestFieldsLeftOutOfFirstListingAreUnknown(t *testing.T) {
	ctx := context.Background()
	sim, newA, out := fieldSite(t)
	sim.SetFieldLoss(openstacksim.FieldLoss{LaterPages: true})
	a := newA()
	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	devs := freshSnapshot(t, out, a)
	unknown := map[condition.Type]int{}
	for _, d := range devs {
		for _, c := range d.GetConditions() {
			if c.GetReason() == conditions.ReasonFieldUnavailable {
				if c.GetStatus() != ironlinkv1.ConditionStatus_CONDITION_STATUS_UNKNOWN {
					t.Errorf("%s %s FieldUnavailable with status %v", d.GetFacts().GetName(), c.GetType(), c.GetStatus())
				}
				unknown[condition.Type(c.GetType())]++
			}
		}
	}
	// Pages 2+ hold 17 nodes; all of them lack traits (CustomerReady) and
	// lessee (CustomerAllocated); the pool's and the maintenance nodes lack
	// resource_class and fault.
	if unknown[condition.CustomerReady] != 17 || unknown[condition.CustomerAllocated] != 17 {
		t.Errorf("FieldUnavailable counts %v; want CustomerReady and CustomerAllocated on the 17 nodes of pages 2+", unknown)
	}
	if unknown[condition.InValidationPool] == 0 || unknown[condition.MaintenanceClear] == 0 || unknown[condition.ProvisioningHealthy] == 0 {
		t.Errorf("FieldUnavailable counts %v; want InValidationPool, MaintenanceClear and ProvisioningHealthy among them", unknown)
	}
	sim.SetFieldLoss(openstacksim.FieldLoss{})
	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	for _, d := range freshSnapshot(t, out, a) {
		for _, c := range d.GetConditions() {
			if c.GetReason() == conditions.ReasonFieldUnavailable {
				t.Errorf("after a complete listing %s %s is still FieldUnavailable: %s", d.GetFacts().GetName(), c.GetType(), c.GetMessage())
			}
		}
	}
}

// A sweep's single-node re-read that lacks fields (Ironic or a proxy
// dropping them from GET /v1/nodes/{id}) changes nothing either: the
// assigned node keeps its maintenance fault, lessee and instance, and no
// orphan is suspected for an instance_uuid that was merely not sent.
func TestSweepReadLackingFieldsFlipsNothing(t *testing.T) {
	s := newSweepSite(t, openstacksim.Options{})
	inst := "0b3f9c2e-4444-4c55-9a1e-3f2b8c7d6e5f"
	busy := s.node(t, "n-busy", "active", inst)
	if err := s.sim.UpdateNode(busy, func(n *openstacksim.Node) {
		n.Maintenance, n.Fault, n.MaintenanceReason, n.Lessee = true, "power failure", "BMC unreachable", "customer"
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.sim.AddServer(openstacksim.Server{ID: inst, TenantID: "customer", Status: "ACTIVE", HypervisorHostname: busy}); err != nil {
		t.Fatal(err)
	}
	s.poll(t)
	before := s.device(t, busy)
	s.sim.SetFieldLoss(openstacksim.FieldLoss{SingleNode: true, Drop: []string{"fault", "maintenance_reason", "lessee", "instance_uuid"}})
	for range 2 { // two sweeps: an orphan would be reported on the second
		s.sweep(t)
	}
	after := s.device(t, busy)
	if !proto.Equal(before.GetFacts(), after.GetFacts()) {
		t.Errorf("facts changed: %v → %v", before.GetFacts(), after.GetFacts())
	}
	for i, c := range before.GetConditions() {
		g := after.GetConditions()[i]
		if g.GetStatus() != c.GetStatus() || g.GetReason() != c.GetReason() || g.GetMessage() != c.GetMessage() {
			t.Errorf("%s: %v/%s %q → %v/%s %q", c.GetType(), c.GetStatus(), c.GetReason(), c.GetMessage(), g.GetStatus(), g.GetReason(), g.GetMessage())
		}
	}
	if st := s.a.Stats(); st.InstanceMismatches != 0 || st.LastSweep.Candidates != 0 {
		t.Errorf("orphans from a read that lacked instance_uuid: %+v", st.LastSweep)
	}
}
