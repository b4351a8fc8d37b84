package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// TestOperationPreconditionsRefusedAtTheHub runs a real hub and a real
// satellite (with its operations credential) on the simulator seeded as
// the test bed, plus an available node with a stale instance_uuid that Nova
// does not know. Every operation the hub's stored view says cannot work is
// refused with FailedPrecondition, a reason naming what the hub saw and
// what to do, no operation row and no request of the satellite's to
// OpenStack beyond its polling; what Ironic's state machine allows
// (CLEAN from clean failed) is accepted, and SITE/NAME names devices.
func TestOperationPreconditionsRefusedAtTheHub(t *testing.T) {
	ctx := context.Background()
	const site = "ops-pre"
	sim := openstacksim.New(openstacksim.Options{ProvisionStep: 100 * time.Millisecond})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	ids := map[string]string{}
	for _, n := range sim.SeedLikeTestbed(8) {
		ids[n.Name] = n.UUID
	}
	staleInstance := uuid()
	stale := sim.AddNode(openstacksim.Node{Name: "stale-001", ResourceClass: "gpu-h100", ProvisionState: "available", PowerState: "power off", InstanceUUID: staleInstance})
	ids[stale.Name] = stale.UUID
	clouds := writeSimOpsClouds(t, sim)
	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{site}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	addr, _ := startHub(t, db, id)
	harness.Start(t, "ironlink-satellite", bins.Satellite(), append([]string{"--site", site, "--hub", addr, "--clouds-yaml", clouds, "--cloud", "sim",
		"--operations-cloud", "sim-ops", "--operations-poll-interval", "200ms", "--state-file", filepath.Join(t.TempDir(), "state.json"),
		"--poll-interval", "1s", "--max-backoff", "1s", "--sweep-interval", "1s"}, id.satelliteArgs(site)...)...)
	oc := ironlinkv1.NewOperationServiceClient(id.dialAs(t, addr, "ops-admin"))
	fc := ironlinkv1.NewFleetServiceClient(id.dialAs(t, addr, "ops-admin"))

	// The hub's view: the orphan sweep has told it Nova does not know the
	// stale instance, and the link announced operations.
	harness.Eventually(t, 90*time.Second, func() error {
		d, err := fc.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: stale.UUID})
		if err != nil {
			return err
		}
		if len(d.GetDevice().GetFacts().GetInstanceMismatches()) == 0 {
			return fmt.Errorf("no instance mismatch reported yet for %s", stale.UUID)
		}
		_, err = oc.ListOperations(ctx, &ironlinkv1.ListOperationsRequest{Site: site})
		return err
	})
	harness.Eventually(t, 60*time.Second, func() error {
		var caps []string
		if err := harness.Pool(t, db).QueryRow(ctx, `SELECT capabilities FROM sites WHERE name = $1`, site).Scan(&caps); err != nil {
			return err
		}
		if !strings.Contains(strings.Join(caps, ","), "operations") {
			return fmt.Errorf("capabilities %v", caps)
		}
		return nil
	})

	novaCreate := &ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{Name: "pre-server", Image: "testbed-image"}}
	deploy := &ironlinkv1.OperationParams{Deploy: &ironlinkv1.DeployParams{ImageSource: "6b1c1c7e-3f0a-4d3e-9d33-2d5a1f1e0a11"}}
	mark := len(sim.Requests())
	for _, c := range []struct {
		name   string
		kind   ironlinkv1.OperationKind
		device string
		params *ironlinkv1.OperationParams
		code   codes.Code
		reason string
		says   []string
	}{
		{"nova create on an available node with a stale instance_uuid", ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, site + "/stale-001", novaCreate,
			codes.FailedPrecondition, "INSTANCE_PRESENT", []string{"instance_uuid " + staleInstance + " that Nova does not know", "clear it first", stale.UUID, "--force-clear"}},
		{"nova create on a node in maintenance", ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, site + "/node-003", novaCreate,
			codes.FailedPrecondition, "NODE_IN_MAINTENANCE", []string{"in maintenance", "maintenance unset"}},
		{"nova create on an active node", ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, "node-002", novaCreate,
			codes.FailedPrecondition, "PROVISION_STATE", []string{`is "active"`, "NOVA_CREATE starts from available"}},
		{"deploy on a node in maintenance", ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY, ids["node-003"], deploy,
			codes.FailedPrecondition, "NODE_IN_MAINTENANCE", []string{"Ironic refuses to deploy"}},
		{"undeploy of a Nova instance", ironlinkv1.OperationKind_OPERATION_KIND_UNDEPLOY, site + "/" + ids["node-002"], nil,
			codes.FailedPrecondition, "INSTANCE_PRESENT", []string{"NOVA_DELETE"}},
		{"provide from deploy failed", ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE, site + "/node-007", nil,
			codes.FailedPrecondition, "PROVISION_STATE", []string{`"deploy failed"`, "PROVIDE starts from available, clean failed, inspect failed, manageable"}},
		{"clean on an active node in maintenance", ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, site + "/node-008",
			&ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "erase_devices_metadata"}}},
			codes.FailedPrecondition, "PROVISION_STATE", []string{`"active"`}},
		{"a mistyped UUID is not looked up as a name", ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, "6b1c1c7e-3f0a-4d3e-9d33-2d5a1f1e0a1", nil,
			codes.InvalidArgument, grpcerr.ReasonNotUUID, []string{"not a UUID"}},
		{"SITE/NAME of an unknown site's device", ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, "elsewhere/node-006", nil,
			codes.NotFound, grpcerr.ReasonNotFound, []string{`site "elsewhere" not found`}},
		{"SITE/NAME of a name the site does not have", ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, site + "/node-099", nil,
			codes.NotFound, grpcerr.ReasonNotFound, []string{`no device named "node-099" at site "` + site + `"`}},
	} {
		_, err := oc.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: c.kind, Devices: []string{c.device}, Params: c.params, Reason: "e2e: preconditions"})
		msg := status.Convert(err).Message()
		if status.Code(err) != c.code || grpcerr.Reason(err) != c.reason {
			t.Errorf("%s: %v (%s), want %v %s", c.name, status.Code(err), err, c.code, c.reason)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(msg, s) {
				t.Errorf("%s: message %q lacks %q", c.name, msg, s)
			}
		}
		t.Logf("%s: %s", c.name, msg)
	}
	var rows int
	if err := harness.Pool(t, db).QueryRow(ctx, `SELECT count(*) FROM operations`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("refused operations left %d operation rows (%v)", rows, err)
	}

	// What Ironic's state machine allows is accepted, named by SITE/NAME.
	r, err := oc.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_INSPECT,
		Devices: []string{site + "/node-006"}, Reason: "e2e: preconditions"})
	if err != nil || len(r.GetOperations()) != 1 || r.GetOperations()[0].GetDeviceId() != ids["node-006"] {
		t.Fatalf("INSPECT of %s/node-006 (manageable): %v %v", site, r, err)
	}
	r, err = oc.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, Devices: []string{site + "/node-005"},
		Params: &ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "erase_devices_metadata"}}}, Reason: "e2e: preconditions"})
	if err != nil || len(r.GetOperations()) != 1 || r.GetOperations()[0].GetDeviceId() != ids["node-005"] {
		t.Fatalf("CLEAN of %s/node-005 (clean failed: manage, then clean): %v %v", site, r, err)
	}
	l, err := oc.ListOperations(ctx, &ironlinkv1.ListOperationsRequest{Device: site + "/node-005"})
	if err != nil || len(l.GetOperations()) != 1 || l.GetOperations()[0].GetDeviceId() != ids["node-005"] {
		t.Fatalf("ListOperations of device %s/node-005: %v %v", site, l, err)
	}
	// Nothing of the refused requests reached OpenStack: the satellite's
	// only writes since the refusals began are the accepted operations'.
	for _, q := range sim.Requests()[mark:] {
		if !strings.HasPrefix(q.UserAgent, "ironlink-satellite") || q.Method == http.MethodGet ||
			(q.Service != openstacksim.ServiceBaremetal && q.Service != openstacksim.ServiceCompute) || strings.Contains(q.Path, "/traits") {
			continue
		}
		if !strings.Contains(q.Path, ids["node-005"]) && !strings.Contains(q.Path, ids["node-006"]) {
			t.Errorf("a refused operation reached OpenStack: %s %s %s", q.Service, q.Method, q.Path)
		}
	}

	testNovaCreateForceClear(t, oc, sim, stale.UUID, staleInstance)
}

// testNovaCreateForceClear (TestOperationPreconditionsRefusedAtTheHub's
// last part, on its hub, satellite and simulator): NOVA_CREATE with
// force_clear on the node with a stale instance_uuid is accepted; the
// satellite removes the instance_uuid as its own recorded step before the
// one server create, and the server ends ACTIVE on the node.
func testNovaCreateForceClear(t *testing.T, oc ironlinkv1.OperationServiceClient, sim *openstacksim.Cloud, node, staleInstance string) {
	ctx := context.Background()
	mark := len(sim.Requests())
	r, err := oc.StartOperation(ctx, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, Devices: []string{node},
		Params: &ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{Name: "force-clear-server", Image: "testbed-image", ForceClear: true}},
		Reason: "e2e: force clear"})
	if err != nil || len(r.GetOperations()) != 1 {
		t.Fatalf("NOVA_CREATE with force_clear: %v %v", r, err)
	}
	op := waitOp(t, oc, r.GetOperations()[0].GetOperationId(), 120*time.Second)
	if op.GetState() != ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED {
		t.Fatalf("NOVA_CREATE with force_clear ended %v: %s", op.GetState(), op.GetLastError())
	}
	var cleared bool
	for _, s := range op.GetSteps() {
		if s.GetName() == "clear-stale-instance" && strings.Contains(s.GetMessage(), staleInstance) {
			for _, q := range s.GetRequests() {
				cleared = cleared || (q.GetMethod() == http.MethodPatch && q.GetDetail() == "remove /instance_uuid" && q.GetStatus() == http.StatusOK)
			}
		}
	}
	if !cleared {
		t.Errorf("no clear-stale-instance step with its PATCH in %v", op.GetSteps())
	}
	// The request log: the PATCH of the node, then exactly one server
	// create.
	patched, creates := false, 0
	for _, q := range sim.Requests()[mark:] {
		switch {
		case q.Service == openstacksim.ServiceBaremetal && q.Method == http.MethodPatch && strings.HasSuffix(q.Path, "/nodes/"+node) && creates == 0:
			patched = true
		case q.Service == openstacksim.ServiceCompute && q.Method == http.MethodPost && strings.HasSuffix(q.Path, "/servers") && q.Status < 300:
			if !patched {
				t.Error("the server was created before the stale instance_uuid was cleared")
			}
			creates++
		}
	}
	if !patched || creates != 1 {
		t.Errorf("request log: PATCH of the node %v, %d server creates (want 1)", patched, creates)
	}
	t.Logf("force-clear: server %s, steps %d", op.GetServerId(), len(op.GetSteps()))
}
