package policyapi

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

func statusCode(err error) codes.Code { return status.Code(err) }

// FleetDecorator is a unary server interceptor that adds the policy fields
// to FleetService answers, so hub/fleet needs no knowledge of the policy:
// ListSites gets Site.policy_state, ListDevices and GetDevice get
// Device.policy_holds (holds that have not ended). A failure to read them
// is logged and the answer goes out without them.
func (s *Server) FleetDecorator() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err != nil {
			return resp, err
		}
		switch r := resp.(type) {
		case *ironlinkv1.ListSitesResponse:
			states, derr := s.SiteStates(ctx, "")
			if derr != nil {
				s.log.Warn("policy state for ListSites", "err", derr)
				break
			}
			by := map[string]*ironlinkv1.SitePolicyState{}
			for _, st := range states {
				by[st.Site] = st
			}
			for _, site := range r.GetSites() {
				st := by[site.GetName()]
				site.PolicyState = st
				if c := guardCondition(st); c != nil {
					site.Conditions = append(site.Conditions, c)
				}
			}
		case *ironlinkv1.ListDevicesResponse:
			s.addHolds(ctx, r.GetDevices())
		case *ironlinkv1.GetDeviceResponse:
			if r.GetDevice() != nil {
				s.addHolds(ctx, []*ironlinkv1.Device{r.GetDevice()})
			}
		}
		return resp, nil
	}
}

// GuardConditionType is the hub-side site condition showing the guard on
// sites whose policy is enabled: True (reason Armed) or False (reason
// GuardTripped, the detail as message, since the trip).
const GuardConditionType = "PolicyGuardArmed"

func guardCondition(st *ironlinkv1.SitePolicyState) *ironlinkv1.Condition {
	if st == nil || !st.GetEnabled() {
		return nil
	}
	if !st.GetGuardTripped() {
		return &ironlinkv1.Condition{Type: GuardConditionType, Status: ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE, Reason: "Armed"}
	}
	return &ironlinkv1.Condition{Type: GuardConditionType, Status: ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE, Reason: "GuardTripped",
		Message:            fmt.Sprintf("rule %s: %s; %d pending", st.GetGuardTrippedRule(), st.GetGuardTrippedDetail(), st.GetPendingHeldCount()),
		LastTransitionTime: st.GetGuardTrippedTime(), ObservedTime: timestamppb.Now()}
}

func (s *Server) addHolds(ctx context.Context, devs []*ironlinkv1.Device) {
	if len(devs) == 0 {
		return
	}
	ids := make([]string, len(devs))
	for i, d := range devs {
		ids[i] = d.GetDeviceId()
	}
	holds, err := s.st.DeviceHolds(ctx, ids)
	if err != nil {
		s.log.Warn("device holds for a device answer", "err", err)
		return
	}
	now := s.now()
	for _, d := range devs {
		for _, h := range holds[d.GetDeviceId()] {
			if h.EndsAt != nil && !now.Before(*h.EndsAt) {
				continue
			}
			d.PolicyHolds = append(d.PolicyHolds, HoldToProto(h))
		}
	}
}
