package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/testlog"
	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/site"
)

// The sweep's tests run on site.Fixture (no HTTP); the Nova client's own
// decoding (hidden hypervisor field, all_tenants) is tested in
// satellite/nova, and the sweep against real processes in test/e2e.

// fxSweepSite is an in-memory site with Placement and (unless noNova) Nova,
// and an agent whose site conditions are kept.
type fxSweepSite struct {
	f       *site.Fixture
	a       *agent.Agent
	site    *link.SiteState
	restart func() // a new agent on the same clients and state file
	seq     int
}

func newFxSweepSite(t *testing.T, cfg agent.Config, noNova bool) *fxSweepSite {
	t.Helper()
	if cfg.PollInterval == 0 {
		cfg.PollInterval = time.Hour
	}
	f := site.NewFixture()
	f.DefineTrait(agent.ReadyTrait)
	cl := agent.Clients{Ironic: f, Placement: f}
	if !noNova {
		cl.Nova = f
	}
	out := link.NewOutbox()
	out.MaxBatches = 1 << 20
	log := testlog.Discard()
	s := &fxSweepSite{f: f, site: link.NewSiteState(nil)}
	s.a = agent.New(cfg, cl, out, s.site, log)
	s.restart = func() {
		s.site = link.NewSiteState(nil)
		s.a = agent.New(cfg, cl, out, s.site, log)
		if err := s.a.LoadState(); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// node adds a node with its (traitless) resource provider.
func (s *fxSweepSite) node(name, state, instance string) string {
	s.seq++
	id := fmt.Sprintf("00000000-0000-4000-8000-%012d", s.seq)
	s.f.PutNode(ironic.Node{UUID: id, Name: name, ProvisionState: state, PowerState: "power on", ResourceClass: "gpu-h100", InstanceUUID: instance})
	s.f.PutProvider(id)
	return id
}

// server adds a live server (ACTIVE unless status says otherwise) on node
// host, the hypervisor field visible.
func (s *fxSweepSite) server(id, host, project, status, task string) {
	if status == "" {
		status = "ACTIVE"
	}
	s.f.PutServer(nova.Server{ID: id, TenantID: project, Status: status, TaskState: task, HypervisorHostname: host, HypervisorVisible: true})
}

func (s *fxSweepSite) poll(t *testing.T) {
	t.Helper()
	if err := s.a.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (s *fxSweepSite) sweep(t *testing.T) {
	t.Helper()
	if err := s.a.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (s *fxSweepSite) device(t *testing.T, id string) *ironlinkv1.DeviceUpdate {
	t.Helper()
	return snapshotDevice(t, s.a, id)
}

// novaError is the HTTP error Nova answers with.
func novaError(code int) error {
	return gophercloud.ErrUnexpectedResponseCode{Method: "GET", URL: "http://nova/v2.1/servers/detail", Actual: code}
}

// An instance_uuid Nova does not know is reported on the second sweep, with
// both ids, and cleared once Nova has the server.
func TestSweepReportsIronicSideOrphanAfterTwoSweeps(t *testing.T) {
	s := newFxSweepSite(t, agent.Config{}, false)
	ghost := "0b3f9c2e-7d41-4c55-9a1e-3f2b8c7d6e5f"
	orphan := s.node("n-orphan", "active", ghost)
	srvID := "5e7a0000-1111-4c55-9a1e-3f2b8c7d6e5f"
	good := s.node("n-good", "active", srvID)
	s.server(srvID, good, "p-cust", "", "")
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
	s.server(ghost, orphan, "p-cust", "", "")
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
	s := newFxSweepSite(t, agent.Config{}, false)
	bare := s.node("n-bare", "available", "")
	srv := nova.Server{ID: "5e7a0000-2222-4c55-9a1e-3f2b8c7d6e5f"}
	s.server(srv.ID, bare, "p-cust", "", "")
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
	s := newFxSweepSite(t, agent.Config{}, false)
	deploying := s.node("n-deploying", "wait call-back", "5d1c7a6e-1111-4c55-9a1e-3f2b8c7d6e5f")
	spawning := s.node("n-spawning", "available", "")
	s.server("5e7a0000-3333-4c55-9a1e-3f2b8c7d6e5f", spawning, "p", "BUILD", "spawning")
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
		setup  func(s *fxSweepSite, bare string)
		reason string
	}{
		{"all_tenants forbidden", func(s *fxSweepSite, bare string) {
			s.server("7a0c1f7e-4444-4c55-9a1e-3f2b8c7d6e5f", bare, "p", "", "")
			s.f.Fail(site.MethodListServers, "", novaError(http.StatusForbidden), -1)
		}, agent.ReasonAllTenantsForbidden},
		{"field hidden", func(s *fxSweepSite, _ string) {
			s.f.PutServer(nova.Server{ID: "7a0c1f7e-5555-4c55-9a1e-3f2b8c7d6e5f", TenantID: "p", Status: "ACTIVE"})
		}, agent.ReasonHypervisorFieldHidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFxSweepSite(t, agent.Config{}, false)
			bare := s.node("n-bare", "available", "")
			ghost := s.node("n-ghost", "active", "0b3f9c2e-2222-4c55-9a1e-3f2b8c7d6e5f")
			tc.setup(s, bare)
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
	s := newFxSweepSite(t, agent.Config{}, false)
	orphan := s.node("n-orphan", "active", "0b3f9c2e-3333-4c55-9a1e-3f2b8c7d6e5f")
	s.poll(t)
	s.sweep(t)
	s.sweep(t)
	if len(s.device(t, orphan).GetFacts().GetInstanceMismatches()) != 1 {
		t.Fatal("orphan not reported")
	}
	s.f.Fail(site.MethodListServers, "", novaError(http.StatusServiceUnavailable), -1)
	s.f.Fail(site.MethodGetServer, "", novaError(http.StatusServiceUnavailable), -1)
	if err := s.a.Sweep(context.Background()); err == nil {
		t.Fatal("sweep with Nova down reported no error")
	}
	if len(s.device(t, orphan).GetFacts().GetInstanceMismatches()) != 1 {
		t.Fatal("orphan verdict dropped while Nova was down")
	}
	if c, _ := s.site.Get(condition.OrphanDetection); c.Status != condition.Unknown || c.Reason != agent.ReasonNovaUnreachable {
		t.Fatalf("OrphanDetection %+v", c)
	}
	s.f.ClearFailures()
	s.sweep(t)
	if c, _ := s.site.Get(condition.OrphanDetection); c.Status != condition.True {
		t.Fatalf("OrphanDetection after recovery %+v", c)
	}
}

// The sweep re-reads assigned nodes one by one: a change the listing has
// not seen yet reaches the hub without a poll.
func TestSweepCatchesTransitionMissedByListing(t *testing.T) {
	s := newFxSweepSite(t, agent.Config{}, true)
	busy := s.node("n-busy", "active", "0b3f9c2e-4444-4c55-9a1e-3f2b8c7d6e5f")
	idle := s.node("n-idle", "available", "")
	s.poll(t)
	for _, id := range []string{busy, idle} {
		s.f.SetMaintenance(id, true, "fan failure", "")
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
	s := newFxSweepSite(t, agent.Config{StatePath: t.TempDir() + "/state.json"}, false)
	reported := s.node("n-reported", "active", "0b3f9c2e-6666-4c55-9a1e-3f2b8c7d6e5f")
	s.poll(t)
	s.sweep(t)
	s.sweep(t)
	before := s.device(t, reported).GetFacts().GetInstanceMismatches()
	if len(before) != 1 {
		t.Fatalf("not reported before the restart: %v", before)
	}
	suspect := s.node("n-suspect", "active", "0b3f9c2e-7777-4c55-9a1e-3f2b8c7d6e5f")
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
	s := newFxSweepSite(t, agent.Config{}, false)
	ghost := "0b3f9c2e-8888-4c55-9a1e-3f2b8c7d6e5f"
	orphan := s.node("n-orphan", "active", ghost)
	s.poll(t)
	s.sweep(t)
	s.sweep(t)
	before := s.device(t, orphan).GetFacts().GetInstanceMismatches()
	if len(before) != 1 {
		t.Fatal("not reported")
	}
	s.f.Fail(site.MethodGetServer, ghost, novaError(http.StatusInternalServerError), -1)
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
	s := newFxSweepSite(t, agent.Config{RequestResync: func() { asked++ }}, false)
	id := s.node("n-q", "available", "")
	s.f.PutProvider(id, agent.ReadyTrait)
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
	s.f.PutProvider(id, agent.ReadyTrait)
	s.poll(t)
	if asked != 1 {
		t.Fatalf("drifted quarantine: %d resync requests, want 1", asked)
	}
	s.poll(t)
	if asked != 1 {
		t.Fatalf("second poll within %s asked again (%d)", agent.ResyncRequestMinInterval, asked)
	}
}
