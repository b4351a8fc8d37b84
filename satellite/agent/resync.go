package agent

import (
	"context"
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// gateSnapshot reads the gate of the whole site at once — one node listing
// (with traits) and, where Placement exists, the provider list and the
// providers carrying the trait — and returns a func telling whether a
// device already matches its desired state on both sides. Only devices it
// says no to are applied one by one (and re-read then), so a resync of a
// converged 10,000-node site costs a dozen requests instead of ~25,000.
// It returns nil when the bulk read fails; every device is then checked
// one by one. A node whose traits the listing did not carry counts as
// differing (checked one by one).
func (a *Agent) gateSnapshot(ctx context.Context) func(id string, quarantine bool) bool {
	nodes, err := a.ironic.ListNodes(ctx)
	if err != nil {
		a.log.Warn("resync: bulk read of Ironic failed; checking devices one by one", "err", err)
		return nil
	}
	nodeHas := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		if n.Missing["traits"] {
			continue // not sent for this node: it is checked one by one
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
// (gateSnapshot). A write made for a desired state this satellite had
// already applied is a drift (someone changed OpenStack behind ironlink's
// back) and is returned as a DriftCorrection for the hub; a write for a
// desired state it had not applied yet (a command accepted while the link
// was down, or a satellite without its state file) is the first
// application of that state, logged and counted
// (Stats.ResyncFirstApplies), not drift. Devices the hub never touched are
// left alone. It implements link.DesiredStateHandler.
//
// The first call of a process also re-evaluates the devices whose desired
// state it learnt, before the first snapshot is sent (see
// Config.DesiredStatesWait).
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
	todo := a.learnDesired(s)
	inSync := a.gateSnapshot(ctx)
	c := a.converge(ctx, todo, inSync)
	a.countStats(func(st *Stats) {
		st.Resyncs++
		st.DriftCorrections += len(c.corrections)
		st.ResyncFirstApplies += c.firsts
		st.LastResyncDuration = time.Since(start)
		st.LastResyncDevices = len(todo)
		st.LastResyncApplied = c.applied
	})
	st := a.takeState()
	if a.cfg.Observer != nil {
		a.cfg.Observer.ResyncDone(time.Since(start))
	}
	if err := a.saveState(st); err != nil {
		a.log.Error("applied desired states not saved", "err", err)
	}
	a.log.Info("resync done", "devices", len(todo), "checked_one_by_one", c.applied, "corrected", len(c.corrections), "first_applied", c.firsts,
		"failed", c.failed, "bulk_read", inSync != nil, "took", time.Since(start).Round(time.Millisecond))
	if len(c.corrections) > 0 || c.firsts > 0 {
		select {
		case a.pollNow <- struct{}{}:
		default:
		}
	}
	return c.corrections
}

// resyncItem is one listed device a resync converges.
type resyncItem struct {
	id         string
	quarantine bool
	generation int64
	known      bool // this exact state was applied before: a write is drift
}

// learnDesired remembers the hub's desired states (a newer command already
// applied wins), saves them, re-evaluates the devices whose desired state
// changed and pushes what changed, and returns the listed devices to
// converge, by id.
func (a *Agent) learnDesired(s *ironlinkv1.DesiredStates) []resyncItem {
	var todo []resyncItem
	var updates []*ironlinkv1.DeviceUpdate
	a.view.mu.Lock()
	now := time.Now().UTC() // under the lock: see Poll
	for _, d := range s.GetDevices() {
		q := d.GetDesired() == ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED
		alone := d.GetDesired() == ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED_UNOFFERED
		if !q && !alone && d.GetDesired() != ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED {
			continue
		}
		id := d.GetDeviceId()
		next := desired{quarantined: q, leftAlone: alone, generation: d.GetGeneration()}
		a.cmds.mu.Lock()
		cur, had := a.cmds.desired[id]
		if cur.generation > d.GetGeneration() {
			a.cmds.mu.Unlock()
			continue // a newer command was applied already; the hub will catch up
		}
		next.applied = alone || (cur.applied && cur.same(next)) // nothing to write for a trait left alone
		a.cmds.desired[id] = next
		a.cmds.mu.Unlock()
		if _, listed := a.view.facts[id]; listed {
			if !alone {
				todo = append(todo, resyncItem{id, q, d.GetGeneration(), next.applied})
			}
			if !had || !cur.same(next) {
				// CustomerReady says whether the device is commanded: tell
				// the hub now, not at the next poll.
				if u := a.evaluateLocked(a.view.nodes[id], a.view.views[id], now, a.view.asOf[id]); u != nil {
					updates = append(updates, u)
				}
			}
		}
	}
	a.cmds.mu.Lock()
	first := !a.cmds.known
	a.cmds.known = true
	a.cmds.mu.Unlock()
	st := a.takeState()
	a.view.mu.Unlock()
	if err := a.saveState(st); err != nil {
		a.log.Error("desired states not saved", "err", err)
	}
	// Pushed before the first snapshot is allowed is dropped (the snapshot
	// carries it); the push wakes the sender, whose snapshot now can go.
	a.outbox.Push(updates)
	if first {
		a.log.Info("hub's desired states received", "devices", len(s.GetDevices()), "reevaluated", len(updates))
	}
	sort.Slice(todo, func(i, j int) bool { return todo[i].id < todo[j].id })
	return todo
}

// convergence is what converge did.
type convergence struct {
	corrections             []*ironlinkv1.DriftCorrection
	failed, applied, firsts int
}

// converge applies each device's desired state through the gate, unless
// inSync (the bulk read; nil: none) shows it applied already, and returns
// the drift it corrected and its counts.
func (a *Agent) converge(ctx context.Context, todo []resyncItem, inSync func(id string, quarantine bool) bool) convergence {
	var c convergence
	for _, it := range todo {
		if ctx.Err() != nil {
			break
		}
		if inSync != nil && inSync(it.id, it.quarantine) {
			a.markApplied(it.id, it.quarantine, it.generation)
			continue
		}
		c.applied++
		lock := a.deviceLock(it.id)
		lock.Lock()
		cctx, cancel := context.WithTimeout(ctx, a.cfg.CommandTimeout)
		r, err := a.gate.Apply(cctx, it.id, it.quarantine)
		cancel()
		lock.Unlock()
		if err != nil {
			c.failed++
			a.log.Warn("resync could not converge a device; next resync retries", "device_id", it.id, "err", err)
			continue
		}
		// Known before this resync, or applied meanwhile by a command.
		known := a.markApplied(it.id, it.quarantine, it.generation) || it.known
		switch wrote := r.NodeChanged || r.ProviderChanged; {
		case wrote && known:
			c.corrections = append(c.corrections, &ironlinkv1.DriftCorrection{DeviceId: it.id, Generation: it.generation,
				Detail: textcheck.SanitizeText("resync: "+r.Detail, maxCorrectionBytes), CorrectTime: timestamppb.Now()})
			a.log.Warn("drift corrected", "device_id", it.id, "generation", it.generation, "detail", r.Detail)
		case wrote:
			c.firsts++
			a.log.Info("resync applied a desired state this satellite had not applied yet (not drift)",
				"device_id", it.id, "generation", it.generation, "quarantine", it.quarantine, "detail", r.Detail)
		}
	}
	return c
}

// markApplied records that OpenStack matches device id's desired state
// (quarantine, generation), if that is still the state known; it reports
// whether the state had been applied before.
func (a *Agent) markApplied(id string, quarantine bool, generation int64) (before bool) {
	a.cmds.mu.Lock()
	defer a.cmds.mu.Unlock()
	d, ok := a.cmds.desired[id]
	if !ok || !d.same(desired{quarantined: quarantine, generation: generation}) {
		return false
	}
	before = d.applied
	d.applied = true
	a.cmds.desired[id] = d
	return before
}
