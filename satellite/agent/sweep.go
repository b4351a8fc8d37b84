package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/periodic"
	"github.com/ironlink/ironlink/internal/textcheck"
	"github.com/ironlink/ironlink/satellite/conditions"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/openstack"
)

// Reasons of the OrphanDetection site condition.
const (
	// ReasonDetectionEnabled (True): the last sweep compared Nova with Ironic.
	ReasonDetectionEnabled = "Enabled"
	// ReasonStandalone (False): a standalone-Ironic site has no Nova.
	ReasonStandalone = "Standalone"
	// ReasonNovaNotConfigured (False): no compute endpoint, or --nova off.
	ReasonNovaNotConfigured = "NovaNotConfigured"
	// ReasonHypervisorFieldHidden (False): Nova lists servers without
	// OS-EXT-SRV-ATTR:hypervisor_hostname for this credential.
	ReasonHypervisorFieldHidden = "HypervisorFieldHidden"
	// ReasonAllTenantsForbidden (False): Nova answers 403 to all_tenants.
	ReasonAllTenantsForbidden = "AllTenantsForbidden"
	// ReasonSweepPending (Unknown): no sweep has run since the start.
	ReasonSweepPending = "SweepPending"
	// ReasonNotConnected (Unknown): the satellite has not reached OpenStack
	// yet, so it does not know whether the site has Nova.
	ReasonNotConnected = "NotConnected"
	// ReasonNovaUnreachable (Unknown): the last sweep could not list Nova's
	// servers; earlier verdicts are kept.
	ReasonNovaUnreachable = "NovaUnreachable"
)

// maxMismatchesPerDevice is the most orphans reported for one node (the
// hub's limit per device).
const maxMismatchesPerDevice = 16

// sweepReaders is how many nodes a sweep re-reads at once.
const sweepReaders = 8

// maxProjectLookups bounds the Nova lookups one poll makes for instances
// whose project is not known yet (the sweep's listing fills the rest).
const maxProjectLookups = 20

// SweepStats describes one sweep: what it read and how long it took.
type SweepStats struct {
	// Duration is the wall time of the sweep.
	Duration time.Duration
	// NodesRead counts single-node GETs (assigned nodes, plus nodes a Nova
	// server claims); NodeReadFailures those that failed.
	NodesRead, NodeReadFailures int
	// Servers is the number of Nova servers listed (-1: Nova not read).
	Servers int
	// ServerLookups counts single-server GETs confirming a suspected orphan.
	ServerLookups int
	// Candidates are mismatches seen this sweep; Reported those also seen
	// on the previous sweep (the ones sent to the hub).
	Candidates, Reported int
	// Judged is false when orphan detection was skipped (no Nova, hidden
	// hypervisor field, Nova unreadable).
	Judged bool
}

// mismatchKey identifies one candidate orphan across sweeps.
type mismatchKey struct {
	node   string
	kind   ironlinkv1.InstanceMismatchKind
	server string
}

// runSweeps sweeps after the first complete listing and then every
// SweepInterval until ctx ends.
func (a *Agent) runSweeps(ctx context.Context) {
	select {
	case <-a.listedCh:
	case <-ctx.Done():
		return
	}
	periodic.NowAndEvery(ctx, a.cfg.SweepInterval, func() {
		sctx, cancel := context.WithTimeout(ctx, a.cfg.SweepTimeout)
		defer cancel()
		if err := a.Sweep(sctx); err != nil && ctx.Err() == nil {
			a.log.Warn("sweep incomplete", "err", err)
		}
	})
}

// reportDetection sets OrphanDetection for sites where it never runs.
func (a *Agent) reportDetection() {
	switch {
	case a.placement == nil:
		a.setDetection(condition.False, ReasonStandalone, "standalone Ironic site: no Nova, orphan detection skipped")
	case a.nova == nil:
		a.setDetection(condition.False, ReasonNovaNotConfigured, "no compute endpoint in the catalog, or Nova turned off (--nova=off): orphan detection skipped")
	default:
		a.setDetection(condition.Unknown, ReasonSweepPending, "the first sweep has not compared Nova with Ironic yet")
	}
}

func (a *Agent) setDetection(s condition.Status, reason, msg string) bool {
	if a.site == nil {
		return false
	}
	msg = textcheck.SanitizeText(msg, condition.MaxMessageBytes) // may carry Nova's error text
	return a.site.Set(condition.Condition{Type: condition.OrphanDetection, Status: s, Reason: reason, Message: msg})
}

// Sweep re-reads every assigned node (one with instance_uuid or
// allocation_uuid) individually and reruns the condition mapping, so a
// transition missed between listings is caught; then, where the site has
// Nova, it compares Nova's servers with Ironic's nodes both ways
// (docs/design/openstack.md §4):
//
//   - NOVA_UNKNOWN: a node's instance_uuid names a server that Nova's
//     listing lacks and a GET of it answers 404 or a DELETED/SOFT_DELETED
//     record;
//   - NODE_UNAWARE: a live server's hypervisor_hostname is a node of this
//     site whose instance_uuid is empty or names another server.
//
// Nodes in a transient provision state and servers with a task_state are
// excluded, and a mismatch is reported (in the device's facts and as
// InstanceAllocated reason InstanceRecordMismatch) only when two
// consecutive sweeps saw it. When Nova's listing has servers but none shows
// OS-EXT-SRV-ATTR:hypervisor_hostname, the credential lacks the policy to
// see it: the sweep does not judge and sets the site condition
// OrphanDetection False/HypervisorFieldHidden (logged once); a 403 for
// all_tenants gives False/AllTenantsForbidden the same way. When Nova
// cannot be read, reported orphans are kept as they are. The satellite
// never repairs an orphan.
//
// It returns an error when it could not read Nova or some nodes (what it
// could read is still applied), or before the first complete listing.
func (a *Agent) Sweep(ctx context.Context) error {
	start := time.Now()
	st := SweepStats{Servers: -1}
	known, assigned, ok := a.knownNodes()
	if !ok {
		return errors.New("sweep: no complete listing yet")
	}

	// 1. Re-read the assigned nodes.
	readStart := time.Now()
	fresh, undecided := a.readNodes(ctx, assigned)
	failures := len(undecided)
	st.NodesRead, st.NodeReadFailures = len(assigned), failures
	for id, n := range fresh {
		n = n.CarryUnsent(known[id]) // a field the answer left out keeps its last known value
		fresh[id], known[id] = n, n
	}
	var errs []error
	if failures > 0 {
		errs = append(errs, fmt.Errorf("sweep: %d of %d assigned nodes could not be read", failures, len(assigned)))
	}

	// 2. Compare with Nova.
	found, servers, err := a.compareWithNova(ctx, known, fresh, undecided, &st)
	if err != nil {
		errs = append(errs, err)
	}
	if ctx.Err() != nil {
		st.Judged = false // a verdict from a cut-short sweep is not a verdict
		errs = append(errs, ctx.Err())
	}

	// 3. Two consecutive sweeps, then re-evaluate what changed.
	now := time.Now().UTC()
	reeval := map[string]bool{}
	for id := range fresh {
		reeval[id] = true
	}
	if st.Judged {
		a.recordVerdict(known, servers, found, undecided, now, reeval, &st)
		ps := a.takeState()
		defer func() {
			if err := a.saveState(ps); err != nil {
				a.log.Error("orphan state not saved; a restart re-learns it over two sweeps", "err", err)
			}
		}()
	}
	updates := a.reevaluate(reeval, fresh, readStart, now)
	st.Duration = time.Since(start)
	mismatches := a.orphans.count()
	a.countStats(func(s *Stats) {
		s.Sweeps++
		if len(errs) > 0 {
			s.FailedSweeps++
		}
		s.LastSweep = st
		s.InstanceMismatches = mismatches
	})

	a.outbox.Push(updates)
	if a.cfg.Observer != nil {
		a.cfg.Observer.SweepDone(st.Duration, len(errs) == 0)
	}
	a.log.Info("sweep done", "assigned", len(assigned), "nodes_read", st.NodesRead, "node_read_failures", st.NodeReadFailures,
		"servers", st.Servers, "server_lookups", st.ServerLookups, "judged", st.Judged, "candidates", st.Candidates,
		"reported", st.Reported, "changed", len(updates), "took", st.Duration.Round(time.Millisecond))
	return errors.Join(errs...)
}

// knownNodes copies the nodes last seen and lists the assigned ones (with
// instance_uuid or allocation_uuid), sorted; ok is false before the first
// complete listing.
func (a *Agent) knownNodes() (known map[string]ironic.Node, assigned []string, ok bool) {
	a.view.mu.Lock()
	defer a.view.mu.Unlock()
	if !a.view.listed {
		return nil, nil, false
	}
	known = make(map[string]ironic.Node, len(a.view.nodes))
	for id, n := range a.view.nodes {
		known[id] = n
		if n.InstanceUUID != "" || n.AllocationUUID != "" {
			assigned = append(assigned, id)
		}
	}
	sort.Strings(assigned)
	return known, assigned, true
}

// compareWithNova lists Nova's servers and, where it may judge, finds the
// candidate orphans (judge), setting OrphanDetection and st as it goes. It
// returns the candidates, the servers listed (nil when they cannot be
// used) and an error when Nova could not be read.
func (a *Agent) compareWithNova(ctx context.Context, known, fresh map[string]ironic.Node, undecided map[string]bool, st *SweepStats) ([]candidate, []nova.Server, error) {
	if a.nova == nil || ctx.Err() != nil {
		return nil, nil, nil
	}
	servers, err := a.nova.ListServers(ctx)
	switch {
	case openstack.StatusCode(err) == http.StatusForbidden:
		if a.setDetection(condition.False, ReasonAllTenantsForbidden,
			"Nova refuses to list all projects' servers to this credential (policy os_compute_api:servers:detail:get_all_tenants, admin by default): orphans cannot be judged") {
			a.log.Error("orphan detection refused: Nova forbids listing all projects' servers to this credential", "err", err)
		}
		return nil, nil, nil
	case err != nil:
		a.setDetection(condition.Unknown, ReasonNovaUnreachable, "Nova's server listing failed; orphan verdicts kept as they were: "+err.Error())
		return nil, nil, fmt.Errorf("sweep: %w", err)
	case len(servers) > 0 && !anyVisible(servers):
		if a.setDetection(condition.False, ReasonHypervisorFieldHidden,
			"Nova does not show OS-EXT-SRV-ATTR:hypervisor_hostname to this credential (extended server attributes policy, admin by default): orphans cannot be judged") {
			a.log.Error("orphan detection refused: Nova hides the hypervisor field from this credential", "servers", len(servers))
		}
		return nil, servers, nil
	}
	st.Servers, st.Judged = len(servers), true
	found, lookups, reads := a.judge(ctx, known, fresh, servers, undecided)
	st.ServerLookups, st.NodesRead = lookups, st.NodesRead+reads
	if ctx.Err() == nil {
		a.setDetection(condition.True, ReasonDetectionEnabled,
			fmt.Sprintf("%d Nova servers compared with %d Ironic nodes", len(servers), len(known)))
	}
	return found, servers, nil
}

// recordVerdict keeps the instances' projects from servers and the
// two-sweep verdict on found, and adds to reeval the devices whose project
// or reported orphans changed.
func (a *Agent) recordVerdict(known map[string]ironic.Node, servers []nova.Server, found []candidate, undecided map[string]bool,
	now time.Time, reeval map[string]bool, st *SweepStats) {
	projects := make(map[string]string, len(servers))
	for _, s := range servers {
		projects[s.ID] = s.TenantID
	}
	a.orphans.mu.Lock()
	defer a.orphans.mu.Unlock()
	for id, n := range known {
		if n.InstanceUUID != "" && a.orphans.projects[n.InstanceUUID] != projects[n.InstanceUUID] {
			reeval[id] = true
		}
	}
	a.orphans.projects, a.orphans.looked = projects, map[string]bool{}
	st.Candidates = len(found)
	v := orphanVerdict(a.orphans.suspects, a.orphans.mismatches, found, undecided, now)
	st.Reported = v.newlyReported
	for id := range v.reported {
		reeval[id] = true
	}
	for id := range a.orphans.mismatches {
		if _, still := v.reported[id]; !still {
			reeval[id] = true
		}
	}
	a.orphans.suspects, a.orphans.mismatches = v.suspects, v.reported
}

// reevaluate evaluates the devices of reeval still listed — with the
// sweep's own read (fresh, made from readStart) unless a listing that
// started later has been evaluated meanwhile — and returns the updates.
func (a *Agent) reevaluate(reeval map[string]bool, fresh map[string]ironic.Node, readStart, now time.Time) []*ironlinkv1.DeviceUpdate {
	ids := make([]string, 0, len(reeval))
	for id := range reeval {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var updates []*ironlinkv1.DeviceUpdate
	a.view.mu.Lock()
	defer a.view.mu.Unlock()
	for _, id := range ids {
		n, ok := a.view.nodes[id]
		if !ok {
			continue // removed by a listing meanwhile
		}
		if _, listed := a.view.facts[id]; !listed {
			continue
		}
		asOf := a.view.asOf[id]
		if f, isFresh := fresh[id]; isFresh && !readStart.Before(asOf) {
			n, asOf = f, readStart
		}
		if u := a.evaluateLocked(n, conditions.PlacementView{}, now, asOf); u != nil {
			updates = append(updates, u)
		}
	}
	return updates
}

// candidate is a mismatch seen by one sweep.
type candidate struct {
	node string
	m    *ironlinkv1.InstanceMismatch
}

// readNodes GETs each node (sweepReaders at a time) and returns those read
// and those that failed; a node Ironic no longer has is left to the next
// listing.
func (a *Agent) readNodes(ctx context.Context, ids []string) (map[string]ironic.Node, map[string]bool) {
	var mu sync.Mutex
	out := make(map[string]ironic.Node, len(ids))
	failed := map[string]bool{}
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(sweepReaders, len(ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				n, err := a.ironic.GetNode(ctx, id)
				mu.Lock()
				switch {
				case err == nil:
					out[id] = n
				case errors.Is(err, ironic.ErrNodeNotFound):
				default:
					failed[id] = true
					if len(failed) <= 3 {
						a.log.Warn("sweep could not re-read a node", "device_id", id, "err", err)
					}
				}
				mu.Unlock()
			}
		}()
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		work <- id
	}
	close(work)
	wg.Wait()
	return out, failed
}

// judge finds this sweep's candidate orphans. known are the site's nodes
// (fresh where re-read); it re-reads a node a server claims when the sweep
// has not read it yet, and GETs a server Ironic points at that the listing
// lacks. Nodes it could not decide for (a failed read) are added to
// undecided. It returns the candidates and the number of server and node
// reads.
func (a *Agent) judge(ctx context.Context, known, fresh map[string]ironic.Node, servers []nova.Server, undecided map[string]bool) ([]candidate, int, int) {
	byID := make(map[string]nova.Server, len(servers))
	for _, s := range servers {
		byID[s.ID] = s
	}
	var out []candidate
	lookups, reads := 0, 0

	// Ironic points at an instance Nova does not know.
	ids := make([]string, 0, len(known))
	for id := range known {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		n := known[id]
		if n.InstanceUUID == "" || conditions.IsTransient(n.ProvisionState) || ctx.Err() != nil {
			continue
		}
		inst := strings.ToLower(n.InstanceUUID)
		s, listed := byID[inst]
		var err error
		switch {
		case listed && !s.Deleted():
			continue // Nova knows it; where it runs is checked from Nova's side
		case !listed:
			lookups++
			s, err = a.nova.GetServer(ctx, inst)
		}
		switch {
		case errors.Is(err, nova.ErrServerNotFound):
			out = append(out, candidate{id, &ironlinkv1.InstanceMismatch{Kind: ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NOVA_UNKNOWN,
				IronicInstanceUuid: n.InstanceUUID, NovaServerId: inst}})
		case err != nil:
			undecided[id] = true
			a.log.Warn("sweep could not look up a server; no verdict for its node", "device_id", id, "instance_uuid", inst, "err", err)
		case s.Deleted():
			out = append(out, candidate{id, &ironlinkv1.InstanceMismatch{Kind: ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NOVA_UNKNOWN,
				IronicInstanceUuid: n.InstanceUUID, NovaServerId: inst, NovaServerStatus: novaText(s.Status, maxMismatchStatusBytes), NovaProjectId: novaText(s.TenantID, maxMismatchIDBytes)}})
		}
	}

	// Nova has an instance on a node that does not point back to it.
	for _, s := range servers {
		if s.Deleted() || s.TaskState != "" || s.HypervisorHostname == "" || ctx.Err() != nil {
			continue
		}
		n, ok := known[s.HypervisorHostname]
		if !ok || strings.EqualFold(n.InstanceUUID, s.ID) {
			continue // not a node of this site (another hypervisor), or consistent
		}
		if _, isFresh := fresh[n.UUID]; !isFresh {
			reads++
			fn, err := a.ironic.GetNode(ctx, n.UUID)
			if err != nil {
				undecided[n.UUID] = true
				a.log.Warn("sweep could not re-read a node a server claims; no verdict", "device_id", n.UUID, "server", s.ID, "err", err)
				continue
			}
			fn = fn.CarryUnsent(n)
			fresh[n.UUID], known[n.UUID], n = fn, fn, fn
			if strings.EqualFold(n.InstanceUUID, s.ID) {
				continue
			}
		}
		if conditions.IsTransient(n.ProvisionState) {
			continue
		}
		out = append(out, candidate{n.UUID, &ironlinkv1.InstanceMismatch{Kind: ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NODE_UNAWARE,
			IronicInstanceUuid: n.InstanceUUID, NovaServerId: s.ID, NovaServerStatus: novaText(s.Status, maxMismatchStatusBytes), NovaProjectId: novaText(s.TenantID, maxMismatchIDBytes)}})
	}
	return out, lookups, reads
}

// mismatchMessage renders reported orphans for InstanceAllocated's message
// ("" when there are none).
func mismatchMessage(ms []*ironlinkv1.InstanceMismatch) string {
	var parts []string
	for _, m := range ms {
		switch m.GetKind() {
		case ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NOVA_UNKNOWN:
			if m.GetNovaServerStatus() != "" {
				parts = append(parts, fmt.Sprintf("Ironic instance_uuid %s names a server Nova has %s", m.GetIronicInstanceUuid(), m.GetNovaServerStatus()))
			} else {
				parts = append(parts, fmt.Sprintf("Ironic instance_uuid %s names a server Nova does not know", m.GetIronicInstanceUuid()))
			}
		case ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NODE_UNAWARE:
			ironicSide := "no instance_uuid"
			if m.GetIronicInstanceUuid() != "" {
				ironicSide = "instance_uuid " + m.GetIronicInstanceUuid()
			}
			parts = append(parts, fmt.Sprintf("Nova server %s (project %s, %s) runs on this node, but Ironic has %s", m.GetNovaServerId(), m.GetNovaProjectId(), m.GetNovaServerStatus(), ironicSide))
		}
	}
	return strings.Join(parts, "; ")
}

// lookupProjects asks Nova for the project of up to maxProjectLookups
// instances seen in a listing whose project is not known yet (each instance
// once), so CustomerAllocated does not wait for the next sweep.
func (a *Agent) lookupProjects(ctx context.Context, nodes []ironic.Node) {
	if a.nova == nil {
		return
	}
	var todo []string
	a.orphans.mu.Lock()
	for _, n := range nodes {
		id := strings.ToLower(n.InstanceUUID)
		if id == "" || a.orphans.projects[id] != "" || a.orphans.looked[id] || len(todo) >= maxProjectLookups {
			continue
		}
		a.orphans.looked[id] = true
		todo = append(todo, id)
	}
	a.orphans.mu.Unlock()
	for _, id := range todo {
		s, err := a.nova.GetServer(ctx, id)
		if err != nil {
			a.log.Debug("instance project not found in Nova; the sweep will judge", "instance_uuid", id, "err", err)
			continue
		}
		if !s.Deleted() && s.TenantID != "" {
			a.orphans.mu.Lock()
			a.orphans.projects[id] = s.TenantID
			a.orphans.mu.Unlock()
		}
	}
}

// novaText sanitizes a value of Nova's answer for an InstanceMismatch.
func novaText(s string, max int) string { return textcheck.SanitizeLine(s, max) }

func anyVisible(servers []nova.Server) bool {
	for _, s := range servers {
		if s.HypervisorVisible {
			return true
		}
	}
	return false
}
