package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/satellite/hardware"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/site"
)

// DefaultHardwareReadsPerPoll is Config.HardwareReadsPerPoll's default:
// at most 200 nodes' inventory and BIOS settings read per poll (400
// requests), so a new site of 10,000 nodes is read within 50 polls
// without a burst on Ironic.
const DefaultHardwareReadsPerPoll = 200

// hardwareReaders is how many nodes' hardware one poll reads at a time.
const hardwareReaders = 4

// hardwareState is what the agent knows of each node's hardware: the
// reduced state last read and the inspection_finished_at it was read at.
// Guarded by mu (a leaf lock, never held across an OpenStack call).
type hardwareState struct {
	mu     sync.Mutex
	states map[string]*ironlinkv1.HardwareState
	readAt map[string]time.Time // inspection_finished_at when last read
}

// get returns device id's hardware (nil when never read).
func (h *hardwareState) get(id string) *ironlinkv1.HardwareState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.states[id]
}

// forget drops a device Ironic no longer has.
func (h *hardwareState) forget(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.states, id)
	delete(h.readAt, id)
}

// due returns the nodes whose hardware must be read: never read by this
// process, or whose inspection_finished_at differs from the one it was
// read at (a listing that left the field out counts as unchanged).
func (h *hardwareState) due(nodes []ironic.Node) []ironic.Node {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []ironic.Node
	for _, n := range nodes {
		at, known := h.readAt[n.UUID]
		if !known || (!n.Unsent["inspection_finished_at"] && !n.InspectionFinishedAt.Equal(at)) {
			out = append(out, n)
		}
	}
	return out
}

// readHardware reads, within the per-poll budget, the hardware of the
// nodes that are due (see hardwareState.due) and returns the reduced
// states read, by device. A node whose read failed transiently is tried
// again on a later poll; nodes beyond the budget wait for the next one.
func (a *Agent) readHardware(ctx context.Context, nodes []ironic.Node) map[string]*ironlinkv1.HardwareState {
	hw, ok := a.ironic.(site.IronicHardware)
	budget := a.cfg.HardwareReadsPerPoll
	if !ok || budget < 0 {
		return nil
	}
	if budget == 0 {
		budget = DefaultHardwareReadsPerPoll
	}
	due := a.hw.due(nodes)
	if len(due) == 0 {
		return nil
	}
	deferred := max(len(due)-budget, 0)
	due = due[:min(len(due), budget)]
	out := make(map[string]*ironlinkv1.HardwareState, len(due))
	var mu sync.Mutex
	work := make(chan ironic.Node)
	var wg sync.WaitGroup
	for range min(hardwareReaders, len(due)) {
		wg.Go(func() {
			for n := range work {
				if st, ok := a.readOne(ctx, hw, n); ok {
					mu.Lock()
					out[n.UUID] = st
					mu.Unlock()
				}
			}
		})
	}
	for _, n := range due {
		if ctx.Err() != nil {
			break
		}
		work <- n
	}
	close(work)
	wg.Wait()
	a.countStats(func(s *Stats) {
		s.HardwareReads += len(out)
		s.HardwareDeferred += deferred
	})
	if deferred > 0 {
		a.log.Info("hardware reads deferred to the next poll", "read", len(out), "deferred", deferred, "budget", budget)
	}
	return out
}

// readOne reads node n's inventory and BIOS settings and records them;
// ok is false when a read failed transiently (nothing recorded).
func (a *Agent) readOne(ctx context.Context, hw site.IronicHardware, n ironic.Node) (*ironlinkv1.HardwareState, bool) {
	r := hardware.Read{InspectionFinishedAt: n.InspectionFinishedAt, ReadAt: time.Now()}
	r.Inventory, r.InventoryErr = hw.NodeInventory(ctx, n.UUID)
	if transientHardware(r.InventoryErr) {
		a.log.Warn("inventory unreadable; trying again next poll", logkey.DeviceID, n.UUID, "err", r.InventoryErr)
		return nil, false
	}
	r.BIOS, r.BIOSErr = hw.NodeBIOS(ctx, n.UUID)
	if transientHardware(r.BIOSErr) {
		a.log.Warn("BIOS settings unreadable; trying again next poll", logkey.DeviceID, n.UUID, "err", r.BIOSErr)
		return nil, false
	}
	if r.InventoryErr != nil && !errors.Is(r.InventoryErr, ironic.ErrNoInventory) {
		a.log.Warn("inventory not usable", logkey.DeviceID, n.UUID, "err", r.InventoryErr)
	}
	st := hardware.Reduce(r)
	a.hw.mu.Lock()
	a.hw.states[n.UUID], a.hw.readAt[n.UUID] = st, n.InspectionFinishedAt
	a.hw.mu.Unlock()
	return st, true
}

// transientHardware reports whether a hardware read's error is worth
// another try on a later poll (not an answer about the node's hardware).
func transientHardware(err error) bool {
	return err != nil && !errors.Is(err, ironic.ErrNoInventory) && !errors.Is(err, ironic.ErrHardwareUnsupported) &&
		!errors.Is(err, ironic.ErrHardwareTooLarge)
}

// withHardware adds each hardware state read to the device's update in
// updates, or a new update for a device whose conditions did not change.
// a.view.mu is held (for the facts).
func (a *Agent) withHardwareLocked(updates []*ironlinkv1.DeviceUpdate, read map[string]*ironlinkv1.HardwareState, now time.Time) []*ironlinkv1.DeviceUpdate {
	if len(read) == 0 {
		return updates
	}
	for _, u := range updates {
		if h, ok := read[u.DeviceId]; ok {
			u.Hardware = h
			delete(read, u.DeviceId)
		}
	}
	for id, h := range read {
		if _, listed := a.view.nodes[id]; !listed {
			continue
		}
		updates = append(updates, &ironlinkv1.DeviceUpdate{DeviceId: id, Facts: a.view.facts[id], Hardware: h, ObservedTime: timestamppb.New(now)})
	}
	return updates
}
