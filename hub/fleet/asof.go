package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/store"
)

// parseAsOf checks the as_of field of ListDevices and GetDevice (see
// fleet.proto): unset is the zero time (the present); otherwise it must be
// a valid timestamp after the Unix epoch and not after now. Errors:
// InvalidArgument naming field "as_of".
func parseAsOf(ts *timestamppb.Timestamp, now time.Time) (time.Time, error) {
	if ts == nil {
		return time.Time{}, nil
	}
	if err := ts.CheckValid(); err != nil {
		return time.Time{}, grpcerr.InvalidArgument("as_of", grpcerr.ReasonInvalidValue, "as_of is not a valid timestamp: "+err.Error())
	}
	t := ts.AsTime()
	switch {
	case !t.After(time.Unix(0, 0)):
		return time.Time{}, grpcerr.InvalidArgument("as_of", grpcerr.ReasonOutOfRange,
			fmt.Sprintf("as_of %s is not after the Unix epoch", t.Format(time.RFC3339Nano)))
	case t.After(now):
		return time.Time{}, grpcerr.InvalidArgument("as_of", grpcerr.ReasonOutOfRange,
			fmt.Sprintf("as_of %s is in the future (the hub's clock reads %s); leave it unset for the present",
				t.Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano)))
	}
	return t, nil
}

// asOfRefusal reports whether err is one of the store's as-of refusals
// (grpcerr.FromStore: InvalidArgument on as_of or instance_mismatch): the
// caller's mistake, not logged.
func asOfRefusal(err error) bool {
	return errors.Is(err, store.ErrHistoryExpired) || errors.Is(err, store.ErrAsOfUnsupported)
}

// getDeviceAsOf is GetDevice for a request with as_of set: the device and
// its histories as they were then (store.GetDeviceAsOf).
func (s *Server) getDeviceAsOf(ctx context.Context, req *ironlinkv1.GetDeviceRequest) (*ironlinkv1.GetDeviceResponse, error) {
	asOf, err := parseAsOf(req.GetAsOf(), time.Now())
	if err != nil {
		return nil, err
	}
	rd, err := s.readDevice(ctx, req, deviceReads{
		device: func(ctx context.Context, id string) (store.Device, error) {
			return s.store.GetDeviceAsOf(ctx, id, asOf)
		},
		statusHistory: func(ctx context.Context, id string, limit int) ([]store.StatusChange, error) {
			return s.store.StatusHistoryAsOf(ctx, id, asOf, limit)
		},
		impairmentHistory: func(ctx context.Context, id string, limit int) ([]store.ImpairmentChange, error) {
			return s.store.ImpairmentHistoryAsOf(ctx, id, asOf, limit)
		},
	})
	if err != nil {
		return nil, err
	}
	return rd.resp, nil
}
