package web

import (
	"context"
	"fmt"
	"net/http"

	"google.golang.org/grpc"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// Policy is what the fleet view needs of the hub's PolicyService
// (hub/policyapi.Server): the RPCs' own handlers (validation, site binding,
// errors as gRPC statuses) and the interceptor that adds the policy fields
// (Site.policy_state, Device.policy_holds) to FleetService answers, which
// the view applies to its own FleetService calls as gRPC does.
type Policy interface {
	// GetEffectivePolicy returns the policy in force at a site.
	GetEffectivePolicy(ctx context.Context, req *ironlinkv1.GetEffectivePolicyRequest) (*ironlinkv1.GetEffectivePolicyResponse, error)
	// ListPolicyDecisions pages the decision log, newest first.
	ListPolicyDecisions(ctx context.Context, req *ironlinkv1.ListPolicyDecisionsRequest) (*ironlinkv1.ListPolicyDecisionsResponse, error)
	// ListPendingActions pages pending actions, oldest first.
	ListPendingActions(ctx context.Context, req *ironlinkv1.ListPendingActionsRequest) (*ironlinkv1.ListPendingActionsResponse, error)
	// ApprovePendingActions approves pending actions, all or nothing.
	ApprovePendingActions(ctx context.Context, req *ironlinkv1.ApprovePendingActionsRequest) (*ironlinkv1.ApprovePendingActionsResponse, error)
	// RejectPendingActions rejects pending actions, all or nothing.
	RejectPendingActions(ctx context.Context, req *ironlinkv1.RejectPendingActionsRequest) (*ironlinkv1.RejectPendingActionsResponse, error)
	// ListSitePolicyStates returns the policy state of every site (or one).
	ListSitePolicyStates(ctx context.Context, req *ironlinkv1.ListSitePolicyStatesRequest) (*ironlinkv1.ListSitePolicyStatesResponse, error)
	// SetDeviceHold sets a device's exclusion or planned maintenance.
	SetDeviceHold(ctx context.Context, req *ironlinkv1.SetDeviceHoldRequest) (*ironlinkv1.SetDeviceHoldResponse, error)
	// ClearDeviceHold ends a device's hold of one kind.
	ClearDeviceHold(ctx context.Context, req *ironlinkv1.ClearDeviceHoldRequest) (*ironlinkv1.ClearDeviceHoldResponse, error)
	// FleetDecorator adds the policy fields to FleetService answers.
	FleetDecorator() grpc.UnaryServerInterceptor
}

// SetPolicy gives the view the quarantine policy's API (the /policy and
// /holds pages, the policy parts of the site and device pages); call it
// before serving. Without it those pages answer 404 and the others show no
// policy state.
func (s *Server) SetPolicy(p Policy) { s.policy = p }

// decorated calls a FleetService handler through the policy's decorator
// (when the hub has a policy API), as the gRPC server's interceptor chain
// would, so answers carry policy_state and policy_holds.
func decorated[Req, Resp any](s *Server, ctx context.Context, method string, req Req, call func(context.Context, Req) (Resp, error)) (Resp, error) {
	if s.policy == nil {
		return call(ctx, req)
	}
	var zero Resp
	out, err := s.policy.FleetDecorator()(ctx, req, &grpc.UnaryServerInfo{FullMethod: "/ironlink.v1.FleetService/" + method},
		func(ctx context.Context, r any) (any, error) { return call(ctx, r.(Req)) })
	if err != nil {
		return zero, err
	}
	return out.(Resp), nil
}

// needPolicy answers 404 when the hub serves no policy API.
func (s *Server) needPolicy(w http.ResponseWriter, r *http.Request) bool {
	if s.policy == nil {
		s.fail(w, r, http.StatusNotFound, "this hub's fleet view has no quarantine policy API")
		return false
	}
	return true
}

// needOps answers 404 when the hub serves no operations.
func (s *Server) needOps(w http.ResponseWriter, r *http.Request) bool {
	if s.ops == nil {
		s.fail(w, r, http.StatusNotFound, "this hub's fleet view offers no operations")
		return false
	}
	return true
}

// writeForm is every state-changing handler's start: operations:write or
// 403 saying why (the refusal logged, nothing written), then the form
// (at most 64 KiB) or 400. what is the refused action, for the message
// ("approve pending actions"). It reports whether the handler goes on.
func (s *Server) writeForm(w http.ResponseWriter, r *http.Request, id Identity, what string) bool {
	if !id.CanWrite() {
		s.log.Warn("fleet view write refused: no operations:write", "client_id", id.ClientID, "path", r.URL.Path)
		s.fail(w, r, http.StatusForbidden, fmt.Sprintf("client %s lacks the operations:write scope: it may look, not %s", id.ClientID, what))
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error())
		return false
	}
	return true
}
