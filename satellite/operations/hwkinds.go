package operations

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/site"
)

// The hardware kinds (docs/reference/hardware.md): HARDWARE_REREAD reads
// the node's inventory and BIOS settings at once through the agent (the
// Runner's HardwareReader) and is done when they were sent to the hub;
// VALIDATE is an inspection then, with clean steps, a manual cleaning,
// each half marked on the node (markers "validate-inspect" and
// "validate-clean") so that a restarted satellite resumes at the right
// one.

// Marker actions of VALIDATE's two halves.
const (
	actValidateInspect = "validate-inspect"
	actValidateClean   = "validate-clean"
)

// ErrNoHardwareReader: the satellite has no agent to read hardware with
// yet (HARDWARE_REREAD waits for it).
var ErrNoHardwareReader = errors.New("operations: no hardware reader")

// HardwareReader reads node id's inventory and BIOS settings now and
// sends them to the hub (satellite/agent.Agent.RereadHardware).
type HardwareReader func(ctx context.Context, id string) error

// SetHardwareReader gives the Runner the agent's hardware read, for
// HARDWARE_REREAD; until then those operations wait.
func (r *Runner) SetHardwareReader(f HardwareReader) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hwReader = f
}

// hardwareKind reconciles the hardware kinds; handled false for others.
func (u *run) hardwareKind(ctx context.Context, n *node) (site.Result, bool) {
	switch u.req.GetKind() {
	case ironlinkv1.OperationKind_OPERATION_KIND_HARDWARE_REREAD:
		return u.reread(ctx, n), true
	case ironlinkv1.OperationKind_OPERATION_KIND_VALIDATE:
		return u.validate(ctx, n), true
	}
	return site.Result{}, false
}

// reread asks the agent to read the node's hardware now.
func (u *run) reread(ctx context.Context, n *node) site.Result {
	u.r.mu.Lock()
	read := u.r.hwReader
	u.r.mu.Unlock()
	if read == nil {
		u.step("read-hardware", n.ProvisionState, "waiting for the satellite's agent")
		return u.waiting()
	}
	u.step("read-hardware", n.ProvisionState, "")
	if err := read(ctx, n.UUID); err != nil {
		if errors.Is(err, ironic.ErrNodeNotFound) {
			return site.Failed("NodeNotFound", "Ironic has no node %s", n.UUID)
		}
		u.step("read-hardware", n.ProvisionState, "read failed, trying again: "+truncate(err.Error(), 256))
		return u.waiting()
	}
	u.step("read-hardware", n.ProvisionState, "inventory and BIOS settings read and sent to the hub")
	return site.Done()
}

// readInspected reads the node's hardware through the agent right after
// VALIDATE's inspection, before its cleaning: the hub checks the profile
// against what the inspection found, not against what a clean step (a
// BIOS factory reset) left, whenever the next poll would have come. False
// when the read failed (tried again). Without a reader yet, the next
// poll reads it (inspection_finished_at moved).
func (u *run) readInspected(ctx context.Context, n *node) bool {
	u.r.mu.Lock()
	read := u.r.hwReader
	u.r.mu.Unlock()
	if read == nil {
		return true
	}
	if err := read(ctx, n.UUID); err != nil {
		u.step("read-hardware", n.ProvisionState, "read after the inspection failed, trying again: "+truncate(err.Error(), 256))
		return false
	}
	u.step("read-hardware", n.ProvisionState, "inventory and BIOS settings read after the inspection and sent to the hub")
	return true
}

// validate inspects, then cleans with the operation's clean steps (none:
// done after the inspection).
func (u *run) validate(ctx context.Context, n *node) site.Result {
	m := markerOf(n)
	id := u.req.GetOperationId()
	if n.ProvisionState == stInspecting || n.ProvisionState == stInspectWait {
		u.step("wait-manageable", n.ProvisionState, "")
		return u.waiting()
	}
	if m.OperationID != id || m.Action == actValidateInspect && m.Since == n.ProvisionUpdatedAt || m.Action == "manage" {
		return u.half(ctx, n, "inspect", actValidateInspect, nil, []string{stInspecting, stInspectWait})
	}
	if m.Action == actValidateInspect && len(u.req.GetParams().GetCleanSteps()) == 0 {
		if n.ProvisionState == stManageable {
			u.step("wait-manageable", n.ProvisionState, "inspect finished: "+inspected(n.Properties)+"; no clean steps")
			if !u.readInspected(ctx, n) {
				return u.waiting()
			}
			return site.Done()
		}
		return u.half(ctx, n, "inspect", actValidateInspect, nil, []string{stInspecting, stInspectWait})
	}
	if m.Action == actValidateInspect && n.ProvisionState == stManageable && !u.readInspected(ctx, n) {
		return u.waiting() // the cleaning waits for the inspected hardware's read
	}
	steps := []map[string]any{}
	for _, s := range u.req.GetParams().GetCleanSteps() {
		args := map[string]any{}
		if s.GetArgs() != nil {
			args = s.GetArgs().AsMap()
		}
		steps = append(steps, map[string]any{"interface": s.GetInterface(), "step": s.GetStep(), "args": args})
	}
	return u.half(ctx, n, "clean", actValidateClean, map[string]any{"clean_steps": steps}, []string{stCleaning, stCleanWait, stCleanHold})
}

// half takes one half of VALIDATE: from manageable, mark (marker) and ask
// verb; done (for the inspection: retryNow, on to the cleaning) when the
// node is manageable again under this half's marker.
func (u *run) half(ctx context.Context, n *node, verb, marker string, args map[string]any, transient []string) site.Result {
	ps, id := n.ProvisionState, u.req.GetOperationId()
	switch {
	case ps == stManageable && actionTaken(n, id, marker):
		if marker == actValidateInspect {
			u.step("wait-manageable", ps, "inspect finished: "+inspected(n.Properties))
			return retryNow
		}
		u.step("wait-manageable", ps, "clean finished")
		return site.Done()
	case ps == stManageable:
		u.step("mark", ps, marker)
		if err := u.mark(ctx, n, marker); err != nil {
			return stop(err)
		}
		u.step(verb, ps, "")
		if err := u.setProvision(ctx, n.UUID, verb, args); err != nil {
			if openstack.StatusCode(err) == http.StatusBadRequest {
				return site.Failed("IronicRejected", "%s", ironic.Message(err))
			}
			return stop(err)
		}
		return retryNow
	case slices.Contains(transient, ps):
		u.step("wait-manageable", ps, "")
		return u.waiting()
	case slices.Contains(recoverable, ps):
		return u.manageFirst(ctx, n)
	case failed[ps] != "":
		return ironicFailure(n)
	}
	return site.Failed("InvalidState", "VALIDATE %ss from manageable; node %s is %s", strings.ToLower(verb), n.UUID, ps)
}
