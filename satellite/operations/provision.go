package operations

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/site"
)

// sameState reconciles INSPECT and CLEAN, which start and end in
// manageable: the marker says whether this operation's action was taken.
func (u *run) sameState(ctx context.Context, n *node, action string, args map[string]any, transient []string) site.Result {
	ps := n.ProvisionState
	id := u.req.GetOperationId()
	switch {
	case ps == stManageable && actionTaken(n, id, action):
		msg := action + " finished"
		if action == "inspect" {
			msg += ": " + inspected(n.Properties)
		}
		u.step("wait-manageable", ps, msg)
		return site.Done()
	case ps == stManageable:
		if markerOf(n).OperationID != id || markerOf(n).Action != action || markerOf(n).Since != n.ProvisionUpdatedAt {
			u.step("mark", ps, "")
			if err := u.mark(ctx, n, action); err != nil {
				return stop(err)
			}
		}
		u.step(action, ps, "")
		if err := u.setProvision(ctx, n.UUID, action, args); err != nil {
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
	return site.Failed("InvalidState", "%s starts from manageable; node %s is %s", strings.ToUpper(action), n.UUID, ps)
}

// recoverable are the failure states Ironic's state machine leaves with
// "manage" straight to manageable (ironic/common/states.py: CLEANFAIL and
// INSPECTFAIL; docs/design/openstack.md §1.2).
var recoverable = []string{stCleanFail, stInspectFail}

// manageFirst handles a node INSPECT, CLEAN or PROVIDE finds in clean
// failed or inspect failed. Left there by an earlier action, the node is
// taken back to manageable with "manage" (a step of its own, after a marker
// so that a restarted satellite knows it was asked); left there by this
// operation's own action (its marker, and the provision state changed
// since), the operation ends FAILED with the node's last_error.
func (u *run) manageFirst(ctx context.Context, n *node) site.Result {
	id := u.req.GetOperationId()
	m := markerOf(n)
	if m.OperationID == id && m.Since != n.ProvisionUpdatedAt {
		return ironicFailure(n)
	}
	why := "node is in " + n.ProvisionState
	if n.LastError != "" {
		why += " (last_error: " + truncate(n.LastError, 512) + ")"
	}
	u.step("manage", n.ProvisionState, why+": manage first, as Ironic's state machine allows")
	if m.OperationID != id || m.Action != "manage" {
		if err := u.mark(ctx, n, "manage"); err != nil {
			return stop(err)
		}
	}
	if err := u.setProvision(ctx, n.UUID, "manage", nil); err != nil {
		if openstack.StatusCode(err) == http.StatusBadRequest {
			return site.Failed("IronicRejected", "%s", ironic.Message(err))
		}
		return stop(err)
	}
	return retryNow
}

// provide reconciles PROVIDE: manageable → cleaning → available.
func (u *run) provide(ctx context.Context, n *node) site.Result {
	switch ps := n.ProvisionState; {
	case ps == stAvailable:
		u.step("wait-available", ps, "available")
		return site.Done()
	case ps == stManageable:
		m := markerOf(n)
		id := u.req.GetOperationId()
		if m.OperationID == id && m.Action == "provide" && m.Since != n.ProvisionUpdatedAt {
			return site.Failed("InvalidState", "node %s came back to manageable after provide (retired, or moved by someone else)", n.UUID)
		}
		u.step("provide", ps, "")
		if m.OperationID != id || m.Action != "provide" {
			// The marker tells a later clean failed apart from one this
			// operation found (manageFirst).
			if err := u.mark(ctx, n, "provide"); err != nil {
				return stop(err)
			}
		}
		if err := u.setProvision(ctx, n.UUID, "provide", nil); err != nil {
			return stop(err)
		}
		return retryNow
	case ps == stCleaning || ps == stCleanWait || ps == stCleanHold:
		u.step("wait-available", ps, "")
		return u.waiting()
	case slices.Contains(recoverable, ps):
		return u.manageFirst(ctx, n)
	case failed[ps] != "":
		return ironicFailure(n)
	default:
		return site.Failed("InvalidState", "PROVIDE starts from manageable; node %s is %s", n.UUID, ps)
	}
}

// deploy reconciles DEPLOY: instance_info, then available → deploying →
// active.
func (u *run) deploy(ctx context.Context, n *node) site.Result {
	d := u.req.GetParams().GetDeploy()
	switch ps := n.ProvisionState; {
	case ps == stActive:
		if got, _ := n.InstanceInfo["image_source"].(string); got != d.GetImageSource() {
			return site.Failed("InvalidState", "node %s is active with image_source %q, not %q", n.UUID, got, d.GetImageSource())
		}
		u.step("wait-active", ps, "active")
		return site.Done()
	case ps == stAvailable:
		if n.InstanceUUID != "" {
			return site.Failed("InvalidState", "node %s is reserved by instance %s", n.UUID, n.InstanceUUID)
		}
		want := map[string]any{"image_source": d.GetImageSource()}
		if d.GetImageChecksum() != "" {
			want["image_checksum"] = d.GetImageChecksum()
		}
		if d.GetRootGb() > 0 {
			want["root_gb"] = fmt.Sprint(d.GetRootGb())
		} else if lg, ok := n.Properties["local_gb"]; ok {
			want["root_gb"] = fmt.Sprint(lg)
		}
		if len(d.GetCapabilities()) > 0 {
			caps := map[string]any{}
			for k, v := range d.GetCapabilities() {
				caps[k] = v
			}
			want["capabilities"] = caps
		}
		if res, failed := u.setInstanceInfo(ctx, n, want); failed {
			return res
		}
		var extra map[string]any
		if cd := d.GetConfigDrive(); cd != nil {
			keys := map[string]any{}
			for i, k := range cd.GetSshKeys() {
				keys[fmt.Sprintf("key-%d", i)] = k
			}
			cdv := map[string]any{"meta_data": map[string]any{"public_keys": keys, "uuid": n.UUID, "name": n.Name}}
			if cd.GetUserData() != "" {
				cdv["user_data"] = cd.GetUserData()
			}
			extra = map[string]any{"configdrive": cdv}
		}
		u.step("deploy", ps, "")
		if err := u.setProvision(ctx, n.UUID, "active", extra); err != nil {
			if openstack.StatusCode(err) == http.StatusBadRequest {
				return site.Failed("IronicRejected", "%s", ironic.Message(err))
			}
			return stop(err)
		}
		return retryNow
	case ps == stDeploying || ps == stDeployWait || ps == stDeployHold:
		u.step("wait-active", ps, "")
		return u.waiting()
	case failed[ps] != "":
		return ironicFailure(n)
	default:
		return site.Failed("InvalidState", "DEPLOY starts from available; node %s is %s", n.UUID, ps)
	}
}

// undeploy reconciles UNDEPLOY: active → deleting → cleaning → available.
func (u *run) undeploy(ctx context.Context, n *node) site.Result {
	switch ps := n.ProvisionState; {
	case ps == stAvailable:
		u.step("wait-available", ps, "available")
		return site.Done()
	case ps == stActive || ps == stDeployFail:
		if n.InstanceUUID != "" {
			return site.Failed("InvalidState", "node %s carries Nova instance %s: use NOVA_DELETE", n.UUID, n.InstanceUUID)
		}
		u.step("undeploy", ps, "")
		if err := u.setProvision(ctx, n.UUID, "deleted", nil); err != nil {
			return stop(err)
		}
		return retryNow
	case ps == stDeleting || ps == stCleaning || ps == stCleanWait:
		u.step("wait-available", ps, "")
		return u.waiting()
	case failed[ps] != "":
		return ironicFailure(n)
	default:
		return site.Failed("InvalidState", "UNDEPLOY starts from active or deploy failed; node %s is %s", n.UUID, ps)
	}
}

// setInstanceInfo adds to the node's instance_info every key of want it
// does not hold with that value, in one PATCH (step set-instance-info);
// failed: Ironic refused it, and res ends the pass.
func (u *run) setInstanceInfo(ctx context.Context, n *node, want map[string]any) (res site.Result, failed bool) {
	var ops []patchOp
	for _, k := range sortedKeys(want) {
		if fmt.Sprint(n.InstanceInfo[k]) != fmt.Sprint(want[k]) {
			ops = append(ops, patchOp{Op: "add", Path: "/instance_info/" + k, Value: want[k]})
		}
	}
	if len(ops) == 0 {
		return site.Result{}, false
	}
	u.step("set-instance-info", n.ProvisionState, "")
	if _, err := u.patchNode(ctx, n.UUID, ops); err != nil {
		if openstack.StatusCode(err) == http.StatusBadRequest {
			return site.Failed("IronicRejected", "%s", ironic.Message(err)), true
		}
		return stop(err), true
	}
	return site.Result{}, false
}
