package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/auth"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/pgtest"
	"github.com/ironlink/ironlink/internal/tcpproxy"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
	"github.com/ironlink/ironlink/test/harness"
)

// This file runs issue 13's operations suite end to end: real ironlink-hub
// replicas (two, behind a TCP load balancer) and a real ironlink-satellite
// with --operations-cloud, against the simulator (always) or a real cloud
// (IRONLINK_E2E_CLOUDS_YAML / IRONLINK_E2E_CLOUD plus
// IRONLINK_E2E_OPERATIONS_CLOUD naming the operations credential's cloud in
// the same clouds.yaml). Operators talk to the OperationService as a user
// would; the test looks behind ironlink's back only through Ironic's API and
// the simulator's request log.

// opsEnv is one cloud the operations suite runs against.
type opsEnv struct {
	*cloud
	opsCloud string
	// image is the Glance image NOVA_CREATE boots.
	image string
	// goodStep is a manual clean step that succeeds on this cloud.
	goodStep *ironlinkv1.CleanStep
}

// TestOperationsSimulator runs the suite on openstacksim with every
// transition stepping every 100 ms.
func TestOperationsSimulator(t *testing.T) {
	sim := openstacksim.New(openstacksim.Options{ProvisionStep: 100 * time.Millisecond})
	if err := sim.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	sim.SeedLikeTestbed(6)
	// One application credential, two clouds: observation and operations.
	path := writeSimOpsClouds(t, sim)
	c := connectCloud(t, path, "sim")
	c.sim = sim
	runOperationsSuite(t, &opsEnv{cloud: c, opsCloud: "sim-ops", image: "testbed-image",
		goodStep: &ironlinkv1.CleanStep{Interface: "deploy", Step: "erase_devices_metadata"}})
}

// TestOperationsRealCloud runs the suite on a real cloud (the test bed):
// IRONLINK_E2E_OPERATIONS_CLOUD names the cloud of the operations
// credential in IRONLINK_E2E_CLOUDS_YAML. The checks that need the
// simulator's hooks (holding a wait state, its request log) are left out
// there and say so.
func TestOperationsRealCloud(t *testing.T) {
	c := realCloud(t)
	oc := os.Getenv("IRONLINK_E2E_OPERATIONS_CLOUD")
	if oc == "" {
		if os.Getenv("IRONLINK_E2E_REQUIRE_REAL") == "1" {
			t.Fatal("IRONLINK_E2E_REQUIRE_REAL=1 but IRONLINK_E2E_OPERATIONS_CLOUD is not set: no operations credential to test with")
		}
		t.Skip("no operations credential: set IRONLINK_E2E_OPERATIONS_CLOUD to the cloud in IRONLINK_E2E_CLOUDS_YAML restricted to deploy/openstack/operations-access-rules.yaml")
	}
	runOperationsSuite(t, &opsEnv{cloud: c, opsCloud: oc, image: "testbed-image",
		goodStep: &ironlinkv1.CleanStep{Interface: "bios", Step: "factory_reset"}})
}

// opsHarness is the running system of one suite run.
type opsHarness struct {
	t       *testing.T
	e       *opsEnv
	site    string
	id      *identity
	db      string
	lb      *tcpproxy.Proxy
	hubA    *harness.Proc
	satArgs []string
	sat     *harness.Proc
	// opsA / opsB are the OperationService of replica hub-a / hub-b.
	opsA, opsB ironlinkv1.OperationServiceClient
	fcB        ironlinkv1.FleetServiceClient
}

func (h *opsHarness) startSatellite() {
	h.sat = harness.Start(h.t, "ironlink-satellite", bins.Satellite(), h.satArgs...)
}

// linkReplica is the replica holding the site's link ("" when none).
func (h *opsHarness) linkReplica() string {
	var r *string
	_ = harness.Pool(h.t, h.db).QueryRow(context.Background(), `SELECT link_replica FROM sites WHERE name = $1`, h.site).Scan(&r)
	if r == nil {
		return ""
	}
	return *r
}

// waitOperationsLink waits until the site's link is on replica and
// announced the operations capability (a StartOperation is accepted).
func (h *opsHarness) waitLink(replica string) {
	h.t.Helper()
	harness.Eventually(h.t, 60*time.Second, func() error {
		if r := h.linkReplica(); r != replica {
			return fmt.Errorf("link on %q, want %q", r, replica)
		}
		return nil
	})
}

func opsFinal(s ironlinkv1.OperationState) bool {
	return s == ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED || s == ironlinkv1.OperationState_OPERATION_STATE_FAILED ||
		s == ironlinkv1.OperationState_OPERATION_STATE_CANCELLED
}

// waitOp polls GetOperation until the operation is final.
func waitOp(t *testing.T, oc ironlinkv1.OperationServiceClient, id string, timeout time.Duration) *ironlinkv1.Operation {
	t.Helper()
	var op *ironlinkv1.Operation
	harness.Eventually(t, timeout, func() error {
		r, err := oc.GetOperation(context.Background(), &ironlinkv1.GetOperationRequest{OperationId: id})
		if err != nil {
			return err
		}
		op = r.GetOperation()
		if !opsFinal(op.GetState()) {
			return fmt.Errorf("operation %s is %v (provision state %q, %d steps, attempts %d)", id, op.GetState(), op.GetProvisionState(), len(op.GetSteps()), op.GetAttempts())
		}
		return nil
	})
	return op
}

func wantOpState(t *testing.T, op *ironlinkv1.Operation, want ironlinkv1.OperationState) {
	t.Helper()
	if op.GetState() != want {
		t.Fatalf("operation %s (%v on %s) ended %v, want %v; last error %q; steps %v", op.GetOperationId(), op.GetKind(), op.GetDeviceId(),
			op.GetState(), want, op.GetLastError(), stepSummary(op))
	}
}

func stepSummary(op *ironlinkv1.Operation) string {
	var s []string
	for _, st := range op.GetSteps() {
		x := fmt.Sprintf("%s(%s)#%d", st.GetName(), st.GetObservedState(), st.GetAttempt())
		for _, r := range st.GetRequests() {
			x += fmt.Sprintf("[%s %s %s → %d]", r.GetMethod(), r.GetPath(), r.GetDetail(), r.GetStatus())
		}
		s = append(s, x)
	}
	return strings.Join(s, " ")
}

// provisionState reads the node's provision state from Ironic directly.
func (c *cloud) provisionState(t *testing.T, id string) (state, instance, power string) {
	t.Helper()
	var n struct {
		ProvisionState string  `json:"provision_state"`
		InstanceUUID   *string `json:"instance_uuid"`
		PowerState     *string `json:"power_state"`
	}
	if _, err := c.bm.Get(context.Background(), c.bm.ServiceURL("nodes", id), &n, nil); err != nil {
		t.Fatalf("get node %s: %v", id, err)
	}
	if n.InstanceUUID != nil {
		instance = *n.InstanceUUID
	}
	if n.PowerState != nil {
		power = *n.PowerState
	}
	return n.ProvisionState, instance, power
}

// opRequests counts the satellite's OpenStack requests recorded since mark
// that belong to operations on the nodes in ids: requests naming one of
// them, node/port creation, driver and flavor lookups and server
// create/delete (the periodic listings and Placement calls of observation
// are left out). -1 without the simulator.
func (e *opsEnv) opRequests(mark int, ids ...string) int {
	if e.sim == nil {
		return -1
	}
	n := 0
	for _, r := range e.sim.Requests()[mark:] {
		if !strings.HasPrefix(r.UserAgent, "ironlink-satellite") || r.Service == openstacksim.ServiceIdentity {
			continue
		}
		named := false
		for _, id := range ids {
			if id != "" && strings.Contains(r.Path, id) {
				named = true
			}
		}
		switch {
		case named,
			r.Method == http.MethodPost && (r.Path == "/v1/nodes" || r.Path == "/v1/ports" || strings.HasSuffix(r.Path, "/servers")),
			r.Path == "/v1/drivers", strings.HasPrefix(r.Path, "/v2.1/flavors"),
			r.Method == http.MethodDelete && strings.Contains(r.Path, "/servers/"):
			n++
		case r.Method == http.MethodGet && (r.Path == "/v1/nodes" || r.Path == "/v1/ports") && strings.Contains(r.Query, "name"):
			n++
		}
	}
	return n
}

func (e *opsEnv) mark() int {
	if e.sim == nil {
		return 0
	}
	return len(e.sim.Requests())
}

// provisionPuts counts the satellite's accepted PUT …/nodes/{id}/states/provision since mark.
func (e *opsEnv) provisionPuts(mark int, id string) int {
	n := 0
	for _, r := range e.sim.Requests()[mark:] {
		if r.Method == http.MethodPut && strings.Contains(r.Path, "/nodes/"+id+"/states/provision") && r.Status < 300 &&
			strings.HasPrefix(r.UserAgent, "ironlink-satellite") {
			n++
		}
	}
	return n
}

func opsSpec(name, mac string) *ironlinkv1.NodeSpec {
	props, _ := structpb.NewStruct(map[string]any{"cpus": 32, "memory_mb": 262144, "local_gb": 20, "cpu_arch": "x86_64"})
	return &ironlinkv1.NodeSpec{Name: name, Driver: "fake-hardware", ResourceClass: "gpu-h100", Properties: props,
		DriverInfo: map[string]string{"fake_bmc_secret": "s3cr3t-" + randID()}, Traits: []string{"CUSTOM_IRONLINK_OPS_E2E"},
		Ports: []*ironlinkv1.PortSpec{{Address: mac, PxeEnabled: true}}}
}

// newRand returns n random bytes in hex.
func newRand(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func randID() string { return newRand(4) }

func randMACAddr() string {
	h := newRand(5)
	return "52:" + h[0:2] + ":" + h[2:4] + ":" + h[4:6] + ":" + h[6:8] + ":" + h[8:10]
}

func runOperationsSuite(t *testing.T, e *opsEnv) {
	ctx := context.Background()
	const site = "ops-e2e"
	h := &opsHarness{t: t, e: e, site: site, db: pgtest.NewDatabase(t)}
	h.id = newIdentity(t, []string{site}, map[string][]string{
		"ops-admin": {auth.ScopeOperationsRead, auth.ScopeOperationsWrite},
	})
	// One enrolment key for both replicas: an ENROL either takes is
	// delivered by the one holding the link (hub/operations/vault).
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "enrol.key")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hubFlags := []string{"--operation-resend-after", "5s", "--operation-max-resend-after", "20s", "--heartbeat-interval", "1s", "--stale-after", "60s",
		"--enrol-key-file", keyFile}
	addrA, pa := startHub(t, h.db, h.id, append([]string{"--replica", "hub-a"}, hubFlags...)...)
	addrB, _ := startHub(t, h.db, h.id, append([]string{"--replica", "hub-b"}, hubFlags...)...)
	h.hubA = pa
	lb, err := tcpproxy.New("127.0.0.1:0", []string{addrA}, nil) // the link starts on hub-a
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	h.lb = lb
	h.satArgs = append([]string{"--site", site, "--hub", lb.Addr(), "--clouds-yaml", e.cloudsYAML, "--cloud", e.name,
		"--operations-cloud", e.opsCloud, "--operations-poll-interval", "200ms", "--state-file", filepath.Join(t.TempDir(), "state.json"),
		"--poll-interval", "2s", "--max-backoff", "2s", "--resync-interval", "3s", "--sweep-interval", "2s", "--auth-backoff", "1s", "--log-level", "debug"},
		h.id.satelliteArgs(site)...)
	h.startSatellite()
	h.opsA = ironlinkv1.NewOperationServiceClient(h.id.dialAs(t, addrA, "ops-admin"))
	h.opsB = ironlinkv1.NewOperationServiceClient(h.id.dialAs(t, addrB, "ops-admin"))
	fcA := ironlinkv1.NewFleetServiceClient(h.id.dialAs(t, addrA, "ops-admin"))
	h.fcB = ironlinkv1.NewFleetServiceClient(h.id.dialAs(t, addrB, "ops-admin"))
	h.waitLink("hub-a")
	lb.SetBackends([]string{addrA, addrB})

	prefix := "opse2e-" + randID()
	var ids, macs [3]string
	t.Cleanup(func() {
		for _, id := range ids {
			if id == "" {
				continue
			}
			_, _ = e.bm.Put(ctx, e.bm.ServiceURL("nodes", id, "maintenance"), map[string]any{}, nil, &gophercloud.RequestOpts{OkCodes: []int{202, 204}})
			_, _ = e.bm.Delete(ctx, e.bm.ServiceURL("nodes", id), &gophercloud.RequestOpts{OkCodes: []int{202, 204}})
		}
	})
	start := func(t *testing.T, oc ironlinkv1.OperationServiceClient, req *ironlinkv1.StartOperationRequest) []*ironlinkv1.Operation {
		t.Helper()
		req.Site, req.Reason = site, "e2e: "+req.GetKind().String()
		var r *ironlinkv1.StartOperationResponse
		// Until the satellite announced the operations capability the hub
		// refuses with FailedPrecondition.
		harness.Eventually(t, 60*time.Second, func() error {
			var err error
			r, err = oc.StartOperation(ctx, req)
			if status.Code(err) == codes.FailedPrecondition && strings.Contains(status.Convert(err).Message(), "operations") {
				return err
			}
			if err != nil {
				t.Fatalf("StartOperation %v: %v", req.GetKind(), err)
			}
			return nil
		})
		return r.GetOperations()
	}
	run := func(t *testing.T, oc ironlinkv1.OperationServiceClient, kind ironlinkv1.OperationKind, device string, params *ironlinkv1.OperationParams, want ironlinkv1.OperationState) *ironlinkv1.Operation {
		t.Helper()
		mark := e.mark()
		t0 := time.Now()
		op := waitOp(t, oc, start(t, oc, &ironlinkv1.StartOperationRequest{Kind: kind, Devices: []string{device}, Params: params})[0].GetOperationId(), 3*time.Minute)
		wantOpState(t, op, want)
		t.Logf("MEASURE %s %s: %s, %d OpenStack requests of the operation (-1: not counted on a real cloud)", e.name, kind, time.Since(t0).Round(time.Millisecond), e.opRequests(mark, device))
		return op
	}
	clean := &ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{e.goodStep}}

	if !t.Run("enrol three nodes to manageable through the replica without the link; the devices appear at the hub", func(t *testing.T) {
		mark := e.mark()
		t0 := time.Now()
		var specs []*ironlinkv1.NodeSpec
		for i := range ids {
			macs[i] = randMACAddr()
			specs = append(specs, opsSpec(fmt.Sprintf("%s-%d", prefix, i), macs[i]))
		}
		// hub-b takes the request, hub-a holds the link: the credentials
		// reach hub-a sealed in the database.
		started := start(t, h.opsB, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL, Nodes: specs})
		if len(started) != 3 || started[0].GetGroupId() == "" {
			t.Fatalf("started %d operations (group %q), want 3 in one group", len(started), started[0].GetGroupId())
		}
		for i, s := range started {
			for k, v := range s.GetNode().GetDriverInfo() {
				if strings.Contains(v, "s3cr3t") {
					t.Errorf("StartOperation echoed driver_info[%s] in clear", k)
				}
			}
			op := waitOp(t, h.opsA, s.GetOperationId(), 3*time.Minute)
			wantOpState(t, op, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
			ids[i] = op.GetDeviceId()
			if st, _, _ := e.provisionState(t, ids[i]); st != "manageable" {
				t.Errorf("node %s (%s) is %q after ENROL, want manageable", ids[i], specs[i].GetName(), st)
			}
			if e.hasMarker(t, ids[i]) {
				t.Errorf("node %s keeps the enrolment's marker in extra", ids[i])
			}
		}
		t.Logf("MEASURE %s ENROL x3: %s, %d OpenStack requests", e.name, time.Since(t0).Round(time.Millisecond), e.opRequests(mark, ids[:]...))
		var secret, sealed int
		_ = harness.Pool(t, h.db).QueryRow(ctx, `SELECT count(*) FROM operations WHERE node::text LIKE '%s3cr3t%'
			OR position('s3cr3t'::bytea in coalesce(sealed_driver_info, ''::bytea)) > 0`).Scan(&secret)
		if secret != 0 {
			t.Errorf("%d stored operations hold the BMC secret", secret)
		}
		_ = harness.Pool(t, h.db).QueryRow(ctx, `SELECT count(*) FROM operations WHERE sealed_driver_info IS NOT NULL`).Scan(&sealed)
		if sealed != 0 {
			t.Errorf("%d enrolments keep their sealed credentials after the node exists", sealed)
		}
		for _, p := range []*harness.Proc{h.hubA, h.sat} {
			if strings.Contains(p.Output(), "s3cr3t-") {
				t.Errorf("%s logged the BMC secret", p.Name)
			}
		}
		harness.Eventually(t, 60*time.Second, func() error {
			for _, id := range ids {
				r, err := fcA.GetDevice(ctx, &ironlinkv1.GetDeviceRequest{DeviceId: id})
				if err != nil {
					return err
				}
				if r.GetDevice().GetFacts().GetProvisionState() != "manageable" || r.GetDevice().GetSite() != site {
					return fmt.Errorf("device %s: site %q provision state %q", id, r.GetDevice().GetSite(), r.GetDevice().GetFacts().GetProvisionState())
				}
				if len(r.GetRecentOperations()) == 0 {
					return fmt.Errorf("device %s lists no recent operation", id)
				}
			}
			return nil
		})
	}) {
		t.FailNow()
	}

	t.Run("a second ENROL of the same name takes the node over", func(t *testing.T) {
		ops := start(t, h.opsA, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL,
			Nodes: []*ironlinkv1.NodeSpec{opsSpec(prefix+"-0", randMACAddr())}})
		op := waitOp(t, h.opsA, ops[0].GetOperationId(), 2*time.Minute)
		wantOpState(t, op, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		if op.GetDeviceId() != ids[0] {
			t.Fatalf("re-enrol gave device %s, want the existing %s", op.GetDeviceId(), ids[0])
		}
	})

	t.Run("an ENROL whose port MAC another node has deletes the node it created and names the owner", func(t *testing.T) {
		mark := e.mark()
		name := prefix + "-dup"
		ops := start(t, h.opsA, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL,
			Nodes: []*ironlinkv1.NodeSpec{opsSpec(name, macs[0])}})
		op := waitOp(t, h.opsA, ops[0].GetOperationId(), 2*time.Minute)
		wantOpState(t, op, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
		for _, want := range []string{macs[0], ids[0], prefix + "-0", op.GetDeviceId(), "was deleted"} {
			if !strings.Contains(op.GetLastError(), want) {
				t.Errorf("last error %q does not name %q", op.GetLastError(), want)
			}
		}
		if e.nodeExists(t, name) {
			t.Errorf("Ironic still has node %s after the failed enrolment", name)
		}
		if r := stepRequest(op, "create-ports", http.MethodPost, ""); r == nil || r.GetStatus() != http.StatusConflict {
			t.Errorf("the refused port is not on the record with Ironic's 409: %s", stepSummary(op))
		}
		if r := stepRequest(op, "delete-node", http.MethodDelete, ""); r == nil || r.GetStatus() != http.StatusNoContent {
			t.Errorf("the node's deletion is not on the record with Ironic's 204: %s", stepSummary(op))
		}
		if e.sim != nil {
			if n := e.satRequests(mark, http.MethodDelete, "/v1/nodes/"+op.GetDeviceId(), true); n != 1 {
				t.Errorf("the satellite deleted node %s %d times, want 1", op.GetDeviceId(), n)
			}
			if n := e.satRequests(mark, http.MethodDelete, "/v1/nodes/"+ids[0], false); n != 0 {
				t.Errorf("the satellite sent %d deletes for the MAC's owner %s", n, ids[0])
			}
		}
		if !e.nodeExists(t, ids[0]) {
			t.Errorf("the MAC's owner %s is gone", ids[0])
		}
	})

	t.Run("inspect", func(t *testing.T) {
		op := run(t, h.opsA, ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, ids[0], nil, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		if e.hasMarker(t, ids[0]) {
			t.Error("INSPECT left its marker in the node's extra")
		}
		// The device's facts carry no hardware properties; the final step
		// names what inspection found.
		steps := op.GetSteps()
		if len(steps) == 0 || !strings.Contains(steps[len(steps)-1].GetMessage(), "cpus=") {
			t.Errorf("INSPECT's final step does not report the inspected properties: %s", stepSummary(op))
		}
	})

	t.Run("manual clean with a step the driver lacks fails with Ironic's error", func(t *testing.T) {
		op := run(t, h.opsA, ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, ids[1], &ironlinkv1.OperationParams{
			CleanSteps: []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "testbed_forced_failure"}}}, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
		if !strings.Contains(op.GetLastError(), "testbed_forced_failure") {
			t.Errorf("last error %q does not carry Ironic's error naming the step", op.GetLastError())
		}
		if st, _, _ := e.provisionState(t, ids[1]); st != "clean failed" {
			t.Errorf("node is %q, want clean failed", st)
		}
		if e.hasMarker(t, ids[1]) {
			t.Error("the failed CLEAN left its marker in the node's extra")
		}
	})

	t.Run("clean from clean failed goes through manage first", func(t *testing.T) {
		mark, logMark := e.mark(), e.logMark(t)
		op := run(t, h.opsA, ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, ids[1], clean, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		checkManageFirst(t, e, op, ids[1], mark, logMark, "clean", "cleaning")
		if st, _, _ := e.provisionState(t, ids[1]); st != "manageable" {
			t.Errorf("node is %q after CLEAN, want manageable", st)
		}
		// Into clean failed again: PROVIDE below starts from there.
		op = run(t, h.opsA, ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, ids[1], &ironlinkv1.OperationParams{
			CleanSteps: []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "testbed_forced_failure"}}}, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
		if r := stepRequest(op, "manage", http.MethodPut, ""); r != nil {
			t.Errorf("a CLEAN from manageable sent a manage: %s", stepSummary(op))
		}
	})

	t.Run("kill -9 the satellite during cleaning; the restarted one finishes without repeating a step", func(t *testing.T) {
		if e.sim == nil {
			t.Skip("needs the simulator's hold in clean wait and its request log; fake-hardware cleans at once on the test bed")
		}
		e.sim.HoldWaitStates(true)
		defer e.sim.HoldWaitStates(false)
		mark := e.mark()
		t0 := time.Now()
		ops := start(t, h.opsA, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, Devices: []string{ids[2]}, Params: clean})
		harness.Eventually(t, 60*time.Second, func() error {
			if st, _, _ := e.provisionState(t, ids[2]); st != "clean wait" {
				return fmt.Errorf("node is %q", st)
			}
			return nil
		})
		h.sat.Kill()
		before := h.sat
		h.startSatellite()
		harness.Eventually(t, 60*time.Second, func() error {
			if !strings.Contains(h.sat.Output(), ops[0].GetOperationId()) {
				return fmt.Errorf("the restarted satellite has not received operation %s", ops[0].GetOperationId())
			}
			return nil
		})
		e.sim.HoldWaitStates(false)
		op := waitOp(t, h.opsA, ops[0].GetOperationId(), 2*time.Minute)
		wantOpState(t, op, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		if n := e.provisionPuts(mark, ids[2]); n != 1 {
			t.Errorf("the satellites asked Ironic for %d provision actions on %s across the restart, want 1 (clean)", n, ids[2])
		}
		if op.GetAttempts() < 2 {
			t.Errorf("attempts %d: the restarted satellite did not get a redelivery", op.GetAttempts())
		}
		// The record keeps the killed satellite's attempt with the clean
		// it asked for, beside the restarted one's steps.
		if r := stepRequest(op, "clean", http.MethodPut, "target=clean"); r == nil || r.GetAttempt() != 1 || r.GetStatus() != http.StatusAccepted {
			t.Errorf("attempt 1's PUT target=clean is not on the record: %s", stepSummary(op))
		}
		if !slices.ContainsFunc(op.GetSteps(), func(s *ironlinkv1.OperationStep) bool { return s.GetAttempt() >= 2 }) {
			t.Errorf("no step of the restarted satellite's attempt: %s", stepSummary(op))
		}
		if !before.Exited() {
			t.Error("the first satellite is still running")
		}
		t.Logf("MEASURE %s CLEAN across a satellite kill -9: %s, %d OpenStack requests", e.name, time.Since(t0).Round(time.Millisecond), e.opRequests(mark, ids[2]))
	})

	t.Run("kill the hub replica holding the link during provide; it finishes on the other", func(t *testing.T) {
		if e.sim != nil {
			e.sim.HoldWaitStates(true)
			defer e.sim.HoldWaitStates(false)
		}
		mark := e.mark()
		t0 := time.Now()
		ops := start(t, h.opsB, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE, Devices: []string{ids[0]}})
		// PROVIDE goes through automated cleaning: held in clean wait on
		// the simulator.
		harness.Eventually(t, 60*time.Second, func() error {
			st, _, _ := e.provisionState(t, ids[0])
			if st == "manageable" || (e.sim != nil && st != "clean wait") {
				return fmt.Errorf("node is %q", st)
			}
			return nil
		})
		h.hubA.Kill()
		h.waitLink("hub-b")
		if e.sim != nil {
			e.sim.HoldWaitStates(false)
		}
		op := waitOp(t, h.opsB, ops[0].GetOperationId(), 3*time.Minute)
		wantOpState(t, op, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		if st, _, _ := e.provisionState(t, ids[0]); st != "available" {
			t.Errorf("node is %q after PROVIDE, want available", st)
		}
		if e.sim != nil {
			if n := e.provisionPuts(mark, ids[0]); n != 1 {
				t.Errorf("%d provision actions on %s across the hub kill, want 1 (provide)", n, ids[0])
			}
		}
		t.Logf("MEASURE %s PROVIDE across a hub kill -9: %s, %d OpenStack requests", e.name, time.Since(t0).Round(time.Millisecond), e.opRequests(mark, ids[0]))
	})
	// From here on operators use hub-b (hub-a is dead).
	oc := h.opsB

	t.Run("provide from clean failed through manage and cleaning to available", func(t *testing.T) {
		mark, logMark := e.mark(), e.logMark(t)
		op := run(t, oc, ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE, ids[1], nil, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		if st, _, _ := e.provisionState(t, ids[1]); st != "available" {
			t.Errorf("node is %q, want available", st)
		}
		checkManageFirst(t, e, op, ids[1], mark, logMark, "provide", "cleaning")
		t.Logf("PROVIDE steps: %s", stepSummary(op))
	})

	t.Run("ironic-direct deploy to active, undeploy to available", func(t *testing.T) {
		run(t, oc, ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY, ids[1], &ironlinkv1.OperationParams{Deploy: &ironlinkv1.DeployParams{
			ImageSource: "http://127.0.0.1:1/ironlink-e2e.img", ImageChecksum: "sha256:" + strings.Repeat("ab", 32), RootGb: 10}},
			ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		if st, _, _ := e.provisionState(t, ids[1]); st != "active" {
			t.Fatalf("node is %q after DEPLOY, want active", st)
		}
		run(t, oc, ironlinkv1.OperationKind_OPERATION_KIND_UNDEPLOY, ids[1], nil, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		if st, _, _ := e.provisionState(t, ids[1]); st != "available" {
			t.Errorf("node is %q after UNDEPLOY, want available", st)
		}
	})

	t.Run("nova create on a chosen node is ACTIVE on exactly that node; nova delete", func(t *testing.T) {
		if e.cp == nil {
			ostest.MissingService(t, "Nova", "NOVA_CREATE and NOVA_DELETE")
		}
		// ids[1] is available again; Nova's Ironic driver needs a power state.
		if _, _, pw := e.provisionState(t, ids[1]); pw == "" {
			if _, err := e.bm.Put(ctx, e.bm.ServiceURL("nodes", ids[1], "states", "power"), map[string]any{"target": "power off"}, nil, &gophercloud.RequestOpts{OkCodes: []int{202}}); err != nil {
				t.Fatalf("power off %s: %v", ids[1], err)
			}
			harness.Eventually(t, 30*time.Second, func() error {
				if _, _, pw := e.provisionState(t, ids[1]); pw == "" {
					return fmt.Errorf("no power state yet")
				}
				return nil
			})
		}
		op := run(t, oc, ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, ids[1], &ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{
			Name: prefix + "-server", Image: e.image}}, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		st, inst, _ := e.provisionState(t, ids[1])
		if op.GetServerId() == "" || inst != op.GetServerId() || st != "active" {
			t.Fatalf("server %q; node %s instance_uuid %q state %q", op.GetServerId(), ids[1], inst, st)
		}
		var body struct {
			Server struct {
				Status string `json:"status"`
				Node   string `json:"OS-EXT-SRV-ATTR:hypervisor_hostname"`
			} `json:"server"`
		}
		if _, err := e.cp.Get(ctx, e.cp.ServiceURL("servers", op.GetServerId()), &body, nil); err != nil {
			t.Fatalf("get server: %v", err)
		}
		if body.Server.Status != "ACTIVE" || body.Server.Node != ids[1] {
			t.Errorf("server %s is %s on %q, want ACTIVE on %s", op.GetServerId(), body.Server.Status, body.Server.Node, ids[1])
		}
		d := getDevice(t, h.fcB, ids[1])
		if len(d.GetRecentOperations()) == 0 || d.GetRecentOperations()[0].GetOperationId() != op.GetOperationId() {
			t.Errorf("GetDevice's recent operations do not start with the NOVA_CREATE")
		}
		run(t, oc, ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE, ids[1], nil, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		if st, inst, _ := e.provisionState(t, ids[1]); st != "available" || inst != "" {
			t.Errorf("after NOVA_DELETE the node is %q with instance %q", st, inst)
		}
	})

	t.Run("kill -9 the satellite during a nova create; one server create, both attempts on the record", func(t *testing.T) {
		if e.cp == nil {
			ostest.MissingService(t, "Nova", "NOVA_CREATE")
		}
		killDuringNovaCreate(t, h, ids[1], prefix+"-kill", start, run)
	})

	t.Run("a nova create whose server goes to ERROR deletes it and names Nova's fault and the node's state", func(t *testing.T) {
		if e.cp == nil {
			ostest.MissingService(t, "Nova", "NOVA_CREATE's failure")
		}
		if e.sim != nil {
			t.Skip("the simulator's Nova fails a boot only with No valid host, which is retried; the test bed fails a real deploy")
		}
		img := e.configDriveImage(t)
		op := run(t, oc, ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, ids[1], &ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{
			Name: prefix + "-err", Image: img}}, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
		t.Logf("NOVA_CREATE's error: %s; steps %s", op.GetLastError(), stepSummary(op))
		if op.GetServerId() == "" || !strings.Contains(op.GetLastError(), "Nova's fault: ") || !strings.Contains(op.GetLastError(), "node "+ids[1]) ||
			!strings.Contains(op.GetLastError(), "the server was deleted") {
			t.Errorf("last error %q: want the server, Nova's fault, the node's last_error and the server's deletion", op.GetLastError())
		}
		// Nova may answer a delete 500 first (SQLite lock contention on the
		// test bed): the satellite deletes again; one must have succeeded.
		if !slices.ContainsFunc(op.GetSteps(), func(s *ironlinkv1.OperationStep) bool {
			return s.GetName() == "delete-failed-server" && slices.ContainsFunc(s.GetRequests(), func(r *ironlinkv1.StepRequest) bool {
				return r.GetMethod() == http.MethodDelete && r.GetStatus() == http.StatusNoContent
			})
		}) {
			t.Errorf("the server's deletion (Nova's 204) is not on the record: %s", stepSummary(op))
		}
		harness.Eventually(t, 2*time.Minute, func() error {
			if !e.serverGone(t, op.GetServerId()) {
				return fmt.Errorf("Nova still has server %s", op.GetServerId())
			}
			if st, inst, _ := e.provisionState(t, ids[1]); st != "available" || inst != "" {
				return fmt.Errorf("node %s is %q with instance %q", ids[1], st, inst)
			}
			return nil
		})
	})

	t.Run("nova create refused early by the hub on nodes the cloud has; force_clear clears a stale instance_uuid", func(t *testing.T) {
		testNovaCreateRefusals(t, h, oc, run, "opse2e-")
	})

	t.Run("cancel during clean wait ends CANCELLED", func(t *testing.T) {
		if e.sim == nil {
			t.Skip("fake-hardware runs its clean steps at once: cleaning never rests in clean wait on the test bed")
		}
		e.sim.HoldWaitStates(true)
		defer e.sim.HoldWaitStates(false)
		mark := e.mark()
		t0 := time.Now()
		ops := start(t, oc, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, Devices: []string{ids[2]}, Params: clean})
		// The hub allows the cancel once the operation reports clean wait.
		harness.Eventually(t, 60*time.Second, func() error {
			r, err := oc.GetOperation(ctx, &ironlinkv1.GetOperationRequest{OperationId: ops[0].GetOperationId()})
			if err != nil {
				return err
			}
			if st := r.GetOperation().GetProvisionState(); st != "clean wait" {
				return fmt.Errorf("operation reports %q", st)
			}
			return nil
		})
		if _, err := oc.CancelOperation(ctx, &ironlinkv1.CancelOperationRequest{OperationId: ops[0].GetOperationId(), Reason: "e2e: cancel"}); err != nil {
			t.Fatalf("CancelOperation: %v", err)
		}
		op := waitOp(t, oc, ops[0].GetOperationId(), 2*time.Minute)
		wantOpState(t, op, ironlinkv1.OperationState_OPERATION_STATE_CANCELLED)
		if n := e.provisionPuts(mark, ids[2]); n != 2 {
			t.Errorf("%d provision actions on %s, want 2 (clean, abort)", n, ids[2])
		}
		t.Logf("MEASURE %s CLEAN cancelled in clean wait: %s", e.name, time.Since(t0).Round(time.Millisecond))
	})

	t.Run("bad input is InvalidArgument and creates nothing", func(t *testing.T) {
		nodesBefore := len(e.nodes(t))
		serversBefore := len(e.serverProjects(t))
		mark := e.mark()
		for _, tc := range []struct {
			name string
			req  *ironlinkv1.StartOperationRequest
		}{
			{"malformed MAC", &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL,
				Nodes: []*ironlinkv1.NodeSpec{{Name: prefix + "-bad2", Driver: "fake-hardware", Ports: []*ironlinkv1.PortSpec{{Address: "52:54:00:zz:00:01"}}}}}},
			{"missing BMC address", &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL,
				Nodes: []*ironlinkv1.NodeSpec{{Name: prefix + "-bad3", Driver: "ipmi", DriverInfo: map[string]string{"ipmi_username": "admin"}}}}},
			{"deploy without an image", &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY, Devices: []string{ids[1]},
				Params: &ironlinkv1.OperationParams{Deploy: &ironlinkv1.DeployParams{RootGb: 10}}}},
		} {
			tc.req.Site, tc.req.Reason = site, "e2e: bad input"
			_, err := oc.StartOperation(ctx, tc.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("%s: %v, want InvalidArgument", tc.name, err)
			}
		}
		// What only the site can tell (Ironic's drivers, Nova's flavors)
		// is refused by the satellite before it creates anything: the
		// operation ends FAILED with the InvalidArgument reason.
		for _, tc := range []struct {
			name, want string
			req        *ironlinkv1.StartOperationRequest
		}{
			{"unknown driver", "no-such-hardware", &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL,
				Nodes: []*ironlinkv1.NodeSpec{{Name: prefix + "-bad1", Driver: "no-such-hardware"}}}},
			{"unknown flavor", "no-such-flavor", &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, Devices: []string{ids[1]},
				Params: &ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{Name: prefix + "-bad", Flavor: "no-such-flavor", Image: e.image}}}},
		} {
			if tc.req.GetKind() == ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE && e.cp == nil {
				continue
			}
			tc.req.Site, tc.req.Reason = site, "e2e: bad input"
			op := waitOp(t, oc, start(t, oc, tc.req)[0].GetOperationId(), time.Minute)
			if op.GetState() != ironlinkv1.OperationState_OPERATION_STATE_FAILED || !strings.Contains(op.GetLastError(), tc.want) {
				t.Errorf("%s: operation %v, last error %q; want FAILED naming %s", tc.name, op.GetState(), op.GetLastError(), tc.want)
			}
		}
		if n := len(e.nodes(t)); n != nodesBefore {
			t.Errorf("bad input changed Ironic's node count %d → %d", nodesBefore, n)
		}
		if n := len(e.serverProjects(t)); n != serversBefore {
			t.Errorf("bad input changed Nova's server count %d → %d", serversBefore, n)
		}
		if e.sim != nil {
			for _, r := range e.sim.Requests()[mark:] {
				if strings.HasPrefix(r.UserAgent, "ironlink-satellite") && r.Method == http.MethodPost && r.Service != openstacksim.ServiceIdentity {
					t.Errorf("bad input made the satellite write %s %s %s", r.Service, r.Method, r.Path)
				}
			}
		}
	})

	t.Run("operations list by site and kind", func(t *testing.T) {
		r, err := oc.ListOperations(ctx, &ironlinkv1.ListOperationsRequest{Site: site, Kinds: []ironlinkv1.OperationKind{ironlinkv1.OperationKind_OPERATION_KIND_ENROL}, PageSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetOperations()) != 2 || r.GetNextPageToken() == "" {
			t.Errorf("page of 2 ENROLs: %d operations, next token %q", len(r.GetOperations()), r.GetNextPageToken())
		}
		if slices.ContainsFunc(r.GetOperations(), func(o *ironlinkv1.Operation) bool {
			return o.GetKind() != ironlinkv1.OperationKind_OPERATION_KIND_ENROL
		}) {
			t.Error("kind filter let other kinds through")
		}
	})
}

// writeSimOpsClouds writes a clouds.yaml naming sim's two clouds, "sim"
// (observation) and "sim-ops" (operations; one application credential on the
// simulator), into a test directory and returns its path.
func writeSimOpsClouds(t *testing.T, sim *openstacksim.Cloud) string {
	t.Helper()
	ops := strings.TrimPrefix(string(sim.CloudsYAML("sim-ops")), "clouds:\n")
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := os.WriteFile(path, append(sim.CloudsYAML("sim"), ops...), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
