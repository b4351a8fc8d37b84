package operations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/satellite/glance"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/openstack"
)

// markerKey is the key under the node's extra where the runner records the
// provision action it asked for (see the package documentation).
const markerKey = "ironlink_operation"

// node is what a pass reads of an Ironic node (site.Ironic.NodeDetail).
type node = ironic.NodeDetail

// port is an Ironic port (site.Ironic.ListPorts).
type port = ironic.Port

// patchOp is one JSON-patch operation (site.Ironic.PatchNode).
type patchOp = ironic.PatchOp

// marker is the value stored at extra/ironlink_operation.
type marker struct {
	OperationID string `json:"operation_id"`
	Action      string `json:"action"`
	Since       string `json:"since"`
	// Created: this operation (an ENROL) created the node, so it may
	// delete it when the enrolment cannot be finished.
	Created bool `json:"created,omitempty"`
}

// markerOf returns the node's marker, or the zero marker.
func markerOf(n *node) marker {
	raw, ok := n.Extra[markerKey]
	if !ok {
		return marker{}
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return marker{}
	}
	var m marker
	_ = json.Unmarshal(b, &m)
	return m
}

// actionTaken reports whether the node carries opID's marker for action and
// its provision state changed since the marker was written: the action was
// accepted by Ironic.
func actionTaken(n *node, opID, action string) bool {
	m := markerOf(n)
	return m.OperationID == opID && m.Action == action && m.Since != n.ProvisionUpdatedAt
}

// errNotFound marks a 404 for the thing asked for.
var errNotFound = errors.New("not found")

// getNode reads a node by UUID or name; errNotFound when Ironic has none.
func (r *Runner) getNode(ctx context.Context, ident string) (*node, error) {
	n, err := r.ironic.NodeDetail(ctx, ident)
	if errors.Is(err, ironic.ErrNodeNotFound) {
		return nil, fmt.Errorf("ironic node %s: %w", ident, errNotFound)
	}
	if err != nil {
		return nil, err
	}
	return &n, nil
}

// APICalls lists every request this package makes, as access rules
// (deploy/openstack/operations-access-rules.yaml is rendered from them by
// satellite/accessrules; docs/design/openstack.md §9): the provisioning calls of
// satellite/ironic, the operations' calls of satellite/nova and Glance's
// image lookup.
func APICalls() []openstack.APICall {
	var calls []openstack.APICall
	calls = append(calls, ironic.ProvisionAPICalls()...)
	calls = append(calls, nova.OperationsAPICalls()...)
	calls = append(calls, glance.APICalls()...)
	return calls
}

// unmark removes this operation's marker from the node's extra when the
// operation ends (succeeded, failed or cancelled), so Ironic keeps nothing
// of it; the request is recorded on the last step. A node that is gone,
// or carries no marker of this operation, is left alone; a failed removal
// is logged and recorded, and does not change the operation's result.
func (u *run) unmark(ctx context.Context) {
	id := u.deviceIDNow()
	if id == "" || u.req.GetKind() == ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE ||
		u.req.GetKind() == ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE {
		return
	}
	n, err := u.r.getNode(ctx, id)
	if err != nil {
		if !errors.Is(err, errNotFound) {
			u.log.Warn("operation ended: could not read the node to remove its marker", "err", err)
		}
		return
	}
	if markerOf(n).OperationID != u.req.GetOperationId() {
		return
	}
	if _, err := u.patchNode(ctx, n.UUID, []patchOp{{Op: "remove", Path: "/extra/" + markerKey}}); err != nil {
		u.log.Warn("operation ended: the marker stays in the node's extra", logkey.DeviceID, n.UUID, "err", err)
	}
}
