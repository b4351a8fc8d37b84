package fleet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/internal/pgtest"
)

// badField returns the field named by err's google.rpc.BadRequest ("" when none).
func badField(err error) string {
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}

func TestAsOfThroughTheFleetAPI(t *testing.T) {
	ctx := context.Background()
	before := time.Now()
	st, _, id, log := newStoreWithDevice(t)
	srv := fleet.NewServer(st, nil, log)
	t1 := time.Now()
	if _, err := srv.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceId: id, Reason: "bad GPU"}); err != nil {
		t.Fatal(err)
	}
	t2 := time.Now()

	quarantined := []ironlinkv1.OperationalStatus{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_QUARANTINED}
	list := func(at time.Time, sts []ironlinkv1.OperationalStatus) []*ironlinkv1.Device {
		t.Helper()
		resp, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "site-a", Statuses: sts, AsOf: timestamppb.New(at)})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetDevices()
	}
	if got := list(t1, quarantined); len(got) != 0 {
		t.Fatalf("quarantined as of t1: %v", got)
	}
	if got := list(t2, quarantined); len(got) != 1 || got[0].GetDeviceId() != id ||
		got[0].GetDesiredImpairment() != ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED {
		t.Fatalf("quarantined as of t2: %v", got)
	}
	if got := list(before, nil); len(got) != 0 {
		t.Fatalf("devices as of before the first report: %v", got)
	}

	g, err := srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id, AsOf: timestamppb.New(t1)})
	if err != nil {
		t.Fatal(err)
	}
	if g.GetDevice().GetStatus() == ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_QUARANTINED || len(g.GetImpairmentHistory()) != 0 || len(g.GetDevice().GetConditions()) != 1 {
		t.Fatalf("as of t1: %v", g)
	}
	g, err = srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id, AsOf: timestamppb.New(t2)})
	if err != nil || g.GetDevice().GetStatus() != ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_QUARANTINED || len(g.GetImpairmentHistory()) != 1 {
		t.Fatalf("as of t2: %v %v", g, err)
	}
	_, err = srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id, AsOf: timestamppb.New(before)})
	if status.Code(err) != codes.NotFound || !strings.Contains(status.Convert(err).Message(), "later, at ") {
		t.Fatalf("device as of before it existed: %v, want NotFound saying when the hub first heard of it", err)
	}
}

func TestAsOfBadInputIsInvalidArgument(t *testing.T) {
	ctx := context.Background()
	st, url, id, log := newStoreWithDevice(t)
	srv := fleet.NewServer(st, nil, log)
	sums := pgtest.Checksums(t, url)
	for _, tc := range []struct {
		name  string
		asOf  *timestamppb.Timestamp
		field string
		mism  bool
	}{
		{"in the future", timestamppb.New(time.Now().Add(time.Hour)), "as_of", false},
		{"before the epoch", &timestamppb.Timestamp{Seconds: -3600}, "as_of", false},
		{"at the epoch", &timestamppb.Timestamp{}, "as_of", false},
		{"invalid nanos", &timestamppb.Timestamp{Seconds: 1e9, Nanos: -1}, "as_of", false},
		{"with instance_mismatch", timestamppb.New(time.Now().Add(-time.Second)), "instance_mismatch", true},
	} {
		_, err := srv.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{AsOf: tc.asOf, InstanceMismatch: tc.mism})
		if status.Code(err) != codes.InvalidArgument || badField(err) != tc.field {
			t.Errorf("ListDevices %s: %v (field %q), want InvalidArgument on %s", tc.name, err, badField(err), tc.field)
		}
		if tc.mism {
			continue
		}
		_, err = srv.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id, AsOf: tc.asOf})
		if status.Code(err) != codes.InvalidArgument || badField(err) != tc.field {
			t.Errorf("GetDevice %s: %v (field %q), want InvalidArgument on %s", tc.name, err, badField(err), tc.field)
		}
	}
	if changed := pgtest.ChangedTables(sums, pgtest.Checksums(t, url)); len(changed) != 0 {
		t.Fatalf("bad as_of requests changed %v", changed)
	}
}
