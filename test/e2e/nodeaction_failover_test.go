package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/tcpproxy"
	"github.com/ironlink/ironlink/test/harness"
)

// A node action across a hub failover, on real processes over
// openstacksim: two hub replicas over one database, the satellite's link
// on hub-a; a REPROVISION asked of hub-b is held in clean wait (the
// provide's automated cleaning); hub-a is killed with SIGKILL, the link
// moves to hub-b, the hold is lifted and the operation ends SUCCEEDED on
// hub-b with Ironic having seen each of its provision requests once
// (manage, provide): nothing lost, nothing repeated.
func TestNodeActionHubFailoverSimulator(t *testing.T) {
	sim := openstacksim.New(openstacksim.Options{ProvisionStep: 200 * time.Millisecond})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	node := sim.SeedLikeTestbed(2)[0] // available
	clouds := writeSimOpsClouds(t, sim)
	const site = "failover-e2e"
	db := pgtest.NewDatabase(t)
	id := newIdentity(t, []string{site}, map[string][]string{"ops-admin": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite}})
	flags := []string{"--operation-resend-after", "3s", "--operation-max-resend-after", "10s", "--heartbeat-interval", "1s", "--stale-after", "60s"}
	addrA, hubA := startHub(t, db, id, append([]string{"--replica", "hub-a"}, flags...)...)
	addrB, _ := startHub(t, db, id, append([]string{"--replica", "hub-b"}, flags...)...)
	lb, err := tcpproxy.New("127.0.0.1:0", []string{addrA}, nil) // the link starts on hub-a
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	harness.Start(t, "ironlink-satellite", bins.Satellite(), append([]string{"--site", site, "--hub", lb.Addr(), "--clouds-yaml", clouds,
		"--cloud", "sim", "--operations-cloud", "sim-ops", "--operations-poll-interval", "200ms",
		"--state-file", filepath.Join(t.TempDir(), "state.json"), "--poll-interval", "1s", "--max-backoff", "2s"}, id.satelliteArgs(site)...)...)
	linkOn := func(replica string) {
		t.Helper()
		harness.Eventually(t, time.Minute, func() error {
			var r *string
			_ = harness.Pool(t, db).QueryRow(context.Background(), `SELECT link_replica FROM sites WHERE name = $1`, site).Scan(&r)
			if r == nil || *r != replica {
				return fmt.Errorf("link on %v, want %s", r, replica)
			}
			return nil
		})
	}
	linkOn("hub-a")
	lb.SetBackends([]string{addrA, addrB})
	opsB := ironlinkv1.NewOperationServiceClient(id.dialAs(t, addrB, "ops-admin"))

	sim.HoldWaitStates(true)
	defer sim.HoldWaitStates(false)
	sim.ResetRequests()
	t0 := time.Now()
	var opID string
	harness.Eventually(t, time.Minute, func() error { // until the satellite announced operations
		r, err := opsB.StartOperation(context.Background(), &ironlinkv1.StartOperationRequest{Site: site, Devices: []string{node.UUID},
			Kind: ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION, Reason: "e2e: failover"})
		if err != nil {
			return err
		}
		opID = r.GetOperations()[0].GetOperationId()
		return nil
	})
	harness.Eventually(t, time.Minute, func() error {
		if n, _ := sim.Node(node.UUID); n.ProvisionState != "clean wait" {
			return fmt.Errorf("node is %q", n.ProvisionState)
		}
		return nil
	})
	hubA.Kill()
	linkOn("hub-b")
	sim.HoldWaitStates(false)
	op := waitOp(t, opsB, opID, 2*time.Minute)
	wantOpState(t, op, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	if n, _ := sim.Node(node.UUID); n.ProvisionState != "available" {
		t.Errorf("node is %q after REPROVISION, want available", n.ProvisionState)
	}
	var puts []string
	for _, r := range sim.Requests() {
		if r.Method == http.MethodPut && strings.HasSuffix(r.Path, node.UUID+"/states/provision") {
			puts = append(puts, r.Path)
		}
	}
	if len(puts) != 2 || provisionRequests(op, "manage") != 1 || provisionRequests(op, "provide") != 1 {
		t.Errorf("Ironic saw %d provision requests (want 2: manage, provide); the record has manage %d, provide %d\n%s",
			len(puts), provisionRequests(op, "manage"), provisionRequests(op, "provide"), stepSummary(op))
	}
	t.Logf("MEASURE REPROVISION across a hub kill -9 (simulator): %s", time.Since(t0).Round(time.Millisecond))
}
