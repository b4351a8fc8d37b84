package link_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/link"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
)

// TestLinkHealthReportRefusedKeepsLink: the hub's Welcome advertises the
// health feature; a HealthReport naming an unknown node is answered
// NotFound in its HealthResult and the link stays up; the next report is
// committed and answered with its results.
func TestLinkHealthReportRefusedKeepsLink(t *testing.T) {
	st, _ := newStore(t)
	site := storetest.NewSite(t, st, "hl", 2, nil)
	h := startReplica(t, st, "r1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := ironlinkv1.NewLinkServiceClient(h.Satellite(t, site.Name)).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: &ironlinkv1.Hello{
		Site: site.Name, BootId: uuid.NewString(), Version: "test"}}}); err != nil {
		t.Fatal(err)
	}
	m, err := s.Recv()
	if err != nil || !slices.Contains(m.GetWelcome().GetFeatures(), link.FeatureHealth) {
		t.Fatalf("welcome %v (%v), want features to list %q", m, err, link.FeatureHealth)
	}
	ev := func(node string) *ironlinkv1.HealthEvent {
		return &ironlinkv1.HealthEvent{NodeName: node, Agent: "gpu-health-monitor", ComponentClass: "GPU", CheckName: "GpuXidError",
			IsFatal: true, ErrorCodes: []string{"79"}, GeneratedTime: timestamppb.Now()}
	}
	send := func(id uint64, e *ironlinkv1.HealthEvent) *ironlinkv1.HealthResult {
		t.Helper()
		if err := s.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_HealthReport{HealthReport: &ironlinkv1.HealthReport{
			ReportId: id, Events: []*ironlinkv1.HealthEvent{e}}}}); err != nil {
			t.Fatal(err)
		}
		for {
			m, err := s.Recv()
			if err != nil {
				t.Fatalf("waiting for health result %d: %v", id, err)
			}
			if r := m.GetHealthResult(); r != nil {
				return r
			}
		}
	}
	if r := send(7, ev("no-such-node")); r.GetReportId() != 7 || codes.Code(r.GetCode()) != codes.NotFound || r.GetMessage() == "" {
		t.Fatalf("unknown node: %v, want report 7 NotFound with a message", r)
	}
	r := send(8, ev(site.Name+"-001"))
	if r.GetReportId() != 8 || r.GetCode() != 0 || len(r.GetResults()) != 1 || !r.GetResults()[0].GetApplied() ||
		r.GetResults()[0].GetDeviceId() != site.IDs[1] || r.GetResults()[0].GetConditionType() != "health.GPU/GpuXidError" {
		t.Fatalf("known node: %v, want report 8 applied to %s", r, site.IDs[1])
	}
}

// TestLinkHealthReportsBurst: twenty HealthReports sent at once (the hub
// commits those that wait together) are each answered with their own
// HealthResult: the good ones applied, a report naming an unknown node
// NotFound and one holding a NUL InvalidArgument, alone (the reports
// around them commit), and a report repeating an earlier event
// duplicate; each device ends with exactly its own conditions.
func TestLinkHealthReportsBurst(t *testing.T) {
	st, url := newStore(t)
	site := storetest.NewSite(t, st, "hb", 20, nil)
	h := startReplica(t, st, "r1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := ironlinkv1.NewLinkServiceClient(h.Satellite(t, site.Name)).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_Hello{Hello: &ironlinkv1.Hello{
		Site: site.Name, BootId: uuid.NewString(), Version: "test"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	gen := timestamppb.Now()
	ev := func(i int) *ironlinkv1.HealthEvent {
		return &ironlinkv1.HealthEvent{NodeName: fmt.Sprintf("%s-%03d", site.Name, i), Agent: "gpu-health-monitor", ComponentClass: "GPU",
			CheckName: "GpuXidError", IsFatal: true, ErrorCodes: []string{"79"}, GeneratedTime: gen}
	}
	const reports = 20
	want := map[uint64]codes.Code{}
	for i := range reports {
		e := ev(i)
		switch i {
		case 5:
			e.NodeName = "no-such-node"
			want[uint64(i)] = codes.NotFound
		case 9:
			e.Message = "bad\x00"
			want[uint64(i)] = codes.InvalidArgument
		case 14:
			e = ev(3) // the event of report 3 again
		}
		if err := s.Send(&ironlinkv1.ConnectRequest{Msg: &ironlinkv1.ConnectRequest_HealthReport{HealthReport: &ironlinkv1.HealthReport{
			ReportId: uint64(i), Events: []*ironlinkv1.HealthEvent{e}}}}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[uint64]*ironlinkv1.HealthResult{}
	for len(got) < reports {
		m, err := s.Recv()
		if err != nil {
			t.Fatalf("waiting for health results (%d of %d): %v", len(got), reports, err)
		}
		if r := m.GetHealthResult(); r != nil {
			if got[r.GetReportId()] != nil {
				t.Fatalf("report %d answered twice", r.GetReportId())
			}
			got[r.GetReportId()] = r
		}
	}
	for id, r := range got {
		switch {
		case want[id] != codes.OK:
			if codes.Code(r.GetCode()) != want[id] {
				t.Errorf("report %d: %v, want %s", id, r, want[id])
			}
		case r.GetCode() != 0 || len(r.GetResults()) != 1:
			t.Errorf("report %d: %v, want committed", id, r)
		case id == 14 && !r.GetResults()[0].GetDuplicate():
			t.Errorf("report 14 repeats report 3's event: %v, want duplicate", r)
		case id != 14 && (!r.GetResults()[0].GetApplied() || r.GetResults()[0].GetDeviceId() != site.IDs[id]):
			t.Errorf("report %d: %v, want applied to %s", id, r, site.IDs[id])
		}
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM device_conditions WHERE health IS NOT NULL`); n != reports-3 {
		t.Errorf("%d health conditions, want %d (one per good report)", n, reports-3)
	}
}
