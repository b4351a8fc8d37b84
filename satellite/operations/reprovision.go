package operations

import (
	"context"
	"net/http"
	"slices"

	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/site"
)

// REPROVISION (docs/reference/operations.md "Node actions") takes a node
// back to a clean available state: undeploy where deployed, then clean
// and provide. Its phases, each started by a marker
// (extra/ironlink_operation) written before the one request of the phase,
// so that a restarted satellite knows which request was sent and never
// sends it again:
//
//   - undeploy (active, deploy failed, error): "deleted"; Ironic tears the
//     node down and runs automated cleaning on its way to available.
//   - manage (available, clean failed, inspect failed, adopt failed):
//     "manage", to manageable. Only when there is a clean or a provide
//     still to do: an undeployed node without params.clean_steps is done
//     in available, Ironic's automated cleaning having run.
//   - clean (manageable, with params.clean_steps): a manual clean.
//   - provide (manageable): "provide", Ironic's automated cleaning, then
//     available.
//
// A node carrying an instance_uuid is refused: Ironic's tear-down would
// leave Nova's server without its node (NOVA_DELETE first).

// Marker actions of REPROVISION's phases.
const (
	actReUndeploy = "reprovision-undeploy"
	actReManage   = "reprovision-manage"
	actReClean    = "reprovision-clean"
	actReProvide  = "reprovision-provide"
)

// reprovisionUndeployFrom are the states "deleted" tears down from;
// reprovisionManageFrom those "manage" leaves for manageable
// (ironic/common/states.py).
var (
	reprovisionUndeployFrom = []string{stActive, stDeployFail, stError}
	reprovisionManageFrom   = []string{stAvailable, stCleanFail, stInspectFail, stAdoptFail}
	cleaningStates          = []string{stDeleting, stCleaning, stCleanWait, stCleanHold}
)

// reprovision reconciles REPROVISION: the phase is the marker's when it is
// this operation's, else the node's state says where to begin.
func (u *run) reprovision(ctx context.Context, n *node) site.Result {
	m := markerOf(n)
	if m.OperationID == u.req.GetOperationId() {
		if res, ok := u.reprovisionPhase(ctx, n, m.Action, m.Since != n.ProvisionUpdatedAt); ok {
			return res
		}
	}
	switch ps := n.ProvisionState; {
	case slices.Contains(reprovisionUndeployFrom, ps):
		if n.InstanceUUID != "" {
			return site.Failed("InvalidState", "node %s carries instance %s: delete it first (NOVA_DELETE); Ironic's tear-down would leave its server without a node", n.UUID, n.InstanceUUID)
		}
		return u.ask(ctx, n, "undeploy", actReUndeploy, "deleted", nil)
	case slices.Contains(reprovisionManageFrom, ps):
		return u.ask(ctx, n, "manage", actReManage, "manage", nil)
	case ps == stManageable:
		return u.cleanOrProvide(ctx, n)
	}
	return site.Failed("InvalidState", "REPROVISION starts from active, deploy failed, error, available, manageable, clean failed, inspect failed or adopt failed; node %s is %s", n.UUID, n.ProvisionState)
}

// reprovisionPhase goes on with the phase this operation's marker names
// (taken: Ironic took the phase's request); not handled when the marker
// names no phase of REPROVISION.
func (u *run) reprovisionPhase(ctx context.Context, n *node, action string, taken bool) (site.Result, bool) {
	ps := n.ProvisionState
	switch action {
	case actReUndeploy:
		switch {
		case !taken && slices.Contains(reprovisionUndeployFrom, ps):
			return u.ask(ctx, n, "undeploy", actReUndeploy, "deleted", nil), true
		case ps == stAvailable && len(u.req.GetParams().GetCleanSteps()) == 0:
			u.step("wait-available", ps, "undeployed and cleaned")
			return site.Done(), true
		case ps == stAvailable:
			return u.ask(ctx, n, "manage", actReManage, "manage", nil), true
		}
		return u.waitOrFail(n, "wait-available"), true
	case actReManage:
		switch {
		case !taken && slices.Contains(reprovisionManageFrom, ps):
			return u.ask(ctx, n, "manage", actReManage, "manage", nil), true
		case ps == stManageable:
			return u.cleanOrProvide(ctx, n), true
		}
		return u.waitOrFail(n, "wait-manageable"), true
	case actReClean:
		switch {
		case !taken && ps == stManageable:
			return u.ask(ctx, n, "clean", actReClean, "clean", cleanArgs(u.req.GetParams().GetCleanSteps())), true
		case ps == stManageable:
			return u.ask(ctx, n, "provide", actReProvide, "provide", nil), true
		}
		return u.waitOrFail(n, "wait-manageable"), true
	case actReProvide:
		switch {
		case !taken && ps == stManageable:
			return u.ask(ctx, n, "provide", actReProvide, "provide", nil), true
		case ps == stAvailable:
			u.step("wait-available", ps, "cleaned and provided")
			return site.Done(), true
		case ps == stManageable:
			return site.Failed("InvalidState", "node %s came back to manageable after provide (retired, or moved by someone else)", n.UUID), true
		}
		return u.waitOrFail(n, "wait-available"), true
	}
	return site.Result{}, false
}

// cleanOrProvide starts the clean phase when params.clean_steps asks for
// one, else the provide phase, from manageable.
func (u *run) cleanOrProvide(ctx context.Context, n *node) site.Result {
	if steps := u.req.GetParams().GetCleanSteps(); len(steps) > 0 {
		return u.ask(ctx, n, "clean", actReClean, "clean", cleanArgs(steps))
	}
	return u.ask(ctx, n, "provide", actReProvide, "provide", nil)
}

// waitOrFail waits while Ironic moves the node (deleting, cleaning, their
// wait and hold states, verifying); a failure state ends the operation with
// Ironic's last_error; any other state was reached by someone else.
func (u *run) waitOrFail(n *node, step string) site.Result {
	ps := n.ProvisionState
	switch {
	case slices.Contains(cleaningStates, ps) || ps == stVerifying:
		u.step(step, ps, "")
		return u.waiting()
	case failed[ps] != "":
		return ironicFailure(n)
	}
	return site.Failed("InvalidState", "node %s is %s in the middle of REPROVISION (moved by someone else)", n.UUID, ps)
}

// ask is one phase's request in step name: the marker for action (unless
// the node already carries it for its current provision state), then
// target. Ironic's 400 ends the operation IronicRejected.
func (u *run) ask(ctx context.Context, n *node, name, action, target string, args map[string]any) site.Result {
	u.step(name, n.ProvisionState, "")
	m := markerOf(n)
	if m.OperationID != u.req.GetOperationId() || m.Action != action || m.Since != n.ProvisionUpdatedAt {
		if err := u.mark(ctx, n, action); err != nil {
			return stop(err)
		}
	}
	if err := u.setProvision(ctx, n.UUID, target, args); err != nil {
		if openstack.StatusCode(err) == http.StatusBadRequest {
			return site.Failed("IronicRejected", "%s", ironic.Message(err))
		}
		return stop(err)
	}
	return retryNow
}
