package policyapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// HoldToProto renders a device hold.
func HoldToProto(h store.DeviceHold) *ironlinkv1.DeviceHold {
	out := &ironlinkv1.DeviceHold{DeviceId: h.DeviceID, Reason: h.Reason, Author: h.Author, StartTime: ts(&h.StartsAt),
		EndTime: ts(h.EndsAt), CreateTime: ts(&h.CreatedAt)}
	for k, v := range holdKinds {
		if v == h.Kind {
			out.Kind = k
		}
	}
	return out
}

func (s *Server) deviceRef(ctx context.Context, raw string, kind ironlinkv1.DeviceHoldKind) (string, string, error) {
	if raw == "" {
		return "", "", grpcerr.InvalidArgument("device_id", grpcerr.ReasonRequired, "device_id is required")
	}
	u, err := uuid.Parse(raw)
	if err != nil {
		return "", "", grpcerr.InvalidArgument("device_id", grpcerr.ReasonNotUUID, "device_id "+textcheck.Quote(raw)+" is not a UUID")
	}
	k, ok := holdKinds[kind]
	switch {
	case !ok && kind == ironlinkv1.DeviceHoldKind_DEVICE_HOLD_KIND_UNSPECIFIED:
		return "", "", grpcerr.InvalidArgument("kind", grpcerr.ReasonRequired, "kind is required: EXCLUSION or PLANNED_MAINTENANCE")
	case !ok:
		return "", "", grpcerr.InvalidArgument("kind", grpcerr.ReasonInvalidValue, fmt.Sprintf("kind %d is not a hold kind: EXCLUSION or PLANNED_MAINTENANCE", int32(kind)))
	}
	id := u.String()
	site, err := s.st.DeviceSite(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return "", "", grpcerr.NotFound("device", id, "")
		}
		return "", "", s.storeErr(err)
	}
	if err := s.allow(ctx, "device "+id, site); err != nil {
		return "", "", err
	}
	return id, k, nil
}

// SetDeviceHold implements PolicyService.SetDeviceHold.
func (s *Server) SetDeviceHold(ctx context.Context, req *ironlinkv1.SetDeviceHoldRequest) (*ironlinkv1.SetDeviceHoldResponse, error) {
	reason, err := checkReason(req.GetReason())
	if err != nil {
		return nil, err
	}
	now := s.now()
	start := now
	if req.GetStartTime() != nil {
		if err := req.GetStartTime().CheckValid(); err != nil {
			return nil, grpcerr.InvalidArgument("start_time", grpcerr.ReasonInvalidValue, "start_time: "+err.Error())
		}
		start = req.GetStartTime().AsTime()
	}
	var end *time.Time
	if req.GetEndTime() != nil {
		if err := req.GetEndTime().CheckValid(); err != nil {
			return nil, grpcerr.InvalidArgument("end_time", grpcerr.ReasonInvalidValue, "end_time: "+err.Error())
		}
		e := req.GetEndTime().AsTime()
		if !e.After(start) {
			return nil, grpcerr.InvalidArgument("end_time", grpcerr.ReasonInvalidValue, "end_time must be after start_time")
		}
		end = &e
	}
	if req.GetKind() == ironlinkv1.DeviceHoldKind_DEVICE_HOLD_KIND_PLANNED_MAINTENANCE && end == nil {
		return nil, grpcerr.InvalidArgument("end_time", grpcerr.ReasonRequired, "end_time is required for planned maintenance")
	}
	id, kind, err := s.deviceRef(ctx, req.GetDeviceId(), req.GetKind())
	if err != nil {
		return nil, err
	}
	h, err := s.st.SetDeviceHold(ctx, store.DeviceHold{DeviceID: id, Kind: kind, Reason: reason, Author: s.actor(ctx), StartsAt: start, EndsAt: end})
	if err != nil {
		return nil, s.storeErr(err)
	}
	s.log.Info("device hold set", "device_id", id, "kind", kind, "author", h.Author, "reason", textcheck.Prefix(reason, 256))
	return &ironlinkv1.SetDeviceHoldResponse{Hold: HoldToProto(h)}, nil
}

// ClearDeviceHold implements PolicyService.ClearDeviceHold.
func (s *Server) ClearDeviceHold(ctx context.Context, req *ironlinkv1.ClearDeviceHoldRequest) (*ironlinkv1.ClearDeviceHoldResponse, error) {
	id, kind, err := s.deviceRef(ctx, req.GetDeviceId(), req.GetKind())
	if err != nil {
		return nil, err
	}
	ok, err := s.st.ClearDeviceHold(ctx, id, kind)
	if err != nil {
		return nil, s.storeErr(err)
	}
	if !ok {
		return nil, grpcerr.NotFound("device hold", id+"/"+kind, fmt.Sprintf("device %s has no %s", id, kind))
	}
	s.log.Info("device hold cleared", "device_id", id, "kind", kind, "actor", s.actor(ctx))
	return &ironlinkv1.ClearDeviceHoldResponse{}, nil
}
