package operations

import (
	"context"
	"fmt"

	"github.com/ironlink/ironlink/satellite/site"
)

// ADOPT (docs/reference/operations.md "Adopt") takes over a machine already
// running outside Ironic's control with Ironic's "adopt" verb: manageable
// (or adopt failed) → adopting → active, without deploying. It first sets
// the instance_info Ironic requires (image_source; image_checksum, root_gb
// and capabilities when given; ironic/conductor/manager.py _do_adoption
// validates the boot interface against it, and a later undeploy or rebuild
// reads it), then writes the marker (action "adopt") and asks. A pass that
// finds its marker and a newer provision_updated_at knows Ironic took the
// request: active is done, "adopt failed" ends the operation FAILED
// (AdoptFailed) with Ironic's last_error.

// actAdopt is ADOPT's marker action.
const actAdopt = "adopt"

// adopt reconciles ADOPT.
func (u *run) adopt(ctx context.Context, n *node) site.Result {
	id := u.req.GetOperationId()
	taken := actionTaken(n, id, actAdopt)
	want := adoptInstanceInfo(u)
	switch ps := n.ProvisionState; {
	case ps == stActive && taken:
		u.step("wait-active", ps, "adopted")
		return site.Done()
	case ps == stActive:
		if got := fmt.Sprint(n.InstanceInfo["image_source"]); got != want["image_source"] {
			return site.Failed("InvalidState", "node %s is active with image_source %q, not %q", n.UUID, got, want["image_source"])
		}
		u.step("wait-active", ps, "already active")
		return site.Done()
	case ps == stAdopting:
		u.step("wait-active", ps, "")
		return u.waiting()
	case ps == stAdoptFail && taken:
		return ironicFailure(n)
	case ps == stManageable && taken:
		return site.Failed("InvalidState", "node %s came back to manageable after adopt (moved by someone else)", n.UUID)
	case ps == stManageable || ps == stAdoptFail:
		if n.InstanceUUID != "" {
			return site.Failed("InvalidState", "node %s is reserved by instance %s", n.UUID, n.InstanceUUID)
		}
		if res, failed := u.setInstanceInfo(ctx, n, want); failed {
			return res
		}
		return u.ask(ctx, n, "adopt", actAdopt, "adopt", nil)
	}
	return site.Failed("InvalidState", "ADOPT starts from manageable or adopt failed; node %s is %s", n.UUID, n.ProvisionState)
}

// adoptInstanceInfo is the instance_info ADOPT sets, from params.adopt.
func adoptInstanceInfo(u *run) map[string]any {
	a := u.req.GetParams().GetAdopt()
	want := map[string]any{"image_source": a.GetImageSource()}
	if a.GetImageChecksum() != "" {
		want["image_checksum"] = a.GetImageChecksum()
	}
	if a.GetRootGb() > 0 {
		want["root_gb"] = fmt.Sprint(a.GetRootGb())
	}
	if len(a.GetCapabilities()) > 0 {
		caps := map[string]any{}
		for k, v := range a.GetCapabilities() {
			caps[k] = v
		}
		want["capabilities"] = caps
	}
	return want
}
