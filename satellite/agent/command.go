package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/textcheck"
	"github.com/ironlink/ironlink/satellite/conditions"
	"github.com/ironlink/ironlink/satellite/gate"
	"github.com/ironlink/ironlink/satellite/placement"
	"github.com/ironlink/ironlink/satellite/site"
)

// HandleCommand applies a hub command to the node and its resource provider
// through the gate (idempotent), remembers the applied generation, re-reads
// only that node (refreshNode) so the new CustomerReady reaches the hub, and
// returns the result. It implements link.CommandHandler.
func (a *Agent) HandleCommand(ctx context.Context, cmd *ironlinkv1.Command) *ironlinkv1.CommandResult {
	res := &ironlinkv1.CommandResult{CommandId: cmd.GetCommandId(), DeviceId: cmd.GetDeviceId(), Generation: cmd.GetGeneration()}
	var quarantine, leaveAlone bool
	switch cmd.GetDesired() {
	case ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED:
		quarantine = true
	case ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED:
	case ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED_UNOFFERED:
		leaveAlone = true
	default:
		res.Error = fmt.Sprintf("desired state %v is not QUARANTINED, RELEASED or RELEASED_UNOFFERED", cmd.GetDesired())
		setFailure(res, site.Failed("InvalidCommand", "%s", res.Error))
		return res
	}
	lock := a.deviceLock(cmd.GetDeviceId())
	lock.Lock()
	defer lock.Unlock()

	prev, _ := a.cmds.get(cmd.GetDeviceId())
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
	// A release of a device not offered before its quarantine leaves the
	// trait as the quarantine left it (absent): nothing to write.
	r, err := gate.Applied{Detail: "quarantine ended; " + ReadyTrait + " left as it is (the device was not offered before)"}, error(nil)
	if !leaveAlone {
		r, err = a.gate.Apply(ctx, cmd.GetDeviceId(), quarantine)
	}
	if err != nil {
		res.Error = textcheck.SanitizeText(err.Error(), maxResultTextBytes)
		f := gate.Classify(err)
		setFailure(res, f)
		a.log.WarnContext(ctx, "command failed", "command_id", cmd.GetCommandId(), "device_id", cmd.GetDeviceId(), "err", err,
			"permanent", f.Permanent(), "failure_reason", f.Reason)
		return res
	}
	res.Success, res.Detail = true, textcheck.SanitizeText(r.Detail, maxResultTextBytes)
	a.cmds.mu.Lock()
	a.cmds.desired[cmd.GetDeviceId()] = desired{quarantined: quarantine, leftAlone: leaveAlone, generation: cmd.GetGeneration(), applied: true}
	a.cmds.mu.Unlock()
	st := a.takeState()
	if err := a.saveState(st); err != nil {
		a.log.Error("applied generation not saved; it will be re-applied after a restart", "err", err)
	}
	a.log.InfoContext(ctx, "command applied", "command_id", cmd.GetCommandId(), "device_id", cmd.GetDeviceId(),
		"generation", cmd.GetGeneration(), "quarantine", quarantine, "detail", r.Detail, "took", time.Since(start).Round(time.Millisecond))
	a.refreshNode(ctx, cmd.GetDeviceId(), quarantine || leaveAlone) // left alone: the trait may not be defined
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
	a.view.mu.Lock()
	now := time.Now().UTC() // under the lock: see Poll
	if _, listed := a.view.facts[id]; !listed {
		a.view.mu.Unlock()
		return // not listed yet: the first listing carries it
	}
	if pv.Read {
		pv.TraitDefined = !quarantined || pv.HasTrait || a.view.views[id].TraitDefined
	}
	u := a.evaluateLocked(n, pv, now, start)
	a.view.mu.Unlock()
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
	a.cmds.mu.Lock()
	defer a.cmds.mu.Unlock()
	l := a.cmds.locks[id]
	if l == nil {
		l = &sync.Mutex{}
		a.cmds.locks[id] = l
	}
	return l
}
