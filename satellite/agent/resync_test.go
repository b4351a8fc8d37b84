package agent_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/testlog"
	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/site"
)

// The resync's tests run on site.Fixture (no HTTP).

// The resync heals what someone undid behind ironlink's back: a quarantined
// device whose provider got the trait back, and a released device whose
// provider lost it and whose node lost it too. Untouched devices are left alone.
func TestResyncCorrectsDriftAndReportsIt(t *testing.T) {
	ctx := context.Background()
	s := newFixtureSite(t, 3, false)
	a, f := s.a, s.f
	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	q, r, untouched := s.ids[0], s.ids[1], s.ids[2]
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
	traits, _ := f.Provider(q)
	f.PutProvider(q, append(traits, agent.ReadyTrait)...)
	traits, _ = f.Provider(r)
	f.PutProvider(r, slices.DeleteFunc(traits, func(s string) bool { return s == agent.ReadyTrait })...)
	f.UpdateNode(r, func(n *ironic.Node) {
		n.Traits = slices.DeleteFunc(n.Traits, func(s string) bool { return s == agent.ReadyTrait })
	})
	untouchedBefore, _ := f.Provider(untouched)
	f.PutProvider(untouched)

	got := a.HandleDesiredStates(ctx, states)
	if len(got) != 2 {
		t.Fatalf("want 2 corrections, got %v", got)
	}
	for _, c := range got {
		if c.GetGeneration() != 1 || !strings.HasPrefix(c.GetDetail(), "resync: ") || c.GetCorrectTime() == nil {
			t.Errorf("correction %v", c)
		}
	}
	if tr, _ := f.Provider(q); slices.Contains(tr, agent.ReadyTrait) {
		t.Errorf("quarantined provider still has the trait: %v", tr)
	}
	if tr, _ := f.Provider(r); !slices.Contains(tr, agent.ReadyTrait) {
		t.Errorf("released provider lacks the trait: %v", tr)
	}
	if n, _ := f.Node(r); !slices.Contains(n.Traits, agent.ReadyTrait) {
		t.Errorf("released node lacks the trait: %v", n.Traits)
	}
	if tr, _ := f.Provider(untouched); len(tr) != 0 {
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
	if tr, _ := f.Provider(q); slices.Contains(tr, agent.ReadyTrait) {
		t.Errorf("stale release put the trait back: %v", tr)
	}
}

// A desired state the satellite had not applied yet (a quarantine accepted
// while the link was down, applied by the new link's resync before the
// command arrives) is applied by the resync but is not drift: no
// DriftCorrection, counted as a first application. The same state found
// changed behind ironlink's back on a later resync is drift. (Before the
// fix the first application was reported as a drift correction.)
func TestResyncFirstApplicationIsNotDrift(t *testing.T) {
	ctx := context.Background()
	s := newFixtureSite(t, 2, false)
	a, f := s.a, s.f
	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	q := s.ids[0]
	states := &ironlinkv1.DesiredStates{Devices: []*ironlinkv1.DeviceDesiredState{
		{DeviceId: q, Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED, Generation: 1},
	}}
	if got := a.HandleDesiredStates(ctx, states); len(got) != 0 {
		t.Fatalf("first application of generation 1 reported as drift: %v", got)
	}
	if tr, _ := f.Provider(q); slices.Contains(tr, agent.ReadyTrait) {
		t.Fatalf("the resync did not apply the quarantine: provider %v", tr)
	}
	if st := a.Stats(); st.DriftCorrections != 0 || st.ResyncFirstApplies != 1 {
		t.Fatalf("stats %+v; want 0 drift corrections, 1 first application", st)
	}
	// The command the hub resends afterwards finds it applied.
	res := a.HandleCommand(ctx, &ironlinkv1.Command{CommandId: "c1", DeviceId: q, Generation: 1, Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED})
	if !res.GetSuccess() || !strings.Contains(res.GetDetail(), "already absent") {
		t.Fatalf("command after the resync: %v", res)
	}
	// Now someone puts the trait back: that is drift.
	traits, _ := f.Provider(q)
	f.PutProvider(q, append(traits, agent.ReadyTrait)...)
	if got := a.HandleDesiredStates(ctx, states); len(got) != 1 || got[0].GetGeneration() != 1 {
		t.Fatalf("drift of an applied state: corrections %v, want 1", got)
	}
	if st := a.Stats(); st.DriftCorrections != 1 || st.ResyncFirstApplies != 1 {
		t.Fatalf("stats %+v; want 1 drift correction, 1 first application", st)
	}
}

// With DesiredStatesWait the first snapshot waits for the hub's desired
// states, so a satellite without its state file never reports a commanded
// device as uncommanded first: its CustomerReady is Quarantined with the
// hub's generation in the very first snapshot. Without desired states the
// snapshot goes when the wait ends.
func TestFirstSnapshotCarriesDesiredStates(t *testing.T) {
	ctx := context.Background()
	f := site.NewFixture()
	f.DefineTrait(agent.ReadyTrait)
	var ids []string
	for i := range 2 {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		f.PutNode(ironic.Node{UUID: id, Name: fmt.Sprintf("w-%d", i), ProvisionState: "available"})
		f.PutProvider(id) // quarantined: no trait anywhere
		ids = append(ids, id)
	}
	newA := func(wait time.Duration) (*agent.Agent, *link.Outbox) {
		out := link.NewOutbox()
		cl := agent.Clients{Ironic: f, Placement: f}
		return agent.New(agent.Config{PollInterval: time.Hour, DesiredStatesWait: wait}, cl, out, nil, testlog.Discard()), out
	}
	a, out := newA(time.Hour)
	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := out.Take(a.Snapshot); len(got) != 0 {
		t.Fatalf("snapshot sent before the desired states: %v", got)
	}
	a.HandleDesiredStates(ctx, &ironlinkv1.DesiredStates{Devices: []*ironlinkv1.DeviceDesiredState{
		{DeviceId: ids[0], Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED, Generation: 3},
	}})
	var devs []*ironlinkv1.DeviceUpdate
	for _, b := range out.Take(a.Snapshot) {
		devs = append(devs, b.GetDevices()...)
	}
	if len(devs) != 2 {
		t.Fatalf("snapshot after the desired states has %d devices, want 2", len(devs))
	}
	for _, d := range devs {
		for _, cd := range d.GetConditions() {
			if cd.GetType() != "CustomerReady" {
				continue
			}
			wantReason, wantGen := "TraitAbsent", int64(0)
			if d.GetDeviceId() == ids[0] {
				wantReason, wantGen = "Quarantined", 3
			}
			if cd.GetReason() != wantReason || cd.GetObservedGeneration() != wantGen {
				t.Errorf("device %s CustomerReady %s gen %d, want %s gen %d", d.GetDeviceId(), cd.GetReason(), cd.GetObservedGeneration(), wantReason, wantGen)
			}
		}
	}

	// No desired states at all: the snapshot goes when the wait ends.
	a, out = newA(200 * time.Millisecond)
	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := out.Take(a.Snapshot); len(got) != 0 {
		t.Fatalf("snapshot sent before the wait ended: %v", got)
	}
	<-out.Wake() // the poll's push
	select {
	case <-out.Wake():
	case <-time.After(10 * time.Second):
		t.Fatal("the end of the wait did not wake the sender")
	}
	if got := out.Take(a.Snapshot); len(got) == 0 {
		t.Fatal("no snapshot after the wait ended")
	}
}
