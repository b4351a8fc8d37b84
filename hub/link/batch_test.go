package link

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
)

func goodCondition() *ironlinkv1.Condition {
	return &ironlinkv1.Condition{Type: "Enrolled", Status: ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE,
		Reason: "Enrolled", ObservedTime: timestamppb.Now()}
}

func goodDevice(id string) *ironlinkv1.DeviceUpdate {
	return &ironlinkv1.DeviceUpdate{DeviceId: id, ObservedTime: timestamppb.Now(), Conditions: []*ironlinkv1.Condition{goodCondition()}}
}

const devA = "3f0b2a5e-4c1d-4e8f-9a7b-1c2d3e4f5a6b"

func TestToBatchRefusesBadInput(t *testing.T) {
	many := &ironlinkv1.ConditionBatch{Sequence: 1}
	for range MaxDevicesPerBatch + 1 {
		many.Devices = append(many.Devices, goodDevice(devA))
	}
	tests := []struct {
		name   string
		mutate func(b *ironlinkv1.ConditionBatch)
		want   codes.Code
		msg    string
	}{
		{"sequence zero", func(b *ironlinkv1.ConditionBatch) { b.Sequence = 0 }, codes.InvalidArgument, "sequence"},
		{"sequence beyond int64", func(b *ironlinkv1.ConditionBatch) { b.Sequence = 1<<63 + 1 }, codes.InvalidArgument, "sequence"},
		{"device id not a UUID", func(b *ironlinkv1.ConditionBatch) { b.Devices[0].DeviceId = "node-001" }, codes.InvalidArgument, "not a UUID"},
		{"device twice", func(b *ironlinkv1.ConditionBatch) { b.Devices = append(b.Devices, goodDevice(strings.ToUpper(devA))) }, codes.InvalidArgument, "twice"},
		{"no observed time", func(b *ironlinkv1.ConditionBatch) { b.Devices[0].ObservedTime = nil }, codes.InvalidArgument, "observed_time"},
		{"unknown condition type", func(b *ironlinkv1.ConditionBatch) { b.Devices[0].Conditions[0].Type = "Happy" }, codes.InvalidArgument, "Happy"},
		{"unspecified status", func(b *ironlinkv1.ConditionBatch) { b.Devices[0].Conditions[0].Status = 0 }, codes.InvalidArgument, "status"},
		{"empty reason", func(b *ironlinkv1.ConditionBatch) { b.Devices[0].Conditions[0].Reason = "" }, codes.InvalidArgument, "reason"},
		{"huge message", func(b *ironlinkv1.ConditionBatch) { b.Devices[0].Conditions[0].Message = strings.Repeat("x", 5000) }, codes.InvalidArgument, "message"},
		{"condition twice", func(b *ironlinkv1.ConditionBatch) {
			b.Devices[0].Conditions = append(b.Devices[0].Conditions, goodCondition())
		}, codes.InvalidArgument, "twice"},
		{"empty snapshot id", func(b *ironlinkv1.ConditionBatch) { b.Snapshot = &ironlinkv1.SnapshotPart{} }, codes.InvalidArgument, "snapshot_id"},
		{"invalid timestamp", func(b *ironlinkv1.ConditionBatch) {
			b.Devices[0].Conditions[0].ObservedTime = &timestamppb.Timestamp{Seconds: 1 << 62}
		}, codes.InvalidArgument, "observed_time"},
		{"too many devices", func(b *ironlinkv1.ConditionBatch) { b.Devices = many.Devices }, codes.ResourceExhausted, "limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &ironlinkv1.ConditionBatch{Sequence: 7, Devices: []*ironlinkv1.DeviceUpdate{goodDevice(devA)}}
			tc.mutate(b)
			_, err := ToBatch(b)
			if status.Code(err) != tc.want || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
}

func TestToBatchCanonicalisesIDs(t *testing.T) {
	b, err := ToBatch(&ironlinkv1.ConditionBatch{Sequence: 3, Snapshot: &ironlinkv1.SnapshotPart{SnapshotId: "s", Final: true},
		Devices: []*ironlinkv1.DeviceUpdate{goodDevice(strings.ToUpper(devA))}})
	if err != nil {
		t.Fatal(err)
	}
	if b.Devices[0].DeviceID != devA || !b.SnapshotFinal || b.Devices[0].Conditions[0].LastTransitionTime.IsZero() {
		t.Fatalf("batch %+v", b)
	}
}

// FuzzToBatch feeds arbitrary wire bytes through the link's batch
// validation: it must never panic, and whatever it accepts must be within
// the documented limits.
func FuzzToBatch(f *testing.F) {
	seed, _ := proto.Marshal(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: &ironlinkv1.ConditionBatch{
		Sequence: 1, Devices: []*ironlinkv1.DeviceUpdate{goodDevice(devA)}}}})
	f.Add(seed)
	withMismatch := goodDevice(devA)
	withMismatch.Facts = &ironlinkv1.DeviceFacts{Name: "node-1", InstanceMismatches: []*ironlinkv1.InstanceMismatch{{
		Kind: ironlinkv1.InstanceMismatchKind_INSTANCE_MISMATCH_KIND_NODE_UNAWARE, NovaServerId: devA, NovaServerStatus: "ACTIVE",
		FirstSeenTime: timestamppb.Now()}}}
	seed, _ = proto.Marshal(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: &ironlinkv1.ConditionBatch{
		Sequence: 2, Devices: []*ironlinkv1.DeviceUpdate{withMismatch}}}})
	f.Add(seed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var m ironlinkv1.ConnectRequest
		if proto.Unmarshal(data, &m) != nil || m.GetBatch() == nil {
			return
		}
		b, err := ToBatch(m.GetBatch())
		if err != nil {
			if c := status.Code(err); c != codes.InvalidArgument && c != codes.ResourceExhausted {
				t.Fatalf("unexpected code %v", c)
			}
			return
		}
		if b.Sequence == 0 || len(b.Devices) > MaxDevicesPerBatch {
			t.Fatalf("accepted an out-of-limits batch: %d devices, sequence %d", len(b.Devices), b.Sequence)
		}
		for _, d := range b.Devices {
			if d.ObservedTime.IsZero() {
				t.Fatalf("accepted a device without observed time")
			}
			for _, c := range d.Conditions {
				if c.Validate() != nil {
					t.Fatalf("accepted an invalid condition %+v", c)
				}
			}
			if d.Facts == nil {
				continue
			}
			if len(d.Facts.InstanceMismatches) > MaxInstanceMismatches {
				t.Fatalf("accepted %d instance mismatches", len(d.Facts.InstanceMismatches))
			}
			for _, m := range d.Facts.InstanceMismatches {
				if m.Kind == "" || m.FirstSeenTime.IsZero() || len(m.NovaServerID) > MaxMismatchIDBytes || len(m.NovaServerStatus) > MaxMismatchStatusBytes {
					t.Fatalf("accepted an invalid instance mismatch %+v", m)
				}
			}
		}
	})
}

func TestClampBatchOnlyFarFutureTimes(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	soon, far := now.Add(30*time.Second), now.Add(2*time.Minute)
	past := now.Add(-time.Hour)
	b := store.Batch{Devices: []store.DeviceUpdate{
		{ObservedTime: soon, Conditions: []condition.Condition{{ObservedTime: soon, LastTransitionTime: past}}},
		{ObservedTime: far, Conditions: []condition.Condition{{ObservedTime: far, LastTransitionTime: far.Add(time.Minute)}},
			Facts: &store.Facts{InstanceMismatches: []store.InstanceMismatch{{FirstSeenTime: far}, {FirstSeenTime: past}}}},
	}}
	sk := ClampBatch(&b, now)
	if sk.Ahead != 3*time.Minute || !sk.Latest.Equal(far.Add(time.Minute)) || !sk.Now.Equal(now) {
		t.Fatalf("skew %+v", sk)
	}
	d0, d1 := b.Devices[0], b.Devices[1]
	if !d0.ObservedTime.Equal(soon) || !d0.Conditions[0].ObservedTime.Equal(soon) || !d0.Conditions[0].LastTransitionTime.Equal(past) {
		t.Fatalf("times within the tolerance changed: %+v", d0)
	}
	if !d1.ObservedTime.Equal(now) || !d1.Conditions[0].ObservedTime.Equal(now) || !d1.Conditions[0].LastTransitionTime.Equal(now) ||
		!d1.Facts.InstanceMismatches[0].FirstSeenTime.Equal(now) || !d1.Facts.InstanceMismatches[1].FirstSeenTime.Equal(past) {
		t.Fatalf("far-future times not clamped to now: %+v", d1)
	}
	if sk := ClampConditions([]condition.Condition{{ObservedTime: soon}}, now); sk.Ahead != 0 {
		t.Fatalf("clamped within the tolerance: %+v", sk)
	}
	cs := []condition.Condition{{ObservedTime: time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)}}
	if sk := ClampConditions(cs, now); sk.Ahead <= 0 || !cs[0].ObservedTime.Equal(now) {
		t.Fatalf("year 9000: %+v %+v", sk, cs)
	}
}

func TestToBatchRefusesNonCamelCaseReason(t *testing.T) {
	for _, r := range []string{"Not CamelCase\nat all", "has space", "9Lives", "Dash-ed", "Ünicode"} {
		b := &ironlinkv1.ConditionBatch{Sequence: 1, Devices: []*ironlinkv1.DeviceUpdate{goodDevice(devA)}}
		b.Devices[0].Conditions[0].Reason = r
		if _, err := ToBatch(b); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "CamelCase") {
			t.Errorf("reason %q: %v, want InvalidArgument naming CamelCase", r, err)
		}
	}
	if _, _, err := ToSiteConditions(&ironlinkv1.SiteConditions{Conditions: []*ironlinkv1.Condition{{
		Type: string(condition.OpenStackAuthenticated), Status: ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE,
		Reason: "Authentication failed", ObservedTime: timestamppb.Now()}}}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "CamelCase") {
		t.Errorf("site condition with a spaced reason: %v", err)
	}
}

// A satellite newer than the hub may report a site condition type the hub
// does not know: the known ones are kept and the link is not refused.
func TestToSiteConditionsIgnoresUnknownTypes(t *testing.T) {
	now := timestamppb.Now()
	conds, ignored, err := ToSiteConditions(&ironlinkv1.SiteConditions{Conditions: []*ironlinkv1.Condition{
		{Type: "FirmwareCatalogReachable", Status: ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE, Reason: "Reachable", ObservedTime: now},
		{Type: string(condition.OpenStackAuthenticated), Status: ironlinkv1.ConditionStatus_CONDITION_STATUS_TRUE, Reason: "Authenticated", ObservedTime: now},
	}})
	if err != nil {
		t.Fatalf("ToSiteConditions: %v", err)
	}
	if len(conds) != 1 || conds[0].Type != condition.OpenStackAuthenticated {
		t.Errorf("kept %+v, want only %s", conds, condition.OpenStackAuthenticated)
	}
	if len(ignored) != 1 || ignored[0] != "FirmwareCatalogReachable" {
		t.Errorf("ignored %v, want [FirmwareCatalogReachable]", ignored)
	}
}
