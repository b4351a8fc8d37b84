package policyreplay_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/policyapi"
	"github.com/ironlink/ironlink/hub/policyreplay"
	"github.com/ironlink/ironlink/hub/policyrun"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// liveSource is a policyapi.Source of one file.
type liveSource struct{ f *policy.File }

func (l liveSource) Policy() *policy.File { return l.f }
func (l liveSource) LastError() error     { return nil }

const live = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 3, maxPercent: 100, window: 1h}
    rules:
      - name: deploy-failed
        to: [FAULTED]
        reasons: [DeployFailed]
      - name: bmc
        to: [FAULTED]
        reasons: [BMCUnreachable]
        dryRun: true
`

// TestReplayReproducesTheRecordedRun drives a recorded scenario with the
// real evaluator on PostgreSQL (faults arrive over several passes, the
// policy quarantines, a dry-run rule only logs, a fault no rule matches is
// skipped, the guard trips and holds the rest), then replays the live
// policy over that period: zero differences from the decisions table, and
// the database unchanged by the replay. A candidate policy with a tighter
// guard reports more pending approvals.
func TestReplayReproducesTheRecordedRun(t *testing.T) {
	ctx := context.Background()
	st, url := storetest.New(t, nil)
	clk := &clock{t: time.Now().Add(time.Second)}
	site := storetest.NewSite(t, st, "site-a", 8, clk.Now)
	f, err := policy.Parse([]byte(live))
	if err != nil {
		t.Fatal(err)
	}
	ev := policyrun.New(st, policyrun.Config{Policy: func() *policy.File { return f }, Now: clk.Now, Replica: "r1"}, testlog.New(t))
	tick := func() {
		t.Helper()
		site.Polled()
		if _, err := ev.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	from := clk.Now().Add(-time.Second)
	ids := site.IDs
	site.Fault(ids[0:2], "DeployFailed", clk.Now())
	tick()
	clk.Add(time.Minute)
	site.Fault(ids[2:3], "BMCUnreachable", clk.Now())
	site.Fault(ids[3:4], "SomethingElse", clk.Now())
	tick()
	clk.Add(time.Minute)
	site.Fault(ids[4:7], "DeployFailed", clk.Now()) // one more quarantine, then the guard trips and holds the rest
	tick()
	clk.Add(time.Minute)
	tick()
	to := time.Now().Add(time.Hour)

	recorded, err := policyreplay.Recorded(ctx, st.Pool(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(recorded) != 7 {
		t.Fatalf("%d decisions recorded, want 7: %+v", len(recorded), recorded)
	}
	before := pgtest.Checksums(t, url)
	rep, err := policyreplay.Replay(ctx, st.Pool(), f, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if changed := pgtest.ChangedTables(before, pgtest.Checksums(t, url)); len(changed) > 0 {
		t.Fatalf("the replay changed tables %v", changed)
	}
	if diffs := policyreplay.Diff(recorded, rep.Decisions); len(diffs) != 0 {
		for _, d := range diffs {
			t.Errorf("trigger %d of %s: recorded %+v, replayed %+v", d.TriggerID, d.DeviceID, d.Recorded, d.Replayed)
		}
		t.Fatalf("%d differences, want 0", len(diffs))
	}
	var q, pend, trips int
	for _, d := range rep.Days {
		q, pend, trips = q+d.Quarantines, pend+d.Pending, trips+d.GuardTrips
	}
	t.Logf("recorded run: %d decisions; replay: %d quarantines, %d pending, %d guard trips, days %+v", len(recorded), q, pend, trips, rep.Days)
	if trips != 1 || pend == 0 {
		t.Errorf("replay: %d guard trips, %d pending; want the recorded trip and its held quarantines", trips, pend)
	}

	// The RPC answers the same, and a bad period or policy is refused.
	api := policyapi.NewServer(st, liveSource{f}, nil, testlog.New(t))
	api.SetReplayDB(st.Pool())
	resp, err := api.ReplayPolicy(ctx, &ironlinkv1.ReplayPolicyRequest{FromTime: timestamppb.New(from), ToTime: timestamppb.New(to)})
	if err != nil || resp.GetDifferences() != 0 || len(resp.GetDecisions()) != 7 || len(resp.GetDays()) != 1 || resp.GetDays()[0].GetGuardTrips() != 1 {
		t.Fatalf("ReplayPolicy = %v, %v; want 7 decisions, 0 differences, 1 guard trip", resp, err)
	}
	for _, bad := range []*ironlinkv1.ReplayPolicyRequest{
		{FromTime: timestamppb.New(to), ToTime: timestamppb.New(from)},
		{FromTime: timestamppb.New(from), ToTime: timestamppb.New(to), PolicyYaml: "policy: {default: {guard: {maxDevices: -1}}}"},
	} {
		if _, err := api.ReplayPolicy(ctx, bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("ReplayPolicy(%v) = %v, want InvalidArgument", bad, err)
		}
	}

	tight, err := policy.Parse([]byte(`
policy:
  default:
    enabled: true
    guard: {maxDevices: 1, maxPercent: 100, window: 1h}
    rules:
      - name: deploy-failed
        to: [FAULTED]
        reasons: [DeployFailed]
`))
	if err != nil {
		t.Fatal(err)
	}
	cand, err := policyreplay.Replay(ctx, st.Pool(), tight, from, to)
	if err != nil {
		t.Fatal(err)
	}
	var cq, cp int
	for _, d := range cand.Days {
		cq, cp = cq+d.Quarantines, cp+d.Pending
	}
	if cq != 1 || cp != 4 {
		t.Errorf("candidate with maxDevices 1: %d quarantines, %d pending; want 1 and 4", cq, cp)
	}
}
