package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/satellite/site"
)

// ErrNotListed: RereadHardware of a node no listing has shown yet (the
// first poll reads its hardware anyway).
var ErrNotListed = errors.New("agent: node not listed yet")

// RereadHardware reads node id's inventory and BIOS settings now (three
// requests: the node, its inventory, its BIOS settings), records them as
// the node's last read and pushes them to the hub as the device's
// hardware (operation HARDWARE_REREAD). Errors: ironic.ErrNodeNotFound,
// ErrNotListed, a transient read error (nothing sent).
func (a *Agent) RereadHardware(ctx context.Context, id string) error {
	hw, ok := a.ironic.(site.IronicHardware)
	if !ok {
		return errors.New("agent: this site's Ironic client reads no hardware")
	}
	n, err := a.ironic.GetNode(ctx, id)
	if err != nil {
		return fmt.Errorf("re-read hardware of %s: %w", id, err)
	}
	st, ok := a.readOne(ctx, hw, n)
	if !ok {
		return fmt.Errorf("re-read hardware of %s: inventory or BIOS settings unreadable now", id)
	}
	a.view.mu.Lock()
	facts, listed := a.view.facts[id]
	now := time.Now().UTC() // under the lock: see Poll
	a.view.mu.Unlock()
	if !listed {
		return fmt.Errorf("re-read hardware of %s: %w", id, ErrNotListed)
	}
	a.outbox.Push([]*ironlinkv1.DeviceUpdate{{DeviceId: id, Facts: facts, Hardware: st, ObservedTime: timestamppb.New(now)}})
	a.countStats(func(s *Stats) { s.HardwareReads++ })
	return nil
}
