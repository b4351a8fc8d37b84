package agent

import (
	"context"
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// gateSnapshot reads the gate of the whole site at once — one node listing
// (with traits) and, where Placement exists, the provider list and the
// providers carrying the trait — and returns a func telling whether a
// device already matches its desired state on both sides. Only devices it
// says no to are applied one by one (and re-read then), so a resync of a
// converged 10,000-node site costs a dozen requests instead of ~25,000.
// It returns nil when the bulk read fails or lacks node traits; every
// device is then checked one by one.
func (a *Agent) gateSnapshot(ctx context.Context) func(id string, quarantine bool) bool {
	nodes, err := a.ironic.ListNodes(ctx)
	if err != nil {
		a.log.Warn("resync: bulk read of Ironic failed; checking devices one by one", "err", err)
		return nil
	}
	nodeHas := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		if n.Missing["traits"] {
			return nil
		}
		nodeHas[n.UUID] = n.HasTrait(ReadyTrait)
	}
	var pg placementGate
	if a.placement != nil {
		if pg, err = a.readPlacementGate(ctx); err != nil {
			a.log.Warn("resync: bulk read of Placement failed; checking devices one by one", "err", err)
			return nil
		}
	}
	return func(id string, q bool) bool {
		has, ok := nodeHas[id]
		return ok && gateMatches(!q, has, pg.view(id), a.placement != nil)
	}
}

// HandleDesiredStates takes the hub's desired impairment states for the
// site (the truth: SPEC "Desired impairment state per device ... is the
// truth"), remembers them, and converges OpenStack to them: for every device
// still listed by Ironic it re-applies the desired state through the gate
// (idempotent: reads the node and provider traits, writes only what
// differs) — after one bulk read of the site has shown it differs
// (gateSnapshot). Every write it had to make is a drift, returned as a
// DriftCorrection for the hub. Devices the hub never touched are left alone.
// It implements link.DesiredStateHandler.
func (a *Agent) HandleDesiredStates(ctx context.Context, s *ironlinkv1.DesiredStates) []*ironlinkv1.DriftCorrection {
	// Desired states usually arrive with the link, often before the first
	// listing: wait for it, so that every listed device is converged now
	// rather than at the next resync.
	select {
	case <-a.listedCh:
	case <-ctx.Done():
		return nil
	}
	start := time.Now()
	type item struct {
		id         string
		quarantine bool
		generation int64
	}
	var todo []item
	a.mu.Lock()
	for _, d := range s.GetDevices() {
		q := d.GetDesired() == ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED
		if !q && d.GetDesired() != ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED {
			continue
		}
		if cur := a.desired[d.GetDeviceId()]; cur.generation > d.GetGeneration() {
			continue // a newer command was applied already; the hub will catch up
		}
		a.desired[d.GetDeviceId()] = desired{quarantined: q, generation: d.GetGeneration()}
		if _, listed := a.facts[d.GetDeviceId()]; listed {
			todo = append(todo, item{d.GetDeviceId(), q, d.GetGeneration()})
		}
	}
	if err := a.saveStateLocked(); err != nil {
		a.log.Error("desired states not saved", "err", err)
	}
	a.mu.Unlock()
	sort.Slice(todo, func(i, j int) bool { return todo[i].id < todo[j].id })

	inSync := a.gateSnapshot(ctx)
	var out []*ironlinkv1.DriftCorrection
	failed, applied := 0, 0
	for _, it := range todo {
		if ctx.Err() != nil {
			break
		}
		if inSync != nil && inSync(it.id, it.quarantine) {
			continue
		}
		applied++
		lock := a.deviceLock(it.id)
		lock.Lock()
		cctx, cancel := context.WithTimeout(ctx, a.cfg.CommandTimeout)
		r, err := a.gate.Apply(cctx, it.id, it.quarantine)
		cancel()
		lock.Unlock()
		if err != nil {
			failed++
			a.log.Warn("resync could not converge a device; next resync retries", "device_id", it.id, "err", err)
			continue
		}
		if r.NodeChanged || r.ProviderChanged {
			out = append(out, &ironlinkv1.DriftCorrection{DeviceId: it.id, Generation: it.generation,
				Detail: "resync: " + r.Detail, CorrectTime: timestamppb.Now()})
			a.log.Warn("drift corrected", "device_id", it.id, "generation", it.generation, "detail", r.Detail)
		}
	}
	a.mu.Lock()
	a.stats.Resyncs++
	a.stats.DriftCorrections += len(out)
	a.stats.LastResyncDuration = time.Since(start)
	a.stats.LastResyncDevices = len(todo)
	a.stats.LastResyncApplied = applied
	a.mu.Unlock()
	if a.cfg.Observer != nil {
		a.cfg.Observer.ResyncDone(time.Since(start))
	}
	a.log.Info("resync done", "devices", len(todo), "checked_one_by_one", applied, "corrected", len(out), "failed", failed,
		"bulk_read", inSync != nil, "took", time.Since(start).Round(time.Millisecond))
	if len(out) > 0 {
		select {
		case a.pollNow <- struct{}{}:
		default:
		}
	}
	return out
}
