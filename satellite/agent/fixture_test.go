package agent_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/testlog"
	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/site"
)

// fixtureSite is an agent over an in-memory site (no HTTP): n available
// nodes, each with a resource provider carrying the gate trait.
type fixtureSite struct {
	f   *site.Fixture
	a   *agent.Agent
	out *link.Outbox
	ids []string
}

func newFixtureSite(t *testing.T, n int, withNova bool) *fixtureSite {
	t.Helper()
	f := site.NewFixture()
	f.DefineTrait(agent.ReadyTrait)
	s := &fixtureSite{f: f, out: link.NewOutbox()}
	for i := range n {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		f.PutNode(ironic.Node{UUID: id, Name: fmt.Sprintf("fx-%d", i), ProvisionState: "available", PowerState: "power off",
			ResourceClass: "gpu", Traits: []string{agent.ReadyTrait}})
		f.PutProvider(id, agent.ReadyTrait)
		s.ids = append(s.ids, id)
	}
	cl := agent.Clients{Ironic: f, Placement: f}
	if withNova {
		cl.Nova = f
	}
	s.out.MaxBatches = 1 << 20
	s.a = agent.New(agent.Config{PollInterval: time.Hour}, cl, s.out, link.NewSiteState(nil), testlog.Discard())
	return s
}

// poll polls and returns the device updates it pushed (after a snapshot
// has been taken once, so the outbox streams deltas).
func (s *fixtureSite) poll(t *testing.T) []*ironlinkv1.DeviceUpdate {
	t.Helper()
	err := s.a.Poll(context.Background())
	var devs []*ironlinkv1.DeviceUpdate
	for _, b := range s.out.Take(s.a.Snapshot) {
		if b.GetSnapshot() != nil {
			continue
		}
		devs = append(devs, b.GetDevices()...)
	}
	if err != nil {
		t.Logf("poll: %v", err)
	}
	return devs
}

// Poll diffing, without HTTP: a first listing yields every device; an
// unchanged one yields nothing; one changed field yields one update with
// only the condition it moved; a deleted node yields one removal; a failed
// listing yields nothing and removes nothing.
func TestPollDiffsOverFixture(t *testing.T) {
	s := newFixtureSite(t, 3, false)
	s.poll(t) // first listing: the snapshot carries it
	if got := s.poll(t); len(got) != 0 {
		t.Fatalf("unchanged site: %d updates", len(got))
	}
	s.f.UpdateNode(s.ids[0], func(n *ironic.Node) { n.Maintenance, n.MaintenanceReason = true, "PSU" })
	got := s.poll(t)
	if len(got) != 1 || got[0].GetDeviceId() != s.ids[0] || len(got[0].GetConditions()) != 1 ||
		got[0].GetConditions()[0].GetType() != string(condition.MaintenanceClear) || !got[0].GetFacts().GetMaintenance() {
		t.Fatalf("maintenance: updates %v", got)
	}
	s.f.RemoveNode(s.ids[1])
	got = s.poll(t)
	if len(got) != 1 || got[0].GetDeviceId() != s.ids[1] || !got[0].GetRemoved() {
		t.Fatalf("deletion: updates %v", got)
	}
	s.f.RemoveNode(s.ids[2])
	s.f.Fail(site.MethodListNodes, "", fmt.Errorf("%w: page 2: 503", ironic.ErrListingIncomplete), 1)
	if got := s.poll(t); len(got) != 0 {
		t.Fatalf("failed listing pushed %v", got)
	}
	if st := s.a.Stats(); st.FailedPolls != 1 {
		t.Fatalf("failed polls %d, want 1", st.FailedPolls)
	}
	if got := s.poll(t); len(got) != 1 || !got[0].GetRemoved() || got[0].GetDeviceId() != s.ids[2] {
		t.Fatalf("after the failure: updates %v", got)
	}
}

// Resync decisions, without HTTP, judged by the calls made: a converged
// site costs reads only; one drifted device costs one write and is one
// correction; a desired state not applied before is applied, not drift; a
// failed write is no correction and is retried by the next resync.
func TestResyncDecisionsOverFixture(t *testing.T) {
	ctx := context.Background()
	s := newFixtureSite(t, 4, false)
	s.poll(t)
	q := func(id string, gen int64) *ironlinkv1.DeviceDesiredState {
		return &ironlinkv1.DeviceDesiredState{DeviceId: id, Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED, Generation: gen}
	}
	r := func(id string, gen int64) *ironlinkv1.DeviceDesiredState {
		return &ironlinkv1.DeviceDesiredState{DeviceId: id, Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED, Generation: gen}
	}
	// The released devices are converged already (trait everywhere).
	states := &ironlinkv1.DesiredStates{Devices: []*ironlinkv1.DeviceDesiredState{r(s.ids[0], 1), r(s.ids[1], 1), q(s.ids[2], 1)}}

	for _, step := range []struct {
		name        string
		before      func()
		wantWrites  int
		corrections int
		firsts      int // cumulative Stats.ResyncFirstApplies
		failed      bool
	}{
		{name: "first resync: the quarantine is a first application", wantWrites: 2, firsts: 1},
		{name: "converged: reads only", wantWrites: 0, firsts: 1},
		{name: "a provider drifted: one write, one correction",
			before: func() { s.f.PutProvider(s.ids[0]) }, wantWrites: 1, corrections: 1, firsts: 1},
		{name: "the write fails: no correction",
			before: func() {
				s.f.PutProvider(s.ids[1])
				s.f.Fail(site.MethodSetProviderTrait, s.ids[1], errors.New("placement: 503"), 1)
			}, wantWrites: 0, firsts: 1, failed: true},
		{name: "the next resync corrects it", wantWrites: 1, corrections: 1, firsts: 1},
	} {
		if step.before != nil {
			step.before()
		}
		s.f.ResetCalls()
		got := s.a.HandleDesiredStates(ctx, states)
		writes := s.f.Writes()
		if len(writes) != step.wantWrites {
			t.Errorf("%s: %d writes %v, want %d", step.name, len(writes), writes, step.wantWrites)
		}
		if len(got) != step.corrections {
			t.Errorf("%s: corrections %v, want %d", step.name, got, step.corrections)
		}
		if st := s.a.Stats(); st.ResyncFirstApplies != step.firsts {
			t.Errorf("%s: first applications %d, want %d", step.name, st.ResyncFirstApplies, step.firsts)
		}
		failedCall := false
		for _, c := range s.f.Calls() {
			failedCall = failedCall || c.Err != nil
		}
		if failedCall != step.failed {
			t.Errorf("%s: a call failed: %v, want %v (%v)", step.name, failedCall, step.failed, s.f.Calls())
		}
	}
	// The never-commanded device was never written.
	if n := s.f.Changes(s.ids[3]); n != 0 {
		t.Errorf("never-commanded device changed %d times", n)
	}
}

// The sweep's two-sweep orphan rule, without HTTP: an instance_uuid Nova
// does not know is a suspect after one sweep, reported after the second;
// a failed lookup keeps the report; once Nova has the server it is gone.
func TestSweepOrphanOverFixture(t *testing.T) {
	ctx := context.Background()
	s := newFixtureSite(t, 2, true)
	inst := "11111111-1111-4111-8111-111111111111"
	s.f.UpdateNode(s.ids[0], func(n *ironic.Node) { n.ProvisionState, n.InstanceUUID = "active", inst })
	s.poll(t)
	instanceAllocated := func() *ironlinkv1.Condition {
		devs, ok := s.a.Snapshot()
		if !ok {
			t.Fatal("no snapshot")
		}
		for _, d := range devs {
			if d.GetDeviceId() == s.ids[0] {
				return cond(d, condition.InstanceAllocated)
			}
		}
		t.Fatal("device missing")
		return nil
	}
	for i, step := range []struct {
		name     string
		before   func()
		reported int
		reason   string
	}{
		{name: "first sweep: suspect only", reported: 0, reason: "NovaInstance"},
		{name: "second sweep: reported", reported: 1, reason: "InstanceRecordMismatch"},
		{name: "lookup fails: the report stays", before: func() {
			s.f.Fail(site.MethodGetServer, inst, errors.New("nova: 503"), 1)
		}, reported: 1, reason: "InstanceRecordMismatch"},
		{name: "Nova has the server: cleared", before: func() {
			s.f.SetServers(nova.Server{ID: inst, TenantID: "p", Status: "ACTIVE", HypervisorHostname: s.ids[0], HypervisorVisible: true})
		}, reported: 0, reason: "NovaInstance"},
	} {
		if step.before != nil {
			step.before()
		}
		_ = s.a.Sweep(ctx)
		if st := s.a.Stats(); st.InstanceMismatches != step.reported || st.Sweeps != i+1 {
			t.Errorf("%s: stats %+v, want %d reported", step.name, st, step.reported)
		}
		if c := instanceAllocated(); c.GetReason() != step.reason {
			t.Errorf("%s: InstanceAllocated %s (%s), want %s", step.name, c.GetReason(), c.GetMessage(), step.reason)
		}
	}
}

// A listing whose answer lacked one node's traits does not cost the resync
// its bulk read: only that node is checked one by one.
func TestResyncChecksOnlyNodesListedWithoutTraits(t *testing.T) {
	ctx := context.Background()
	s := newFixtureSite(t, 3, false)
	s.poll(t)
	states := &ironlinkv1.DesiredStates{}
	for _, id := range s.ids {
		states.Devices = append(states.Devices, &ironlinkv1.DeviceDesiredState{DeviceId: id, Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED, Generation: 1})
	}
	s.a.HandleDesiredStates(ctx, states) // applied (converged already)
	s.f.UpdateNode(s.ids[1], func(n *ironic.Node) {
		n.Unsent, n.Missing = map[string]bool{"traits": true}, map[string]bool{"traits": true}
	})
	s.f.ResetCalls()
	if got := s.a.HandleDesiredStates(ctx, states); len(got) != 0 {
		t.Fatalf("corrections %v", got)
	}
	var oneByOne []string
	for _, c := range s.f.Calls() {
		if c.Method == site.MethodNodeTraits {
			oneByOne = append(oneByOne, c.ID)
		}
	}
	if len(oneByOne) != 1 || oneByOne[0] != s.ids[1] {
		t.Fatalf("checked one by one: %v, want only %s", oneByOne, s.ids[1])
	}
	if st := s.a.Stats(); st.LastResyncApplied != 1 {
		t.Fatalf("LastResyncApplied %d, want 1", st.LastResyncApplied)
	}
}

// Commands over the fixture, judged by the result and the writes: a
// quarantine removes the gate trait on both sides and a repeat writes
// nothing; each failure gets its class — permanent for what repeating
// cannot fix (an invalid or stale command, a node Ironic no longer has),
// transient for what it can (a node locked past the write retries).
func TestCommandResultsOverFixture(t *testing.T) {
	ctx := context.Background()
	s := newFixtureSite(t, 3, false)
	s.poll(t)
	cmd := func(id string, gen int64, desired ironlinkv1.ImpairmentState) *ironlinkv1.CommandResult {
		return s.a.HandleCommand(ctx, &ironlinkv1.Command{CommandId: fmt.Sprintf("c-%s-%d", id, gen), DeviceId: id, Generation: gen, Desired: desired})
	}
	const q = ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED
	const permanent, transient = ironlinkv1.FailureClass_FAILURE_CLASS_PERMANENT, ironlinkv1.FailureClass_FAILURE_CLASS_TRANSIENT

	if r := cmd(s.ids[0], 1, q); !r.GetSuccess() {
		t.Fatalf("quarantine: %v", r)
	}
	if n, _ := s.f.Node(s.ids[0]); n.HasTrait(agent.ReadyTrait) {
		t.Error("node keeps the gate trait after a quarantine")
	}
	if traits, _ := s.f.Provider(s.ids[0]); len(traits) != 0 {
		t.Errorf("provider traits %v after a quarantine", traits)
	}
	writes := len(s.f.Writes())
	if r := cmd(s.ids[0], 1, q); !r.GetSuccess() || len(s.f.Writes()) != writes {
		t.Errorf("repeat: %v, %d more writes", r, len(s.f.Writes())-writes)
	}

	s.f.RemoveNode(s.ids[2])
	s.f.Fail(site.MethodRemoveTrait, s.ids[1], fmt.Errorf("%w: remove trait still refused with 409", ironic.ErrNodeLocked), 1)
	for _, tc := range []struct {
		name   string
		res    *ironlinkv1.CommandResult
		class  ironlinkv1.FailureClass
		reason string
	}{
		{"invalid desired state", cmd(s.ids[1], 1, ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_UNSPECIFIED), permanent, "InvalidCommand"},
		{"stale generation", cmd(s.ids[0], 0, q), permanent, "StaleGeneration"},
		{"node gone", cmd(s.ids[2], 1, q), permanent, "NodeNotFound"},
		{"node locked", cmd(s.ids[1], 2, q), transient, "NodeLocked"},
	} {
		if tc.res.GetSuccess() || tc.res.GetFailureClass() != tc.class || tc.res.GetFailureReason() != tc.reason {
			t.Errorf("%s: success %v class %v reason %q (%s), want %v %q", tc.name, tc.res.GetSuccess(),
				tc.res.GetFailureClass(), tc.res.GetFailureReason(), tc.res.GetError(), tc.class, tc.reason)
		}
	}
}

// Placement unreadable during a poll keeps each device's last CustomerReady:
// Ironic was read, so the poll goes on, and a gate change on Placement's
// side that it could not see sends nothing until Placement is back.
func TestPlacementOutageKeepsCustomerReady(t *testing.T) {
	s := newFixtureSite(t, 5, false)
	s.poll(t)
	s.f.PutProvider(s.ids[0]) // the gate trait goes from the provider
	s.f.Fail(site.MethodProviders, "", errors.New("placement: 503 Service Unavailable"), -1)
	if got := s.poll(t); len(got) != 0 {
		t.Fatalf("placement outage produced deltas: %v", got)
	}
	if st := s.a.Stats(); st.FailedPolls != 0 || st.Polls != 2 {
		t.Fatalf("the poll should go on with Ironic read: %+v", st)
	}
	s.f.ClearFailures()
	if got := s.poll(t); len(got) != 1 || got[0].GetDeviceId() != s.ids[0] {
		t.Fatalf("Placement back: updates %v, want one for %s", got, s.ids[0])
	}
}
