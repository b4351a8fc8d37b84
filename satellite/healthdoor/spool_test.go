package healthdoor

import (
	"testing"

	"google.golang.org/grpc/codes"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

func events(n int) []*ironlinkv1.HealthEvent {
	out := make([]*ironlinkv1.HealthEvent, n)
	for i := range out {
		out[i] = &ironlinkv1.HealthEvent{NodeName: "n", Agent: "a", ComponentClass: "GPU", CheckName: "c"}
	}
	return out
}

// TestSpoolKeepsOrderAcrossLinksAndDropsOldest: reports sent on a link
// that ended go again first, in order; a full spool drops the oldest and
// answers its caller Unavailable; a transient refusal is sent again; a
// refusal or a commit ends the report.
func TestSpoolKeepsOrderAcrossLinksAndDropsOldest(t *testing.T) {
	s := NewSpool(10, nil)
	r1, r2 := s.put(events(4)), s.put(events(4))
	if got := s.Take(); len(got) != 2 || got[0].GetReportId() != r1.id || got[1].GetReportId() != r2.id {
		t.Fatalf("first take %v", got)
	}
	s.LinkDown()
	r3 := s.put(events(2))
	got := s.Take()
	if len(got) != 3 || got[0].GetReportId() != r1.id || got[1].GetReportId() != r2.id || got[2].GetReportId() != r3.id {
		t.Fatalf("after the link came back: %v, want r1 r2 r3", got)
	}
	s.LinkDown()
	r4 := s.put(events(3)) // 13 > 10: r1 goes
	if res := <-r1.done; codes.Code(res.GetCode()) != codes.Unavailable {
		t.Fatalf("dropped report answered %v, want Unavailable", res)
	}
	if s.Depth() != 9 {
		t.Fatalf("depth %d, want 9", s.Depth())
	}
	if s.put(events(11)) != nil {
		t.Fatal("a batch larger than the spool was taken")
	}
	got = s.Take()
	if len(got) != 3 || got[0].GetReportId() != r2.id {
		t.Fatalf("take after the drop %v", got)
	}
	s.Result(&ironlinkv1.HealthResult{ReportId: r2.id})
	s.Result(&ironlinkv1.HealthResult{ReportId: r3.id, Code: int32(codes.NotFound), Message: "no such node"})
	s.Result(&ironlinkv1.HealthResult{ReportId: r4.id, Code: int32(codes.Unavailable)})
	if res := <-r2.done; res.GetCode() != 0 {
		t.Errorf("r2 %v, want OK", res)
	}
	if res := <-r3.done; codes.Code(res.GetCode()) != codes.NotFound {
		t.Errorf("r3 %v, want NotFound", res)
	}
	if got := s.Take(); len(got) != 1 || got[0].GetReportId() != r4.id {
		t.Errorf("after a transient refusal: %v, want r4 again", got)
	}
	if s.Depth() != 3 {
		t.Errorf("depth %d, want 3 (r4)", s.Depth())
	}
}
