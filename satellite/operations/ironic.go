package operations

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/logkey"
	"github.com/ironlink/ironlink/satellite/glance"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/site"
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

// lastKey is the key under the node's extra where an ended operation
// leaves its result, written in the request that removes its marker: a
// redelivery of that operation after a satellite restart (the final
// progress not yet acknowledged by the hub) reports that result instead
// of starting again from the state the operation left the node in.
const lastKey = "ironlink_last_operation"

// lastOperation is the value stored at extra/ironlink_last_operation.
type lastOperation struct {
	OperationID string `json:"operation_id"`
	// State is SUCCEEDED, FAILED or CANCELLED.
	State         string `json:"state"`
	FailureReason string `json:"failure_reason,omitempty"`
	Error         string `json:"error,omitempty"`
	EndedAt       string `json:"ended_at"`
}

// maxLastError bounds the error kept in extra/ironlink_last_operation.
const maxLastError = 1024

// lastOf returns the node's last ended operation, or the zero value.
func lastOf(n *node) lastOperation {
	raw, ok := n.Extra[lastKey]
	if !ok {
		return lastOperation{}
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return lastOperation{}
	}
	var l lastOperation
	_ = json.Unmarshal(b, &l)
	return l
}

// endedResult is the result of an operation that had ended before this
// process (its lastOperation l): reported again, nothing sent to Ironic.
func (u *run) endedResult(n *node, l lastOperation) site.Result {
	u.step("already-ended", n.ProvisionState, "this operation ended "+l.State+" at "+l.EndedAt+
		" (recorded in the node's extra); its result is reported again and nothing is asked of Ironic")
	switch l.State {
	case "SUCCEEDED":
		return site.Done()
	case "CANCELLED":
		return cancelled
	}
	return site.Failed(cmp.Or(l.FailureReason, "Failed"), "%s", l.Error)
}

// unmark removes this operation's marker from the node's extra when the
// operation ends with res (succeeded, failed or cancelled) and, in the same
// request, records its result at extra/ironlink_last_operation (lastKey),
// so Ironic keeps nothing of it in progress; the request is recorded on the
// last step. A node that is gone, or carries no marker of this operation,
// is left alone; a failed removal is logged and recorded, and does not
// change the operation's result.
func (u *run) unmark(ctx context.Context, res site.Result) {
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
	l := lastOperation{OperationID: u.req.GetOperationId(), State: "SUCCEEDED", EndedAt: time.Now().UTC().Format(time.RFC3339)}
	switch {
	case res.Permanent() && res.Reason == reasonCancelled:
		l.State = "CANCELLED"
	case res.Permanent():
		l.State, l.FailureReason, l.Error = "FAILED", res.Reason, res.Message
		if len(l.Error) > maxLastError {
			l.Error = strings.ToValidUTF8(l.Error[:maxLastError], "")
		}
	}
	if _, err := u.patchNode(ctx, n.UUID, []patchOp{{Op: "remove", Path: "/extra/" + markerKey},
		{Op: "add", Path: "/extra/" + lastKey, Value: l}}); err != nil {
		u.log.Warn("operation ended: the marker stays in the node's extra", logkey.DeviceID, n.UUID, "err", err)
	}
}
