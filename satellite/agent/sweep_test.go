package agent_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
	"github.com/ironlink/ironlink/satellite/placement"
)

// sweepSite is a simulated site with Nova and an agent whose site
// conditions are kept.
type sweepSite struct {
	sim     *openstacksim.Cloud
	a       *agent.Agent
	site    *link.SiteState
	restart func() // a new agent on the same clients and state file
}

func newSweepSite(t *testing.T, opts openstacksim.Options) *sweepSite {
	t.Helper()
	return newSweepSiteWith(t, opts, agent.Config{PollInterval: time.Hour})
}

func newSweepSiteWith(t *testing.T, opts openstacksim.Options, cfg agent.Config) *sweepSite {
	t.Helper()
	sim, c := ostest.ConnectSim(t, opts)
	sim.DefineTrait("CUSTOM_CUSTOMER_READY")
	ir := ironic.New(c.Baremetal, ostest.Logger(t))
	ir.ReadRetry = ostest.FastRetry(2)
	cl := agent.Clients{Ironic: ir}
	if c.Placement != nil {
		pl := placement.New(c.Placement, ostest.Logger(t))
		pl.ReadRetry = ostest.FastRetry(2)
		cl.Placement = pl
	}
	if c.Compute != nil {
		nv := nova.New(c.Compute, ostest.Logger(t))
		nv.ReadRetry = ostest.FastRetry(2)
		cl.Nova = nv
	}
	out := link.NewOutbox()
	out.MaxBatches = 1 << 20
	site := link.NewSiteState(nil)
	s := &sweepSite{sim: sim, site: site, a: agent.New(cfg, cl, out, site, ostest.Logger(t))}
	s.restart = func() {
		s.site = link.NewSiteState(nil)
		s.a = agent.New(cfg, cl, out, s.site, ostest.Logger(t))
		if err := s.a.LoadState(); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func (s *sweepSite) node(t *testing.T, name, state, instance string) string {
	t.Helper()
	n := s.sim.AddNode(openstacksim.Node{Name: name, ProvisionState: state, PowerState: "power on", ResourceClass: "gpu-h100", InstanceUUID: instance})
	s.sim.AddProvider(n.UUID, n.UUID, nil)
	return n.UUID
}

func (s *sweepSite) poll(t *testing.T) {
	t.Helper()
	if err := s.a.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (s *sweepSite) sweep(t *testing.T) {
	t.Helper()
	if err := s.a.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// device returns the device's current facts and conditions (as a new link's
// snapshot would send them).
func (s *sweepSite) device(t *testing.T, id string) *ironlinkv1.DeviceUpdate {
	t.Helper()
	return snapshotDevice(t, s.a, id)
}

// snapshotDevice returns device id as a new link's snapshot would send it.
func snapshotDevice(t *testing.T, a *agent.Agent, id string) *ironlinkv1.DeviceUpdate {
	t.Helper()
	devs, ok := a.Snapshot()
	if !ok {
		t.Fatal("no snapshot")
	}
	for _, d := range devs {
		if d.GetDeviceId() == id {
			return d
		}
	}
	t.Fatalf("device %s not in the snapshot", id)
	return nil
}

func cond(d *ironlinkv1.DeviceUpdate, typ condition.Type) *ironlinkv1.Condition {
	for _, c := range d.GetConditions() {
		if c.GetType() == string(typ) {
			return c
		}
	}
	return nil
}

// An instance_uuid Nova does not know is reported on the second sweep, with
// both ids, and cleared once Nova has the server.
func TestSweepReportsIronicSideOrphanAfterTwoSweeps(t *testing.T) {
	s := newSweepSite(t, openstacksim.Options{})
	ghost := "0b3f9c2e-7d41-4c55-9a1e-3f2b8c7d6e5f"
	orphan := s.node(t, "n-orphan", "active", ghost)
	good := s.node(t, "n-good", "active", "")
	srv, err := s.sim.AddServer(openstacksim.Server{HypervisorHostname: good, TenantID: "p-cust"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.sim.UpdateNode(good, func(n *openstacksim.Node) { n.InstanceUUID = srv.ID }); err != nil {
		t.Fatal(err)
	}
	s.poll(t)
	s.sweep(t)
	if ms := s.device(t, orphan).GetFacts().GetInstanceMismatches(); len(ms) != 0 {
		t.Fatalf("reported after one sweep: %v", ms)
	}
	if st := s.a.Stats().LastSweep; st.Candidates != 1 || st.Reported != 0 || !st.Judged {
		t.Fatalf("first sweep stats %+v, want 1 candidate, 0 reported", st)
	}
	s.sweep(t)
	d := s.device(t, orphan)
	ms := d.GetFacts().GetInstanceMismatches()
	if len(ms) != 1 || ms[0].GetKind() != ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NOVA_UNKNOWN ||
		ms[0].GetIronicInstanceUuid() != ghost || ms[0].GetNovaServerId() != ghost || ms[0].GetFirstSeenTime() == nil {
		t.Fatalf("mismatches %v", ms)
	}
	c := cond(d, condition.InstanceAllocated)
	if c.GetStatus() != ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE || c.GetReason() != "InstanceRecordMismatch" || !strings.Contains(c.GetMessage(), ghost) {
		t.Fatalf("InstanceAllocated %v", c)
	}
	if ms := s.device(t, good).GetFacts().GetInstanceMismatches(); len(ms) != 0 {
		t.Fatalf("consistent node reported: %v", ms)
	}
	// The good node's CustomerAllocated uses the server's project from Nova.
	if c := cond(s.device(t, good), condition.CustomerAllocated); c.GetStatus() != ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE || !strings.Contains(c.GetMessage(), "p-cust") {
		t.Fatalf("CustomerAllocated of the good node %v", c)
	}
	// The operator repairs it (Nova gets the server): the next sweep clears it.
	if _, err := s.sim.AddServer(openstacksim.Server{ID: ghost, HypervisorHostname: orphan}); err != nil {
		t.Fatal(err)
	}
	s.sweep(t)
	d = s.device(t, orphan)
	if ms := d.GetFacts().GetInstanceMismatches(); len(ms) != 0 {
		t.Fatalf("still reported after repair: %v", ms)
	}
	if c := cond(d, condition.InstanceAllocated); c.GetStatus() != ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE || c.GetReason() != "NovaInstance" {
		t.Fatalf("InstanceAllocated after repair %v", c)
	}
	if st := s.a.Stats(); st.InstanceMismatches != 0 {
		t.Fatalf("stats still count %d mismatches", st.InstanceMismatches)
	}
}

// A live server on a node whose instance_uuid is empty is reported as
// NODE_UNAWARE on the second sweep; a deleted server on a node that still
// points at it is NOVA_UNKNOWN with Nova's status.
func TestSweepReportsNovaSideOrphan(t *testing.T) {
	s := newSweepSite(t, openstacksim.Options{})
	bare := s.node(t, "n-bare", "available", "")
	srv, err := s.sim.AddServer(openstacksim.Server{HypervisorHostname: bare, TenantID: "p-cust"})
	if err != nil {
		t.Fatal(err)
	}
	s.poll(t)
	s.sweep(t)
	s.sweep(t)
	ms := s.device(t, bare).GetFacts().GetInstanceMismatches()
	if len(ms) != 1 || ms[0].GetKind() != ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NODE_UNAWARE ||
		ms[0].GetNovaServerId() != srv.ID || ms[0].GetIronicInstanceUuid() != "" || ms[0].GetNovaProjectId() != "p-cust" {
		t.Fatalf("mismatches %v", ms)
	}
	if c := cond(s.device(t, bare), condition.InstanceAllocated); c.GetStatus() != ironlinkv1.ConditionStatus_CONDITION_STATUS_UNKNOWN ||
		c.GetReason() != "InstanceRecordMismatch" || !strings.Contains(c.GetMessage(), srv.ID) {
		t.Fatalf("InstanceAllocated %v", c)
	}
}

// Transient states are never judged: a deploying node whose instance Nova
// does not show yet, and a server Nova is still spawning.
func TestSweepExcludesTransientStates(t *testing.T) {
	s := newSweepSite(t, openstacksim.Options{})
	deploying := s.node(t, "n-deploying", "wait call-back", "5d1c7a6e-1111-4c55-9a1e-3f2b8c7d6e5f")
	spawning := s.node(t, "n-spawning", "available", "")
	if _, err := s.sim.AddServer(openstacksim.Server{HypervisorHostname: spawning, Status: "BUILD", TaskState: "spawning"}); err != nil {
		t.Fatal(err)
	}
	s.poll(t)
	for range 3 {
		s.sweep(t)
	}
	for _, id := range []string{deploying, spawning} {
		if ms := s.device(t, id).GetFacts().GetInstanceMismatches(); len(ms) != 0 {
			t.Fatalf("%s reported: %v", id, ms)
		}
	}
	if st := s.a.Stats().LastSweep; st.Candidates != 0 {
		t.Fatalf("candidates %d, want 0", st.Candidates)
	}
}

// A credential without Nova's admin policy gets no verdict at all, even
// with a node pointing at nothing: all_tenants is refused (403), or the
// listing hides the hypervisor field. Either is said once on the site.
func TestSweepRefusesWithoutHypervisorField(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   openstacksim.Options
		fault  *openstacksim.Fault
		reason string
	}{
		{"all_tenants forbidden", openstacksim.Options{NovaNonAdmin: true}, nil, agent.ReasonAllTenantsForbidden},
		{"field hidden", openstacksim.Options{}, &openstacksim.Fault{Service: "compute", PathContains: "/servers/detail", Status: http.StatusOK, Times: -1,
			Body: `{"servers": [{"id": "7a0c1f7e-5555-4c55-9a1e-3f2b8c7d6e5f", "tenant_id": "p", "status": "ACTIVE", "OS-EXT-STS:task_state": null}]}`}, agent.ReasonHypervisorFieldHidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSweepSite(t, tc.opts)
			bare := s.node(t, "n-bare", "available", "")
			ghost := s.node(t, "n-ghost", "active", "0b3f9c2e-2222-4c55-9a1e-3f2b8c7d6e5f")
			if _, err := s.sim.AddServer(openstacksim.Server{HypervisorHostname: bare}); err != nil {
				t.Fatal(err)
			}
			if tc.fault != nil {
				s.sim.InjectFault(*tc.fault)
			}
			s.poll(t)
			s.sweep(t)
			s.sweep(t)
			for _, id := range []string{bare, ghost} {
				if ms := s.device(t, id).GetFacts().GetInstanceMismatches(); len(ms) != 0 {
					t.Fatalf("%s judged without the hypervisor field: %v", id, ms)
				}
			}
			c, ok := s.site.Get(condition.OrphanDetection)
			if !ok || c.Status != condition.False || c.Reason != tc.reason {
				t.Fatalf("OrphanDetection %+v", c)
			}
			if s.a.Stats().LastSweep.Judged {
				t.Fatal("sweep says it judged")
			}
		})
	}
}

// Nova failing mid-way keeps what was reported and says so on the site.
func TestSweepKeepsVerdictsWhenNovaFails(t *testing.T) {
	s := newSweepSite(t, openstacksim.Options{})
	orphan := s.node(t, "n-orphan", "active", "0b3f9c2e-3333-4c55-9a1e-3f2b8c7d6e5f")
	s.poll(t)
	s.sweep(t)
	s.sweep(t)
	if len(s.device(t, orphan).GetFacts().GetInstanceMismatches()) != 1 {
		t.Fatal("orphan not reported")
	}
	s.sim.InjectFault(openstacksim.Fault{Service: "compute", Status: http.StatusServiceUnavailable, Times: -1})
	if err := s.a.Sweep(context.Background()); err == nil {
		t.Fatal("sweep with Nova down reported no error")
	}
	if len(s.device(t, orphan).GetFacts().GetInstanceMismatches()) != 1 {
		t.Fatal("orphan verdict dropped while Nova was down")
	}
	if c, _ := s.site.Get(condition.OrphanDetection); c.Status != condition.Unknown || c.Reason != agent.ReasonNovaUnreachable {
		t.Fatalf("OrphanDetection %+v", c)
	}
	s.sim.ClearFaults()
	s.sweep(t)
	if c, _ := s.site.Get(condition.OrphanDetection); c.Status != condition.True {
		t.Fatalf("OrphanDetection after recovery %+v", c)
	}
}

// The sweep re-reads assigned nodes one by one: a change the listing has
// not seen yet reaches the hub without a poll.
func TestSweepCatchesTransitionMissedByListing(t *testing.T) {
	s := newSweepSite(t, openstacksim.Options{NoNova: true})
	busy := s.node(t, "n-busy", "active", "0b3f9c2e-4444-4c55-9a1e-3f2b8c7d6e5f")
	idle := s.node(t, "n-idle", "available", "")
	s.poll(t)
	for _, id := range []string{busy, idle} {
		if err := s.sim.UpdateNode(id, func(n *openstacksim.Node) { n.Maintenance, n.MaintenanceReason = true, "fan failure" }); err != nil {
			t.Fatal(err)
		}
	}
	s.sweep(t)
	if c := cond(s.device(t, busy), condition.MaintenanceClear); c.GetStatus() != ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE {
		t.Fatalf("assigned node's MaintenanceClear after the sweep: %v", c)
	}
	if c := cond(s.device(t, idle), condition.MaintenanceClear); c.GetStatus() != ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE {
		t.Fatalf("unassigned node re-read by the sweep: %v", c)
	}
	if c, ok := s.site.Get(condition.OrphanDetection); !ok || c.Status != condition.False || c.Reason != agent.ReasonNovaNotConfigured {
		t.Fatalf("OrphanDetection without Nova %+v", c)
	}
	if n := s.a.Stats().LastSweep.NodesRead; n != 1 {
		t.Fatalf("sweep read %d nodes, want 1", n)
	}
}

// A restarted satellite keeps what its sweeps learnt (state file): a
// reported orphan is in the first snapshot again with its first-seen time,
// and a suspect seen once before the restart is reported by the first
// sweep after it.
func TestSweepMemorySurvivesRestart(t *testing.T) {
	s := newSweepSiteWith(t, openstacksim.Options{}, agent.Config{PollInterval: time.Hour, StatePath: t.TempDir() + "/state.json"})
	reported := s.node(t, "n-reported", "active", "0b3f9c2e-6666-4c55-9a1e-3f2b8c7d6e5f")
	s.poll(t)
	s.sweep(t)
	s.sweep(t)
	before := s.device(t, reported).GetFacts().GetInstanceMismatches()
	if len(before) != 1 {
		t.Fatalf("not reported before the restart: %v", before)
	}
	suspect := s.node(t, "n-suspect", "active", "0b3f9c2e-7777-4c55-9a1e-3f2b8c7d6e5f")
	s.poll(t)
	s.sweep(t) // the new one is a suspect now

	s.restart()
	s.poll(t)
	after := s.device(t, reported).GetFacts().GetInstanceMismatches()
	if len(after) != 1 || !after[0].GetFirstSeenTime().AsTime().Equal(before[0].GetFirstSeenTime().AsTime()) {
		t.Fatalf("after the restart: %v, before: %v", after, before)
	}
	if c, _ := s.site.Get(condition.OrphanDetection); c.Reason != agent.ReasonSweepPending {
		t.Fatalf("OrphanDetection before the first sweep after a restart: %+v", c)
	}
	s.sweep(t)
	if ms := s.device(t, suspect).GetFacts().GetInstanceMismatches(); len(ms) != 1 {
		t.Fatalf("suspect from before the restart not reported by the first sweep after it: %v", ms)
	}
}

// A failed lookup of one server is no verdict: the node's reported orphan
// stays, with its first-seen time.
func TestSweepKeepsVerdictWhenLookupFails(t *testing.T) {
	s := newSweepSite(t, openstacksim.Options{})
	ghost := "0b3f9c2e-8888-4c55-9a1e-3f2b8c7d6e5f"
	orphan := s.node(t, "n-orphan", "active", ghost)
	s.poll(t)
	s.sweep(t)
	s.sweep(t)
	before := s.device(t, orphan).GetFacts().GetInstanceMismatches()
	if len(before) != 1 {
		t.Fatal("not reported")
	}
	s.sim.InjectFault(openstacksim.Fault{Service: "compute", PathContains: "/servers/" + ghost, Status: http.StatusInternalServerError, Times: -1})
	if err := s.a.Sweep(context.Background()); err != nil {
		t.Logf("sweep: %v", err)
	}
	after := s.device(t, orphan).GetFacts().GetInstanceMismatches()
	if len(after) != 1 || !after[0].GetFirstSeenTime().AsTime().Equal(before[0].GetFirstSeenTime().AsTime()) {
		t.Fatalf("after a failed lookup: %v, before: %v", after, before)
	}
}

// A poll that sees a commanded device's gate differ from what was applied
// (nova-compute rewrote the provider's traits from a stale node-trait list
// right after a quarantine) asks the hub for a resync at once, and not
// again within ResyncRequestMinInterval; a converged site asks nothing.
func TestPollAsksForResyncWhenGateDrifts(t *testing.T) {
	asked := 0
	s := newSweepSiteWith(t, openstacksim.Options{}, agent.Config{PollInterval: time.Hour, RequestResync: func() { asked++ }})
	id := s.node(t, "n-q", "available", "")
	if err := s.sim.SetProviderTraits(id, []string{"CUSTOM_CUSTOMER_READY"}); err != nil {
		t.Fatal(err)
	}
	s.poll(t)
	ctx := context.Background()
	if r := s.a.HandleCommand(ctx, &ironlinkv1.Command{CommandId: "c1", DeviceId: id, Generation: 1, Desired: ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED}); !r.GetSuccess() {
		t.Fatal(r.GetError())
	}
	s.poll(t)
	if asked != 0 {
		t.Fatalf("converged site asked for %d resyncs", asked)
	}
	// Nova puts the trait back on the provider behind ironlink's back.
	if err := s.sim.SetProviderTraits(id, []string{"CUSTOM_CUSTOMER_READY"}); err != nil {
		t.Fatal(err)
	}
	s.poll(t)
	if asked != 1 {
		t.Fatalf("drifted quarantine: %d resync requests, want 1", asked)
	}
	s.poll(t)
	if asked != 1 {
		t.Fatalf("second poll within %s asked again (%d)", agent.ResyncRequestMinInterval, asked)
	}
}
