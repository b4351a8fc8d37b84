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
// "Node actions"): a real ironlink-hub and ironlink-satellite, the
// satellite killed with SIGKILL in the middle of a REBOOT and started
// again; the operation ends SUCCEEDED and its record (kept across the
// delivery attempts) shows one power off and one power on.

// TestNodeActionsKillSimulator runs it on openstacksim, whose power
// changes take 500 ms to settle.
func TestNodeActionsKillSimulator(t *testing.T) {
	sim := openstacksim.New(openstacksim.Options{ProvisionStep: 500 * time.Millisecond})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	sim.SeedLikeTestbed(2)
	ops := strings.TrimPrefix(string(sim.CloudsYAML("sim-ops")), "clouds:\n")
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := os.WriteFile(path, append(sim.CloudsYAML("sim"), ops...), 0o600); err != nil {
		t.Fatal(err)
	}
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

func runNodeActionsKill(t *testing.T, e *opsEnv) {
	ctx := context.Background()
	const site = "nodeact-e2e"
	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{site}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	addr, _ := startHub(t, db, id, "--replica", "hub-a", "--operation-resend-after", "3s", "--operation-max-resend-after", "10s", "--heartbeat-interval", "1s")
	satArgs := append([]string{"--site", site, "--hub", addr, "--clouds-yaml", e.cloudsYAML, "--cloud", e.name,
		"--operations-cloud", e.opsCloud, "--operations-poll-interval", "200ms", "--state-file", filepath.Join(t.TempDir(), "state.json"),
		"--poll-interval", "2s", "--max-backoff", "2s", "--auth-backoff", "1s", "--log-level", "debug"}, id.satelliteArgs(site)...)
	sat := harness.Start(t, "ironlink-satellite", bins.Satellite(), satArgs...)
	api := ironlinkv1.NewOperationServiceClient(id.dialAs(t, addr, "ops-admin"))
	var nodeID string
	t.Cleanup(func() {
		if nodeID != "" {
			_, _ = e.bm.Put(ctx, e.bm.ServiceURL("nodes", nodeID, "maintenance"), map[string]any{}, nil, &gophercloud.RequestOpts{OkCodes: []int{202, 204}})
			_, _ = e.bm.Delete(ctx, e.bm.ServiceURL("nodes", nodeID), &gophercloud.RequestOpts{OkCodes: []int{202, 204}})
		}
	})
	start := func(req *ironlinkv1.StartOperationRequest) *ironlinkv1.Operation {
		t.Helper()
		req.Site, req.Reason = site, "e2e node actions"
		var r *ironlinkv1.StartOperationResponse
		harness.Eventually(t, 60*time.Second, func() error {
			var err error
			r, err = api.StartOperation(ctx, req)
			// Until the satellite linked and announced the operations
			// capability: NotFound, then FailedPrecondition.
			if status.Code(err) == codes.NotFound || (status.Code(err) == codes.FailedPrecondition && strings.Contains(status.Convert(err).Message(), "capability")) {
				return err
			}
			if err != nil {
				t.Fatalf("start %v: %v", req.GetKind(), err)
			}
			return nil
		})
		return r.GetOperations()[0]
	}
	enrol := waitOp(t, api, start(&ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL,
		Nodes: []*ironlinkv1.NodeSpec{opsSpec("nodeact-"+randID(), randMACAddr())}}).GetOperationId(), 2*time.Minute)
	wantOpState(t, enrol, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	nodeID = enrol.GetDeviceId()
	wantOpState(t, waitOp(t, api, start(&ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_POWER_ON, Devices: []string{nodeID}}).GetOperationId(), 2*time.Minute),
		ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)

	mark, t0 := e.mark(), time.Now()
	reboot := start(&ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_REBOOT, Devices: []string{nodeID}})
	// Kill once the power off is on the record: Ironic is (or was just)
	// powering the node off and the satellite has not asked for on yet.
	harness.Eventually(t, 60*time.Second, func() error {
		r, err := api.GetOperation(ctx, &ironlinkv1.GetOperationRequest{OperationId: reboot.GetOperationId()})
		if err != nil {
			return err
		}
		if powerRequests(r.GetOperation(), "power off") == 0 {
			return fmt.Errorf("no power off recorded yet: %s", stepSummary(r.GetOperation()))
		}
		return nil
	})
	sat.Kill()
	power := "unknown"
	if _, _, p := e.provisionState(t, nodeID); p != "" {
		power = p
	}
	t.Logf("satellite killed %s into the reboot; node power %s", time.Since(t0).Round(time.Millisecond), power)
	restarted := harness.Start(t, "ironlink-satellite", bins.Satellite(), satArgs...)
	op := waitOp(t, api, reboot.GetOperationId(), 2*time.Minute)
	wantOpState(t, op, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	if !sat.Exited() || !strings.Contains(restarted.Output(), reboot.GetOperationId()) {
		t.Errorf("the killed satellite still runs (%v), or the restarted one never received the reboot", !sat.Exited())
	}
	if off, on := powerRequests(op, "power off"), powerRequests(op, "power on"); off != 1 || on != 1 {
		t.Errorf("the reboot's record has %d power-off and %d power-on requests across the kill, want 1 and 1: %s", off, on, stepSummary(op))
	}
	if op.GetAttempts() < 2 {
		t.Errorf("attempts %d: the restarted satellite did not take the reboot over", op.GetAttempts())
	}
	if _, _, p := e.provisionState(t, nodeID); p != "power on" {
		t.Errorf("after the reboot the node is %q", p)
	}
	if e.sim != nil {
		n := 0
		for _, r := range e.sim.Requests()[mark:] {
			if r.Method == http.MethodPut && strings.HasSuffix(r.Path, "/nodes/"+nodeID+"/states/power") && r.Status < 300 {
				n++
			}
		}
		if n != 2 {
			t.Errorf("the simulator answered %d power requests for the reboot, want 2 (off, on)", n)
		}
	}
	t.Logf("MEASURE %s REBOOT across a satellite kill -9: %s, %d OpenStack requests (-1: no request log); %s",
		e.name, time.Since(t0).Round(time.Millisecond), e.opRequests(mark, nodeID), stepSummary(op))
}
