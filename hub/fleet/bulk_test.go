package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/fleet"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
	"github.com/ironlink/ironlink/test/grpctest"
)

// bulkFleet is a fleet of five devices on two sites:
//
//	site-a a-gpu-01 gpu-h100 FAULTED     (ProvisioningHealthy False DeployFailed)
//	site-a a-gpu-02 gpu-h100 MAINTENANCE (MaintenanceClear False PowerFailure)
//	site-a a-gpu-03 gpu-h100 FAULTED     (ProvisioningHealthy False CleanFailed)
//	site-a a-cpu-01 cpu      FAULTED     (ProvisioningHealthy False DeployFailed)
//	site-b b-gpu-01 gpu-h100 FAULTED     (ProvisioningHealthy False DeployFailed)
func bulkFleet(t *testing.T) (*store.Store, string) {
	t.Helper()
	ctx := context.Background()
	st, url := storetest.New(t, nil)
	now := time.Now().UTC()
	c := func(typ condition.Type, s condition.Status, reason string) condition.Condition {
		return condition.Condition{Type: typ, Status: s, Reason: reason, ObservedTime: now, LastTransitionTime: now}
	}
	dev := func(name, class string, conds ...condition.Condition) store.DeviceUpdate {
		return store.DeviceUpdate{DeviceID: uuid.NewString(), ObservedTime: now, Facts: &store.Facts{Name: name, ResourceClass: class},
			Conditions: append([]condition.Condition{c(condition.Enrolled, condition.True, "Enrolled")}, conds...)}
	}
	for site, devs := range map[string][]store.DeviceUpdate{
		"site-a": {
			dev("a-gpu-01", "gpu-h100", c(condition.ProvisioningHealthy, condition.False, "DeployFailed")),
			dev("a-gpu-02", "gpu-h100", c(condition.ProvisioningHealthy, condition.True, "Available"), c(condition.MaintenanceClear, condition.False, "PowerFailure")),
			dev("a-gpu-03", "gpu-h100", c(condition.ProvisioningHealthy, condition.False, "CleanFailed")),
			dev("a-cpu-01", "cpu", c(condition.ProvisioningHealthy, condition.False, "DeployFailed")),
		},
		"site-b": {dev("b-gpu-01", "gpu-h100", c(condition.ProvisioningHealthy, condition.False, "DeployFailed"))},
	} {
		sess, err := st.OpenLink(ctx, store.LinkHello{Site: site, Replica: "r"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.ApplyBatch(ctx, site, sess.Epoch, store.Batch{Sequence: 1, Devices: devs}); err != nil {
			t.Fatal(err)
		}
	}
	return st, url
}

func sel(site string, statuses []ironlinkv1.OperationalStatus, reasons []string, class, name string) *ironlinkv1.DeviceSelector {
	return &ironlinkv1.DeviceSelector{Site: site, Statuses: statuses, ConditionReasons: reasons, ResourceClass: class, NamePattern: name}
}

var faulted = []ironlinkv1.OperationalStatus{ironlinkv1.OperationalStatus_OPERATIONAL_STATUS_FAULTED}

// bulkRows counts what a bulk call writes.
func bulkRows(t *testing.T, url string) int {
	t.Helper()
	return pgtest.Count(t, url, `SELECT (SELECT count(*) FROM commands) + (SELECT count(*) FROM impairment_history)
		+ (SELECT count(*) FROM bulk_requests) + (SELECT count(*) FROM status_history)`)
}

// Bulk quarantine and release by selector over gRPC with authentication
// (test/grpctest): the preview counts and lists without writing; a call
// whose expected_count differs is FailedPrecondition and writes nothing;
// the right count creates one command per device under one request id,
// which ListCommands lists, with who/why/source in each device's history;
// a read-only operator may preview but not act.
func TestBulkImpairmentBySelector(t *testing.T) {
	st, url := bulkFleet(t)
	h := grpctest.Start(t, st, grpctest.Options{})
	ctx := context.Background()
	bulk := ironlinkv1.NewBulkServiceClient(h.Operator(t, "ops"))
	fl := ironlinkv1.NewFleetServiceClient(h.Operator(t, "ops"))

	for _, tc := range []struct {
		name  string
		sel   *ironlinkv1.DeviceSelector
		names []string
	}{
		{"site and status", sel("site-a", faulted, nil, "", ""), []string{"a-cpu-01", "a-gpu-01", "a-gpu-03"}},
		{"and resource class", sel("site-a", faulted, nil, "gpu-h100", ""), []string{"a-gpu-01", "a-gpu-03"}},
		{"condition reason", sel("", nil, []string{"PowerFailure"}, "", ""), []string{"a-gpu-02"}},
		{"reason across sites", sel("", nil, []string{"DeployFailed"}, "", ""), []string{"a-cpu-01", "a-gpu-01", "b-gpu-01"}},
		{"name pattern", sel("", nil, nil, "", "a-gpu-*"), []string{"a-gpu-01", "a-gpu-02", "a-gpu-03"}},
		{"nothing", sel("site-a", nil, nil, "", "zz-*"), nil},
	} {
		before := bulkRows(t, url)
		p, err := bulk.PreviewBulkImpairment(ctx, &ironlinkv1.PreviewBulkImpairmentRequest{Selector: tc.sel})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, d := range p.GetDevices() {
			got = append(got, d.GetName())
		}
		if int(p.GetCount()) != len(tc.names) || len(got) != len(tc.names) {
			t.Fatalf("%s: preview count %d devices %v, want %v", tc.name, p.GetCount(), got, tc.names)
		}
		for i := range got {
			if got[i] != tc.names[i] {
				t.Fatalf("%s: preview %v, want %v", tc.name, got, tc.names)
			}
		}
		if after := bulkRows(t, url); after != before {
			t.Fatalf("%s: the preview wrote %d rows", tc.name, after-before)
		}
	}
	if _, err := bulk.PreviewBulkImpairment(ctx, &ironlinkv1.PreviewBulkImpairmentRequest{Selector: &ironlinkv1.DeviceSelector{}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty selector: %v, want InvalidArgument", err)
	}
	// A misspelt site is NotFound, not an empty match.
	if _, err := bulk.PreviewBulkImpairment(ctx, &ironlinkv1.PreviewBulkImpairmentRequest{Selector: sel("site-aa", nil, nil, "", "")}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown site: %v, want NotFound", err)
	}
	if _, err := bulk.BulkQuarantine(ctx, &ironlinkv1.BulkQuarantineRequest{Selector: sel("site-aa", nil, nil, "", ""), Reason: "x", ExpectedCount: 1}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown site, act: %v, want NotFound", err)
	}

	// A count that differs (a typo, or the fleet moved) writes nothing.
	before := bulkRows(t, url)
	_, err := bulk.BulkQuarantine(ctx, &ironlinkv1.BulkQuarantineRequest{Selector: sel("site-a", faulted, nil, "", ""), Reason: "rack r4 PDU", ExpectedCount: 2})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("count mismatch: %v, want FailedPrecondition", err)
	}
	var matched string
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetReason() == fleet.ReasonCountMismatch {
			matched = ei.GetMetadata()["matched"]
		}
	}
	if matched != "3" {
		t.Fatalf("count mismatch: ErrorInfo matched %q, want 3 (%v)", matched, err)
	}
	if after := bulkRows(t, url); after != before {
		t.Fatalf("refused bulk call wrote %d rows", after-before)
	}
	if _, err := bulk.BulkQuarantine(ctx, &ironlinkv1.BulkQuarantineRequest{Selector: sel("site-a", faulted, nil, "", ""), Reason: "x"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("no expected_count: %v, want InvalidArgument", err)
	}

	// The right count: one command per device under one request id.
	q, err := bulk.BulkQuarantine(ctx, &ironlinkv1.BulkQuarantineRequest{Selector: sel("site-a", faulted, nil, "", ""), Reason: "rack r4 PDU", ExpectedCount: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := uuid.Parse(q.GetRequestId()); err != nil || len(q.GetCommands()) != 3 {
		t.Fatalf("bulk quarantine: request %q, %d commands", q.GetRequestId(), len(q.GetCommands()))
	}
	want := map[string]bool{}
	for _, c := range q.GetCommands() {
		want[c.GetCommandId()] = true
		if c.GetDesired() != ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED || c.GetState() != ironlinkv1.CommandState_COMMAND_STATE_PENDING || c.GetSite() != "site-a" {
			t.Fatalf("command %v", c)
		}
	}
	// Another command outside the request must not be listed with it.
	if _, err := fl.QuarantineDevice(ctx, &ironlinkv1.QuarantineDeviceRequest{DeviceName: "b-gpu-01", Reason: "single"}); err != nil {
		t.Fatal(err)
	}
	lc, err := fl.ListCommands(ctx, &ironlinkv1.ListCommandsRequest{RequestId: q.GetRequestId()})
	if err != nil {
		t.Fatal(err)
	}
	if len(lc.GetCommands()) != 3 {
		t.Fatalf("ListCommands(request_id) %d commands, want 3", len(lc.GetCommands()))
	}
	for _, c := range lc.GetCommands() {
		if !want[c.GetCommandId()] {
			t.Fatalf("ListCommands(request_id) listed %s, not of the request", c.GetCommandId())
		}
	}
	gd, err := fl.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceName: "a-cpu-01"})
	if err != nil {
		t.Fatal(err)
	}
	ih := gd.GetImpairmentHistory()
	if len(ih) != 1 || ih[0].GetActor() != "ops" || ih[0].GetReason() != "rack r4 PDU" || ih[0].GetSource() != fleet.SourceBulk || !want[ih[0].GetCommandId()] {
		t.Fatalf("impairment history %v", ih)
	}
	if n := pgtest.Count(t, url, `SELECT count(*) FROM bulk_requests WHERE id = '`+q.GetRequestId()+`' AND selector = 'site=site-a,status=FAULTED' AND device_count = 3 AND desired = 'QUARANTINED'`); n != 1 {
		t.Fatalf("bulk request record: %d rows", n)
	}

	// Release by reason: the same path, its own request id.
	r, err := bulk.BulkRelease(ctx, &ironlinkv1.BulkReleaseRequest{Selector: sel("site-a", nil, []string{"DeployFailed"}, "", ""), Reason: "PDU back", ExpectedCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	// These FAULTED devices were not offered (CustomerReady not True) when
	// quarantined: the release leaves them not offered, and says so.
	if r.GetRequestId() == q.GetRequestId() || len(r.GetCommands()) != 2 || r.GetCommands()[0].GetDesired() != ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED_UNOFFERED ||
		len(r.GetCounts()) != 1 || r.GetCounts()[0].GetOutcome() != ironlinkv1.ReleaseOutcome_RELEASE_OUTCOME_RESTORED_NOT_OFFERED || r.GetCounts()[0].GetCount() != 2 {
		t.Fatalf("bulk release %v", r)
	}

	// operations:read may preview, not act.
	ro := ironlinkv1.NewBulkServiceClient(h.Operator(t, "viewer", auth.ScopeOperationsRead))
	if _, err := ro.PreviewBulkImpairment(ctx, &ironlinkv1.PreviewBulkImpairmentRequest{Selector: sel("site-b", nil, nil, "", "")}); err != nil {
		t.Fatalf("read-only preview: %v", err)
	}
	before = bulkRows(t, url)
	if _, err := ro.BulkQuarantine(ctx, &ironlinkv1.BulkQuarantineRequest{Selector: sel("site-b", nil, nil, "", ""), Reason: "x", ExpectedCount: 1}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("read-only bulk quarantine: %v, want PermissionDenied", err)
	}
	if after := bulkRows(t, url); after != before {
		t.Fatalf("refused bulk call wrote %d rows", after-before)
	}
}

// An operator bound to site-a matches only site-a's devices: a selector
// across sites counts only those (so an expected count that includes
// another site's devices is refused), and naming site-b is
// PermissionDenied; neither writes anything.
func TestBulkImpairmentSiteBound(t *testing.T) {
	st, url := bulkFleet(t)
	srv := fleet.NewServer(st, func(context.Context) string { return "ops-a" }, testlog.New(t)).Bulk()
	ctx := authn.NewContext(context.Background(), auth.Identity{ClientID: "ops-a", Sites: []string{"site-a"},
		Scopes: []string{auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	deploy := sel("", nil, []string{"DeployFailed"}, "", "")
	p, err := srv.PreviewBulkImpairment(ctx, &ironlinkv1.PreviewBulkImpairmentRequest{Selector: deploy})
	if err != nil || p.GetCount() != 2 {
		t.Fatalf("bound preview: %v %v, want 2 (site-a only)", p, err)
	}
	for _, d := range p.GetDevices() {
		if d.GetSite() != "site-a" {
			t.Fatalf("bound preview listed %v", d)
		}
	}
	before := bulkRows(t, url)
	if _, err := srv.BulkQuarantine(ctx, &ironlinkv1.BulkQuarantineRequest{Selector: deploy, Reason: "x", ExpectedCount: 3}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("count including site-b: %v, want FailedPrecondition", err)
	}
	if _, err := srv.PreviewBulkImpairment(ctx, &ironlinkv1.PreviewBulkImpairmentRequest{Selector: sel("site-b", nil, nil, "", "")}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("naming site-b: %v, want PermissionDenied", err)
	}
	if _, err := srv.BulkQuarantine(ctx, &ironlinkv1.BulkQuarantineRequest{Selector: sel("site-b", nil, nil, "", ""), Reason: "x", ExpectedCount: 1}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("quarantining site-b: %v, want PermissionDenied", err)
	}
	if after := bulkRows(t, url); after != before {
		t.Fatalf("refused calls wrote %d rows", after-before)
	}
	q, err := srv.BulkQuarantine(ctx, &ironlinkv1.BulkQuarantineRequest{Selector: deploy, Reason: "x", ExpectedCount: 2})
	if err != nil || len(q.GetCommands()) != 2 {
		t.Fatalf("bound bulk quarantine: %v %v", q, err)
	}
	for _, c := range q.GetCommands() {
		if c.GetSite() != "site-a" {
			t.Fatalf("bound bulk quarantine touched %v", c)
		}
	}
}
