package agent

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/wire"
	"github.com/ironlink/ironlink/satellite/conditions"
	"github.com/ironlink/ironlink/satellite/ironic"
)

// Poll lists every node once and pushes the changes. On any read failure it
// returns the error and changes nothing: no device is marked removed and no
// condition flips.
func (a *Agent) Poll(ctx context.Context) error {
	start := time.Now()
	nodes, err := a.ironic.ListNodes(ctx)
	if err != nil {
		a.countFailure()
		err = fmt.Errorf("list Ironic nodes: %w", err)
		a.reportPollFailed(err)
		return err
	}
	var pg placementGate
	if a.placement != nil {
		if pg, err = a.readPlacementGate(ctx); err != nil {
			// Ironic was read: go on, but keep each device's last CustomerReady.
			a.log.Warn("Placement unreadable; CustomerReady kept as last seen", "err", err)
		}
	}
	a.lookupProjects(ctx, nodes)
	hw := a.readHardware(ctx, nodes)

	a.view.mu.Lock()
	// The observation time is taken under the view's lock, as the command
	// and resync paths take theirs: a device's conditions then carry
	// observed times in the order they were evaluated, and the hub, which
	// drops an observation older than the one it stores, keeps every change
	// (taken before the project and hardware reads, a command's evaluation
	// in between was newer than this poll's, and the poll's change dropped).
	now := time.Now().UTC()
	var updates []*ironlinkv1.DeviceUpdate
	drifted := 0
	seen := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		seen[n.UUID] = true
		pv := pg.view(n.UUID)
		if u := a.evaluateLocked(n, pv, now, start); u != nil {
			updates = append(updates, u)
		}
		if a.gateDiffersLocked(n, pv) {
			drifted++
		}
	}
	updates = a.withHardwareLocked(updates, hw, now)
	for _, id := range a.view.tracker.Devices() {
		if !seen[id] {
			a.hw.forget(id)
			a.view.tracker.Forget(id)
			delete(a.view.facts, id)
			delete(a.view.nodes, id)
			delete(a.view.asOf, id)
			a.orphans.forget(id)
			delete(a.view.views, id)
			updates = append(updates, &ironlinkv1.DeviceUpdate{DeviceId: id, Removed: true, ObservedTime: timestamppb.New(now)})
		}
	}
	if !a.view.listed {
		close(a.listedCh)
		a.view.listedAt = time.Now()
		if w := a.cfg.DesiredStatesWait; w > 0 && !a.cmds.isKnown() {
			// Wake the sender when the wait for desired states ends, so the
			// snapshot goes then even if the hub never sent them.
			time.AfterFunc(w, func() { a.outbox.Push(nil) })
		}
	}
	a.view.listed = true
	askResync := drifted > 0 && a.cfg.RequestResync != nil && time.Since(a.view.lastResyncAsk) >= ResyncRequestMinInterval
	if askResync {
		a.view.lastResyncAsk = time.Now()
	}
	a.view.mu.Unlock()
	a.countStats(func(s *Stats) {
		s.Polls++
		s.LastPollDuration = time.Since(start)
		s.LastPollNodes = len(nodes)
	})

	a.outbox.Push(updates)
	a.reportPoll(nodes, now)
	if a.cfg.Observer != nil {
		a.cfg.Observer.PollDone(time.Since(start))
	}
	a.log.Info("poll done", "nodes", len(nodes), "changed", len(updates), "took", time.Since(start).Round(time.Millisecond))
	if askResync {
		a.log.Warn("devices' gate differs from the state last applied; asking the hub for a resync", "devices", drifted)
		a.cfg.RequestResync()
	}
	return nil
}

// gateDiffersLocked reports whether node n's gate differs from the
// impairment state last applied to it (see gateMatches); devices never
// commanded, or whose trait a release left alone, are not judged. a.view.mu is held.
func (a *Agent) gateDiffersLocked(n ironic.Node, pv conditions.PlacementView) bool {
	d, ok := a.cmds.get(n.UUID)
	if !ok || d.generation == 0 || d.leftAlone || n.Missing["traits"] {
		return false
	}
	return !gateMatches(!d.quarantined, n.HasTrait(ReadyTrait), pv, a.placement != nil)
}

// gateMatches reports whether a device's gate agrees with want (true:
// released, trait present): the Ironic node trait always; where the site
// has Placement and it was read, also the provider trait when the
// provider exists, and for a release the trait must be defined in
// Placement (the gate creates it).
func gateMatches(want, nodeHas bool, pv conditions.PlacementView, hasPlacement bool) bool {
	switch {
	case nodeHas != want:
		return false
	case !hasPlacement || !pv.Read:
		return true
	case want && !pv.TraitDefined:
		return false
	case !pv.ProviderExists:
		return true // no provider yet: the gate writes nothing there
	}
	return pv.HasTrait == want
}

// placementGate is one read of the gate on Placement's side for the whole
// site: which providers exist, which carry the trait, whether the trait is
// defined. The zero value is "not read".
type placementGate struct {
	read             bool
	providers, ready map[string]bool
	defined          bool
}

// readPlacementGate reads the gate on Placement's side (two requests).
func (a *Agent) readPlacementGate(ctx context.Context) (placementGate, error) {
	providers, err := a.placement.Providers(ctx)
	if err != nil {
		return placementGate{}, err
	}
	ready, defined, err := a.placement.ProvidersWithTrait(ctx, ReadyTrait)
	if err != nil {
		return placementGate{}, err
	}
	return placementGate{read: true, providers: providers, ready: ready, defined: defined}, nil
}

// view is what Map and gateMatches need of device id's provider.
func (g placementGate) view(id string) conditions.PlacementView {
	if !g.read {
		return conditions.PlacementView{}
	}
	return conditions.PlacementView{Read: true, ProviderExists: g.providers[id], HasTrait: g.ready[id], TraitDefined: g.defined}
}

// evaluateLocked maps node n (with the Placement view pv, the Nova project
// and the reported orphans) to conditions and returns the update to send,
// or nil when neither conditions nor facts changed. When Placement exists
// but pv was not read, CustomerReady keeps its last value. asOf is when n
// was read; data older than what was already evaluated for the node (a
// sweep's re-read overtaken by a listing) is ignored. a.view.mu is held.
func (a *Agent) evaluateLocked(n ironic.Node, pv conditions.PlacementView, now, asOf time.Time) *ironlinkv1.DeviceUpdate {
	if prev, ok := a.view.asOf[n.UUID]; ok && asOf.Before(prev) {
		return nil
	}
	if prev, ok := a.view.nodes[n.UUID]; ok {
		// A field the answer left out keeps its last known value, for the
		// facts and the sweep; n.Unsent still says it is not fresh.
		n = n.CarryUnsent(prev)
	}
	a.view.nodes[n.UUID], a.view.asOf[n.UUID] = n, asOf
	if pv.Read {
		a.view.views[n.UUID] = pv
	}
	d, _ := a.cmds.get(n.UUID)
	mismatches, project := a.orphans.forDevice(n.UUID, n.InstanceUUID)
	obs := conditions.Observation{
		Node: n, Now: now, Placement: pv, Quarantined: d.quarantined, AppliedGeneration: d.generation,
		InstanceMismatch: mismatchMessage(mismatches), InstanceProject: project,
	}
	// One buffer for every evaluation (a.view.mu is held; the tracker copies
	// what it keeps, holdUnsentLocked and without build new slices).
	conds := conditions.MapInto(a.view.condBuf, a.cfg.Conditions, obs)
	a.view.condBuf = conds
	if a.placement != nil && !pv.Read {
		if _, had := a.view.tracker.Get(n.UUID, condition.CustomerReady); had {
			conds = without(conds, condition.CustomerReady)
		}
	}
	if len(n.Unsent) > 0 {
		conds = a.holdUnsentLocked(n, conds)
	}
	changed := a.view.tracker.Observe(n.UUID, conds)
	// The facts are built in a scratch message and kept only when they
	// changed (most polls change none of 10,000).
	f := a.view.factsScratch
	if f == nil {
		f = &ironlinkv1.DeviceFacts{}
	}
	fillFacts(f, n)
	f.Labels = a.nodeLabels(n)
	f.InstanceMismatches = mismatches
	factsChanged := !sameFacts(a.view.facts[n.UUID], f)
	if !factsChanged {
		a.view.factsScratch = f
		if len(changed) == 0 {
			return nil
		}
		f = a.view.facts[n.UUID]
	} else {
		a.view.factsScratch = nil
		a.view.facts[n.UUID] = f
	}
	u := &ironlinkv1.DeviceUpdate{DeviceId: n.UUID, Facts: f, ObservedTime: timestamppb.New(now)}
	for _, c := range changed {
		u.Conditions = append(u.Conditions, wire.ConditionToProto(c))
	}
	return u
}

// holdUnsentLocked drops from conds every condition that Map could not
// compute because Ironic's answer left out a field it needs
// (conditions.UnsentNeeded) and that the tracker already has a value for:
// that value is kept, unchanged, with its observed time of when it was
// last computed from complete data, so neither a flip nor a "field
// unavailable" status change reaches the hub. A device seen for the first
// time gets Unknown/FieldUnavailable. a.view.mu is held.
func (a *Agent) holdUnsentLocked(n ironic.Node, conds []condition.Condition) []condition.Condition {
	out := conds[:0:0]
	for _, c := range conds {
		if c.Reason == conditions.ReasonFieldUnavailable && conditions.UnsentNeeded(a.cfg.Conditions, c.Type, n) != "" {
			if _, had := a.view.tracker.Get(n.UUID, c.Type); had {
				a.countStats(func(s *Stats) { s.HeldConditions++ })
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

func (a *Agent) countFailure() {
	a.countStats(func(s *Stats) { s.FailedPolls++ })
}

func without(cs []condition.Condition, t condition.Type) []condition.Condition {
	out := cs[:0:0]
	for _, c := range cs {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}

// Snapshot returns every known device with all its conditions (for a new
// link), or ok=false before the first complete listing (and, with
// Config.DesiredStatesWait, before the hub's desired states arrived or the
// wait ended). It implements link.SnapshotFunc.
func (a *Agent) Snapshot() ([]*ironlinkv1.DeviceUpdate, bool) {
	a.view.mu.Lock()
	defer a.view.mu.Unlock()
	if !a.view.listed {
		return nil, false
	}
	if w := a.cfg.DesiredStatesWait; w > 0 && !a.cmds.isKnown() && time.Since(a.view.listedAt) < w {
		return nil, false // HandleDesiredStates or the wait's timer wakes the sender
	}
	ids := a.view.tracker.Devices()
	out := make([]*ironlinkv1.DeviceUpdate, 0, len(ids))
	for _, id := range ids {
		conds := a.view.tracker.All(id)
		u := &ironlinkv1.DeviceUpdate{DeviceId: id, Facts: a.view.facts[id], Hardware: a.hw.get(id)}
		var observed time.Time
		for _, c := range conds {
			u.Conditions = append(u.Conditions, wire.ConditionToProto(c))
			if c.ObservedTime.After(observed) {
				observed = c.ObservedTime
			}
		}
		u.ObservedTime = timestamppb.New(observed)
		out = append(out, u)
	}
	return out, true
}
