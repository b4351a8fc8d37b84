package operations_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
	"github.com/ironlink/ironlink/satellite/operations"
)

// TestNodeActionsSimulator runs the node actions against openstacksim,
// whose power changes and provision steps take 20 ms each.
func TestNodeActionsSimulator(t *testing.T) {
	sim, cfg := ostest.StartSim(t, openstacksim.Options{ProvisionStep: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := openstack.Connect(ctx, cfg, ostest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	ocfg := cfg
	ocfg.WrapTransport = rec.wrap
	oc, _, err := operations.Connect(ctx, ocfg, ostest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	runNodeActions(t, &env{name: "sim", clients: oc, rec: rec, admin: admin, poll: 20 * time.Millisecond, timeout: 30 * time.Second, sim: simHold{sim}})
}

// TestNodeActionsRealCloud runs the node actions against the real cloud
// (the test bed's fake-hardware nodes) with a credential restricted to
// deploy/openstack/operations-access-rules.yaml. Run it under the bed's
// lock (flock /work/testbed/bed.lock on the shared bed).
func TestNodeActionsRealCloud(t *testing.T) {
	cfg := ostest.RealCloudConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := openstack.Connect(ctx, cfg, ostest.Logger(t))
	if err != nil {
		t.Fatalf("connect %s: %v", cfg.Cloud, err)
	}
	pw := os.Getenv("IRONLINK_E2E_PASSWORD_CLOUD")
	if pw == "" {
		pw = "testbed-agent-password"
	}
	opsYAML := createOperationsCredential(t, cfg.CloudsYAML, pw)
	rec := &recorder{}
	oc, _, err := operations.Connect(ctx, openstack.Config{CloudsYAML: opsYAML, Cloud: "operations", Nova: openstack.NovaOff, WrapTransport: rec.wrap}, ostest.Logger(t))
	if err != nil {
		t.Fatalf("connect with the operations credential: %v", err)
	}
	runNodeActions(t, &env{name: "testbed", clients: oc, rec: rec, admin: admin, poll: time.Second, timeout: 5 * time.Minute})
}

// powerPuts counts the accepted PUT …/states/power with target on node id.
func powerPuts(reqs []recorded, id, target string) int {
	n := 0
	for _, r := range reqs {
		if r.Method == http.MethodPut && strings.HasSuffix(r.Path, "/nodes/"+id+"/states/power") && r.Target == target && r.Status < 300 {
			n++
		}
	}
	return n
}

// runNodeActions enrols a node of its own and runs every node action on
// it, a reboot interrupted between its halves included; the node is
// deleted at the end.
func runNodeActions(t *testing.T, e *env) {
	var id string
	t.Cleanup(func() {
		if id != "" {
			deleteNode(e, id)
		}
	})
	p, _, _ := runOp(t, e, &ironlinkv1.OperationRequest{OperationId: opID(), Attempt: 1, Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL,
		Node: spec("nodeact-"+randHex(3), randMAC())})
	wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	id = p.GetDeviceId()
	act := func(t *testing.T, name string, kind ironlinkv1.OperationKind, params *ironlinkv1.OperationParams) []recorded {
		t.Helper()
		before := len(e.rec.snapshot())
		p, _, d := runOp(t, e, ironicReq(kind, id, params))
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		measure(t, e, name, before, d)
		return e.rec.snapshot()[before:]
	}
	power := func(t *testing.T) string {
		t.Helper()
		n := getNode(t, e, id)
		if n["target_power_state"] != nil {
			t.Fatalf("node %s still has target_power_state %v after the operation ended", id, n["target_power_state"])
		}
		s, _ := n["power_state"].(string)
		return s
	}
	t.Run("power on, power off, power on again is a no-op", func(t *testing.T) {
		act(t, "POWER_ON", ironlinkv1.OperationKind_OPERATION_KIND_POWER_ON, &ironlinkv1.OperationParams{PowerTimeoutSeconds: 60})
		if got := power(t); got != "power on" {
			t.Fatalf("after POWER_ON: %q", got)
		}
		reqs := act(t, "POWER_OFF", ironlinkv1.OperationKind_OPERATION_KIND_POWER_OFF, nil)
		if got := power(t); got != "power off" {
			t.Fatalf("after POWER_OFF: %q", got)
		}
		if n := powerPuts(reqs, id, "power off"); n != 1 {
			t.Errorf("POWER_OFF sent %d power-off requests, want 1", n)
		}
		act(t, "POWER_ON", ironlinkv1.OperationKind_OPERATION_KIND_POWER_ON, nil)
		reqs = act(t, "POWER_ON(already on)", ironlinkv1.OperationKind_OPERATION_KIND_POWER_ON, nil)
		if n := powerPuts(reqs, id, "power on"); n != 0 {
			t.Errorf("POWER_ON of a node already on sent %d power requests", n)
		}
	})
	t.Run("reboot is one power off then one power on", func(t *testing.T) {
		reqs := act(t, "REBOOT", ironlinkv1.OperationKind_OPERATION_KIND_REBOOT, nil)
		if off, on := powerPuts(reqs, id, "power off"), powerPuts(reqs, id, "power on"); off != 1 || on != 1 {
			t.Errorf("REBOOT sent %d power-off and %d power-on requests, want 1 and 1", off, on)
		}
		if got := power(t); got != "power on" {
			t.Fatalf("after REBOOT: %q", got)
		}
		reqs = act(t, "REBOOT(soft)", ironlinkv1.OperationKind_OPERATION_KIND_REBOOT, &ironlinkv1.OperationParams{Soft: true})
		if off, on := powerPuts(reqs, id, "soft power off"), powerPuts(reqs, id, "power on"); off != 1 || on != 1 {
			t.Errorf("soft REBOOT sent %d soft-power-off and %d power-on requests, want 1 and 1", off, on)
		}
		if n := getNode(t, e, id); n["extra"].(map[string]any)["ironlink_operation"] != nil {
			t.Errorf("the reboot's marker stayed on the node: %v", n["extra"])
		}
	})
	t.Run("a reboot whose satellite stops between the halves resumes without repeating", func(t *testing.T) {
		rebootResumes(t, e, id)
	})
	t.Run("maintenance set with a reason, then cleared", func(t *testing.T) {
		reason := "ironlink node action test " + randHex(2)
		act(t, "SET_MAINTENANCE", ironlinkv1.OperationKind_OPERATION_KIND_SET_MAINTENANCE, &ironlinkv1.OperationParams{MaintenanceReason: reason})
		if n := getNode(t, e, id); n["maintenance"] != true || n["maintenance_reason"] != reason {
			t.Fatalf("after SET_MAINTENANCE: maintenance %v, reason %v", n["maintenance"], n["maintenance_reason"])
		}
		act(t, "CLEAR_MAINTENANCE", ironlinkv1.OperationKind_OPERATION_KIND_CLEAR_MAINTENANCE, nil)
		if n := getNode(t, e, id); n["maintenance"] != false {
			t.Fatalf("after CLEAR_MAINTENANCE: maintenance %v (%v)", n["maintenance"], n["maintenance_reason"])
		}
	})
	t.Run("adopt takes the manageable node to active without deploying", func(t *testing.T) {
		adoptNode(t, e, id, act)
	})
	t.Run("reprovision undeploys an active node once, then cleans and provides", func(t *testing.T) {
		reqs := act(t, "REPROVISION", ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION, nil)
		for target, want := range map[string]int{"deleted": 1, "rebuild": 0, "manage": 0, "provide": 0} {
			if n := provisionPuts(reqs, id, target); n != want {
				t.Errorf("REPROVISION sent %d %q requests, want %d", n, target, want)
			}
		}
		if n := getNode(t, e, id); n["provision_state"] != "available" {
			t.Fatalf("after REPROVISION: %v", n["provision_state"])
		}
		reqs = act(t, "REPROVISION(available, clean steps)", ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION,
			&ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{{Interface: "bios", Step: "factory_reset"}}})
		for target, want := range map[string]int{"deleted": 0, "manage": 1, "clean": 1, "provide": 1} {
			if n := provisionPuts(reqs, id, target); n != want {
				t.Errorf("REPROVISION of an available node sent %d %q requests, want %d", n, target, want)
			}
		}
		if n := getNode(t, e, id); n["provision_state"] != "available" || n["extra"].(map[string]any)["ironlink_operation"] != nil {
			t.Fatalf("after REPROVISION: %v, extra %v", n["provision_state"], n["extra"])
		}
	})
	t.Run("a reprovision redelivered to a restarted satellite after it ended reports its result, nothing repeated", func(t *testing.T) {
		redeliveredAfterEnd(t, e, id)
	})
}

// redeliveredAfterEnd runs a REPROVISION of the available node id to its
// end, then delivers the same operation again (attempt 2, a redelivery)
// to a new runner, as the hub does when a satellite restarted before the
// final progress reached it: the marker is gone and the node is available,
// a state REPROVISION starts from, yet the redelivery reports SUCCEEDED
// from the result the first run left in the node's extra and sends no
// write to Ironic.
func redeliveredAfterEnd(t *testing.T, e *env, id string) {
	req := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_REPROVISION, id, nil)
	p, _, _ := runOp(t, e, req)
	wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	n := getNode(t, e, id)
	last, _ := n["extra"].(map[string]any)["ironlink_last_operation"].(map[string]any)
	if n["provision_state"] != "available" || n["extra"].(map[string]any)["ironlink_operation"] != nil ||
		last["operation_id"] != req.GetOperationId() || last["state"] != "SUCCEEDED" {
		t.Fatalf("after REPROVISION: %v, extra %v", n["provision_state"], n["extra"])
	}
	before := len(e.rec.snapshot())
	req.Attempt, req.Redelivery = 2, true
	p, _, d := runOp(t, e, req) // a new runner: the restarted satellite
	wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	reqs := e.rec.snapshot()[before:]
	t.Logf("MEASURE %s REPROVISION(redelivered after its end): %s, %d OpenStack requests", e.name, d.Round(time.Millisecond), len(reqs))
	for _, r := range reqs {
		if r.Method != http.MethodGet {
			t.Errorf("the redelivery sent %s %s (target %q): a step repeated", r.Method, r.Path, r.Target)
		}
	}
	steps := p.GetSteps()
	if len(steps) == 0 || steps[len(steps)-1].GetName() != "already-ended" {
		t.Errorf("the redelivery's steps do not say it had ended: %v", steps)
	}
}

// adoptNode adopts the manageable node id: on the simulator a first
// adoption is made to fail (FAILED AdoptFailed with Ironic's last_error,
// the node in adopt failed), and a second ADOPT adopts from there.
func adoptNode(t *testing.T, e *env, id string, act func(*testing.T, string, ironlinkv1.OperationKind, *ironlinkv1.OperationParams) []recorded) {
	params := &ironlinkv1.OperationParams{Adopt: &ironlinkv1.AdoptParams{ImageSource: "http://127.0.0.1:1/slurm-worker.img", RootGb: 10,
		Capabilities: map[string]string{"boot_option": "local"}}}
	if e.sim != nil {
		e.sim.failNextAdoption(id, "boot validation failed: no PXE port")
		before := len(e.rec.snapshot())
		p, _, d := runOp(t, e, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_ADOPT, id, params))
		measure(t, e, "ADOPT(failed)", before, d)
		want := "Error while attempting to adopt node " + id + ": boot validation failed: no PXE port."
		if p.GetState() != ironlinkv1.OperationState_OPERATION_STATE_FAILED || p.GetFailureReason() != "AdoptFailed" || p.GetError() != want {
			t.Fatalf("failed adoption: %v %s: %s", p.GetState(), p.GetFailureReason(), p.GetError())
		}
		if n := getNode(t, e, id); n["provision_state"] != "adopt failed" || n["power_state"] != nil {
			t.Fatalf("after the failed adoption: %v, power %v", n["provision_state"], n["power_state"])
		}
	}
	reqs := act(t, "ADOPT", ironlinkv1.OperationKind_OPERATION_KIND_ADOPT, params)
	if a, d := provisionPuts(reqs, id, "adopt"), provisionPuts(reqs, id, "active"); a != 1 || d != 0 {
		t.Errorf("ADOPT sent %d adopt and %d deploy requests, want 1 and 0", a, d)
	}
	n := getNode(t, e, id)
	ii, _ := n["instance_info"].(map[string]any)
	if n["provision_state"] != "active" || ii["image_source"] != "http://127.0.0.1:1/slurm-worker.img" {
		t.Fatalf("after ADOPT: %v, instance_info %v", n["provision_state"], ii)
	}
	if n["extra"].(map[string]any)["ironlink_operation"] != nil {
		t.Errorf("the adoption's marker stayed: %v", n["extra"])
	}
}

// rebootResumes starts a REBOOT, stops its runner (as a killed satellite)
// once the power off was sent, and runs the same operation as the next
// delivery attempt on a new runner: it ends SUCCEEDED with one power off
// and one power on in all.
func rebootResumes(t *testing.T, e *env, id string) {
	before := len(e.rec.snapshot())
	req := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_REBOOT, id, nil)
	ctx, cancel := context.WithCancel(context.Background())
	r := operations.New(ctx, e.clients, operations.Config{PollInterval: e.poll}, func(*ironlinkv1.OperationProgress) {}, ostest.Logger(t))
	r.Handle(req)
	deadline := time.Now().Add(e.timeout)
	for powerPuts(e.rec.snapshot()[before:], id, "power off") == 0 {
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("the first runner never sent the power off")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	time.Sleep(50 * time.Millisecond) // let the stopped runner's pass end
	req.Attempt, req.Redelivery = 2, true
	start := time.Now()
	p, _, _ := runOp(t, e, req)
	wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	reqs := e.rec.snapshot()[before:]
	t.Logf("MEASURE %s REBOOT(resumed): %s after the restart, %d OpenStack requests in all", e.name, time.Since(start).Round(time.Millisecond), len(reqs))
	if off, on := powerPuts(reqs, id, "power off"), powerPuts(reqs, id, "power on"); off != 1 || on != 1 {
		t.Errorf("resumed REBOOT sent %d power-off and %d power-on requests in all, want 1 and 1", off, on)
	}
	if n := getNode(t, e, id); n["power_state"] != "power on" {
		t.Errorf("after the resumed REBOOT: %v", n["power_state"])
	}
}
