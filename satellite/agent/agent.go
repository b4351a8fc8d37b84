// Package agent is the satellite's core loop: every poll interval it lists
// Ironic (and reads the Placement gate), maps nodes to conditions, and pushes
// what changed to the link's outbox; it builds full snapshots for new links
// and applies the hub's quarantine/release commands through the gate.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/textcheck"
	"github.com/ironlink/ironlink/internal/wire"
	"github.com/ironlink/ironlink/satellite/conditions"
	"github.com/ironlink/ironlink/satellite/gate"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/placement"
	"github.com/ironlink/ironlink/satellite/site"
)

// ReadyTrait is the Placement/Ironic trait that gates a node open to customers.
const ReadyTrait = conditions.ReadyTrait

// Config configures the agent.
type Config struct {
	// PollInterval between Ironic listings (default 60 s).
	PollInterval time.Duration
	// PollTimeout bounds one poll (default: the poll interval).
	PollTimeout time.Duration
	// CommandTimeout bounds applying one command (default 2 min).
	CommandTimeout time.Duration
	// Conditions configures the node → condition mapping.
	Conditions conditions.Config
	// StatePath, when set, is a JSON file where the applied command
	// generations are kept across restarts.
	StatePath string
	// SweepInterval between sweeps of assigned nodes and orphan checks
	// (default 5 min; SPEC "Satellite schedules").
	SweepInterval time.Duration
	// SweepTimeout bounds one sweep (default: the sweep interval).
	SweepTimeout time.Duration
	// RequestResync, when set, asks the hub for the desired states (the
	// link's RequestResync). A poll calls it, at most every
	// ResyncRequestMinInterval, when it sees a device's gate differ from the
	// state last applied — for example a quarantine that nova-compute undid
	// by rewriting the provider's traits from a node-trait list it read
	// just before the quarantine.
	RequestResync func()
	// Observer, when set, is told the wall time of every completed poll,
	// sweep and resync (satellite/metrics turns them into histograms).
	Observer Observer
	// DesiredStatesWait, when > 0, holds the process's first snapshot back
	// until the hub's desired states have arrived (HandleDesiredStates), at
	// most this long after the first complete listing. Without it a
	// satellite that lost its state file would report every commanded
	// device as never commanded (CustomerReady TraitAbsent, observed
	// generation 0) and then, once the desired states arrive, as commanded
	// again: two history rows per device for a change that never happened.
	// The satellite sets DefaultDesiredStatesWait when it has a link; 0
	// (tests, no link) sends the snapshot at once.
	DesiredStatesWait time.Duration
}

// Observer receives the agent's timings. Its methods are called after each
// poll that completed (not one skipped because a read failed), each sweep
// and each resync; they must be quick and must not block.
type Observer interface {
	PollDone(took time.Duration)
	SweepDone(took time.Duration, complete bool)
	ResyncDone(took time.Duration)
}

// Defaults of Config.PollInterval and Config.SweepInterval. satellite/app's
// Defaults table uses them (the values the flags show and Validate fills);
// New fills them too for a Config built without it (tests), so each value is
// written once.
const (
	DefaultPollInterval  = time.Minute
	DefaultSweepInterval = 5 * time.Minute
)

// DefaultDesiredStatesWait is the DesiredStatesWait of a satellite with a
// link: the hub sends its desired states right after Welcome, so the wait
// is normally a round trip; the bound only matters for a hub that does not.
const DefaultDesiredStatesWait = 30 * time.Second

// ResyncRequestMinInterval is the least time between two resyncs a poll
// asks for.
const ResyncRequestMinInterval = 30 * time.Second

// Clients are the agent's connections to its site, through the seams of
// satellite/site: the gophercloud-backed clients in production, a
// site.Fixture in tests. Ironic is required; Placement is nil on a
// standalone site and Nova is nil where the site has no Nova (no orphan
// detection) — nil interfaces, not nil pointers.
type Clients struct {
	// Ironic lists, re-reads and writes node traits (required).
	Ironic site.Ironic
	// Placement reads and writes resource-provider traits; nil standalone.
	Placement site.Placement
	// Nova lists servers for the orphan sweep; nil without Nova.
	Nova site.Nova
}

// Agent polls one site and applies its commands. Safe for concurrent use.
type Agent struct {
	cfg       Config
	ironic    site.Ironic
	placement site.Placement // nil on a standalone site
	nova      site.Nova      // nil without Nova
	gate      *gate.Applier
	outbox    *link.Outbox
	site      *link.SiteState // nil: site conditions not reported
	log       *slog.Logger
	pollNow   chan struct{}
	listedCh  chan struct{} // closed after the first complete listing

	mu      sync.Mutex
	tracker *conditions.Tracker
	facts   map[string]*ironlinkv1.DeviceFacts
	listed  bool                                // a complete listing has been made
	desired map[string]desired                  // the hub's desired state known here, by device
	views   map[string]conditions.PlacementView // last Placement view read, by device
	// desiredKnown: the hub's desired states have been received once by
	// this process (see Config.DesiredStatesWait); listedAt is when the
	// first complete listing ended.
	desiredKnown bool
	listedAt     time.Time
	locks        map[string]*sync.Mutex
	nodes        map[string]ironic.Node // last seen (listing or sweep re-read), by device
	asOf         map[string]time.Time   // when the data in nodes was read (listing or re-read start)

	// Orphan sweep state (sweep.go).
	suspects   map[mismatchKey]time.Time                 // candidates of the last sweep → first seen
	mismatches map[string][]*ironlinkv1.InstanceMismatch // reported (seen on two sweeps), by device
	projects   map[string]string                         // Nova server id → tenant_id
	looked     map[string]bool                           // server ids looked up for their project

	condBuf       []condition.Condition   // evaluateLocked's scratch for conditions.MapInto
	factsScratch  *ironlinkv1.DeviceFacts // evaluateLocked's scratch facts (never sent or kept)
	stats         Stats
	lastResyncAsk time.Time
	stateSeq      uint64 // numbers the copies stateLocked takes

	saveMu   sync.Mutex // serialises state file writes (never held with mu)
	savedSeq uint64     // the newest copy written
}

// desired is the hub's desired impairment state of one device as this
// satellite knows it. applied says the satellite has made OpenStack match
// exactly this state (a command, a resync, or a bulk read finding it so);
// only a difference between an applied state and OpenStack is drift.
type desired struct {
	quarantined bool
	generation  int64
	applied     bool
}

// same reports whether d and o are the same desired state.
func (d desired) same(o desired) bool {
	return d.quarantined == o.quarantined && d.generation == o.generation
}

// Stats are counters for logs and tests.
type Stats struct {
	// Polls counts completed polls; FailedPolls polls skipped because a read failed.
	Polls, FailedPolls int
	// LastPollDuration is the wall time of the last completed poll.
	LastPollDuration time.Duration
	// LastPollNodes is the node count of the last completed poll.
	LastPollNodes int
	// Resyncs counts impairment resyncs; DriftCorrections the corrections
	// they made (OpenStack differed from a desired state already applied);
	// ResyncFirstApplies the desired states a resync applied for the first
	// time (for example a quarantine accepted while the link was down):
	// writes, but not drift.
	Resyncs, DriftCorrections, ResyncFirstApplies int
	// LastResyncDuration and LastResyncDevices describe the last resync;
	// LastResyncApplied counts the devices the bulk read found differing
	// (or all of them when the bulk read failed), checked one by one.
	LastResyncDuration time.Duration
	LastResyncDevices  int
	LastResyncApplied  int
	// Sweeps counts completed sweeps; FailedSweeps sweeps that could not
	// read Ironic or Nova completely (their orphan verdicts were skipped).
	Sweeps, FailedSweeps int
	// LastSweep describes the last completed sweep.
	LastSweep SweepStats
	// InstanceMismatches is the number of orphans currently reported.
	InstanceMismatches int
	// HeldConditions counts conditions kept at their last known value
	// because Ironic's answer lacked a field they need (one per condition
	// per node per evaluation).
	HeldConditions int
}

// New returns an agent for the site's clients. site, when not nil, receives
// the OrphanDetection site condition.
func New(cfg Config, cl Clients, outbox *link.Outbox, site *link.SiteState, log *slog.Logger) *Agent {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = cfg.PollInterval
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = 2 * time.Minute
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	if cfg.SweepTimeout <= 0 {
		cfg.SweepTimeout = cfg.SweepInterval
	}
	ir, pl := cl.Ironic, cl.Placement
	a := &Agent{
		cfg: cfg, ironic: ir, placement: pl, nova: cl.Nova, outbox: outbox, site: site, log: log,
		nodes: map[string]ironic.Node{}, asOf: map[string]time.Time{}, suspects: map[mismatchKey]time.Time{},
		mismatches: map[string][]*ironlinkv1.InstanceMismatch{}, projects: map[string]string{}, looked: map[string]bool{},
		gate:    &gate.Applier{Ironic: ir, Placement: pl, Trait: ReadyTrait},
		pollNow: make(chan struct{}, 1), listedCh: make(chan struct{}),
		tracker: conditions.NewTracker(), facts: map[string]*ironlinkv1.DeviceFacts{},
		desired: map[string]desired{}, locks: map[string]*sync.Mutex{}, views: map[string]conditions.PlacementView{},
	}
	a.reportDetection()
	return a
}

// Stats returns a copy of the counters.
func (a *Agent) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

// Run polls at once and then every PollInterval (or sooner when a command
// asks for a refresh) until ctx ends.
func (a *Agent) Run(ctx context.Context) {
	go a.runSweeps(ctx)
	t := time.NewTicker(a.cfg.PollInterval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, a.cfg.PollTimeout)
		if err := a.Poll(pctx); err != nil && ctx.Err() == nil {
			a.log.Warn("poll skipped; conditions unchanged", "err", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.pollNow:
		}
	}
}

// Poll lists every node once and pushes the changes. On any read failure it
// returns the error and changes nothing: no device is marked removed and no
// condition flips.
func (a *Agent) Poll(ctx context.Context) error {
	start := time.Now()
	nodes, err := a.ironic.ListNodes(ctx)
	if err != nil {
		a.countFailure()
		return fmt.Errorf("list Ironic nodes: %w", err)
	}
	var pg placementGate
	if a.placement != nil {
		if pg, err = a.readPlacementGate(ctx); err != nil {
			// Ironic was read: go on, but keep each device's last CustomerReady.
			a.log.Warn("Placement unreadable; CustomerReady kept as last seen", "err", err)
		}
	}
	now := time.Now().UTC()

	a.lookupProjects(ctx, nodes)

	a.mu.Lock()
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
	for _, id := range a.tracker.Devices() {
		if !seen[id] {
			a.tracker.Forget(id)
			delete(a.facts, id)
			delete(a.nodes, id)
			delete(a.asOf, id)
			delete(a.mismatches, id)
			delete(a.views, id)
			updates = append(updates, &ironlinkv1.DeviceUpdate{DeviceId: id, Removed: true, ObservedTime: timestamppb.New(now)})
		}
	}
	if !a.listed {
		close(a.listedCh)
		a.listedAt = time.Now()
		if w := a.cfg.DesiredStatesWait; w > 0 && !a.desiredKnown {
			// Wake the sender when the wait for desired states ends, so the
			// snapshot goes then even if the hub never sent them.
			time.AfterFunc(w, func() { a.outbox.Push(nil) })
		}
	}
	a.listed = true
	askResync := drifted > 0 && a.cfg.RequestResync != nil && time.Since(a.lastResyncAsk) >= ResyncRequestMinInterval
	if askResync {
		a.lastResyncAsk = time.Now()
	}
	a.stats.Polls++
	a.stats.LastPollDuration = time.Since(start)
	a.stats.LastPollNodes = len(nodes)
	a.mu.Unlock()

	a.outbox.Push(updates)
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
// commanded are not judged. a.mu is held.
func (a *Agent) gateDiffersLocked(n ironic.Node, pv conditions.PlacementView) bool {
	d, ok := a.desired[n.UUID]
	if !ok || d.generation == 0 || n.Missing["traits"] {
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
// sweep's re-read overtaken by a listing) is ignored. a.mu is held.
func (a *Agent) evaluateLocked(n ironic.Node, pv conditions.PlacementView, now, asOf time.Time) *ironlinkv1.DeviceUpdate {
	if prev, ok := a.asOf[n.UUID]; ok && asOf.Before(prev) {
		return nil
	}
	if prev, ok := a.nodes[n.UUID]; ok {
		// A field the answer left out keeps its last known value, for the
		// facts and the sweep; n.Unsent still says it is not fresh.
		n = n.CarryUnsent(prev)
	}
	a.nodes[n.UUID], a.asOf[n.UUID] = n, asOf
	if pv.Read {
		a.views[n.UUID] = pv
	}
	d := a.desired[n.UUID]
	obs := conditions.Observation{
		Node: n, Now: now, Placement: pv, Quarantined: d.quarantined, AppliedGeneration: d.generation,
		InstanceMismatch: mismatchMessage(a.mismatches[n.UUID]),
	}
	if n.InstanceUUID != "" {
		obs.InstanceProject = a.projects[strings.ToLower(n.InstanceUUID)]
	}
	// One buffer for every evaluation (a.mu is held; the tracker copies
	// what it keeps, holdUnsentLocked and without build new slices).
	conds := conditions.MapInto(a.condBuf, a.cfg.Conditions, obs)
	a.condBuf = conds
	if a.placement != nil && !pv.Read {
		if _, had := a.tracker.Get(n.UUID, condition.CustomerReady); had {
			conds = without(conds, condition.CustomerReady)
		}
	}
	if len(n.Unsent) > 0 {
		conds = a.holdUnsentLocked(n, conds)
	}
	changed := a.tracker.Observe(n.UUID, conds)
	// The facts are built in a scratch message and kept only when they
	// changed (most polls change none of 10,000).
	f := a.factsScratch
	if f == nil {
		f = &ironlinkv1.DeviceFacts{}
	}
	fillFacts(f, n)
	f.InstanceMismatches = a.mismatches[n.UUID]
	factsChanged := !sameFacts(a.facts[n.UUID], f)
	if !factsChanged {
		a.factsScratch = f
		if len(changed) == 0 {
			return nil
		}
		f = a.facts[n.UUID]
	} else {
		a.factsScratch = nil
		a.facts[n.UUID] = f
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
// time gets Unknown/FieldUnavailable. a.mu is held.
func (a *Agent) holdUnsentLocked(n ironic.Node, conds []condition.Condition) []condition.Condition {
	out := conds[:0:0]
	for _, c := range conds {
		if c.Reason == conditions.ReasonFieldUnavailable && conditions.UnsentNeeded(a.cfg.Conditions, c.Type, n) != "" {
			if _, had := a.tracker.Get(n.UUID, c.Type); had {
				a.stats.HeldConditions++
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

func (a *Agent) countFailure() {
	a.mu.Lock()
	a.stats.FailedPolls++
	a.mu.Unlock()
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
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.listed {
		return nil, false
	}
	if w := a.cfg.DesiredStatesWait; w > 0 && !a.desiredKnown && time.Since(a.listedAt) < w {
		return nil, false // HandleDesiredStates or the wait's timer wakes the sender
	}
	ids := a.tracker.Devices()
	out := make([]*ironlinkv1.DeviceUpdate, 0, len(ids))
	for _, id := range ids {
		conds := a.tracker.All(id)
		u := &ironlinkv1.DeviceUpdate{DeviceId: id, Facts: a.facts[id]}
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

// HandleCommand applies a hub command to the node and its resource provider
// through the gate (idempotent), remembers the applied generation, re-reads
// only that node (refreshNode) so the new CustomerReady reaches the hub, and
// returns the result. It implements link.CommandHandler.
func (a *Agent) HandleCommand(ctx context.Context, cmd *ironlinkv1.Command) *ironlinkv1.CommandResult {
	res := &ironlinkv1.CommandResult{CommandId: cmd.GetCommandId(), DeviceId: cmd.GetDeviceId(), Generation: cmd.GetGeneration()}
	var quarantine bool
	switch cmd.GetDesired() {
	case ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED:
		quarantine = true
	case ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED:
	default:
		res.Error = fmt.Sprintf("desired state %v is not QUARANTINED or RELEASED", cmd.GetDesired())
		setFailure(res, site.Failed("InvalidCommand", "%s", res.Error))
		return res
	}
	lock := a.deviceLock(cmd.GetDeviceId())
	lock.Lock()
	defer lock.Unlock()

	a.mu.Lock()
	prev := a.desired[cmd.GetDeviceId()]
	a.mu.Unlock()
	if prev.generation > cmd.GetGeneration() {
		res.Error = fmt.Sprintf("generation %d is older than the applied generation %d", cmd.GetGeneration(), prev.generation)
		setFailure(res, site.Failed("StaleGeneration", "%s", res.Error))
		return res
	}
	// Applying is idempotent, so a repeated generation (a resend after a
	// lost result, or after a restart) is applied again: that also heals a
	// trait someone changed behind ironlink's back.

	ctx, cancel := context.WithTimeout(ctx, a.cfg.CommandTimeout)
	defer cancel()
	start := time.Now()
	r, err := a.gate.Apply(ctx, cmd.GetDeviceId(), quarantine)
	if err != nil {
		res.Error = textcheck.SanitizeText(err.Error(), maxResultTextBytes)
		f := gate.Classify(err)
		setFailure(res, f)
		a.log.WarnContext(ctx, "command failed", "command_id", cmd.GetCommandId(), "device_id", cmd.GetDeviceId(), "err", err,
			"permanent", f.Permanent(), "failure_reason", f.Reason)
		return res
	}
	res.Success, res.Detail = true, textcheck.SanitizeText(r.Detail, maxResultTextBytes)
	a.mu.Lock()
	a.desired[cmd.GetDeviceId()] = desired{quarantined: quarantine, generation: cmd.GetGeneration(), applied: true}
	st := a.stateLocked()
	a.mu.Unlock()
	if err := a.saveState(st); err != nil {
		a.log.Error("applied generation not saved; it will be re-applied after a restart", "err", err)
	}
	a.log.InfoContext(ctx, "command applied", "command_id", cmd.GetCommandId(), "device_id", cmd.GetDeviceId(),
		"generation", cmd.GetGeneration(), "quarantine", quarantine, "detail", r.Detail, "took", time.Since(start).Round(time.Millisecond))
	a.refreshNode(ctx, cmd.GetDeviceId(), quarantine)
	return res
}

// refreshNode re-reads device id after a command changed its gate — the
// node (GET /v1/nodes/{id}) and, where the site has Placement, its
// provider's traits (GET /resource_providers/{id}/traits) — evaluates it
// and pushes what changed, so the new CustomerReady reaches the hub after
// two requests instead of a listing of the whole site (issue 11: a
// 10,000-node site lists in pages for seconds). quarantined is the state
// just applied: after a release the gate has made sure the trait is
// defined in Placement. When a read fails, or Ironic no longer has the
// node, it asks for an immediate poll instead (the listing then decides).
// The per-device lock of the command is held, so no other command or
// resync of the device interleaves; a listing that started after the
// re-read wins (evaluateLocked's asOf rule).
func (a *Agent) refreshNode(ctx context.Context, id string, quarantined bool) {
	start := time.Now()
	n, err := a.ironic.GetNode(ctx, id)
	if err != nil {
		a.log.WarnContext(ctx, "re-read after a command failed; polling the site instead", "device_id", id, "err", err)
		a.askPoll()
		return
	}
	var pv conditions.PlacementView
	if a.placement != nil {
		ts, _, err := a.placement.ProviderTraits(ctx, id)
		switch {
		case errors.Is(err, placement.ErrProviderNotFound):
			pv = conditions.PlacementView{Read: true}
		case err != nil:
			a.log.WarnContext(ctx, "provider re-read after a command failed; polling the site instead", "device_id", id, "err", err)
			a.askPoll()
			return
		default:
			pv = conditions.PlacementView{Read: true, ProviderExists: true, HasTrait: slices.Contains(ts, ReadyTrait)}
		}
	}
	now := time.Now().UTC()
	a.mu.Lock()
	if _, listed := a.facts[id]; !listed {
		a.mu.Unlock()
		return // not listed yet: the first listing carries it
	}
	if pv.Read {
		pv.TraitDefined = !quarantined || pv.HasTrait || a.views[id].TraitDefined
	}
	u := a.evaluateLocked(n, pv, now, start)
	a.mu.Unlock()
	if u != nil {
		a.outbox.Push([]*ironlinkv1.DeviceUpdate{u})
	}
}

// askPoll asks Run for a poll now (at most one pending).
func (a *Agent) askPoll() {
	select {
	case a.pollNow <- struct{}{}:
	default:
	}
}

// PollSoon asks for a listing now instead of at the next tick (at most one
// waits): an operation that changed a node, or created one, shows at the
// hub without waiting a whole poll interval.
func (a *Agent) PollSoon() {
	select {
	case a.pollNow <- struct{}{}:
	default:
	}
}

func (a *Agent) deviceLock(id string) *sync.Mutex {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.locks[id]
	if l == nil {
		l = &sync.Mutex{}
		a.locks[id] = l
	}
	return l
}

// Limits of the hub's link validation (hub/link: MaxFactBytes,
// MaxResultTextBytes, MaxCorrectionDetailBytes, MaxMismatchStatusBytes,
// MaxMismatchIDBytes), which the satellite cannot import: text relayed from
// OpenStack is sanitized to them (textcheck.SanitizeLine/SanitizeText)
// before it is sent, because the hub refuses a whole batch or result with
// InvalidArgument for one bad value and the satellite would resend it for
// ever.
const (
	maxFactBytes           = 255
	maxResultTextBytes     = 2048
	maxCorrectionBytes     = 1024
	maxMismatchStatusBytes = 32
	maxMismatchIDBytes     = 64
)

// sameFacts reports whether facts a (nil: none yet) and b are equal:
// field by field, the instance mismatches by proto.Equal (reflection only
// when a device has some; a poll compares 10,000 facts).
func sameFacts(a, b *ironlinkv1.DeviceFacts) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Name != b.Name || a.ProvisionState != b.ProvisionState || a.PowerState != b.PowerState || a.Maintenance != b.Maintenance ||
		a.ResourceClass != b.ResourceClass || a.InstanceUuid != b.InstanceUuid || a.Lessee != b.Lessee || a.Owner != b.Owner ||
		a.ConductorGroup != b.ConductorGroup || a.Fault != b.Fault || len(a.InstanceMismatches) != len(b.InstanceMismatches) ||
		!samePtr(a.Cpus, b.Cpus) || !samePtr(a.MemoryMb, b.MemoryMb) || !samePtr(a.LocalGb, b.LocalGb) || !samePtr(a.CpuArch, b.CpuArch) {
		return false
	}
	for i, m := range a.InstanceMismatches {
		if !proto.Equal(m, b.InstanceMismatches[i]) {
			return false
		}
	}
	return true
}

// samePtr reports whether two optional fact values are both unset or
// both set and equal.
func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// setPtr sets the optional fact *p to v when has (reusing *p's storage: f
// is the scratch message, whose values are never shared), else unsets it.
func setPtr[T any](p **T, v T, has bool) {
	switch {
	case !has:
		*p = nil
	case *p != nil:
		**p = v
	default:
		*p = &v
	}
}

// fillFacts sets every field of f but InstanceMismatches to n's facts for
// the hub, each one-line value sanitized (NUL and control characters
// replaced, cut to maxFactBytes). The node's properties (cpus, memory_mb,
// local_gb, cpu_arch) are unset when Ironic did not tell them.
func fillFacts(f *ironlinkv1.DeviceFacts, n ironic.Node) {
	l := func(s string) string { return textcheck.SanitizeLine(s, maxFactBytes) }
	f.Name, f.ProvisionState, f.PowerState, f.Maintenance = l(n.Name), l(n.ProvisionState), l(n.PowerState), n.Maintenance
	f.ResourceClass, f.InstanceUuid, f.Lessee, f.Owner = l(n.ResourceClass), l(n.InstanceUUID), l(n.Lessee), l(n.Owner)
	f.ConductorGroup, f.Fault = l(n.ConductorGroup), l(n.Fault)
	p := n.Properties
	setPtr(&f.Cpus, p.CPUs, p.HasCPUs)
	setPtr(&f.MemoryMb, p.MemoryMB, p.HasMemoryMB)
	setPtr(&f.LocalGb, p.LocalGB, p.HasLocalGB)
	setPtr(&f.CpuArch, l(p.CPUArch), p.HasCPUArch)
}
