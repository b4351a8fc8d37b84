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

func sizes(rs []*ironlinkv1.HealthReport) []int {
	var out []int
	for _, r := range rs {
		out = append(out, len(r.GetEvents()))
	}
	return out
}

// TestSpoolCombinesKeepsOrderAndDropsOldest: waiting reports go combined;
// what was sent on a link that ended goes again; a full spool drops the
// oldest and answers its caller Unavailable; a refused combined report
// goes again one by one, so only the bad one is refused; a transient
// refusal is sent again.
func TestSpoolCombinesKeepsOrderAndDropsOldest(t *testing.T) {
	s := NewSpool(304, nil)
	r1, r2 := s.put(events(4)), s.put(events(4))
	if got := s.Take(); len(got) != 1 || len(got[0].GetEvents()) != 8 {
		t.Fatalf("first take %v, want one report of 8 events", sizes(got))
	}
	s.LinkDown()
	r3 := s.put(events(250))
	if got := s.Take(); len(got) != 2 || len(got[0].GetEvents()) != 8 || len(got[1].GetEvents()) != 250 {
		t.Fatalf("after the link came back: %v, want [8 250] (at most 256 a report)", sizes(got))
	}
	s.LinkDown()
	r4 := s.put(events(40)) // 298 events: fits
	r5 := s.put(events(10)) // 308 > 304: r1 goes
	if res := <-r1.done; codes.Code(res.GetCode()) != codes.Unavailable {
		t.Fatalf("dropped report answered %v, want Unavailable", res)
	}
	if s.put(events(305)) != nil {
		t.Fatal("a batch larger than the spool was taken")
	}
	got := s.Take() // r2 r3 | r4 r5
	if len(got) != 2 || len(got[0].GetEvents()) != 254 || len(got[1].GetEvents()) != 50 {
		t.Fatalf("take after the drop %v, want [254 50]", sizes(got))
	}
	s.Result(&ironlinkv1.HealthResult{ReportId: got[0].GetReportId()})
	for _, r := range []*report{r2, r3} {
		if res := <-r.done; res.GetCode() != 0 {
			t.Errorf("report %d: %v, want OK", r.id, res)
		}
	}
	s.Result(&ironlinkv1.HealthResult{ReportId: got[1].GetReportId(), Code: int32(codes.NotFound), Message: "no such node"})
	alone := s.Take()
	if len(alone) != 2 || len(alone[0].GetEvents()) != 40 || len(alone[1].GetEvents()) != 10 {
		t.Fatalf("after a refused combined report: %v, want [40 10] one by one", sizes(alone))
	}
	s.Result(&ironlinkv1.HealthResult{ReportId: alone[0].GetReportId()})
	s.Result(&ironlinkv1.HealthResult{ReportId: alone[1].GetReportId(), Code: int32(codes.NotFound), Message: "no such node"})
	if res := <-r4.done; res.GetCode() != 0 {
		t.Errorf("r4 %v, want OK", res)
	}
	if res := <-r5.done; codes.Code(res.GetCode()) != codes.NotFound {
		t.Errorf("r5 %v, want NotFound", res)
	}
	r6 := s.put(events(3))
	got = s.Take()
	s.Result(&ironlinkv1.HealthResult{ReportId: got[0].GetReportId(), Code: int32(codes.Unavailable)})
	if again := s.Take(); len(again) != 1 || len(again[0].GetEvents()) != 3 {
		t.Errorf("after a transient refusal: %v, want r6 again", sizes(again))
	}
	if s.Depth() != len(r6.events) {
		t.Errorf("depth %d, want %d", s.Depth(), len(r6.events))
	}
}
