package link_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/link"
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
