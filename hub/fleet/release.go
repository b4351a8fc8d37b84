package fleet

import (
	"context"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/textcheck"
	"github.com/ironlink/ironlink/internal/wire"
)

// Quarantine, release and offer of one device: the operators' quarantine
// hold, the restoring release and the explicit offer (hub/store/holds.go;
// docs/reference/api.md "Quarantine holds and release").

// impairmentCall validates the reason and the device of a quarantine,
// release or offer and returns the device id and who asks.
func (s *Server) impairmentCall(ctx context.Context, ref deviceRef, reason string) (id string, a store.ImpairmentAction, err error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return "", a, grpcerr.InvalidArgument("reason", grpcerr.ReasonRequired, "reason is required: say why (it is kept in the device's quarantine history)")
	}
	if err := textcheck.Text("reason", reason, MaxReasonBytes); err != nil {
		return "", a, grpcerr.FromCheck(err)
	}
	if id, err = s.resolveDevice(ctx, ref); err != nil {
		return "", a, err
	}
	if err := s.checkDevice(ctx, callerScope(ctx), id); err != nil {
		return "", a, err
	}
	return id, store.ImpairmentAction{Actor: s.actor(ctx), Reason: reason, Source: SourceOperatorAPI}, nil
}

// QuarantineDevice implements FleetService.QuarantineDevice: it adds (or
// renews) the operators' hold.
func (s *Server) QuarantineDevice(ctx context.Context, req *ironlinkv1.QuarantineDeviceRequest) (*ironlinkv1.QuarantineDeviceResponse, error) {
	id, a, err := s.impairmentCall(ctx, deviceRef{req.GetDeviceId(), req.GetDeviceName(), req.GetSite()}, req.GetReason())
	if err != nil {
		return nil, err
	}
	cmd, err := s.store.Quarantine(ctx, id, store.HolderOperator, a)
	if err != nil {
		return nil, s.storeErr(err, "device", id)
	}
	s.log.Info("quarantine requested", "device_id", id, "generation", cmd.Generation, "actor", a.Actor, "reason", a.Reason, "command_id", cmd.ID)
	return &ironlinkv1.QuarantineDeviceResponse{Command: commandToProto(cmd)}, nil
}

// ReleaseDevice implements FleetService.ReleaseDevice.
func (s *Server) ReleaseDevice(ctx context.Context, req *ironlinkv1.ReleaseDeviceRequest) (*ironlinkv1.ReleaseDeviceResponse, error) {
	id, a, err := s.impairmentCall(ctx, deviceRef{req.GetDeviceId(), req.GetDeviceName(), req.GetSite()}, req.GetReason())
	if err != nil {
		return nil, err
	}
	p, cmd, err := s.store.Release(ctx, id, store.HolderOperator, req.GetAllHolds(), a, req.GetValidateOnly())
	if err != nil {
		return nil, s.storeErr(err, "device", id)
	}
	resp := &ironlinkv1.ReleaseDeviceResponse{Plan: releasePlanToProto(p)}
	if cmd.ID != "" {
		resp.Command = commandToProto(cmd)
		s.log.Info("release requested", "device_id", id, "outcome", p.Outcome, "released", p.Released, "remaining", len(p.Remaining),
			"all_holds", req.GetAllHolds(), "generation", cmd.Generation, "actor", a.Actor, "reason", a.Reason, "command_id", cmd.ID)
	}
	return resp, nil
}

// OfferDevice implements FleetService.OfferDevice.
func (s *Server) OfferDevice(ctx context.Context, req *ironlinkv1.OfferDeviceRequest) (*ironlinkv1.OfferDeviceResponse, error) {
	id, a, err := s.impairmentCall(ctx, deviceRef{req.GetDeviceId(), req.GetDeviceName(), req.GetSite()}, req.GetReason())
	if err != nil {
		return nil, err
	}
	cmd, err := s.store.Offer(ctx, id, a, req.GetValidateOnly())
	if err != nil {
		return nil, s.storeErr(err, "device", id)
	}
	resp := &ironlinkv1.OfferDeviceResponse{}
	if cmd.ID != "" {
		resp.Command = commandToProto(cmd)
		s.log.Info("offer requested", "device_id", id, "generation", cmd.Generation, "actor", a.Actor, "reason", a.Reason, "command_id", cmd.ID)
	}
	return resp, nil
}

// addHolds adds device id's quarantine holds and what an operator's
// release would do now to resp (GetDevice, not as of a past time).
func (s *Server) addHolds(ctx context.Context, id string, resp *ironlinkv1.GetDeviceResponse) error {
	hs, err := s.store.Holds(ctx, []string{id})
	if err != nil {
		return s.storeErr(err, "device", id)
	}
	for _, h := range hs[id] {
		resp.QuarantineHolds = append(resp.QuarantineHolds, holdToProto(h))
	}
	if resp.GetDevice().GetDesiredImpairment() != ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED {
		return nil
	}
	p, err := s.store.PlanRelease(ctx, id, store.HolderOperator, false)
	if err != nil {
		return s.storeErr(err, "device", id)
	}
	resp.ReleasePlan = releasePlanToProto(p)
	return nil
}

func actionToProto(a store.Action) ironlinkv1.ImpairmentAction {
	return wire.EnumFromName[ironlinkv1.ImpairmentAction](a, ironlinkv1.ImpairmentAction_value, "IMPAIRMENT_ACTION_")
}

func holdToProto(h store.QuarantineHold) *ironlinkv1.QuarantineHold {
	return &ironlinkv1.QuarantineHold{Holder: h.Holder, Actor: h.Actor, Reason: h.Reason, Source: h.Source,
		Generation: h.Generation, CreateTime: timestamppb.New(h.CreatedAt)}
}

func releasePlanToProto(p store.ReleasePlan) *ironlinkv1.ReleasePlan {
	out := &ironlinkv1.ReleasePlan{DeviceId: p.DeviceID, Site: p.Site, Name: p.Name,
		Outcome:                 wire.EnumFromName[ironlinkv1.ReleaseOutcome](p.Outcome, ironlinkv1.ReleaseOutcome_value, "RELEASE_OUTCOME_"),
		ReleasedHolders:         p.Released,
		OfferedBeforeQuarantine: p.OfferedBefore, StatusBeforeQuarantine: statusToProto(p.StatusBefore)}
	for _, h := range p.Remaining {
		out.RemainingHolds = append(out.RemainingHolds, holdToProto(h))
	}
	return out
}

func releaseCountsToProto(cs []store.ReleaseCount) []*ironlinkv1.ReleaseOutcomeCount {
	out := make([]*ironlinkv1.ReleaseOutcomeCount, len(cs))
	for i, c := range cs {
		out[i] = &ironlinkv1.ReleaseOutcomeCount{
			Outcome: wire.EnumFromName[ironlinkv1.ReleaseOutcome](c.Outcome, ironlinkv1.ReleaseOutcome_value, "RELEASE_OUTCOME_"),
			Holders: c.Holders, Count: int32(c.Count)}
	}
	return out
}
