package policy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/ctl"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/promtest"
	"github.com/ironlink/ironlink/internal/storetest"
)

const rackDoc = `
policy:
  default:
    enabled: true
    guard:
      maxDevices: 100
      maxPercent: 100
      window: 1h
      perLabel: [{label: rack, maxDevices: 2}]
    rules:
      - name: offered-faulted
        to: [FAULTED]
        reasons: [DeployFailed]
`

// TestRackBurstTripsPerRackGuard: 30 devices of one rack fault at once
// under a per-rack guard of 2 (the site's own limits far away): the
// policy quarantines 2, holds the other 28 for an operator with rack
// r12's guard tripped (the site's guard stays armed), and the hub names
// the common cause (rack from the satellite's labels, switch from the
// labels file) in the API, the CLI and a metric. A device of another rack
// faulting afterwards is quarantined under the site's guard; one more of
// rack r12 waits. Rejecting what the guard held leaves r12 tripped while
// its window is full. The metric names the tripped rack.
func TestRackBurstTripsPerRackGuard(t *testing.T) {
	h := startHubDoc(t, rackDoc)
	ctx := context.Background()
	s := newSat(t, h.st, "site-r", 40)
	at := time.Now()
	var ups []store.DeviceUpdate
	for i, id := range s.IDs {
		rack := "r12"
		if i >= 32 {
			rack = "r7"
		}
		ups = append(ups, store.DeviceUpdate{DeviceID: id, Conditions: storetest.Healthy(at), ObservedTime: at,
			Facts: &store.Facts{Name: fmt.Sprintf("site-r-%03d", i), Labels: map[string]string{"rack": rack}}})
	}
	s.Send(ups)
	if err := h.st.ReplaceFileLabels(ctx, []store.FileLabelEntry{{Site: "site-r", NameLike: "site-r-0%", Labels: map[string]string{"switch": "s3"}},
		{Site: "site-r", NameLike: "site-r-03%", Labels: map[string]string{"switch": "s9"}}}); err != nil {
		t.Fatal(err)
	}
	s.Fault(s.IDs[:30], "DeployFailed", time.Now())
	waitFor(t, "30 decisions", func() bool { return pgtest.Count(t, h.url, `SELECT count(*) FROM policy_decisions`) == 30 })

	quarantined, err := h.fleet.ListDevices(ctx, &ironlinkv1.ListDevicesRequest{Site: "site-r", PageSize: 100,
		Impairments: []ironlinkv1.ImpairmentState{ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED}})
	if err != nil || len(quarantined.GetDevices()) != 2 {
		t.Fatalf("quarantined: %d devices (%v), want 2", len(quarantined.GetDevices()), err)
	}
	pend, err := h.policy.ListPendingActions(ctx, &ironlinkv1.ListPendingActionsRequest{Site: "site-r", PageSize: 100})
	if err != nil || len(pend.GetActions()) != 28 {
		t.Fatalf("pending: %d (%v), want 28", len(pend.GetActions()), err)
	}
	for _, p := range pend.GetActions() {
		if p.GetReason() != "HeldByGuard" {
			t.Fatalf("pending action %+v, want HeldByGuard", p)
		}
	}
	states, err := h.policy.ListSitePolicyStates(ctx, &ironlinkv1.ListSitePolicyStatesRequest{Site: "site-r"})
	if err != nil || len(states.GetStates()) != 1 {
		t.Fatalf("states: %v %v", states, err)
	}
	st := states.GetStates()[0]
	const want = "30 of 30 new faults are in rack r12, switch s3"
	doms := st.GetTrippedDomains()
	if st.GetGuardTripped() || len(doms) != 1 || doms[0].GetLabel() != "rack" || doms[0].GetValue() != "r12" ||
		!strings.Contains(doms[0].GetDetail(), "rack=r12") || doms[0].GetPendingHeldCount() != 28 || st.GetCommonCause().GetSummary() != want {
		t.Fatalf("guard: site tripped=%v, tripped domains %v, cause %q; want the site armed, rack=r12 tripped holding 28, and %q",
			st.GetGuardTripped(), doms, st.GetCommonCause().GetSummary(), want)
	}
	if pl := st.GetGuard().GetPerLabel(); len(pl) != 1 || pl[0].GetLabel() != "rack" || pl[0].GetMaxDevices() != 2 {
		t.Errorf("guard per_label %v", pl)
	}
	page := promtest.Scrape(t, h.metrics+"/metrics")
	if v, _ := page.Value("ironlink_policy_guard_common_cause", "site", "site-r", "label", "rack", "value", "r12"); v != 30 {
		t.Errorf("ironlink_policy_guard_common_cause{rack=r12} = %v, want 30", v)
	}
	if v, _ := page.Value("ironlink_policy_label_guard_tripped", "site", "site-r", "label", "rack", "value", "r12"); v != 1 {
		t.Errorf("ironlink_policy_label_guard_tripped{rack=r12} = %v, want 1", v)
	}
	if got := page.Series("ironlink_policy_label_guard_tripped"); len(got) != 1 {
		t.Errorf("ironlink_policy_label_guard_tripped series %v, want rack=r12 only (r7 is armed)", got)
	}
	if v, _ := page.Value("ironlink_policy_label_guards_tripped", "site", "site-r"); v != 1 {
		t.Errorf("ironlink_policy_label_guards_tripped{site-r} = %v, want 1", v)
	}
	var out, errb strings.Builder
	code := ctl.Execute(ctx, ctl.Options{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }},
		[]string{"--hub", h.addr, "--plaintext", "--no-auth", "policy", "guard", "site-r"})
	if code != 0 || !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "per rack at most 2 devices") ||
		!strings.Contains(out.String(), "TRIPPED rack=r12") {
		t.Errorf("ironlink policy guard: %d %q %q", code, out.String(), errb.String())
	}
	out.Reset()
	code = ctl.Execute(ctx, ctl.Options{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }},
		[]string{"--hub", h.addr, "--plaintext", "--no-auth", "get", "devices", "-l", "rack=r7", "--show-labels", "-o", "name"})
	if code != 0 || strings.Count(out.String(), "\n") != 8 {
		t.Errorf("get devices -l rack=r7: %d %q %q", code, out.String(), errb.String())
	}
	// -l reads --selector's syntax: site= is the site, not a label named
	// "site"; a term ListDevices cannot filter by is refused, not ignored.
	for args, want := range map[string]int{"site=site-r,rack=r7": 8, "site=site-r,rack=r99": 0} {
		out.Reset()
		code = ctl.Execute(ctx, ctl.Options{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }},
			[]string{"--hub", h.addr, "--plaintext", "--no-auth", "get", "devices", "-l", args, "-o", "name"})
		if code != 0 || strings.Count(out.String(), "\n") != want {
			t.Errorf("get devices -l %s: exit %d, %q, want %d devices", args, code, out.String(), want)
		}
	}
	errb.Reset()
	code = ctl.Execute(ctx, ctl.Options{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }},
		[]string{"--hub", h.addr, "--plaintext", "--no-auth", "get", "devices", "-l", "reason=DeployFailed"})
	if code != ctl.ExitUsage || !strings.Contains(errb.String(), "reason, class and hw. terms select only") {
		t.Errorf("get devices -l reason=…: exit %d, %q, want a usage error", code, errb.String())
	}

	// Another rack's fault is quarantined: only rack r12 is held.
	s.Fault([]string{s.IDs[35]}, "DeployFailed", time.Now())
	waitFor(t, "the r7 decision", func() bool { return pgtest.Count(t, h.url, `SELECT count(*) FROM policy_decisions`) == 31 })
	if n := pgtest.Count(t, h.url, `SELECT count(*) FROM policy_decisions WHERE action = 'QUARANTINE' AND device_id = $1`, s.IDs[35]); n != 1 {
		t.Errorf("the r7 fault: %d quarantines, want 1 (the r12 trip holds rack r12 only)", n)
	}
	s.Fault([]string{s.IDs[31]}, "DeployFailed", time.Now())
	waitFor(t, "the last r12 decision", func() bool { return pgtest.Count(t, h.url, `SELECT count(*) FROM policy_decisions`) == 32 })
	if n := pgtest.Count(t, h.url, `SELECT count(*) FROM policy_decisions WHERE action = 'PENDING' AND reason = 'HeldByGuard' AND device_id = $1`, s.IDs[31]); n != 1 {
		t.Errorf("one more r12 fault: %d held, want 1", n)
	}

	// The operator rejects what the guard held: r12 stays tripped while
	// its window holds 2 quarantines.
	pend, err = h.policy.ListPendingActions(ctx, &ironlinkv1.ListPendingActionsRequest{Site: "site-r", PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, p := range pend.GetActions() {
		ids = append(ids, p.GetId())
	}
	if _, err := h.policy.RejectPendingActions(ctx, &ironlinkv1.RejectPendingActionsRequest{Ids: ids, Reason: "rack r12 switch s3 is being replaced"}); err != nil {
		t.Fatal(err)
	}
	states, err = h.policy.ListSitePolicyStates(ctx, &ironlinkv1.ListSitePolicyStatesRequest{Site: "site-r"})
	if err != nil {
		t.Fatal(err)
	}
	if doms := states.GetStates()[0].GetTrippedDomains(); len(doms) != 1 || doms[0].GetPendingHeldCount() != 0 {
		t.Errorf("after the rejections: tripped domains %v, want rack=r12 still tripped, nothing held", doms)
	}
}
