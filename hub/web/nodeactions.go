package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// The device page's node actions (docs/reference/web.md "Node actions"):
// power on, power off, reboot, maintenance set and clear, reprovision,
// started through the hub's OperationService like `ironlink op start`.

// Operations is what the fleet view needs of the hub's OperationService
// (hub/operations.Server): the RPCs' own handlers, with their validation,
// guards, site binding and errors as gRPC statuses.
type Operations interface {
	// StartOperation starts one operation per target.
	StartOperation(ctx context.Context, req *ironlinkv1.StartOperationRequest) (*ironlinkv1.StartOperationResponse, error)
	// GetOperation returns one operation with its steps.
	GetOperation(ctx context.Context, req *ironlinkv1.GetOperationRequest) (*ironlinkv1.GetOperationResponse, error)
	// ListOperations pages operations, newest first (the operations list
	// reads the same rows itself, in any column's order).
	ListOperations(ctx context.Context, req *ironlinkv1.ListOperationsRequest) (*ironlinkv1.ListOperationsResponse, error)
	// CancelOperation cancels a pending or abortable running operation.
	CancelOperation(ctx context.Context, req *ironlinkv1.CancelOperationRequest) (*ironlinkv1.CancelOperationResponse, error)
	// WatchOperation streams the operation now and after every change
	// until it is final (the operation page's live region).
	WatchOperation(req *ironlinkv1.WatchOperationRequest, stream ironlinkv1.OperationService_WatchOperationServer) error
}

// nodeActionKinds are the node actions the device page offers, by form
// value (the CLI's names).
var nodeActionKinds = map[string]ironlinkv1.OperationKind{
	"power-on":          ironlinkv1.OperationKind_OPERATION_KIND_POWER_ON,
	"power-off":         ironlinkv1.OperationKind_OPERATION_KIND_POWER_OFF,
	"reboot":            ironlinkv1.OperationKind_OPERATION_KIND_REBOOT,
	"maintenance-set":   ironlinkv1.OperationKind_OPERATION_KIND_SET_MAINTENANCE,
	"maintenance-clear": ironlinkv1.OperationKind_OPERATION_KIND_CLEAR_MAINTENANCE,
	"reprovision":       ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION,
}

// SetOperations lets the device page start node actions through ops; call
// it before serving. Without it the page offers none and the POST answers
// 404.
func (s *Server) SetOperations(ops Operations) { s.ops = ops }

// nodeAction handles POST /devices/{id}/action: operations:write or 403
// (nothing written); form fields action (a nodeActionKinds key), reason
// (also the maintenance reason of maintenance-set), soft and force ("on"
// when checked). The hub's answer decides: a refusal (CUSTOMER_INSTANCE,
// PROVISION_STATE, ...) is shown with its message; success redirects to
// the device page naming the operation.
func (s *Server) nodeAction(w http.ResponseWriter, r *http.Request, id Identity) {
	devID := r.PathValue("id")
	if s.ops == nil {
		s.fail(w, r, http.StatusNotFound, "this hub's fleet view offers no node actions")
		return
	}
	if !id.CanWrite() {
		s.log.Warn("fleet view node action refused: no operations:write", "client_id", id.ClientID, "device_id", devID)
		s.fail(w, r, http.StatusForbidden, fmt.Sprintf("client %s lacks the operations:write scope: it may look, not start node actions", id.ClientID))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error())
		return
	}
	action := r.PostForm.Get("action")
	kind, ok := nodeActionKinds[action]
	if !ok {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("action %q is not a node action (power-on, power-off, reboot, maintenance-set, maintenance-clear, reprovision)", action))
		return
	}
	reason := r.PostForm.Get("reason")
	p := &ironlinkv1.OperationParams{}
	switch kind {
	case ironlinkv1.OperationKind_OPERATION_KIND_POWER_OFF, ironlinkv1.OperationKind_OPERATION_KIND_REBOOT:
		p.Soft = r.PostForm.Get("soft") == "on"
	case ironlinkv1.OperationKind_OPERATION_KIND_SET_MAINTENANCE:
		p.MaintenanceReason = reason
	}
	resp, err := s.ops.StartOperation(apiContext(r.Context(), id), &ironlinkv1.StartOperationRequest{Kind: kind, Devices: []string{devID},
		Reason: reason, Params: p, Force: r.PostForm.Get("force") == "on"})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	op := resp.GetOperations()[0]
	s.log.Info("fleet view: node action requested", "client_id", id.ClientID, "device_id", op.GetDeviceId(), "kind", kind.String(),
		"operation_id", op.GetOperationId(), "forced", op.GetForced(), "via", id.Via)
	http.Redirect(w, r, "/devices/"+url.PathEscape(op.GetDeviceId())+"?operation="+url.QueryEscape(op.GetOperationId()), http.StatusSeeOther)
}
