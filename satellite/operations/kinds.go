package operations

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/site"
)

// Ironic provision states (ironic/common/states.py; docs/design/openstack.md §1.2).
const (
	stEnroll       = "enroll"
	stVerifying    = "verifying"
	stManageable   = "manageable"
	stInspecting   = "inspecting"
	stInspectWait  = "inspect wait"
	stInspectFail  = "inspect failed"
	stCleaning     = "cleaning"
	stCleanWait    = "clean wait"
	stCleanHold    = "clean hold"
	stCleanFail    = "clean failed"
	stAvailable    = "available"
	stDeploying    = "deploying"
	stDeployWait   = "wait call-back"
	stDeployHold   = "deploy hold"
	stDeployFail   = "deploy failed"
	stActive       = "active"
	stDeleting     = "deleting"
	stError        = "error"
	stRescueWait   = "rescue wait"
	stAdopting     = "adopting"
	stAdoptFail    = "adopt failed"
	stRescueFail   = "rescue failed"
	stUnrescueFail = "unrescue failed"
	stServiceFail  = "service failed"
)

// abortable are the "* wait" states Ironic aborts from (OperationService
// CancelOperation).
var abortable = []string{stCleanWait, stInspectWait, stDeployWait, stRescueWait}

// failed are Ironic's failure states plus error (docs/design/openstack.md §1.2).
var failed = map[string]string{
	stCleanFail: "CleanFailed", stInspectFail: "InspectFailed", stDeployFail: "DeployFailed",
	stError: "ProvisionError", stAdoptFail: "AdoptFailed", stRescueFail: "RescueFailed",
	stUnrescueFail: "UnrescueFailed", stServiceFail: "ServiceFailed",
}

// ironicFailure ends the run with the node's failure state and last_error.
func ironicFailure(n *node) site.Result {
	msg := n.LastError
	if msg == "" {
		// The test bed's conductor has been seen to leave last_error null
		// (docs/design/openstack.md §8): the state alone decides.
		msg = "node " + n.UUID + " is in " + n.ProvisionState + " (Ironic gave no last_error)"
	}
	return site.Failed(failed[n.ProvisionState], "%s", msg)
}

// pass reads the world once and takes at most one step towards the goal.
func (u *run) pass(ctx context.Context) site.Result {
	k := u.req.GetKind()
	if !u.checked {
		if err := u.preflight(ctx); err != nil {
			return stop(err)
		}
		u.checked = true
	}
	if k == ironlinkv1.OperationKind_OPERATION_KIND_ENROL {
		return u.enrol(ctx)
	}
	if k == ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE && time.Now().Before(u.retryAt) && !u.cancelRequested() {
		return u.waiting() // waiting to boot again: nothing to read until then
	}
	n, err := u.r.getNode(ctx, u.req.GetDeviceId())
	if errors.Is(err, errNotFound) {
		return site.Failed("NodeNotFound", "Ironic has no node %s", u.req.GetDeviceId())
	}
	if err != nil {
		return stop(err)
	}
	u.mu.Lock()
	u.deviceID = n.UUID
	u.provisionState = n.ProvisionState
	u.mu.Unlock()
	if l := lastOf(n); l.OperationID == u.req.GetOperationId() {
		return u.endedResult(n, l) // a redelivery after it ended: report, do nothing again
	}
	if u.cancelRequested() {
		if res, handled := u.tryCancel(ctx, n); handled {
			return res
		}
	}
	if res, ok := u.nodeAction(ctx, n); ok {
		return res
	}
	if res, ok := u.hardwareKind(ctx, n); ok {
		return res
	}
	switch k {
	case ironlinkv1.OperationKind_OPERATION_KIND_INSPECT:
		return u.sameState(ctx, n, "inspect", nil, []string{stInspecting, stInspectWait})
	case ironlinkv1.OperationKind_OPERATION_KIND_CLEAN:
		return u.sameState(ctx, n, "clean", cleanArgs(u.req.GetParams().GetCleanSteps()), []string{stCleaning, stCleanWait, stCleanHold})
	case ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE:
		return u.provide(ctx, n)
	case ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY:
		return u.deploy(ctx, n)
	case ironlinkv1.OperationKind_OPERATION_KIND_UNDEPLOY:
		return u.undeploy(ctx, n)
	case ironlinkv1.OperationKind_OPERATION_KIND_ADOPT:
		return u.adopt(ctx, n)
	case ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE:
		return u.novaCreate(ctx, n)
	case ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE:
		return u.novaDelete(ctx, n)
	}
	return site.Failed("InvalidArgument", "unknown kind %v", k)
}

// preflight checks, once per process and before any write, what only
// OpenStack can tell: the driver is enabled, the flavor and the image
// exist, Nova is there for NOVA_*. Failures are InvalidArgument.
func (u *run) preflight(ctx context.Context) error {
	switch u.req.GetKind() {
	case ironlinkv1.OperationKind_OPERATION_KIND_ENROL:
		names, err := u.r.ironic.Drivers(ctx)
		if err != nil {
			return err
		}
		if d := u.req.GetNode().GetDriver(); !slices.Contains(names, d) {
			return fail("InvalidArgument", "driver %q is not enabled in this site's Ironic (enabled: %s)", d, strings.Join(names, ", "))
		}
	case ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE:
		if u.r.nova == nil {
			return fail("NovaUnavailable", "this site has no Nova (no compute endpoint for the operations credential)")
		}
	}
	return nil
}

// tryCancel aborts from a wait state (handled: cancelled, or the abort's
// failure) or refuses the cancel (not handled: the pass goes on).
func (u *run) tryCancel(ctx context.Context, n *node) (site.Result, bool) {
	kind := u.req.GetKind()
	if kind != ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE && kind != ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE &&
		slices.Contains(abortable, n.ProvisionState) {
		u.step("abort", n.ProvisionState, "cancel requested: abort from "+n.ProvisionState)
		if err := u.setProvision(ctx, n.UUID, "abort", nil); err != nil {
			if openstack.StatusCode(err) == http.StatusBadRequest || openstack.StatusCode(err) == http.StatusConflict {
				// The node moved on meanwhile: refuse and go on.
				u.refuseCancel(n)
				return site.Result{}, false
			}
			return stop(err), true
		}
		return cancelled, true
	}
	u.refuseCancel(n)
	return site.Result{}, false
}

func (u *run) refuseCancel(n *node) {
	u.mu.Lock()
	u.cancel = false
	u.mu.Unlock()
	u.log.Info("cancel refused: the node is not in a state Ironic can abort", "provision_state", n.ProvisionState)
	u.sendProgress(true)
}

// cleanArgs is the body's "clean_steps" of a manual clean with steps.
func cleanArgs(cs []*ironlinkv1.CleanStep) map[string]any {
	steps := []map[string]any{}
	for _, s := range cs {
		args := map[string]any{}
		if s.GetArgs() != nil {
			args = s.GetArgs().AsMap()
		}
		steps = append(steps, map[string]any{"interface": s.GetInterface(), "step": s.GetStep(), "args": args})
	}
	return map[string]any{"clean_steps": steps}
}

// inspected summarises the properties inspection fills in, for the final
// step's message (the device's facts do not carry them).
func inspected(props map[string]any) string {
	var parts []string
	for _, k := range []string{"cpus", "cpu_arch", "memory_mb", "local_gb"} {
		if v, ok := props[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	if len(parts) == 0 {
		return "no properties reported"
	}
	return strings.Join(parts, " ")
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
