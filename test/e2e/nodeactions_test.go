package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/test/harness"
)

// This file runs the node actions end to end (docs/reference/operations.md
// "Node actions", "Adopt") on a real ironlink-hub and ironlink-satellite:
// power off, power on, maintenance set and clear, an adoption, a reboot
// and a reprovision (undeploy, clean, provide), each with the satellite
// killed with SIGKILL once its first write is on the record and started
// again; each ends SUCCEEDED and its record (kept across the delivery
// attempts) shows no request repeated.

// TestNodeActionsKillSimulator runs it on openstacksim, whose power
// changes take 500 ms to settle.
func TestNodeActionsKillSimulator(t *testing.T) {
	sim := openstacksim.New(openstacksim.Options{ProvisionStep: 500 * time.Millisecond})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	sim.SeedLikeTestbed(2)
	path := writeSimOpsClouds(t, sim)
	c := connectCloud(t, path, "sim")
	c.sim = sim
	runNodeActionsKill(t, &opsEnv{cloud: c, opsCloud: "sim-ops"})
}

// TestNodeActionsKillRealCloud runs it on the real cloud (the test bed,
// under its lock): IRONLINK_E2E_OPERATIONS_CLOUD names the operations
// credential's cloud, restricted to
// deploy/openstack/operations-access-rules.yaml.
func TestNodeActionsKillRealCloud(t *testing.T) {
	c := realCloud(t)
	oc := os.Getenv("IRONLINK_E2E_OPERATIONS_CLOUD")
	if oc == "" {
		if os.Getenv("IRONLINK_E2E_REQUIRE_REAL") == "1" {
			t.Fatal("IRONLINK_E2E_REQUIRE_REAL=1 but IRONLINK_E2E_OPERATIONS_CLOUD is not set")
		}
		t.Skip("no operations credential: set IRONLINK_E2E_OPERATIONS_CLOUD")
	}
	runNodeActionsKill(t, &opsEnv{cloud: c, opsCloud: oc})
}

// powerRequests counts the operation's recorded PUT …/states/power with
// detail prefix target=TARGET, over every attempt's steps.
func powerRequests(op *ironlinkv1.Operation, target string) int {
	n := 0
	for _, s := range op.GetSteps() {
		for _, r := range s.GetRequests() {
			if r.GetMethod() == http.MethodPut && strings.HasSuffix(r.GetPath(), "/states/power") &&
				(r.GetDetail() == "target="+target || strings.HasPrefix(r.GetDetail(), "target="+target+" ")) && r.GetStatus() == http.StatusAccepted {
				n++
			}
		}
	}
	return n
}

// provisionRequests counts the operation's accepted PUT
// …/states/provision with target TARGET.
func provisionRequests(op *ironlinkv1.Operation, target string) int {
	n := 0
	for _, s := range op.GetSteps() {
		for _, r := range s.GetRequests() {
			if r.GetMethod() == http.MethodPut && strings.HasSuffix(r.GetPath(), "/states/provision") && r.GetDetail() == "target="+target && r.GetStatus() == http.StatusAccepted {
				n++
			}
		}
	}
	return n
}

// nodeActs is the running system of one node-actions run.
type nodeActs struct {
	t       *testing.T
	e       *opsEnv
	api     ironlinkv1.OperationServiceClient
	satArgs []string
	sat     *harness.Proc
	node    string
}

const nodeActsSite = "nodeact-e2e"

func startNodeActs(t *testing.T, e *opsEnv) *nodeActs {
	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{nodeActsSite}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	addr, _ := startHub(t, db, id, "--replica", "hub-a", "--operation-resend-after", "3s", "--operation-max-resend-after", "10s", "--heartbeat-interval", "1s")
	h := &nodeActs{t: t, e: e, api: ironlinkv1.NewOperationServiceClient(id.dialAs(t, addr, "ops-admin"))}
	h.satArgs = append([]string{"--site", nodeActsSite, "--hub", addr, "--clouds-yaml", e.cloudsYAML, "--cloud", e.name,
		"--operations-cloud", e.opsCloud, "--operations-poll-interval", "200ms", "--state-file", filepath.Join(t.TempDir(), "state.json"),
		"--poll-interval", "2s", "--max-backoff", "2s", "--auth-backoff", "1s", "--log-level", "debug"}, id.satelliteArgs(nodeActsSite)...)
	h.sat = harness.Start(t, "ironlink-satellite", bins.Satellite(), h.satArgs...)
	t.Cleanup(func() {
		if h.node != "" {
			ctx := context.Background()
			_, _ = e.bm.Put(ctx, e.bm.ServiceURL("nodes", h.node, "maintenance"), map[string]any{}, nil, &gophercloud.RequestOpts{OkCodes: []int{202, 204}})
			_, _ = e.bm.Delete(ctx, e.bm.ServiceURL("nodes", h.node), &gophercloud.RequestOpts{OkCodes: []int{202, 204}})
		}
	})
	return h
}

// start starts one operation (on the run's node unless req names targets),
// waiting for the satellite to link and announce operations.
func (h *nodeActs) start(req *ironlinkv1.StartOperationRequest) *ironlinkv1.Operation {
	h.t.Helper()
	req.Site, req.Reason = nodeActsSite, "e2e node actions"
	if req.GetKind() != ironlinkv1.OperationKind_OPERATION_KIND_ENROL && len(req.GetDevices()) == 0 {
		req.Devices = []string{h.node}
	}
	var r *ironlinkv1.StartOperationResponse
	harness.Eventually(h.t, 60*time.Second, func() error {
		var err error
		r, err = h.api.StartOperation(context.Background(), req)
		// Until the satellite linked and announced the operations
		// capability: NotFound, then FailedPrecondition.
		if status.Code(err) == codes.NotFound || (status.Code(err) == codes.FailedPrecondition && strings.Contains(status.Convert(err).Message(), "capability")) {
			return err
		}
		if err != nil {
			h.t.Fatalf("start %v: %v", req.GetKind(), err)
		}
		return nil
	})
	return r.GetOperations()[0]
}

// run starts kind on the node and waits for it to succeed.
func (h *nodeActs) run(kind ironlinkv1.OperationKind, p *ironlinkv1.OperationParams) *ironlinkv1.Operation {
	h.t.Helper()
	t0 := time.Now()
	op := waitOp(h.t, h.api, h.start(&ironlinkv1.StartOperationRequest{Kind: kind, Params: p}).GetOperationId(), 3*time.Minute)
	wantOpState(h.t, op, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	h.t.Logf("MEASURE %s %v end to end: %s", h.e.name, kind, time.Since(t0).Round(time.Millisecond))
	return op
}

// killDuring starts kind, kills the satellite with SIGKILL once sent says
// the operation's first write is on the record, starts it again and waits
// for the operation to succeed.
func (h *nodeActs) killDuring(kind ironlinkv1.OperationKind, p *ironlinkv1.OperationParams, sent func(*ironlinkv1.Operation) bool) *ironlinkv1.Operation {
	h.t.Helper()
	t0 := time.Now()
	started := h.start(&ironlinkv1.StartOperationRequest{Kind: kind, Params: p})
	harness.Eventually(h.t, 60*time.Second, func() error {
		r, err := h.api.GetOperation(context.Background(), &ironlinkv1.GetOperationRequest{OperationId: started.GetOperationId()})
		if err != nil {
			return err
		}
		if !sent(r.GetOperation()) {
			return fmt.Errorf("nothing sent yet: %s", stepSummary(r.GetOperation()))
		}
		return nil
	})
	h.sat.Kill()
	ps, _, power := h.e.provisionState(h.t, h.node)
	at, err := h.api.GetOperation(context.Background(), &ironlinkv1.GetOperationRequest{OperationId: started.GetOperationId()})
	if err != nil {
		h.t.Fatal(err)
	}
	// A one-request action (maintenance) can end in the few milliseconds
	// between its request and the kill: then there is nothing left to
	// resume, and the check below is only that nothing was sent again.
	finished := at.GetOperation().GetEndTime() != nil
	h.t.Logf("satellite killed %s into %v; node %s, %s; operation %v", time.Since(t0).Round(time.Millisecond), kind, ps, power, at.GetOperation().GetState())
	killed := h.sat
	h.sat = harness.Start(h.t, "ironlink-satellite", bins.Satellite(), h.satArgs...)
	op := waitOp(h.t, h.api, started.GetOperationId(), 3*time.Minute)
	wantOpState(h.t, op, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	if !killed.Exited() || (!finished && (op.GetAttempts() < 2 || !strings.Contains(h.sat.Output(), started.GetOperationId()))) {
		h.t.Errorf("%v: the killed satellite still runs (%v), or the restarted one never took the operation over (attempts %d)", kind, !killed.Exited(), op.GetAttempts())
	}
	h.t.Logf("MEASURE %s %v across a satellite kill -9: %s, %d OpenStack writes on its record; %s", h.e.name, kind, time.Since(t0).Round(time.Millisecond), writes(op), stepSummary(op))
	return op
}

func runNodeActionsKill(t *testing.T, e *opsEnv) {
	h := startNodeActs(t, e)
	enrol := waitOp(t, h.api, h.start(&ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL,
		Nodes: []*ironlinkv1.NodeSpec{opsSpec("nodeact-"+randID(), randMACAddr())}}).GetOperationId(), 2*time.Minute)
	wantOpState(t, enrol, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	h.node = enrol.GetDeviceId()
	once := func(op *ironlinkv1.Operation, what string, n int) {
		t.Helper()
		if n != 1 {
			t.Errorf("%v: the record has %d %s requests across the kill, want 1: %s", op.GetKind(), n, what, stepSummary(op))
		}
	}
	if _, _, p := e.provisionState(t, h.node); p != "power off" {
		h.run(ironlinkv1.OperationKind_OPERATION_KIND_POWER_OFF, nil) // so that the power on has work to do
	}
	op := h.killDuring(ironlinkv1.OperationKind_OPERATION_KIND_POWER_ON, nil, func(op *ironlinkv1.Operation) bool { return powerRequests(op, "power on") > 0 })
	once(op, "power-on", powerRequests(op, "power on"))
	mark := e.mark()
	op = h.killDuring(ironlinkv1.OperationKind_OPERATION_KIND_REBOOT, nil, func(op *ironlinkv1.Operation) bool { return powerRequests(op, "power off") > 0 })
	if off, on := powerRequests(op, "power off"), powerRequests(op, "power on"); off != 1 || on != 1 {
		t.Errorf("the reboot's record has %d power-off and %d power-on requests across the kill, want 1 and 1: %s", off, on, stepSummary(op))
	}
	if _, _, p := e.provisionState(t, h.node); p != "power on" {
		t.Errorf("after the reboot the node is %q", p)
	}
	if e.sim != nil {
		n := 0
		for _, r := range e.sim.Requests()[mark:] {
			if r.Method == http.MethodPut && strings.HasSuffix(r.Path, "/nodes/"+h.node+"/states/power") && r.Status < 300 {
				n++
			}
		}
		if n != 2 {
			t.Errorf("the simulator answered %d power requests for the reboot, want 2 (off, on)", n)
		}
	}

	op = h.killDuring(ironlinkv1.OperationKind_OPERATION_KIND_POWER_OFF, nil, func(op *ironlinkv1.Operation) bool { return powerRequests(op, "power off") > 0 })
	once(op, "power-off", powerRequests(op, "power off"))
	if _, _, p := e.provisionState(t, h.node); p != "power off" {
		t.Fatalf("after POWER_OFF the node is %q", p)
	}
	op = h.killDuring(ironlinkv1.OperationKind_OPERATION_KIND_SET_MAINTENANCE, &ironlinkv1.OperationParams{MaintenanceReason: "e2e: DIMM swap"},
		func(op *ironlinkv1.Operation) bool { return maintenanceRequests(op, http.MethodPut) > 0 })
	once(op, "set-maintenance", maintenanceRequests(op, http.MethodPut))
	op = h.killDuring(ironlinkv1.OperationKind_OPERATION_KIND_CLEAR_MAINTENANCE, nil, func(op *ironlinkv1.Operation) bool { return maintenanceRequests(op, http.MethodDelete) > 0 })
	once(op, "clear-maintenance", maintenanceRequests(op, http.MethodDelete))

	op = h.killDuring(ironlinkv1.OperationKind_OPERATION_KIND_ADOPT, &ironlinkv1.OperationParams{Adopt: &ironlinkv1.AdoptParams{
		ImageSource: "http://127.0.0.1:1/slurm-worker.img", RootGb: 10}}, func(op *ironlinkv1.Operation) bool { return provisionRequests(op, "adopt") > 0 })
	once(op, "adopt", provisionRequests(op, "adopt"))
	if ps, _, _ := e.provisionState(t, h.node); ps != "active" {
		t.Fatalf("after ADOPT the node is %q", ps)
	}

	// The adopted node is reprovisioned: undeployed (Ironic cleans on the
	// way), then cleaned by hand and provided.
	op = h.killDuring(ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION, &ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{{Interface: "bios", Step: "factory_reset"}}},
		func(op *ironlinkv1.Operation) bool { return provisionRequests(op, "deleted") > 0 })
	for _, target := range []string{"deleted", "manage", "clean", "provide"} {
		once(op, target, provisionRequests(op, target))
	}
	if ps, _, _ := e.provisionState(t, h.node); ps != "available" {
		t.Errorf("after the reprovision the node is %q", ps)
	}
}

// maintenanceRequests counts the operation's accepted PUT (set) or DELETE
// (clear) …/maintenance.
func maintenanceRequests(op *ironlinkv1.Operation, method string) int {
	n := 0
	for _, s := range op.GetSteps() {
		for _, r := range s.GetRequests() {
			if r.GetMethod() == method && strings.HasSuffix(r.GetPath(), "/maintenance") && r.GetStatus() == http.StatusAccepted {
				n++
			}
		}
	}
	return n
}

// writes counts the requests on the operation's record (its writes to
// OpenStack, every attempt's).
func writes(op *ironlinkv1.Operation) int {
	n := 0
	for _, s := range op.GetSteps() {
		n += len(s.GetRequests())
	}
	return n
}
