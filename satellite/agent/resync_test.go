package agent_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
)

// The resync heals what someone undid behind ironlink's back: a quarantined
// device whose provider got the trait back, and a released device whose
// provider lost it and whose node lost it too. Untouched devices are left alone.
func TestResyncCorrectsDriftAndReportsIt(t *testing.T) {
	ctx := context.Background()
	sim, a, _ := newAgent(t, openstacksim.Options{}, 3)
	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	nodes := sim.Nodes()
	q, r, untouched := nodes[0].UUID, nodes[1].UUID, nodes[2].UUID
	for _, c := range []*ironlinkv1.Command{
		{CommandId: "c1", DeviceId: q, Generation: 1, Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED},
		{CommandId: "c2", DeviceId: r, Generation: 1, Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED},
	} {
		if res := a.HandleCommand(ctx, c); !res.GetSuccess() {
			t.Fatalf("apply %s: %s", c.GetCommandId(), res.GetError())
		}
	}
	states := &ironlinkv1.DesiredStates{Devices: []*ironlinkv1.DeviceDesiredState{
		{DeviceId: q, Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED, Generation: 1},
		{DeviceId: r, Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED, Generation: 1},
	}}
	if got := a.HandleDesiredStates(ctx, states); len(got) != 0 {
		t.Fatalf("no drift yet, but %d corrections: %v", len(got), got)
	}
	// Behind ironlink's back.
	traits, _, _ := sim.ProviderTraits(q)
	if err := sim.SetProviderTraits(q, append(traits, openstacksim.ReadyTrait)); err != nil {
		t.Fatal(err)
	}
	traits, _, _ = sim.ProviderTraits(r)
	if err := sim.SetProviderTraits(r, slices.DeleteFunc(traits, func(s string) bool { return s == openstacksim.ReadyTrait })); err != nil {
		t.Fatal(err)
	}
	_ = sim.UpdateNode(r, func(n *openstacksim.Node) {
		n.Traits = slices.DeleteFunc(n.Traits, func(s string) bool { return s == openstacksim.ReadyTrait })
	})
	untouchedBefore, _, _ := sim.ProviderTraits(untouched)
	_ = sim.SetProviderTraits(untouched, nil)

	got := a.HandleDesiredStates(ctx, states)
	if len(got) != 2 {
		t.Fatalf("want 2 corrections, got %v", got)
	}
	for _, c := range got {
		if c.GetGeneration() != 1 || !strings.HasPrefix(c.GetDetail(), "resync: ") || c.GetCorrectTime() == nil {
			t.Errorf("correction %v", c)
		}
	}
	if tr, _, _ := sim.ProviderTraits(q); slices.Contains(tr, openstacksim.ReadyTrait) {
		t.Errorf("quarantined provider still has the trait: %v", tr)
	}
	if tr, _, _ := sim.ProviderTraits(r); !slices.Contains(tr, openstacksim.ReadyTrait) {
		t.Errorf("released provider lacks the trait: %v", tr)
	}
	if n, _ := sim.Node(r); !slices.Contains(n.Traits, openstacksim.ReadyTrait) {
		t.Errorf("released node lacks the trait: %v", n.Traits)
	}
	if tr, _, _ := sim.ProviderTraits(untouched); len(tr) != 0 {
		t.Errorf("never-touched device was changed: %v (had %v)", tr, untouchedBefore)
	}
	if st := a.Stats(); st.Resyncs != 2 || st.DriftCorrections != 2 {
		t.Errorf("stats %+v", st)
	}
	// A desired state older than what was applied is not re-applied backwards.
	if got := a.HandleDesiredStates(ctx, &ironlinkv1.DesiredStates{Devices: []*ironlinkv1.DeviceDesiredState{
		{DeviceId: q, Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED, Generation: 0},
	}}); len(got) != 0 {
		t.Fatalf("stale desired state applied: %v", got)
	}
	if tr, _, _ := sim.ProviderTraits(q); slices.Contains(tr, openstacksim.ReadyTrait) {
		t.Errorf("stale release put the trait back: %v", tr)
	}
}
