package link

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// FuzzConvert feeds arbitrary wire bytes through the validation of every
// link message kind (hello, batch, site conditions, command result, drift
// correction). Properties: no panic; a refusal is InvalidArgument or
// ResourceExhausted with an ErrorInfo reason and a bounded message; what is
// accepted holds only canonical UUIDs and valid one-line or free text (no
// NUL, no control character PostgreSQL or a log would choke on).
func FuzzConvert(f *testing.F) {
	now := timestamppb.Now()
	for _, m := range []*ironlinkv1.ConnectRequest{
		{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: &ironlinkv1.Hello{Site: "site-a", BootId: "b", Capabilities: []string{"nova"},
			AppliedGenerations: []*ironlinkv1.AppliedGeneration{{DeviceId: devA, Generation: 2}}}}},
		{Msg: &ironlinkv1.ConnectRequest_Batch{Batch: &ironlinkv1.ConditionBatch{Sequence: 1, Devices: []*ironlinkv1.DeviceUpdate{goodDevice(devA)}}}},
		{Msg: &ironlinkv1.ConnectRequest_SiteConditions{SiteConditions: &ironlinkv1.SiteConditions{Conditions: []*ironlinkv1.Condition{{
			Type: "OrphanDetection", Status: ironlinkv1.ConditionStatus_CONDITION_STATUS_FALSE, Reason: "Standalone", Message: "m", ObservedTime: now}}}}},
		{Msg: &ironlinkv1.ConnectRequest_CommandResult{CommandResult: &ironlinkv1.CommandResult{CommandId: cmdA, DeviceId: devA, Generation: 3, Error: "e\nf"}}},
		{Msg: &ironlinkv1.ConnectRequest_DriftCorrection{DriftCorrection: &ironlinkv1.DriftCorrection{DeviceId: devA, Generation: 3, Detail: "d", CorrectTime: now}}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m ironlinkv1.ConnectRequest
		if proto.Unmarshal(data, &m) != nil {
			return
		}
		var err error
		var texts []string // accepted free text
		var ids []string   // accepted ids
		switch msg := m.GetMsg().(type) {
		case *ironlinkv1.ConnectRequest_Hello:
			var devs []string
			devs, err = checkHello(msg.Hello)
			if err == nil {
				ids = devs
				texts = append(texts, msg.Hello.GetBootId(), msg.Hello.GetVersion())
				texts = append(texts, msg.Hello.GetCapabilities()...)
			}
		case *ironlinkv1.ConnectRequest_Batch:
			b, e := ToBatch(msg.Batch)
			err = e
			for _, d := range b.Devices {
				ids = append(ids, d.DeviceID)
				for _, c := range d.Conditions {
					texts = append(texts, c.Message, c.Reason, string(c.Type))
				}
				if d.Facts != nil {
					texts = append(texts, d.Facts.Name, d.Facts.Fault, d.Facts.Owner, d.Facts.Lessee, d.Facts.ProvisionState)
					for _, mm := range d.Facts.InstanceMismatches {
						texts = append(texts, mm.NovaServerID, mm.NovaServerStatus, mm.NovaProjectID, mm.IronicInstanceUUID)
					}
				}
			}
			if err == nil {
				texts = append(texts, b.SnapshotID)
			}
		case *ironlinkv1.ConnectRequest_SiteConditions:
			cs, _, e := ToSiteConditions(msg.SiteConditions)
			err = e
			for _, c := range cs {
				texts = append(texts, c.Message, c.Reason)
			}
		case *ironlinkv1.ConnectRequest_CommandResult:
			r, e := ToResult(msg.CommandResult)
			err = e
			if err == nil {
				ids = append(ids, r.CommandID, r.DeviceID)
				texts = append(texts, r.Error, r.Detail)
			}
		case *ironlinkv1.ConnectRequest_DriftCorrection:
			c, _, e := ToCorrection(msg.DriftCorrection, time.Now())
			err = e
			if err == nil {
				ids = append(ids, c.DeviceID)
				texts = append(texts, c.Detail)
			}
		default:
			return
		}
		if err != nil {
			if c := status.Code(err); c != codes.InvalidArgument && c != codes.ResourceExhausted {
				t.Fatalf("refused with %v: %v", c, err)
			}
			if grpcerr.Reason(err) == "" {
				t.Fatalf("refusal without an ErrorInfo reason: %v", err)
			}
			if n := len(status.Convert(err).Message()); n > 1024 {
				t.Fatalf("refusal message of %d bytes", n)
			}
			return
		}
		for _, id := range ids {
			if u, e := uuid.Parse(id); e != nil || u.String() != id {
				t.Fatalf("accepted a non-canonical id %q", id)
			}
		}
		for _, s := range texts {
			if e := textcheck.Text("accepted", s, 1<<20); e != nil {
				t.Fatalf("accepted text %q: %v", s, e)
			}
		}
	})
}
