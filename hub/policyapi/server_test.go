package policyapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/policy"
	"github.com/ironlink/ironlink/hub/policyapi"
	"github.com/ironlink/ironlink/hub/policyrun"
	hubstatus "github.com/ironlink/ironlink/hub/status"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/hub/web/webtest"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
)

const testPolicy = `
policy:
  default:
    enabled: true
    guard: {maxDevices: 1, maxPercent: 50, window: 1h}
    rules: [{name: faulted, to: [FAULTED]}]
  sites:
    site-b: {dryRun: true}
`

// source is a policy.Source whose file and reload error the test sets.
type source struct {
	f   *policy.File
	err error
}

func (s *source) Policy() *policy.File { return s.f }
func (s *source) LastError() error     { return s.err }

// fixture is a policy API over a store where site-a (6 devices) had three
// devices fault under a guard of one: one quarantine, two actions pending
// (HeldByGuard); site-b has 2 healthy devices.
type fixture struct {
	srv     *policyapi.Server
	src     *source
	st      *store.Store
	a, b    []string // device ids of site-a and site-b
	pending []int64  // ids of the pending actions, in order
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	st, _ := storetest.New(t, nil)
	f, err := policy.Parse([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{st: st, src: &source{f: f}}
	avail := func(n int) []webtest.Device {
		var out []webtest.Device
		for range n {
			out = append(out, webtest.Device{Name: "n-" + uuid.NewString()[:8], Status: hubstatus.Available})
		}
		return out
	}
	start := time.Now().Add(-time.Minute)
	if fx.a, err = webtest.SeedSiteAt(ctx, st, "site-a", start, avail(6)); err != nil {
		t.Fatal(err)
	}
	if fx.b, err = webtest.SeedSiteAt(ctx, st, "site-b", start, avail(2)); err != nil {
		t.Fatal(err)
	}
	faults := map[string]hubstatus.Status{}
	for _, id := range fx.a[:3] {
		faults[id] = hubstatus.Faulted
	}
	if err := webtest.Report(ctx, st, "site-a", time.Now(), faults); err != nil {
		t.Fatal(err)
	}
	// The site's link is up and its satellite reported a fresh poll: the
	// policy acts only on fresh evidence (docs/reference/policy.md).
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-a", BootID: webtest.BootID, Replica: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := st.ReplaceSiteConditions(ctx, "site-a", sess.Epoch, []condition.Condition{{Type: condition.InventoryPolled,
		Status: condition.True, Reason: condition.ReasonPollSucceeded, LastTransitionTime: now, ObservedTime: now}}); err != nil {
		t.Fatal(err)
	}
	ev := policyrun.New(st, policyrun.Config{Policy: fx.src.Policy, Replica: "r1"}, testlog.New(t))
	if stats, err := ev.Tick(ctx); err != nil || stats.Quarantined != 1 || stats.Pending != 2 {
		t.Fatalf("policy pass: %+v %v; want 1 quarantined, 2 pending", stats, err)
	}
	fx.srv = policyapi.NewServer(st, fx.src, func(context.Context) string { return "alice" }, testlog.New(t))
	resp, err := fx.srv.ListPendingActions(ctx, &ironlinkv1.ListPendingActionsRequest{Site: "site-a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.GetActions() {
		fx.pending = append(fx.pending, p.GetId())
	}
	if len(fx.pending) != 2 {
		t.Fatalf("%d pending actions, want 2", len(fx.pending))
	}
	return fx
}

// boundTo is the context of an operator whom the roster binds to sites.
func boundTo(sites ...string) context.Context {
	return authn.NewContext(context.Background(), auth.Identity{ClientID: "ops-bound", Sites: sites})
}

// wantErr fails t unless err is a status of code whose ErrorInfo reason is
// reason ("" for any) and whose bad-request fields include field ("" for any).
func wantErr(t *testing.T, what string, err error, code codes.Code, reason, field string) {
	t.Helper()
	switch {
	case status.Code(err) != code:
		t.Errorf("%s: %v, want %v", what, err, code)
	case reason != "" && grpcerr.Reason(err) != reason:
		t.Errorf("%s: reason %q, want %q (%v)", what, grpcerr.Reason(err), reason, err)
	case field != "" && !strings.Contains(strings.Join(grpcerr.Fields(err), ","), field):
		t.Errorf("%s: fields %v, want %s (%v)", what, grpcerr.Fields(err), field, err)
	}
}

// A refused request is answered with the code, reason and field an
// operator's client acts on, and changes nothing.
func TestRefusedRequests(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	past, later := timestamppb.New(time.Now().Add(-time.Hour)), timestamppb.New(time.Now().Add(time.Hour))
	excl, maint := ironlinkv1.DeviceHoldKind_DEVICE_HOLD_KIND_EXCLUSION, ironlinkv1.DeviceHoldKind_DEVICE_HOLD_KIND_PLANNED_MAINTENANCE
	for _, tc := range []struct {
		name          string
		ctx           context.Context
		call          func(context.Context) error
		code          codes.Code
		reason, field string
	}{
		{"effective policy without a site", ctx, func(ctx context.Context) error {
			_, err := fx.srv.GetEffectivePolicy(ctx, &ironlinkv1.GetEffectivePolicyRequest{})
			return err
		}, codes.InvalidArgument, grpcerr.ReasonRequired, "site"},
		{"effective policy of a malformed site", ctx, func(ctx context.Context) error {
			_, err := fx.srv.GetEffectivePolicy(ctx, &ironlinkv1.GetEffectivePolicyRequest{Site: "Site_A"})
			return err
		}, codes.InvalidArgument, grpcerr.ReasonInvalidValue, "site"},
		{"effective policy of another site", boundTo("site-b"), func(ctx context.Context) error {
			_, err := fx.srv.GetEffectivePolicy(ctx, &ironlinkv1.GetEffectivePolicyRequest{Site: "site-a"})
			return err
		}, codes.PermissionDenied, grpcerr.ReasonWrongSite, ""},
		{"decisions of an unknown site", ctx, func(ctx context.Context) error {
			_, err := fx.srv.ListPolicyDecisions(ctx, &ironlinkv1.ListPolicyDecisionsRequest{Site: "site-z"})
			return err
		}, codes.NotFound, "", ""},
		{"decisions of a device that is not a UUID", ctx, func(ctx context.Context) error {
			_, err := fx.srv.ListPolicyDecisions(ctx, &ironlinkv1.ListPolicyDecisionsRequest{DeviceId: "node-1"})
			return err
		}, codes.InvalidArgument, grpcerr.ReasonNotUUID, "device_id"},
		{"decisions filtered by an unknown action", ctx, func(ctx context.Context) error {
			_, err := fx.srv.ListPolicyDecisions(ctx, &ironlinkv1.ListPolicyDecisionsRequest{Actions: []ironlinkv1.PolicyAction{1, 99}})
			return err
		}, codes.InvalidArgument, grpcerr.ReasonInvalidValue, "actions[1]"},
		{"decisions with a forged page token", ctx, func(ctx context.Context) error {
			_, err := fx.srv.ListPolicyDecisions(ctx, &ironlinkv1.ListPolicyDecisionsRequest{PageToken: "not-a-token"})
			return err
		}, codes.InvalidArgument, "", "page_token"},
		{"pending actions of another site", boundTo("site-b"), func(ctx context.Context) error {
			_, err := fx.srv.ListPendingActions(ctx, &ironlinkv1.ListPendingActionsRequest{Site: "site-a"})
			return err
		}, codes.PermissionDenied, grpcerr.ReasonWrongSite, ""},
		{"approve nothing", ctx, func(ctx context.Context) error {
			_, err := fx.srv.ApprovePendingActions(ctx, &ironlinkv1.ApprovePendingActionsRequest{Reason: "ok"})
			return err
		}, codes.InvalidArgument, grpcerr.ReasonRequired, "ids"},
		{"approve an id twice", ctx, func(ctx context.Context) error {
			_, err := fx.srv.ApprovePendingActions(ctx, &ironlinkv1.ApprovePendingActionsRequest{Ids: []int64{fx.pending[0], fx.pending[0]}, Reason: "ok"})
			return err
		}, codes.InvalidArgument, grpcerr.ReasonInvalidValue, "ids[1]"},
		{"approve id 0", ctx, func(ctx context.Context) error {
			_, err := fx.srv.ApprovePendingActions(ctx, &ironlinkv1.ApprovePendingActionsRequest{Ids: []int64{0}, Reason: "ok"})
			return err
		}, codes.InvalidArgument, grpcerr.ReasonInvalidValue, "ids[0]"},
		{"approve without a reason", ctx, func(ctx context.Context) error {
			_, err := fx.srv.ApprovePendingActions(ctx, &ironlinkv1.ApprovePendingActionsRequest{Ids: fx.pending[:1], Reason: "  "})
			return err
		}, codes.InvalidArgument, grpcerr.ReasonRequired, "reason"},
		{"approve an unknown action", ctx, func(ctx context.Context) error {
			_, err := fx.srv.ApprovePendingActions(ctx, &ironlinkv1.ApprovePendingActionsRequest{Ids: []int64{fx.pending[0], 1 << 40}, Reason: "ok"})
			return err
		}, codes.NotFound, "", ""},
		{"reject another site's action", boundTo("site-b"), func(ctx context.Context) error {
			_, err := fx.srv.RejectPendingActions(ctx, &ironlinkv1.RejectPendingActionsRequest{Ids: fx.pending[:1], Reason: "no"})
			return err
		}, codes.PermissionDenied, grpcerr.ReasonWrongSite, ""},
		{"state of an unknown site", ctx, func(ctx context.Context) error {
			_, err := fx.srv.ListSitePolicyStates(ctx, &ironlinkv1.ListSitePolicyStatesRequest{Site: "site-z"})
			return err
		}, codes.NotFound, "", ""},
		{"hold without a device", ctx, func(ctx context.Context) error {
			_, err := fx.srv.SetDeviceHold(ctx, &ironlinkv1.SetDeviceHoldRequest{Kind: excl, Reason: "burn-in"})
			return err
		}, codes.InvalidArgument, grpcerr.ReasonRequired, "device_id"},
		{"hold without a kind", ctx, func(ctx context.Context) error {
			_, err := fx.srv.SetDeviceHold(ctx, &ironlinkv1.SetDeviceHoldRequest{DeviceId: fx.a[5], Reason: "burn-in"})
			return err
		}, codes.InvalidArgument, grpcerr.ReasonRequired, "kind"},
		{"planned maintenance without an end", ctx, func(ctx context.Context) error {
			_, err := fx.srv.SetDeviceHold(ctx, &ironlinkv1.SetDeviceHoldRequest{DeviceId: fx.a[5], Kind: maint, Reason: "firmware"})
			return err
		}, codes.InvalidArgument, grpcerr.ReasonRequired, "end_time"},
		{"hold ending before it starts", ctx, func(ctx context.Context) error {
			_, err := fx.srv.SetDeviceHold(ctx, &ironlinkv1.SetDeviceHoldRequest{DeviceId: fx.a[5], Kind: maint, Reason: "firmware", StartTime: later, EndTime: past})
			return err
		}, codes.InvalidArgument, grpcerr.ReasonInvalidValue, "end_time"},
		{"hold on an unknown device", ctx, func(ctx context.Context) error {
			_, err := fx.srv.SetDeviceHold(ctx, &ironlinkv1.SetDeviceHoldRequest{DeviceId: uuid.NewString(), Kind: excl, Reason: "burn-in"})
			return err
		}, codes.NotFound, "", ""},
		{"hold on another site's device", boundTo("site-b"), func(ctx context.Context) error {
			_, err := fx.srv.SetDeviceHold(ctx, &ironlinkv1.SetDeviceHoldRequest{DeviceId: fx.a[5], Kind: excl, Reason: "burn-in"})
			return err
		}, codes.PermissionDenied, grpcerr.ReasonWrongSite, ""},
		{"clear a hold that is not there", ctx, func(ctx context.Context) error {
			_, err := fx.srv.ClearDeviceHold(ctx, &ironlinkv1.ClearDeviceHoldRequest{DeviceId: fx.a[5], Kind: excl})
			return err
		}, codes.NotFound, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) { wantErr(t, tc.name, tc.call(tc.ctx), tc.code, tc.reason, tc.field) })
	}
	// Nothing changed: both actions are still pending, no hold was set.
	resp, err := fx.srv.ListPendingActions(ctx, &ironlinkv1.ListPendingActionsRequest{Site: "site-a",
		States: []ironlinkv1.PendingActionState{ironlinkv1.PendingActionState_PENDING_ACTION_STATE_PENDING}})
	if err != nil || len(resp.GetActions()) != 2 {
		t.Fatalf("pending after the refusals: %v %v, want both", resp.GetActions(), err)
	}
	if hs, err := fx.st.DeviceHolds(ctx, fx.a); err != nil || len(hs) != 0 {
		t.Fatalf("holds after the refusals: %v %v, want none", hs, err)
	}
}

// The effective policy is the site's (its override applied), with the
// reason the newest file was refused when it was.
func TestEffectivePolicy(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	r, err := fx.srv.GetEffectivePolicy(ctx, &ironlinkv1.GetEffectivePolicyRequest{Site: "site-b"})
	if err != nil {
		t.Fatal(err)
	}
	if p := r.GetPolicy(); p.GetSite() != "site-b" || !p.GetEnabled() || !p.GetDryRun() || !p.GetOverridden() ||
		p.GetGuard().GetMaxDevices() != 1 || p.GetGuard().GetWindow().AsDuration() != time.Hour || len(p.GetRules()) != 1 || r.GetReloadError() != "" {
		t.Fatalf("site-b's policy: %v (reload error %q)", p, r.GetReloadError())
	}
	fx.src.err = errors.New("policy.yaml: line 3: unknown field")
	r, err = fx.srv.GetEffectivePolicy(boundTo("site-a"), &ironlinkv1.GetEffectivePolicyRequest{Site: "site-a"})
	if err != nil || r.GetPolicy().GetDryRun() || r.GetPolicy().GetOverridden() || !strings.Contains(r.GetReloadError(), "unknown field") {
		t.Fatalf("site-a's policy %v, reload error %q, %v", r.GetPolicy(), r.GetReloadError(), err)
	}
}

// Decisions are listed newest first, filtered and paged; pending actions
// are approved (a command, by the caller) or rejected once; the site's
// guard state counts what is held.
func TestDecisionsPendingAndSiteState(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	all, err := fx.srv.ListPolicyDecisions(ctx, &ironlinkv1.ListPolicyDecisionsRequest{Site: "site-a"})
	if err != nil || len(all.GetDecisions()) != 3 {
		t.Fatalf("decisions: %v %v, want 3", all.GetDecisions(), err)
	}
	q, err := fx.srv.ListPolicyDecisions(ctx, &ironlinkv1.ListPolicyDecisionsRequest{Actions: []ironlinkv1.PolicyAction{ironlinkv1.PolicyAction_POLICY_ACTION_QUARANTINE}})
	if err != nil || len(q.GetDecisions()) != 1 || q.GetDecisions()[0].GetCommandId() == "" || q.GetDecisions()[0].GetRule() != "faulted" {
		t.Fatalf("quarantines: %v %v, want one with its command", q.GetDecisions(), err)
	}
	var paged []int64
	for tok := ""; ; {
		p, err := fx.srv.ListPolicyDecisions(ctx, &ironlinkv1.ListPolicyDecisionsRequest{Site: "site-a", PageSize: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range p.GetDecisions() {
			paged = append(paged, d.GetId())
		}
		if tok = p.GetNextPageToken(); tok == "" {
			break
		}
	}
	if len(paged) != 3 || paged[0] <= paged[1] || paged[1] <= paged[2] {
		t.Fatalf("paged decision ids %v, want 3 newest first", paged)
	}
	if r, err := fx.srv.ListPolicyDecisions(boundTo("site-b"), &ironlinkv1.ListPolicyDecisionsRequest{}); err != nil || len(r.GetDecisions()) != 0 {
		t.Fatalf("a site-b operator sees decisions %v %v, want none of site-a's", r.GetDecisions(), err)
	}

	st, err := fx.srv.ListSitePolicyStates(ctx, &ironlinkv1.ListSitePolicyStatesRequest{Site: "site-a"})
	if err != nil || len(st.GetStates()) != 1 {
		t.Fatalf("site-a state: %v %v", st.GetStates(), err)
	}
	if s := st.GetStates()[0]; !s.GetGuardTripped() || s.GetPendingHeldCount() != 2 || s.GetWindowCount() != 1 || s.GetSiteDeviceCount() != 6 {
		t.Fatalf("site-a state %v: want guard tripped, 2 held, 1 in the window, 6 devices", s)
	}
	if st, err := fx.srv.ListSitePolicyStates(boundTo("site-b"), &ironlinkv1.ListSitePolicyStatesRequest{}); err != nil ||
		len(st.GetStates()) != 1 || st.GetStates()[0].GetSite() != "site-b" || st.GetStates()[0].GetGuardTripped() {
		t.Fatalf("a site-b operator sees states %v %v, want only site-b's, not tripped", st.GetStates(), err)
	}

	ok, err := fx.srv.ApprovePendingActions(ctx, &ironlinkv1.ApprovePendingActionsRequest{Ids: fx.pending[:1], Reason: " confirmed broken "})
	if err != nil || len(ok.GetActions()) != 1 {
		t.Fatalf("approve: %v %v", ok, err)
	}
	if a := ok.GetActions()[0]; a.GetState() != ironlinkv1.PendingActionState_PENDING_ACTION_STATE_APPROVED || a.GetCommandId() == "" ||
		a.GetResolvedBy() != "alice" || a.GetResolutionReason() != "confirmed broken" {
		t.Fatalf("approved %v: want APPROVED with a command, by alice, the reason trimmed", a)
	}
	_, err = fx.srv.RejectPendingActions(ctx, &ironlinkv1.RejectPendingActionsRequest{Ids: fx.pending, Reason: "not now"})
	wantErr(t, "rejecting an approved action with a pending one", err, codes.FailedPrecondition, policyapi.ReasonNotPending, "")
	no, err := fx.srv.RejectPendingActions(ctx, &ironlinkv1.RejectPendingActionsRequest{Ids: fx.pending[1:], Reason: "not now"})
	if err != nil || len(no.GetActions()) != 1 || no.GetActions()[0].GetState() != ironlinkv1.PendingActionState_PENDING_ACTION_STATE_REJECTED ||
		no.GetActions()[0].GetCommandId() != "" {
		t.Fatalf("reject: %v %v, want REJECTED without a command", no, err)
	}
}

// A hold is set (by the caller, from now when no start is given), shown
// and cleared once.
func TestDeviceHolds(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	end := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	maint := ironlinkv1.DeviceHoldKind_DEVICE_HOLD_KIND_PLANNED_MAINTENANCE
	r, err := fx.srv.SetDeviceHold(boundTo("site-a"), &ironlinkv1.SetDeviceHoldRequest{DeviceId: strings.ToUpper(fx.a[5]), Kind: maint,
		Reason: "firmware", EndTime: timestamppb.New(end)})
	if err != nil {
		t.Fatal(err)
	}
	if h := r.GetHold(); h.GetDeviceId() != fx.a[5] || h.GetKind() != maint || h.GetAuthor() != "alice" || h.GetReason() != "firmware" ||
		!h.GetEndTime().AsTime().Equal(end) || time.Since(h.GetStartTime().AsTime()) > time.Minute {
		t.Fatalf("hold %v", h)
	}
	if hs, err := fx.st.DeviceHolds(ctx, fx.a[5:]); err != nil || len(hs[fx.a[5]]) != 1 {
		t.Fatalf("holds in the store: %v %v", hs, err)
	}
	if _, err := fx.srv.ClearDeviceHold(ctx, &ironlinkv1.ClearDeviceHoldRequest{DeviceId: fx.a[5], Kind: maint}); err != nil {
		t.Fatal(err)
	}
	_, err = fx.srv.ClearDeviceHold(ctx, &ironlinkv1.ClearDeviceHoldRequest{DeviceId: fx.a[5], Kind: maint})
	wantErr(t, "clearing it again", err, codes.NotFound, "", "")
}
