// Package agent is the satellite's core loop: every poll interval it lists
// Ironic (and reads the Placement gate), maps nodes to conditions, and pushes
// what changed to the link's outbox; it builds full snapshots for new links
// and applies the hub's quarantine/release commands through the gate.
package agent

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/labels"
	"github.com/ironlink/ironlink/satellite/conditions"
	"github.com/ironlink/ironlink/satellite/gate"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
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
	// CommandTimeout bounds applying one command, and each desired state a
	// resync re-applies (default DefaultCommandTimeout; --command-timeout):
	// past it the command fails with the context's deadline as its error.
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
	// HardwareReadsPerPoll bounds the nodes whose inventory and BIOS
	// settings one poll reads (two requests each): a node is read on its
	// first poll and when its inspection_finished_at changes, never
	// otherwise (hardware.go). 0 means DefaultHardwareReadsPerPoll; < 0
	// turns the reads off.
	HardwareReadsPerPoll int
	// LabelMap maps Ironic node fields to failure-domain labels sent with
	// the facts (--label-map; labels.go); nil sends none.
	LabelMap labels.Mapping
}

// Observer receives the agent's timings. Its methods are called after each
// poll that completed (not one skipped because a read failed), each sweep
// and each resync; they must be quick and must not block.
type Observer interface {
	PollDone(took time.Duration)
	// ListingHazards counts n hazards of kind (HazardKinds) in one
	// complete listing.
	ListingHazards(kind string, n int)
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
	// DefaultCommandTimeout bounds applying one command (its Ironic and
	// Placement writes, retries included) when Config.CommandTimeout is 0
	// (--command-timeout).
	DefaultCommandTimeout = 2 * time.Minute
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

	// The agent's state, split by concern, each part behind its own lock.
	// Lock order: view.mu → cmds.mu → orphans.mu → hw.mu → statsMu (a holder of one
	// may take the later ones, never the earlier); saveMu is never held
	// with any of them. Operations keep their state in the operations
	// runner, under its own lock.
	view    deviceView    // poll state: what Ironic showed, what was sent
	cmds    commandState  // command state: the hub's desired states
	orphans orphanState   // the orphan sweep's memory
	hw      hardwareState // hardware read from Ironic (a leaf lock)

	statsMu sync.Mutex // guards stats; a leaf lock
	stats   Stats

	// labelWarned holds "uuid/key" of the bad label values already logged.
	labelWarned sync.Map

	saveMu   sync.Mutex // serialises state file writes (held with no other lock of the agent; it takes the site set's, a leaf)
	savedSeq uint64     // the newest copy written
	stateMsg string     // the StateFileWritten message last set (saveMu)
}

// deviceView is the poll state: each device as the listings, the sweep's
// re-reads and the refreshes after a command showed it, and the
// conditions and facts sent for it. Guarded by mu, which evaluateLocked
// needs held.
type deviceView struct {
	mu      sync.Mutex
	tracker *conditions.Tracker
	facts   map[string]*ironlinkv1.DeviceFacts
	listed  bool                                // a complete listing has been made
	views   map[string]conditions.PlacementView // last Placement view read, by device
	// listedAt is when the first complete listing ended.
	listedAt time.Time
	nodes    map[string]ironic.Node // last seen (listing or sweep re-read), by device
	asOf     map[string]time.Time   // when the data in nodes was read (listing or re-read start)

	condBuf       []condition.Condition   // evaluateLocked's scratch for conditions.MapInto
	factsScratch  *ironlinkv1.DeviceFacts // evaluateLocked's scratch facts (never sent or kept)
	lastResyncAsk time.Time
}

// commandState is the command state: the hub's desired impairment states
// as known here (commands, resyncs, the state file) and the per-device
// locks that serialise applying them. Guarded by mu, which is never held
// across an OpenStack call.
type commandState struct {
	mu      sync.Mutex
	desired map[string]desired // the hub's desired state known here, by device
	// known: the hub's desired states have been received once by this
	// process (see Config.DesiredStatesWait).
	known    bool
	locks    map[string]*sync.Mutex
	stateSeq uint64 // numbers the copies takeState takes
}

// get returns device id's desired state.
func (c *commandState) get(id string) (desired, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.desired[id]
	return d, ok
}

// isKnown reports whether the hub's desired states have arrived once.
func (c *commandState) isKnown() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.known
}

// orphanState is the orphan sweep's memory (sweep.go). Guarded by mu.
type orphanState struct {
	mu         sync.Mutex
	suspects   map[mismatchKey]time.Time                 // candidates of the last sweep → first seen
	mismatches map[string][]*ironlinkv1.InstanceMismatch // reported (seen on two sweeps), by device
	projects   map[string]string                         // Nova server id → tenant_id
	looked     map[string]bool                           // server ids looked up for their project
}

// forDevice returns the orphans reported for device id and the project of
// its instance ("" when unknown).
func (o *orphanState) forDevice(id, instanceUUID string) ([]*ironlinkv1.InstanceMismatch, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	project := ""
	if instanceUUID != "" {
		project = o.projects[strings.ToLower(instanceUUID)]
	}
	return o.mismatches[id], project
}

// forget drops the orphans reported for a device Ironic no longer has.
func (o *orphanState) forget(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.mismatches, id)
}

// count returns the number of orphans reported.
func (o *orphanState) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, ms := range o.mismatches {
		n += len(ms)
	}
	return n
}

// countStats changes the counters through fn (statsMu is a leaf lock:
// callable with any other lock held).
func (a *Agent) countStats(fn func(*Stats)) {
	a.statsMu.Lock()
	fn(&a.stats)
	a.statsMu.Unlock()
}

// desired is the hub's desired impairment state of one device as this
// satellite knows it. applied says the satellite has made OpenStack match
// exactly this state (a command, a resync, or a bulk read finding it so);
// only a difference between an applied state and OpenStack is drift.
type desired struct {
	quarantined bool
	// leftAlone: a release of a device not offered before its quarantine
	// (IMPAIRMENT_STATE_RELEASED_UNOFFERED): the trait is not written and
	// not converged, as for a device never commanded.
	leftAlone  bool
	generation int64
	applied    bool
}

// same reports whether d and o are the same desired state.
func (d desired) same(o desired) bool {
	return d.quarantined == o.quarantined && d.leftAlone == o.leftAlone && d.generation == o.generation
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
	// HardwareReads counts nodes whose inventory and BIOS settings were
	// read; HardwareDeferred nodes due for a read that a poll's budget
	// left to a later poll.
	HardwareReads, HardwareDeferred int
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
		cfg.CommandTimeout = DefaultCommandTimeout
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
		gate:    &gate.Applier{Ironic: ir, Placement: pl, Trait: ReadyTrait},
		pollNow: make(chan struct{}, 1), listedCh: make(chan struct{}),
		view: deviceView{tracker: conditions.NewTracker(), facts: map[string]*ironlinkv1.DeviceFacts{},
			nodes: map[string]ironic.Node{}, asOf: map[string]time.Time{}, views: map[string]conditions.PlacementView{}},
		hw:   hardwareState{states: map[string]*ironlinkv1.HardwareState{}, readAt: map[string]time.Time{}},
		cmds: commandState{desired: map[string]desired{}, locks: map[string]*sync.Mutex{}},
		orphans: orphanState{suspects: map[mismatchKey]time.Time{}, mismatches: map[string][]*ironlinkv1.InstanceMismatch{},
			projects: map[string]string{}, looked: map[string]bool{}},
	}
	a.reportDetection()
	return a
}

// Stats returns a copy of the counters.
func (a *Agent) Stats() Stats {
	a.statsMu.Lock()
	defer a.statsMu.Unlock()
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
