package operations_test

import (
	"context"
	"slices"
	"strings"
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
)

// ironicMachine is Ironic's provision state machine between stable states
// (ironic/common/states.py, Ironic 21.4: the add_transition calls, each
// verb followed through its transient states to where it ends on success).
var ironicMachine = map[string]map[string]string{
	"enroll":         {"manage": "manageable"},
	"manageable":     {"inspect": "manageable", "clean": "manageable", "provide": "available", "adopt": "active"},
	"available":      {"deploy": "active", "manage": "manageable"},
	"active":         {"deleted": "available", "rebuild": "active"},
	"deploy failed":  {"deploy": "active", "rebuild": "active", "deleted": "available"},
	"error":          {"deleted": "available", "rebuild": "active"},
	"clean failed":   {"manage": "manageable"},
	"inspect failed": {"manage": "manageable", "inspect": "manageable"},
	"adopt failed":   {"adopt": "active", "manage": "manageable"},
	"rescue":         {"unrescue": "active", "rescue": "rescue", "deleted": "available"},
	"rescue failed":  {"rescue": "rescue", "unrescue": "active", "deleted": "available"},
}

// goals are the Ironic kinds' end states and the verb each is made of.
var goals = map[store.OperationKind]struct{ state, verb string }{
	"INSPECT":  {"manageable", "inspect"},
	"CLEAN":    {"manageable", "clean"},
	"PROVIDE":  {"available", "provide"},
	"DEPLOY":   {"active", "deploy"},
	"UNDEPLOY": {"available", "deleted"},
	// REPROVISION: undeploy where deployed, else manage and provide.
	"REPROVISION": {"available", "deleted"},
	"ADOPT":       {"active", "adopt"},
}

// notTaken are states the state machine could leave for a kind's goal
// that the table leaves out on purpose (docs/reference/operations.md,
// "Preconditions"): enroll is ENROL's (its manage verifies the BMC
// credentials the hub does not hold); adopt failed is left to ADOPT and
// REPROVISION (INSPECT, CLEAN and PROVIDE do not manage a failed
// adoption away); rescue and rescue failed belong to rescue, which ironlink
// does not run; an available node is not taken to manageable by INSPECT or
// CLEAN as a side effect (it would leave Nova's pool); the satellite ends
// DEPLOY that meets deploy failed, and UNDEPLOY that meets error, as FAILED
// (it cannot tell an earlier failure from its own), so the hub refuses them
// rather than accept what will fail at once. ADOPT takes over a machine
// enrolled for it (manageable) or after a failed adoption: it does not
// manage a node first (an available one would leave Nova's pool, a failed
// clean or inspection says the machine is not the running one to keep).
var notTaken = map[store.OperationKind][]string{
	"":         {"enroll", "rescue", "rescue failed"},
	"INSPECT":  {"available", "adopt failed"},
	"CLEAN":    {"available", "adopt failed"},
	"PROVIDE":  {"adopt failed"},
	"ADOPT":    {"available", "clean failed", "inspect failed"},
	"DEPLOY":   {"deploy failed"},
	"UNDEPLOY": {"error"},
}

// TestPreconditionsFollowIronicsStateMachine: every state the table
// accepts reaches the kind's goal by the verbs it names, and every state
// from which the machine reaches the goal with the kind's verb (after at
// most a manage) is in the table.
func TestPreconditionsFollowIronicsStateMachine(t *testing.T) {
	for kind, g := range goals {
		p := operations.Preconditions[kind]
		for from, path := range p.From {
			at := from
			if path != "" {
				for _, verb := range strings.Split(path, ", ") {
					next, ok := ironicMachine[at][verb]
					if !ok {
						t.Errorf("%s from %q: Ironic has no %q from %q", kind, from, verb, at)
						break
					}
					at = next
				}
			}
			if at != g.state {
				t.Errorf("%s from %q by %q ends in %q, want %q", kind, from, path, at, g.state)
			}
		}
		for from, verbs := range ironicMachine {
			if slices.Contains(notTaken[""], from) || slices.Contains(notTaken[kind], from) {
				continue
			}
			direct := verbs[g.verb] == g.state
			viaManage := verbs["manage"] == "manageable" && ironicMachine["manageable"][g.verb] == g.state
			if _, ok := p.From[from]; (direct || viaManage) && !ok && from != g.state {
				t.Errorf("%s: Ironic reaches %q from %q, but the table refuses it", kind, g.state, from)
			}
		}
	}
}

// TestPreconditionsOfTheHubsView: each rule of the table against devices
// the hub stores (a real store behind a real gRPC server): maintenance,
// power error, an Ironic allocation, a Nova server Ironic does not name;
// INSPECT is accepted in maintenance (Ironic allows it); a NOVA_DELETE
// that succeeded after the last observation clears the instance for the
// next NOVA_CREATE. Refusals write nothing.
func TestPreconditionsOfTheHubsView(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().UTC()
	sess, err := f.st.OpenLink(ctx, store.LinkHello{Site: "site-p", BootID: "b", Replica: "r0", Capabilities: []string{"nova", "operations"}})
	if err != nil {
		t.Fatal(err)
	}
	const staleInstance = "5a1e0000-0000-4000-8000-0000000000aa"
	staleCond := []condition.Condition{{Type: condition.InstanceAllocated, Status: condition.True, Reason: "InstanceRecordMismatch",
		Message: "Ironic points at instance " + staleInstance + ", which Nova does not know", ObservedTime: now, LastTransitionTime: now}}
	allocated := []condition.Condition{{Type: condition.InstanceAllocated, Status: condition.True, Reason: "IronicAllocation", Message: "allocation 5f0c", ObservedTime: now, LastTransitionTime: now}}
	devs := map[string]struct {
		facts store.Facts
		conds []condition.Condition
	}{
		"p-maint-manageable": {store.Facts{ProvisionState: "manageable", Maintenance: true, Fault: "power failure"}, nil},
		"p-power-error":      {store.Facts{ProvisionState: "available", PowerState: "error"}, nil},
		"p-allocation":       {store.Facts{ProvisionState: "available"}, allocated},
		"p-nova-unaware": {store.Facts{ProvisionState: "available", InstanceMismatches: []store.InstanceMismatch{{Kind: store.MismatchNodeUnaware,
			NovaServerID: "0d6b4a1e-36c4-4f55-9d0c-1a4f5e6b7c8d", NovaServerStatus: "ACTIVE", FirstSeenTime: now}}}, nil},
		"p-nova-deleted": {store.Facts{ProvisionState: "active", InstanceUUID: "7e1d4c2b-0a9f-4e8d-8c7b-6a5f4e3d2c1b"}, nil},
		"p-stale": {store.Facts{ProvisionState: "available", InstanceUUID: staleInstance, InstanceMismatches: []store.InstanceMismatch{{Kind: store.MismatchNovaUnknown,
			IronicInstanceUUID: staleInstance, FirstSeenTime: now}}}, staleCond},
	}
	var ups []store.DeviceUpdate
	for name, d := range devs {
		f.devs[name] = uuid.NewString()
		facts := d.facts
		facts.Name = name
		conds := append([]condition.Condition{{Type: condition.Enrolled, Status: condition.True, Reason: "Enrolled", ObservedTime: now, LastTransitionTime: now}}, d.conds...)
		ups = append(ups, store.DeviceUpdate{DeviceID: f.devs[name], ObservedTime: now, Facts: &facts, Conditions: conds})
	}
	if _, err := f.st.ApplyBatch(ctx, "site-p", sess.Epoch, store.Batch{Sequence: 1, Devices: ups}); err != nil {
		t.Fatal(err)
	}
	novaCreate := &ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{Name: "s1", Image: "img"}}
	clean := &ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "erase_devices_metadata"}}}
	start := func(kind ironlinkv1.OperationKind, dev string, p *ironlinkv1.OperationParams) error {
		_, err := f.api.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: kind, Devices: []string{"site-p/" + dev}, Params: p, Reason: "test"})
		return err
	}
	before := f.checksums(t)
	for _, c := range []struct {
		kind   ironlinkv1.OperationKind
		dev    string
		params *ironlinkv1.OperationParams
		reason string
		says   string
	}{
		{ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, "p-maint-manageable", clean, operations.ReasonMaintenance, "in maintenance (fault: power failure); Ironic refuses manual cleaning"},
		{ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, "p-power-error", novaCreate, operations.ReasonPowerState, `power_state "error"`},
		{ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, "p-allocation", novaCreate, operations.ReasonInstancePresent, "IronicAllocation: allocation 5f0c"},
		{ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, "p-nova-unaware", novaCreate, operations.ReasonInstancePresent, "runs Nova server 0d6b4a1e-36c4-4f55-9d0c-1a4f5e6b7c8d (ACTIVE)"},
		{ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, "p-nova-deleted", novaCreate, operations.ReasonProvisionState, `is "active"`},
		{ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, "p-stale", novaCreate, operations.ReasonInstancePresent,
			"has instance_uuid " + staleInstance + " that Nova does not know (a stale record"},
		{ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, "p-stale", novaCreate, operations.ReasonInstancePresent, "or use --force-clear"},
		{ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY, "p-stale", &ironlinkv1.OperationParams{Deploy: &ironlinkv1.DeployParams{ImageSource: "6b1c1c7e-3f0a-4d3e-9d33-2d5a1f1e0a11"}},
			operations.ReasonInstancePresent, "clear it first (openstack baremetal node unset --instance-uuid"},
	} {
		err := start(c.kind, c.dev, c.params)
		if status.Code(err) != codes.FailedPrecondition || grpcerr.Reason(err) != c.reason || !strings.Contains(status.Convert(err).Message(), c.says) {
			t.Errorf("%v on %s: %v, want FailedPrecondition %s saying %q", c.kind, c.dev, err, c.reason, c.says)
		}
	}
	if changed := pgtest.ChangedTables(before, f.checksums(t)); len(changed) > 0 {
		t.Fatalf("refused requests changed tables %v", changed)
	}
	// force_clear lets NOVA_CREATE through a stale instance_uuid (the
	// satellite clears it first), and nothing else: a Nova server on the
	// node still refuses.
	forceClear := &ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{Name: "s1", Image: "img", ForceClear: true}}
	if err := start(ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, "p-nova-unaware", forceClear); grpcerr.Reason(err) != operations.ReasonInstancePresent {
		t.Errorf("NOVA_CREATE with force_clear on a node running a Nova server: %v", err)
	}
	if err := start(ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, "p-stale", forceClear); err != nil {
		t.Errorf("NOVA_CREATE with force_clear on a stale instance_uuid: %v", err)
	}
	if err := start(ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, "p-maint-manageable", nil); err != nil {
		t.Errorf("INSPECT in maintenance (Ironic allows it): %v", err)
	}
	// NOVA_DELETE runs and succeeds before the next poll: the hub's view
	// takes the operation's end over the older observation.
	if err := start(ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE, "p-nova-deleted", nil); err != nil {
		t.Fatal(err)
	}
	ops, err := f.st.ListOperations(ctx, store.OperationFilter{DeviceID: f.devs["p-nova-deleted"], Limit: 1})
	if err != nil || len(ops) != 1 {
		t.Fatal(ops, err)
	}
	if _, ok, err := f.st.MarkOperationSent(ctx, "site-p", sess.Epoch, ops[0].ID); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if r, err := f.st.RecordOperationProgress(ctx, "site-p", store.OperationProgress{OperationID: ops[0].ID, Attempt: 1, State: store.OperationSucceeded, ProvisionState: "available"}); err != nil || r.Ignored {
		t.Fatal(r, err)
	}
	if err := start(ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, "p-nova-deleted", novaCreate); err != nil {
		t.Errorf("NOVA_CREATE after a NOVA_DELETE that succeeded after the last poll: %v", err)
	}
}
