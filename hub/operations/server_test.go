package operations_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/authn"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
	"github.com/ironlink/ironlink/test/grpctest"
)

// fixture is a hub (test/grpctest) with sites and devices in its store.
type fixture struct {
	st  *store.Store
	url string
	hub *grpctest.Hub
	api ironlinkv1.OperationServiceClient
	// devs maps a device name to its id.
	devs map[string]string
}

// newFixture starts a hub and registers, by a link hello and a batch each:
// site-a (capability "operations") with devices a-manageable,
// a-available, a-active and a-quarantined (available, quarantined);
// site-b (operations) with b-manageable; site-old (no operations
// capability) with old-manageable.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	st, url := storetest.New(t, nil)
	f := &fixture{st: st, url: url, devs: map[string]string{}}
	now := time.Now().UTC()
	for _, site := range []struct {
		name string
		caps []string
		devs map[string]string // name → provision state
	}{
		{"site-a", []string{"nova", "operations"}, map[string]string{"a-manageable": "manageable", "a-available": "available", "a-active": "active", "a-quarantined": "available"}},
		{"site-b", []string{"operations"}, map[string]string{"b-manageable": "manageable"}},
		{"site-old", nil, map[string]string{"old-manageable": "manageable"}},
	} {
		sess, err := st.OpenLink(ctx, store.LinkHello{Site: site.name, BootID: "b", Replica: "r0", Capabilities: site.caps})
		if err != nil {
			t.Fatal(err)
		}
		var ups []store.DeviceUpdate
		for name, ps := range site.devs {
			id := uuid.NewString()
			f.devs[name] = id
			ups = append(ups, store.DeviceUpdate{DeviceID: id, ObservedTime: now, Facts: &store.Facts{Name: name, ProvisionState: ps},
				Conditions: []condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}}})
		}
		if _, err := st.ApplyBatch(ctx, site.name, sess.Epoch, store.Batch{Sequence: 1, Devices: ups}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.SetDesiredImpairment(ctx, f.devs["a-quarantined"], store.ImpairmentQuarantined, "ops", "bad DIMM", "operator-api"); err != nil {
		t.Fatal(err)
	}
	f.hub = grpctest.Start(t, st, grpctest.Options{})
	f.api = ironlinkv1.NewOperationServiceClient(f.hub.Operator(t, "ops-admin"))
	return f
}

func (f *fixture) checksums(t *testing.T) map[string]string {
	return pgtest.Checksums(t, f.url, "jti_replay")
}

func ipmiNode(name string) *ironlinkv1.NodeSpec {
	return &ironlinkv1.NodeSpec{Name: name, Driver: "ipmi", ResourceClass: "gpu-h100",
		DriverInfo: map[string]string{"ipmi_address": "10.0.0.5", "ipmi_username": "admin", "ipmi_password": "s3cret-Pa55"},
		Ports:      []*ironlinkv1.PortSpec{{Address: fmt.Sprintf("52:54:00:aa:bb:%02x", len(name)+int(name[len(name)-1])), PxeEnabled: true}}}
}

func TestStartOperationBadInputIsInvalidArgumentAndStoresNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	enrol := ironlinkv1.OperationKind_OPERATION_KIND_ENROL
	with := func(mod func(n *ironlinkv1.NodeSpec)) *ironlinkv1.StartOperationRequest {
		n := ipmiNode("n1")
		mod(n)
		return &ironlinkv1.StartOperationRequest{Kind: enrol, Site: "site-a", Nodes: []*ironlinkv1.NodeSpec{n}, Reason: "rack 1"}
	}
	dev := func(kind ironlinkv1.OperationKind, p *ironlinkv1.OperationParams) *ironlinkv1.StartOperationRequest {
		return &ironlinkv1.StartOperationRequest{Kind: kind, Devices: []string{"a-available"}, Params: p, Reason: "test"}
	}
	many := make([]string, operations.MaxTargets+1)
	for i := range many {
		many[i] = "a-available"
	}
	cases := []struct {
		name  string
		req   *ironlinkv1.StartOperationRequest
		field string
	}{
		{"unknown kind", &ironlinkv1.StartOperationRequest{Kind: 99, Devices: []string{"a-available"}, Reason: "x"}, "kind"},
		{"unspecified kind", &ironlinkv1.StartOperationRequest{Devices: []string{"a-available"}, Reason: "x"}, "kind"},
		{"empty reason", &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, Devices: []string{"a-manageable"}, Reason: "  "}, "reason"},
		{"malformed MAC", with(func(n *ironlinkv1.NodeSpec) { n.Ports[0].Address = "52:54:00:aa:bb" }), "nodes[0].ports[0].address"},
		{"missing BMC address", with(func(n *ironlinkv1.NodeSpec) { delete(n.DriverInfo, "ipmi_address") }), "nodes[0].driver_info"},
		{"redfish without address", with(func(n *ironlinkv1.NodeSpec) { n.Driver = "redfish" }), "nodes[0].driver_info"},
		{"driver name format", with(func(n *ironlinkv1.NodeSpec) { n.Driver = "IPMI tool" }), "nodes[0].driver"},
		{"bad node name", with(func(n *ironlinkv1.NodeSpec) { n.Name = "node 1" }), "nodes[0].name"},
		{"enrol without site", &ironlinkv1.StartOperationRequest{Kind: enrol, Nodes: []*ironlinkv1.NodeSpec{ipmiNode("n1")}, Reason: "x"}, "site"},
		{"enrol with devices", &ironlinkv1.StartOperationRequest{Kind: enrol, Site: "site-a", Devices: []string{"a-available"}, Nodes: []*ironlinkv1.NodeSpec{ipmiNode("n1")}, Reason: "x"}, "devices"},
		{"duplicate node names", &ironlinkv1.StartOperationRequest{Kind: enrol, Site: "site-a", Nodes: []*ironlinkv1.NodeSpec{ipmiNode("n1"), ipmiNode("n1")}, Reason: "x"}, "nodes[1].name"},
		{"deploy without image_source", dev(ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY, &ironlinkv1.OperationParams{Deploy: &ironlinkv1.DeployParams{}}), "params.deploy.image_source"},
		{"deploy without params", dev(ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY, nil), "params.deploy.image_source"},
		{"http image without checksum", dev(ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY, &ironlinkv1.OperationParams{Deploy: &ironlinkv1.DeployParams{ImageSource: "http://img/x.qcow2"}}), "params.deploy.image_checksum"},
		{"nova create without image", dev(ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, &ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{Name: "w1"}}), "params.nova_create.image"},
		{"clean without steps", dev(ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, nil), "params.clean_steps"},
		{"params of another kind", dev(ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE, &ironlinkv1.OperationParams{Deploy: &ironlinkv1.DeployParams{ImageSource: "glance-id"}}), "params.deploy"},
		{"too many targets", &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, Devices: many, Reason: "x"}, "devices"},
		{"no targets", &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, Reason: "x"}, "devices"},
		{"same device twice", &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, Devices: []string{"a-manageable", "a-manageable"}, Reason: "x"}, "devices[1]"},
		{"site mismatch", &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, Site: "site-b", Devices: []string{"DEVICE:a-manageable"}, Reason: "x"}, "devices[0]"},
	}
	before := f.checksums(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.req.Devices) == 1 && strings.HasPrefix(c.req.Devices[0], "DEVICE:") {
				c.req.Devices[0] = f.devs[strings.TrimPrefix(c.req.Devices[0], "DEVICE:")]
			}
			_, err := f.api.StartOperation(ctx, c.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("code %v (%v), want InvalidArgument", status.Code(err), err)
			}
			if fields := grpcerr.Fields(err); len(fields) != 1 || fields[0] != c.field {
				t.Fatalf("field violations %v, want [%s] (%v)", fields, c.field, err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error echoes a driver_info value: %v", err)
			}
		})
	}
	if changed := pgtest.ChangedTables(before, f.checksums(t)); len(changed) > 0 {
		t.Fatalf("refused requests changed tables %v", changed)
	}
}

func TestStartOperationGuards(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	req := func(kind ironlinkv1.OperationKind, devs ...string) *ironlinkv1.StartOperationRequest {
		return &ironlinkv1.StartOperationRequest{Kind: kind, Devices: devs, Reason: "test",
			Params: map[ironlinkv1.OperationKind]*ironlinkv1.OperationParams{
				ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY: {Deploy: &ironlinkv1.DeployParams{ImageSource: "6b1c1c7e-3f0a-4d3e-9d33-2d5a1f1e0a11"}},
			}[kind]}
	}
	before := f.checksums(t)
	for _, c := range []struct {
		name   string
		req    *ironlinkv1.StartOperationRequest
		code   codes.Code
		reason string
	}{
		{"quarantined provide", req(ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY, "a-quarantined"), codes.FailedPrecondition, operations.ReasonQuarantined},
		{"site without operations", req(ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, "old-manageable"), codes.FailedPrecondition, operations.ReasonNoOperations},
		{"wrong provision state", req(ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, "a-active"), codes.FailedPrecondition, operations.ReasonProvisionState},
		{"one bad target refuses all", req(ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, "a-manageable", "old-manageable"), codes.FailedPrecondition, operations.ReasonNoOperations},
		{"unknown device", req(ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, "no-such-node"), codes.NotFound, grpcerr.ReasonNotFound},
		{"unknown site", &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL, Site: "site-z", Nodes: []*ironlinkv1.NodeSpec{ipmiNode("n1")}, Reason: "x"}, codes.NotFound, grpcerr.ReasonNotFound},
	} {
		_, err := f.api.StartOperation(ctx, c.req)
		if status.Code(err) != c.code || grpcerr.Reason(err) != c.reason {
			t.Errorf("%s: %v %s (%v), want %v %s", c.name, status.Code(err), grpcerr.Reason(err), err, c.code, c.reason)
		}
	}
	if changed := pgtest.ChangedTables(before, f.checksums(t)); len(changed) > 0 {
		t.Fatalf("refused requests changed tables %v", changed)
	}

	// Force overrides the quarantine, and is recorded.
	r := req(ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY, "a-quarantined")
	r.Force = true
	resp, err := f.api.StartOperation(ctx, r)
	if err != nil || len(resp.GetOperations()) != 1 || !resp.Operations[0].GetForced() {
		t.Fatalf("forced deploy: %v %v", resp, err)
	}
	op := resp.Operations[0]
	if op.GetState() != ironlinkv1.OperationState_OPERATION_STATE_PENDING || op.GetActor() != "ops-admin" || op.GetReason() != "test" ||
		op.GetDeviceId() != f.devs["a-quarantined"] || op.GetSite() != "site-a" || op.GetSourceAddress() == "" {
		t.Fatalf("stored operation %v", op)
	}
	// A device already running an operation.
	_, err = f.api.StartOperation(ctx, r)
	if status.Code(err) != codes.FailedPrecondition || grpcerr.Reason(err) != operations.ReasonOperationActive {
		t.Fatalf("second operation: %v, want FailedPrecondition %s", err, operations.ReasonOperationActive)
	}
}

func TestEnrolKeepsCredentialsOutOfTheDatabase(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	resp, err := f.api.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL,
		Site: "site-a", Nodes: []*ironlinkv1.NodeSpec{ipmiNode("rack1-n1"), ipmiNode("rack1-n2")}, Reason: "rack 1"})
	if err != nil || len(resp.GetOperations()) != 2 {
		t.Fatalf("enrol: %v %v", resp, err)
	}
	for _, o := range resp.Operations {
		if o.GetGroupId() != resp.GetGroupId() || o.GetNode().GetDriverInfo()["ipmi_password"] != operations.Redacted {
			t.Fatalf("operation %v: want the group id and redacted driver_info", o)
		}
	}
	rows := pgtest.QueryString(t, f.url, `SELECT string_agg(o::text, '|') FROM operations o`)
	for _, secret := range []string{"s3cret-Pa55", "10.0.0.5", "admin\""} {
		if strings.Contains(rows, secret) {
			t.Fatalf("operations rows contain %q:\n%s", secret, rows)
		}
	}
	if !strings.Contains(rows, "ipmi_password") {
		t.Fatalf("the key names are not kept:\n%s", rows)
	}
	got, err := f.api.GetOperation(ctx, &ironlinkv1.GetOperationRequest{OperationId: resp.Operations[1].GetOperationId()})
	if err != nil || got.GetOperation().GetDeviceName() != "rack1-n2" || len(got.GetOperation().GetNode().GetPorts()) != 1 {
		t.Fatalf("get: %v %v", got, err)
	}
}

func TestGetDeviceListsRecentOperations(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	resp, err := f.api.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, Devices: []string{"a-manageable"}, Reason: "check"})
	if err != nil {
		t.Fatal(err)
	}
	fleet := ironlinkv1.NewFleetServiceClient(f.hub.Operator(t, "ops-admin"))
	d, err := fleet.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceName: "a-manageable"})
	if err != nil || len(d.GetRecentOperations()) != 1 || d.RecentOperations[0].GetOperationId() != resp.Operations[0].GetOperationId() {
		t.Fatalf("GetDevice recent operations %v %v", d.GetRecentOperations(), err)
	}
}

func TestListAndCancelOperations(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	resp, err := f.api.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_CLEAN,
		Devices: []string{"a-manageable", f.devs["b-manageable"]}, Reason: "wipe",
		Params: &ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "erase_devices_metadata"}}}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := f.api.ListOperations(ctx, &ironlinkv1.ListOperationsRequest{Device: "a-manageable"})
	if err != nil || len(list.GetOperations()) != 1 || list.Operations[0].GetOperationId() != resp.Operations[0].GetOperationId() {
		t.Fatalf("list by device name: %v %v", list, err)
	}
	page, err := f.api.ListOperations(ctx, &ironlinkv1.ListOperationsRequest{GroupId: resp.GetGroupId(), PageSize: 1})
	if err != nil || len(page.GetOperations()) != 1 || page.GetNextPageToken() == "" {
		t.Fatalf("first page: %v %v", page, err)
	}
	page2, err := f.api.ListOperations(ctx, &ironlinkv1.ListOperationsRequest{GroupId: resp.GetGroupId(), PageSize: 1, PageToken: page.GetNextPageToken()})
	if err != nil || len(page2.GetOperations()) != 1 || page2.GetNextPageToken() != "" || page2.Operations[0].GetOperationId() == page.Operations[0].GetOperationId() {
		t.Fatalf("second page: %v %v", page2, err)
	}
	if _, err := f.api.ListOperations(ctx, &ironlinkv1.ListOperationsRequest{PageToken: "garbage"}); grpcerr.Fields(err) == nil || grpcerr.Fields(err)[0] != "page_token" {
		t.Fatalf("bad page token: %v", err)
	}
	if _, err := f.api.ListOperations(ctx, &ironlinkv1.ListOperationsRequest{States: []ironlinkv1.OperationState{42}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad state filter: %v", err)
	}
	if _, err := f.api.ListOperations(ctx, &ironlinkv1.ListOperationsRequest{Site: "site-typo"}); status.Code(err) != codes.NotFound {
		t.Fatalf("operations of an unknown site: %v, want NotFound (an empty list looks like a quiet site)", err)
	}

	id := resp.Operations[0].GetOperationId()
	if _, err := f.api.CancelOperation(ctx, &ironlinkv1.CancelOperationRequest{OperationId: id}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("cancel without reason: %v", err)
	}
	c, err := f.api.CancelOperation(ctx, &ironlinkv1.CancelOperationRequest{OperationId: id, Reason: "wrong node"})
	if err != nil || c.GetOperation().GetState() != ironlinkv1.OperationState_OPERATION_STATE_CANCELLED || c.GetOperation().GetEndTime() == nil {
		t.Fatalf("cancel PENDING: %v %v", c, err)
	}
	_, err = f.api.CancelOperation(ctx, &ironlinkv1.CancelOperationRequest{OperationId: id, Reason: "again"})
	if status.Code(err) != codes.FailedPrecondition || grpcerr.Reason(err) != operations.ReasonOperationFinished {
		t.Fatalf("cancel CANCELLED: %v", err)
	}
	// A RUNNING operation in a state Ironic cannot abort from.
	other := resp.Operations[1].GetOperationId()
	sess, _ := f.st.OpenLink(ctx, store.LinkHello{Site: "site-b", BootID: "b2", Replica: "r0", Capabilities: []string{"operations"}})
	if _, ok, err := f.st.MarkOperationSent(ctx, "site-b", sess.Epoch, other); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := f.st.RecordOperationProgress(ctx, "site-b", store.OperationProgress{OperationID: other, Attempt: 1, State: store.OperationRunning, ProvisionState: "cleaning"}); err != nil {
		t.Fatal(err)
	}
	_, err = f.api.CancelOperation(ctx, &ironlinkv1.CancelOperationRequest{OperationId: other, Reason: "stop"})
	if status.Code(err) != codes.FailedPrecondition || grpcerr.Reason(err) != operations.ReasonNotAbortable {
		t.Fatalf("cancel while cleaning: %v", err)
	}
	if _, err := f.st.RecordOperationProgress(ctx, "site-b", store.OperationProgress{OperationID: other, Attempt: 1, State: store.OperationRunning, ProvisionState: "clean wait"}); err != nil {
		t.Fatal(err)
	}
	c, err = f.api.CancelOperation(ctx, &ironlinkv1.CancelOperationRequest{OperationId: other, Reason: "stop"})
	if err != nil || c.GetOperation().GetState() != ironlinkv1.OperationState_OPERATION_STATE_RUNNING || !c.GetOperation().GetCancelRequested() {
		t.Fatalf("cancel in clean wait: %v %v", c, err)
	}
}

// TestSiteBoundOperator calls the server as an operator bound to site-b.
// TestSiteBoundOperator: an operator bound to site-b starts, cancels and
// lists nothing of site-a: every operation kind, the node actions and adopt
// included (forced or not), on a site-a device is PermissionDenied
// WRONG_SITE and changes nothing.
func TestSiteBoundOperator(t *testing.T) {
	f := newFixture(t)
	srv := operations.NewServer(f.st, operations.Config{}, testlog.New(t))
	admin := context.Background()
	resp, err := srv.StartOperation(admin, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT,
		Devices: []string{"a-manageable"}, Reason: "x"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := authn.NewContext(admin, auth.Identity{ClientID: "ops-b", Sites: []string{"site-b"}, Scopes: []string{auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	before := f.checksums(t)
	_, err = srv.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT,
		Devices: []string{f.devs["a-available"]}, Reason: "x"})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("device of another site: %v, want PermissionDenied", err)
	}
	// The node actions (and adopt) on another site's device, by its id:
	// refused the same way, before anything is stored.
	for _, c := range []struct {
		kind ironlinkv1.OperationKind
		p    *ironlinkv1.OperationParams
	}{
		{ironlinkv1.OperationKind_OPERATION_KIND_REBOOT, nil},
		{ironlinkv1.OperationKind_OPERATION_KIND_REBOOT, &ironlinkv1.OperationParams{Soft: true}},
		{ironlinkv1.OperationKind_OPERATION_KIND_POWER_OFF, nil},
		{ironlinkv1.OperationKind_OPERATION_KIND_POWER_ON, nil},
		{ironlinkv1.OperationKind_OPERATION_KIND_SET_MAINTENANCE, &ironlinkv1.OperationParams{MaintenanceReason: "DIMM swap"}},
		{ironlinkv1.OperationKind_OPERATION_KIND_CLEAR_MAINTENANCE, nil},
		{ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION, nil},
		{ironlinkv1.OperationKind_OPERATION_KIND_ADOPT, &ironlinkv1.OperationParams{Adopt: &ironlinkv1.AdoptParams{ImageSource: "http://img/x.qcow2"}}},
	} {
		for _, force := range []bool{false, true} {
			_, err := srv.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: c.kind, Devices: []string{f.devs["a-available"]},
				Reason: "x", Params: c.p, Force: force})
			if status.Code(err) != codes.PermissionDenied || grpcerr.Reason(err) != grpcerr.ReasonWrongSite {
				t.Errorf("%s (force %t) of another site's device: %v, want PermissionDenied %s", c.kind, force, err, grpcerr.ReasonWrongSite)
			}
		}
	}
	_, err = srv.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL,
		Site: "site-a", Nodes: []*ironlinkv1.NodeSpec{ipmiNode("n1")}, Reason: "x"})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("enrol at another site: %v, want PermissionDenied", err)
	}
	if _, err := srv.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT,
		Devices: []string{"a-manageable"}, Reason: "x"}); status.Code(err) != codes.NotFound {
		t.Fatalf("another site's device by name: %v, want NotFound (names resolve among the caller's sites)", err)
	}
	// Naming the other site outright is refused as ListOperations' site
	// filter is: PermissionDenied WRONG_SITE, not NotFound.
	if _, err := srv.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT,
		Site: "site-a", Devices: []string{"a-manageable"}, Reason: "x"}); status.Code(err) != codes.PermissionDenied || grpcerr.Reason(err) != grpcerr.ReasonWrongSite {
		t.Fatalf("another site's device by name with site %q: %v, want PermissionDenied %s", "site-a", err, grpcerr.ReasonWrongSite)
	}
	if _, err := srv.CancelOperation(ctx, &ironlinkv1.CancelOperationRequest{OperationId: resp.Operations[0].GetOperationId(), Reason: "x"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("cancel another site's operation: %v", err)
	}
	if changed := pgtest.ChangedTables(before, f.checksums(t)); len(changed) > 0 {
		t.Fatalf("refused requests changed tables %v", changed)
	}
	list, err := srv.ListOperations(ctx, &ironlinkv1.ListOperationsRequest{})
	if err != nil || len(list.GetOperations()) != 0 {
		t.Fatalf("bound operator lists %v %v; want none of site-a's", list, err)
	}
	if _, err := srv.ListOperations(ctx, &ironlinkv1.ListOperationsRequest{Site: "site-a"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("list another site: %v", err)
	}
	if _, err := srv.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT,
		Devices: []string{"b-manageable"}, Reason: "x"}); err != nil {
		t.Fatalf("own site: %v", err)
	}
}

func TestScopes(t *testing.T) {
	f := newFixture(t)
	ro := ironlinkv1.NewOperationServiceClient(f.hub.Operator(t, "ops-reader", auth.ScopeOperationsRead))
	ctx := context.Background()
	if _, err := ro.ListOperations(ctx, &ironlinkv1.ListOperationsRequest{}); err != nil {
		t.Fatalf("read with operations:read: %v", err)
	}
	_, err := ro.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, Devices: []string{"a-manageable"}, Reason: "x"})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("start with operations:read only: %v, want PermissionDenied", err)
	}
}

// TestEnrolOfANodeInUseNeedsForce: an ENROL naming a node the site already
// has past manageable (a typo in a rack file) is refused FailedPrecondition
// NODE_IN_USE, naming the device and its state, and stores nothing; with
// force it is accepted and recorded as forced. A node in manageable (the
// same rack file sent again) and an unknown name pass as before.
func TestEnrolOfANodeInUseNeedsForce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	enrol := func(name string, force bool) (*ironlinkv1.StartOperationResponse, error) {
		return f.api.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL, Site: "site-a",
			Nodes: []*ironlinkv1.NodeSpec{ipmiNode("fresh-node-1"), ipmiNode(name)}, Reason: "rack 7", Force: force})
	}
	before := f.checksums(t)
	for _, name := range []string{"a-available", "a-active"} {
		_, err := enrol(name, false)
		msg := status.Convert(err).Message()
		if status.Code(err) != codes.FailedPrecondition || grpcerr.Reason(err) != operations.ReasonNodeInUse ||
			!strings.Contains(msg, "nodes[1]") || !strings.Contains(msg, f.devs[name]) || !strings.Contains(msg, "set force") {
			t.Fatalf("ENROL of %s: %v, want FailedPrecondition %s naming nodes[1] and device %s", name, err, operations.ReasonNodeInUse, f.devs[name])
		}
	}
	if after := f.checksums(t); !maps.Equal(before, after) {
		t.Fatalf("a refused ENROL changed tables: %v -> %v", before, after)
	}
	r, err := enrol("a-manageable", false)
	if err != nil || len(r.GetOperations()) != 2 || r.GetOperations()[1].GetForced() {
		t.Fatalf("ENROL of a manageable node's name: %v %v, want accepted, not forced", r, err)
	}
	r, err = f.api.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL, Site: "site-a",
		Nodes: []*ironlinkv1.NodeSpec{ipmiNode("a-available")}, Reason: "take it over on purpose", Force: true})
	if err != nil || len(r.GetOperations()) != 1 || !r.GetOperations()[0].GetForced() {
		t.Fatalf("forced ENROL of an available node's name: %v %v, want accepted and recorded as forced", r, err)
	}
}
