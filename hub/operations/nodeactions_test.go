package operations_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/operations"
	"github.com/ironlink/ironlink/hub/store"
	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/storetest"
	"github.com/ironlink/ironlink/internal/testlog"
	"github.com/ironlink/ironlink/test/grpctest"
)

// TestNodeActionGuards: power off, reboot and reprovision of a device with
// a customer's instance are refused (CUSTOMER_INSTANCE) and change
// nothing, unless forced, which is recorded; power on is not guarded; a
// reprovision of a node in the middle of a deploy, an adopt of a node with
// an instance or in a state Ironic cannot adopt from, and malformed
// node-action and adopt parameters, are refused before anything is
// stored; an adopt of a manageable node is stored with its instance_info.
func TestNodeActionGuards(t *testing.T) {
	ctx := context.Background()
	st, url := storetest.New(t, nil)
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-c", BootID: "b", Replica: "r0", Capabilities: []string{"operations"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	enrolled := condition.Condition{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}
	customer := condition.Condition{Type: condition.CustomerAllocated, Status: condition.True, Reason: "CustomerInstance", Message: "project p-42", ObservedTime: now, LastTransitionTime: now}
	inst := uuid.NewString()
	if _, err := st.ApplyBatch(ctx, "site-c", sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{
		{DeviceID: uuid.NewString(), ObservedTime: now, Facts: &store.Facts{Name: "c-customer", ProvisionState: "active", InstanceUUID: inst, PowerState: "power on"},
			Conditions: []condition.Condition{enrolled, customer}},
		{DeviceID: uuid.NewString(), ObservedTime: now, Facts: &store.Facts{Name: "c-manageable", ProvisionState: "manageable", PowerState: "power off"},
			Conditions: []condition.Condition{enrolled}},
		{DeviceID: uuid.NewString(), ObservedTime: now, Facts: &store.Facts{Name: "c-deploying", ProvisionState: "deploying", PowerState: "power on"},
			Conditions: []condition.Condition{enrolled}},
	}}); err != nil {
		t.Fatal(err)
	}
	api := ironlinkv1.NewOperationServiceClient(grpctest.Start(t, st, grpctest.Options{}).Operator(t, "ops-admin"))
	req := func(kind ironlinkv1.OperationKind, dev string, p *ironlinkv1.OperationParams) *ironlinkv1.StartOperationRequest {
		return &ironlinkv1.StartOperationRequest{Kind: kind, Devices: []string{dev}, Reason: "test", Params: p}
	}
	adopt := &ironlinkv1.OperationParams{Adopt: &ironlinkv1.AdoptParams{ImageSource: "http://img/slurm-worker.qcow2"}}
	before := pgtest.Checksums(t, url, "jti_replay")
	for _, c := range []struct {
		name   string
		req    *ironlinkv1.StartOperationRequest
		code   codes.Code
		reason string
	}{
		{"power off of a customer's node", req(ironlinkv1.OperationKind_OPERATION_KIND_POWER_OFF, "c-customer", nil), codes.FailedPrecondition, operations.ReasonCustomerInstance},
		{"reboot of a customer's node", req(ironlinkv1.OperationKind_OPERATION_KIND_REBOOT, "c-customer", &ironlinkv1.OperationParams{Soft: true}), codes.FailedPrecondition, operations.ReasonCustomerInstance},
		{"reprovision of a customer's node", req(ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION, "c-customer", nil), codes.FailedPrecondition, operations.ReasonCustomerInstance},
		{"reprovision of a node while it deploys", req(ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION, "c-deploying", nil), codes.FailedPrecondition, operations.ReasonProvisionState},
		{"maintenance without a reason", req(ironlinkv1.OperationKind_OPERATION_KIND_SET_MAINTENANCE, "c-manageable", nil), codes.InvalidArgument, grpcerr.ReasonRequired},
		{"soft power on", req(ironlinkv1.OperationKind_OPERATION_KIND_POWER_ON, "c-manageable", &ironlinkv1.OperationParams{Soft: true}), codes.InvalidArgument, grpcerr.ReasonInvalidValue},
		{"power timeout over an hour", req(ironlinkv1.OperationKind_OPERATION_KIND_POWER_OFF, "c-manageable", &ironlinkv1.OperationParams{PowerTimeoutSeconds: 3601}), codes.InvalidArgument, grpcerr.ReasonOutOfRange},
		{"maintenance reason on a power off", req(ironlinkv1.OperationKind_OPERATION_KIND_POWER_OFF, "c-manageable", &ironlinkv1.OperationParams{MaintenanceReason: "x"}), codes.InvalidArgument, grpcerr.ReasonInvalidValue},
		{"adopt without an image", req(ironlinkv1.OperationKind_OPERATION_KIND_ADOPT, "c-manageable", nil), codes.InvalidArgument, grpcerr.ReasonRequired},
		{"adopt params on a reboot", req(ironlinkv1.OperationKind_OPERATION_KIND_REBOOT, "c-manageable", &ironlinkv1.OperationParams{Adopt: &ironlinkv1.AdoptParams{ImageSource: "x"}}), codes.InvalidArgument, grpcerr.ReasonInvalidValue},
		{"adopt of a deployed customer node", req(ironlinkv1.OperationKind_OPERATION_KIND_ADOPT, "c-customer", adopt), codes.FailedPrecondition, operations.ReasonInstancePresent},
		{"adopt while it deploys", req(ironlinkv1.OperationKind_OPERATION_KIND_ADOPT, "c-deploying", adopt), codes.FailedPrecondition, operations.ReasonProvisionState},
		{"reprovision with a malformed clean step", req(ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION, "c-manageable", &ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{{Interface: "Deploy", Step: "x"}}}), codes.InvalidArgument, grpcerr.ReasonInvalidValue},
	} {
		_, err := api.StartOperation(ctx, c.req)
		if status.Code(err) != c.code || grpcerr.Reason(err) != c.reason {
			t.Errorf("%s: %v %s (%v), want %v %s", c.name, status.Code(err), grpcerr.Reason(err), err, c.code, c.reason)
		}
	}
	if changed := pgtest.ChangedTables(before, pgtest.Checksums(t, url, "jti_replay")); len(changed) > 0 {
		t.Fatalf("refused requests changed tables %v", changed)
	}
	// Forced: accepted and recorded.
	r := req(ironlinkv1.OperationKind_OPERATION_KIND_REBOOT, "c-customer", nil)
	r.Force = true
	resp, err := api.StartOperation(ctx, r)
	if err != nil || len(resp.GetOperations()) != 1 || !resp.Operations[0].GetForced() {
		t.Fatalf("forced reboot: %v %v", resp, err)
	}
	// ADOPT of a manageable node, its instance_info kept with the operation.
	resp, err = api.StartOperation(ctx, req(ironlinkv1.OperationKind_OPERATION_KIND_ADOPT, "c-manageable", adopt))
	if err != nil || resp.GetOperations()[0].GetParams().GetAdopt().GetImageSource() != "http://img/slurm-worker.qcow2" {
		t.Fatalf("adopt: %v %v", resp, err)
	}
	if _, err := api.CancelOperation(ctx, &ironlinkv1.CancelOperationRequest{OperationId: resp.GetOperations()[0].GetOperationId(), Reason: "test"}); err != nil {
		t.Fatalf("cancel the pending adopt: %v", err)
	}
	// Maintenance in any provision state, its reason kept with the operation.
	resp, err = api.StartOperation(ctx, req(ironlinkv1.OperationKind_OPERATION_KIND_SET_MAINTENANCE, "c-manageable", &ironlinkv1.OperationParams{MaintenanceReason: "DIMM swap"}))
	if err != nil {
		t.Fatalf("set maintenance: %v", err)
	}
	got, err := api.GetOperation(ctx, &ironlinkv1.GetOperationRequest{OperationId: resp.Operations[0].GetOperationId()})
	if err != nil || got.GetOperation().GetParams().GetMaintenanceReason() != "DIMM swap" || got.GetOperation().GetForced() {
		t.Fatalf("stored maintenance operation: %v %v", got, err)
	}
}

// TestCheckStep: a remediation ladder's step passes the same checks as an
// operator's unforced request: the customer-instance guard (never forced),
// the precondition table, a site without operations; a step that may start
// gets no refusal and nothing is written.
func TestCheckStep(t *testing.T) {
	ctx := context.Background()
	st, url := storetest.New(t, nil)
	sess, err := st.OpenLink(ctx, store.LinkHello{Site: "site-c", BootID: "b", Replica: "r0", Capabilities: []string{"operations"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	enrolled := condition.Condition{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}
	customer := condition.Condition{Type: condition.CustomerAllocated, Status: condition.True, Reason: "CustomerInstance", Message: "project p-42", ObservedTime: now, LastTransitionTime: now}
	ids := map[string]string{"c-customer": uuid.NewString(), "c-deploying": uuid.NewString(), "c-active": uuid.NewString()}
	if _, err := st.ApplyBatch(ctx, "site-c", sess.Epoch, store.Batch{Sequence: 1, Devices: []store.DeviceUpdate{
		{DeviceID: ids["c-customer"], ObservedTime: now, Facts: &store.Facts{Name: "c-customer", ProvisionState: "active", InstanceUUID: uuid.NewString(), PowerState: "power on"},
			Conditions: []condition.Condition{enrolled, customer}},
		{DeviceID: ids["c-deploying"], ObservedTime: now, Facts: &store.Facts{Name: "c-deploying", ProvisionState: "deploying", PowerState: "power on"},
			Conditions: []condition.Condition{enrolled}},
		{DeviceID: ids["c-active"], ObservedTime: now, Facts: &store.Facts{Name: "c-active", ProvisionState: "active", PowerState: "power on"},
			Conditions: []condition.Condition{enrolled}},
	}}); err != nil {
		t.Fatal(err)
	}
	srv := operations.NewServer(st, operations.Config{}, testlog.New(t))
	before := pgtest.Checksums(t, url, "jti_replay")
	for _, c := range []struct {
		dev    string
		kind   store.OperationKind
		reason string
	}{
		{"c-customer", "REBOOT", operations.ReasonCustomerInstance},
		{"c-customer", "POWER_ON", ""},
		{"c-deploying", "REBOOT", operations.ReasonProvisionState},
		{"c-deploying", "REPROVISION", operations.ReasonProvisionState},
		{"c-active", "REBOOT", ""},
		{"c-active", "REPROVISION", ""},
	} {
		reason, msg, err := srv.CheckStep(ctx, ids[c.dev], c.kind, false)
		if err != nil || reason != c.reason || (reason != "") != (msg != "") {
			t.Errorf("%s %s: %q %q %v, want %q", c.kind, c.dev, reason, msg, err, c.reason)
		}
	}
	if reason, _, err := srv.CheckStep(ctx, uuid.NewString(), "REBOOT", false); err != nil || reason != grpcerr.ReasonNotFound {
		t.Errorf("unknown device: %q %v", reason, err)
	}
	// A ladder acting on customer instances passes the customer guard as
	// a forced request does; the other checks still apply.
	if reason, _, err := srv.CheckStep(ctx, ids["c-customer"], "REBOOT", true); err != nil || reason != "" {
		t.Errorf("forced REBOOT of c-customer: %q %v, want no refusal", reason, err)
	}
	if reason, _, err := srv.CheckStep(ctx, ids["c-deploying"], "REBOOT", true); err != nil || reason != operations.ReasonProvisionState {
		t.Errorf("forced REBOOT of c-deploying: %q %v, want %s", reason, err, operations.ReasonProvisionState)
	}
	if changed := pgtest.ChangedTables(before, pgtest.Checksums(t, url, "jti_replay")); len(changed) > 0 {
		t.Fatalf("checks changed tables %v", changed)
	}
	// A site whose satellite offers no operations refuses every step.
	if _, err := st.OpenLink(ctx, store.LinkHello{Site: "site-c", BootID: "b2", Replica: "r0"}); err != nil {
		t.Fatal(err)
	}
	if reason, _, err := srv.CheckStep(ctx, ids["c-active"], "REBOOT", false); err != nil || reason != operations.ReasonNoOperations {
		t.Errorf("site without operations: %q %v", reason, err)
	}
}
