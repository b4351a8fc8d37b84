package operations_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gcconfig "github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"google.golang.org/protobuf/types/known/structpb"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/satellite/accessrules"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
	"github.com/ironlink/ironlink/satellite/operations"
)

// recorded is one request the runner made, with the target of a PUT
// …/states/provision or …/states/power.
type recorded struct {
	Method, Path, Target string
	Status               int
}

// recorder logs every request made through the clients it wraps.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
}

func (rc *recorder) wrap(next http.RoundTripper) http.RoundTripper {
	return rtFunc(func(r *http.Request) (*http.Response, error) {
		rec := recorded{Method: r.Method, Path: r.URL.Path}
		if r.Body != nil && (strings.HasSuffix(r.URL.Path, "/states/provision") || strings.HasSuffix(r.URL.Path, "/states/power")) {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			var body struct {
				Target string `json:"target"`
			}
			_ = json.Unmarshal(b, &body)
			rec.Target = body.Target
		}
		resp, err := next.RoundTrip(r)
		if resp != nil {
			rec.Status = resp.StatusCode
		}
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, rec)
		rc.mu.Unlock()
		return resp, err
	})
}

func (rc *recorder) snapshot() []recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]recorded(nil), rc.reqs...)
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// env is one cloud the suite runs against.
type env struct {
	name    string
	clients operations.Clients
	rec     *recorder
	// admin is the site's observation credential, used by the test only
	// to look and to clean up.
	admin   *openstack.Clients
	nova    bool
	image   string // Glance image for NOVA_CREATE
	poll    time.Duration
	timeout time.Duration
	// clean is Ironic's manual clean step that succeeds on this cloud.
	goodStep *ironlinkv1.CleanStep
	// waitsInClean says whether cleaning passes through "clean wait" long
	// enough to cancel there (the simulator; fake-hardware does not wait).
	waitsInClean bool
	// configDriveFails says a deploy with a config drive ends in deploy
	// failed (the test bed: no Swift for it).
	configDriveFails bool
	sim              simHooks
}

// simHooks are set only on the simulator.
type simHooks interface {
	holdCleanWait(on bool)
	failNextAdoption(uuid, err string)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func randMAC() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return fmt.Sprintf("52:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4])
}

// runOp runs req on a fresh runner until its final progress and returns it
// with every progress sent.
func runOp(t *testing.T, e *env, req *ironlinkv1.OperationRequest) (*ironlinkv1.OperationProgress, []*ironlinkv1.OperationProgress, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan *ironlinkv1.OperationProgress, 1000)
	r := operations.New(ctx, e.clients, operations.Config{PollInterval: e.poll}, func(p *ironlinkv1.OperationProgress) { got <- p }, ostest.Logger(t))
	start := time.Now()
	r.Handle(req)
	var all []*ironlinkv1.OperationProgress
	deadline := time.After(e.timeout)
	for {
		select {
		case p := <-got:
			all = append(all, p)
			if p.GetState() != ironlinkv1.OperationState_OPERATION_STATE_RUNNING {
				return p, all, time.Since(start)
			}
		case <-deadline:
			t.Fatalf("%s %s: no final progress within %s; last %v", req.GetKind(), req.GetOperationId(), e.timeout, lastOf(all))
		}
	}
}

func lastOf(ps []*ironlinkv1.OperationProgress) *ironlinkv1.OperationProgress {
	if len(ps) == 0 {
		return nil
	}
	return ps[len(ps)-1]
}

func opID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func stepNames(p *ironlinkv1.OperationProgress) string {
	var s []string
	for _, st := range p.GetSteps() {
		s = append(s, st.GetName()+"("+st.GetObservedState()+")")
	}
	return strings.Join(s, " ")
}

func observed(ps []*ironlinkv1.OperationProgress, state string) bool {
	for _, p := range ps {
		if p.GetProvisionState() == state {
			return true
		}
		for _, s := range p.GetSteps() {
			if s.GetObservedState() == state {
				return true
			}
		}
	}
	return false
}

func wantState(t *testing.T, p *ironlinkv1.OperationProgress, want ironlinkv1.OperationState) {
	t.Helper()
	if p.GetState() != want {
		t.Fatalf("operation %s ended %v (%s: %s), want %v; steps %s", p.GetOperationId(), p.GetState(), p.GetFailureReason(), p.GetError(), want, stepNames(p))
	}
}

// measure prints the time and OpenStack requests of one operation.
func measure(t *testing.T, e *env, kind string, before int, d time.Duration) {
	t.Helper()
	n := len(e.rec.snapshot()) - before
	t.Logf("MEASURE %s %s: %s, %d OpenStack requests", e.name, kind, d.Round(time.Millisecond), n)
}

// provisionPuts counts the PUT …/states/provision with target on node id.
func provisionPuts(reqs []recorded, id, target string) int {
	n := 0
	for _, r := range reqs {
		if r.Method == http.MethodPut && strings.Contains(r.Path, "/nodes/"+id+"/states/provision") && r.Target == target && r.Status < 300 {
			n++
		}
	}
	return n
}

func getNode(t *testing.T, e *env, id string) map[string]any {
	t.Helper()
	var n map[string]any
	_, err := e.admin.Baremetal.Get(context.Background(), e.admin.Baremetal.ServiceURL("nodes", id), &n, nil)
	if err != nil {
		t.Fatalf("get node %s: %v", id, err)
	}
	return n
}

func nodesNamed(t *testing.T, e *env, name string) int {
	t.Helper()
	var out struct {
		Nodes []struct {
			Name string `json:"name"`
		} `json:"nodes"`
	}
	_, err := e.admin.Baremetal.Get(context.Background(), e.admin.Baremetal.ServiceURL("nodes")+"?fields=name&limit=1000", &out, nil)
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	n := 0
	for _, x := range out.Nodes {
		if x.Name == name {
			n++
		}
	}
	return n
}

func portsOf(t *testing.T, e *env, id string) []string {
	t.Helper()
	var out struct {
		Ports []struct {
			Address string `json:"address"`
		} `json:"ports"`
	}
	_, err := e.admin.Baremetal.Get(context.Background(), e.admin.Baremetal.ServiceURL("ports")+"?node_uuid="+id, &out, nil)
	if err != nil {
		t.Fatalf("list ports: %v", err)
	}
	var macs []string
	for _, p := range out.Ports {
		macs = append(macs, p.Address)
	}
	return macs
}

// deleteNode removes a node the suite enrolled (maintenance on, then DELETE).
func deleteNode(e *env, id string) {
	ctx := context.Background()
	bm := e.admin.Baremetal
	_, _ = bm.Put(ctx, bm.ServiceURL("nodes", id, "maintenance"), map[string]any{"reason": "ironlink operations test cleanup"}, nil, &gophercloud.RequestOpts{OkCodes: []int{202}})
	_, _ = bm.Delete(ctx, bm.ServiceURL("nodes", id), &gophercloud.RequestOpts{OkCodes: []int{204}})
}

// deleteServersNamed removes the suite's servers left by a failed run.
func deleteServersNamed(e *env, name string) {
	c := e.admin.Compute
	if c == nil {
		return
	}
	ctx := context.Background()
	var out struct {
		Servers []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"servers"`
	}
	if _, err := c.Get(ctx, c.ServiceURL("servers")+"?all_tenants=1&name="+name, &out, nil); err != nil {
		return
	}
	for _, s := range out.Servers {
		if s.Name == name {
			_, _ = c.Delete(ctx, c.ServiceURL("servers", s.ID), nil)
		}
	}
}

func spec(name string, macs ...string) *ironlinkv1.NodeSpec {
	props, _ := structpb.NewStruct(map[string]any{"cpus": 32, "memory_mb": 262144, "local_gb": 20, "cpu_arch": "x86_64"})
	s := &ironlinkv1.NodeSpec{Name: name, Driver: "fake-hardware", ResourceClass: "gpu-h100", Properties: props,
		DriverInfo: map[string]string{"fake_bmc_secret": "s3cr3t-" + randHex(4)}, Traits: []string{"CUSTOM_IRONLINK_OPS_TEST"}}
	for _, m := range macs {
		s.Ports = append(s.Ports, &ironlinkv1.PortSpec{Address: m, PxeEnabled: true})
	}
	return s
}

func ironicReq(kind ironlinkv1.OperationKind, device string, params *ironlinkv1.OperationParams) *ironlinkv1.OperationRequest {
	return &ironlinkv1.OperationRequest{OperationId: opID(), Attempt: 1, Kind: kind, DeviceId: device, Params: params}
}

// runSuite is the suite both clouds run (issue 13 "Tests").
func runSuite(t *testing.T, e *env) {
	prefix := "ops-" + randHex(3)
	var ids [3]string
	macs := [3]string{randMAC(), randMAC(), randMAC()}
	t.Cleanup(func() {
		for _, id := range ids {
			if id != "" {
				deleteNode(e, id)
			}
		}
	})
	if !t.Run("enrol three nodes to manageable", func(t *testing.T) {
		for i := range ids {
			before := len(e.rec.snapshot())
			req := &ironlinkv1.OperationRequest{OperationId: opID(), Attempt: 1, Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL,
				Node: spec(fmt.Sprintf("%s-%d", prefix, i+1), macs[i])}
			p, all, d := runOp(t, e, req)
			wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
			ids[i] = p.GetDeviceId()
			if p.GetProvisionState() != "manageable" {
				t.Fatalf("enrolled node %s is %q, want manageable", ids[i], p.GetProvisionState())
			}
			if !observed(all, "enroll") {
				t.Errorf("enrolment of %s never reported enroll: %s", ids[i], stepNames(p))
			}
			if i == 0 {
				measure(t, e, "ENROL", before, d)
			}
			n := getNode(t, e, ids[i])
			if n["provision_state"] != "manageable" || n["resource_class"] != "gpu-h100" {
				t.Fatalf("node %s: %v / %v", ids[i], n["provision_state"], n["resource_class"])
			}
			if got := portsOf(t, e, ids[i]); len(got) != 1 || got[0] != macs[i] {
				t.Fatalf("node %s ports %v, want [%s]", ids[i], got, macs[i])
			}
		}
		// Enrolling the same spec again takes the node over: no second
		// node, no second port.
		p, _, _ := runOp(t, e, &ironlinkv1.OperationRequest{OperationId: opID(), Attempt: 1, Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL, Node: spec(prefix+"-1", macs[0])})
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		if p.GetDeviceId() != ids[0] || nodesNamed(t, e, prefix+"-1") != 1 || len(portsOf(t, e, ids[0])) != 1 {
			t.Fatalf("second enrolment of %s-1: device %s (first %s), %d nodes of that name, ports %v", prefix, p.GetDeviceId(), ids[0], nodesNamed(t, e, prefix+"-1"), portsOf(t, e, ids[0]))
		}
	}) {
		t.FailNow()
	}

	t.Run("inspect", func(t *testing.T) {
		before := len(e.rec.snapshot())
		p, _, d := runOp(t, e, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, ids[0], nil))
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		measure(t, e, "INSPECT", before, d)
		if last := p.GetSteps()[len(p.GetSteps())-1]; !strings.Contains(last.GetMessage(), "cpus=") || !strings.Contains(last.GetMessage(), "memory_mb=") {
			t.Errorf("the inspection's last step does not report the inspected properties: %q", last.GetMessage())
		}
		if n := provisionPuts(e.rec.snapshot()[before:], ids[0], "inspect"); n != 1 {
			t.Errorf("inspect asked %d times, want 1", n)
		}
		if st := getNode(t, e, ids[0])["provision_state"]; st != "manageable" {
			t.Errorf("after inspect node is %v", st)
		}
	})

	t.Run("manual clean with a step the driver lacks fails with Ironic's error", func(t *testing.T) {
		before := len(e.rec.snapshot())
		p, _, d := runOp(t, e, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, ids[1], &ironlinkv1.OperationParams{
			CleanSteps: []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "testbed_forced_failure"}}}))
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
		measure(t, e, "CLEAN(failing)", before, d)
		if p.GetFailureReason() != "CleanFailed" || p.GetProvisionState() != "clean failed" {
			t.Fatalf("failure %s in %s: %s", p.GetFailureReason(), p.GetProvisionState(), p.GetError())
		}
		n := getNode(t, e, ids[1])
		if le, _ := n["last_error"].(string); le != "" && !strings.Contains(p.GetError(), le) {
			t.Errorf("error %q does not carry Ironic's last_error %q", p.GetError(), le)
		}
		t.Logf("clean failed error: %s", p.GetError())
	})

	t.Run("runner restarted mid-clean finishes without repeating a step", func(t *testing.T) {
		req := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, ids[2], &ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{e.goodStep}})
		before := len(e.rec.snapshot())
		if e.sim != nil {
			e.sim.holdCleanWait(true)
		}
		// First runner: stopped right after it asked Ironic to clean.
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan *ironlinkv1.OperationProgress, 100)
		r1 := operations.New(ctx, e.clients, operations.Config{PollInterval: e.poll}, func(p *ironlinkv1.OperationProgress) { got <- p }, ostest.Logger(t))
		r1.Handle(req)
		deadline := time.After(e.timeout)
	wait:
		for {
			select {
			case p := <-got:
				if p.GetState() != ironlinkv1.OperationState_OPERATION_STATE_RUNNING {
					t.Fatalf("first runner finished before the restart: %v %s", p.GetState(), p.GetError())
				}
				for _, s := range p.GetSteps() {
					if s.GetName() == "clean" && s.GetEndTime() != nil {
						break wait
					}
				}
				if strings.Contains(stepNames(p), "wait-manageable") {
					break wait
				}
			case <-deadline:
				t.Fatal("first runner never asked to clean")
			}
		}
		cancel()
		r1.Wait()
		if e.sim != nil {
			e.sim.holdCleanWait(false)
		}
		// Second runner, as after a satellite restart: the hub redelivers.
		req.Attempt, req.Redelivery = 2, true
		p, _, _ := runOp(t, e, req)
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		reqs := e.rec.snapshot()[before:]
		if n := provisionPuts(reqs, ids[2], "clean"); n != 1 {
			t.Fatalf("clean asked %d times across the restart, want 1", n)
		}
		if st := getNode(t, e, ids[2])["provision_state"]; st != "manageable" {
			t.Errorf("after clean node is %v", st)
		}
	})

	t.Run("provide through cleaning to available", func(t *testing.T) {
		before := len(e.rec.snapshot())
		p, all, d := runOp(t, e, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE, ids[0], nil))
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		measure(t, e, "PROVIDE", before, d)
		if p.GetProvisionState() != "available" {
			t.Fatalf("after provide: %s", p.GetProvisionState())
		}
		if !observed(all, "cleaning") && !observed(all, "clean wait") && e.sim != nil {
			t.Errorf("provide never reported cleaning: %s", stepNames(p))
		}
		t.Logf("provide steps: %s", stepNames(p))
	})

	t.Run("ironic-direct deploy to active then undeploy to available", func(t *testing.T) {
		before := len(e.rec.snapshot())
		p, _, d := runOp(t, e, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY, ids[0], &ironlinkv1.OperationParams{Deploy: &ironlinkv1.DeployParams{
			ImageSource: "http://127.0.0.1:1/ironlink-test.img", ImageChecksum: "sha256:" + strings.Repeat("ab", 32), RootGb: 10,
			Capabilities: map[string]string{"boot_option": "local"}}}))
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		measure(t, e, "DEPLOY", before, d)
		n := getNode(t, e, ids[0])
		ii, _ := n["instance_info"].(map[string]any)
		if n["provision_state"] != "active" || ii["image_source"] != "http://127.0.0.1:1/ironlink-test.img" {
			t.Fatalf("after deploy: %v, instance_info %v", n["provision_state"], ii)
		}
		before = len(e.rec.snapshot())
		p, _, d = runOp(t, e, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_UNDEPLOY, ids[0], nil))
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		measure(t, e, "UNDEPLOY", before, d)
		if p.GetProvisionState() != "available" {
			t.Fatalf("after undeploy: %s", p.GetProvisionState())
		}
	})

	t.Run("nova create on a chosen node then delete", func(t *testing.T) {
		if !e.nova {
			ostest.MissingService(t, "Nova", "Nova create and delete on a chosen node need Nova's Ironic driver (IRONLINK_E2E_NOVA_IRONIC=1 runs it)")
		}
		// ids[0] is available again; a Nova boot targeted at it. A
		// fake-hardware node never reads a power state, and Nova's Ironic
		// driver keeps a node without one reserved: set it, as seed-nodes
		// does (real hardware reports it during verification).
		if n := getNode(t, e, ids[0]); n["power_state"] == nil {
			bm := e.admin.Baremetal
			if _, err := bm.Put(context.Background(), bm.ServiceURL("nodes", ids[0], "states", "power"), map[string]any{"target": "power off"}, nil, &gophercloud.RequestOpts{OkCodes: []int{202}}); err != nil {
				t.Fatalf("power off %s: %v", ids[0], err)
			}
			for i := 0; i < 50 && getNode(t, e, ids[0])["power_state"] == nil; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
		name := prefix + "-server"
		t.Cleanup(func() { deleteServersNamed(e, name) })
		before := len(e.rec.snapshot())
		req := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, ids[0], &ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{Name: name, Image: e.image}})
		p, _, d := runOp(t, e, req)
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		measure(t, e, "NOVA_CREATE", before, d)
		n := getNode(t, e, ids[0])
		if p.GetServerId() == "" || n["instance_uuid"] != p.GetServerId() || n["provision_state"] != "active" {
			t.Fatalf("server %q, node %s instance_uuid %v state %v", p.GetServerId(), ids[0], n["instance_uuid"], n["provision_state"])
		}
		// A redelivery to a new runner (restart) boots no second server.
		req.Attempt, req.Redelivery = 2, true
		mark := len(e.rec.snapshot())
		p2, _, _ := runOp(t, e, req)
		wantState(t, p2, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		for _, r := range e.rec.snapshot()[mark:] {
			if r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/servers") {
				t.Fatalf("the redelivered NOVA_CREATE booted another server")
			}
		}
		if p2.GetServerId() != p.GetServerId() {
			t.Fatalf("redelivery reported server %s, first %s", p2.GetServerId(), p.GetServerId())
		}
		before = len(e.rec.snapshot())
		p, _, d = runOp(t, e, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE, ids[0], nil))
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		measure(t, e, "NOVA_DELETE", before, d)
		if st := getNode(t, e, ids[0])["provision_state"]; st != "available" {
			t.Errorf("after nova delete the node is %v", st)
		}
	})

	t.Run("deploy with a config drive, then undeploy", func(t *testing.T) {
		// On the test bed a config drive makes the deploy fail (no Swift:
		// "Failed to prepare the configdrive", its README); the simulator
		// builds it. Either way UNDEPLOY brings the node back to available.
		before := len(e.rec.snapshot())
		p, _, d := runOp(t, e, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY, ids[0], &ironlinkv1.OperationParams{Deploy: &ironlinkv1.DeployParams{
			ImageSource: "http://127.0.0.1:1/ironlink-test.img", ImageChecksum: "sha256:" + strings.Repeat("cd", 32),
			ConfigDrive: &ironlinkv1.ConfigDrive{UserData: "#cloud-config\n", SshKeys: []string{"ssh-ed25519 AAAA test"}}}}))
		measure(t, e, "DEPLOY(config drive)", before, d)
		if e.configDriveFails {
			wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
			if p.GetFailureReason() != "DeployFailed" || p.GetProvisionState() != "deploy failed" {
				t.Fatalf("config-drive deploy: %s in %s: %s", p.GetFailureReason(), p.GetProvisionState(), p.GetError())
			}
			t.Logf("deploy failed error: %s", p.GetError())
		} else {
			wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		}
		p, _, _ = runOp(t, e, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_UNDEPLOY, ids[0], nil))
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		if p.GetProvisionState() != "available" {
			t.Fatalf("after undeploy: %s", p.GetProvisionState())
		}
	})

	t.Run("cancel during clean wait aborts", func(t *testing.T) {
		if !e.waitsInClean {
			t.Skip("fake-hardware runs its clean steps at once: cleaning never rests in clean wait on the test bed (checked: manual clean with bios.factory_reset goes manageable → cleaning → manageable)")
		}
		e.sim.holdCleanWait(true)
		defer e.sim.holdCleanWait(false)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		got := make(chan *ironlinkv1.OperationProgress, 100)
		r := operations.New(ctx, e.clients, operations.Config{PollInterval: e.poll}, func(p *ironlinkv1.OperationProgress) { got <- p }, ostest.Logger(t))
		req := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, ids[2], &ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{e.goodStep}})
		r.Handle(req)
		deadline := time.After(e.timeout)
		sent := false
		for {
			select {
			case p := <-got:
				if !sent && p.GetProvisionState() == "clean wait" {
					c := &ironlinkv1.OperationRequest{OperationId: req.GetOperationId(), Attempt: 2, Kind: req.GetKind(), DeviceId: req.GetDeviceId(), Params: req.GetParams(), Cancel: true}
					r.Handle(c)
					sent = true
				}
				if p.GetState() == ironlinkv1.OperationState_OPERATION_STATE_RUNNING {
					continue
				}
				wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_CANCELLED)
				if n := provisionPuts(e.rec.snapshot(), ids[2], "abort"); n != 1 {
					t.Errorf("abort asked %d times", n)
				}
				return
			case <-deadline:
				t.Fatal("no final progress after cancel")
			}
		}
	})

	t.Run("cancel outside a wait state is refused", func(t *testing.T) {
		// An INSPECT of a manageable node (ids[2]) cancelled before it
		// starts: the node is not in a wait state, so the cancel is refused
		// and the inspection goes on.
		if getNode(t, e, ids[2])["provision_state"] != "manageable" { // clean failed after the abort above
			bm := e.admin.Baremetal
			if _, err := bm.Put(context.Background(), bm.ServiceURL("nodes", ids[2], "states", "provision"), map[string]any{"target": "manage"}, nil, &gophercloud.RequestOpts{OkCodes: []int{202}}); err != nil {
				t.Fatalf("manage %s: %v", ids[2], err)
			}
			for i := 0; i < 100 && getNode(t, e, ids[2])["provision_state"] != "manageable"; i++ {
				time.Sleep(50 * time.Millisecond)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		got := make(chan *ironlinkv1.OperationProgress, 100)
		r := operations.New(ctx, e.clients, operations.Config{PollInterval: e.poll}, func(p *ironlinkv1.OperationProgress) { got <- p }, ostest.Logger(t))
		req := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, ids[2], nil)
		req.Cancel = true
		r.Handle(req)
		refused := false
		deadline := time.After(e.timeout)
		for {
			select {
			case p := <-got:
				refused = refused || p.GetCancelRefused()
				if p.GetState() == ironlinkv1.OperationState_OPERATION_STATE_RUNNING {
					continue
				}
				if !refused {
					t.Errorf("cancel of an operation on a manageable node was not refused")
				}
				wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
				return
			case <-deadline:
				t.Fatal("no final progress")
			}
		}
	})

	t.Run("bad input creates nothing", func(t *testing.T) {
		before := e.rec.snapshot()
		cases := []struct {
			name string
			req  *ironlinkv1.OperationRequest
			want string
		}{
			{"unknown driver", &ironlinkv1.OperationRequest{OperationId: opID(), Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL,
				Node: &ironlinkv1.NodeSpec{Name: prefix + "-bad1", Driver: "no-such-hardware"}}, "no-such-hardware"},
			{"malformed MAC", &ironlinkv1.OperationRequest{OperationId: opID(), Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL,
				Node: spec(prefix+"-bad2", "52:54:00:zz:00:01")}, "MAC"},
			{"missing BMC address", &ironlinkv1.OperationRequest{OperationId: opID(), Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL,
				Node: &ironlinkv1.NodeSpec{Name: prefix + "-bad3", Driver: "ipmi", DriverInfo: map[string]string{"ipmi_username": "admin"}}}, "ipmi_address"},
			{"deploy without image", ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_DEPLOY, ids[0], &ironlinkv1.OperationParams{Deploy: &ironlinkv1.DeployParams{}}), "image_source"},
		}
		if e.nova {
			cases = append(cases, struct {
				name string
				req  *ironlinkv1.OperationRequest
				want string
			}{"unknown flavor", ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, ids[0], &ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{Name: prefix + "-bad", Flavor: "no-such-flavor", Image: e.image}}), "no-such-flavor"})
		}
		for _, tc := range cases {
			p, _, _ := runOp(t, e, tc.req)
			wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
			if p.GetFailureReason() != "InvalidArgument" || !strings.Contains(p.GetError(), tc.want) {
				t.Errorf("%s: %s %q, want InvalidArgument naming %q", tc.name, p.GetFailureReason(), p.GetError(), tc.want)
			}
		}
		for _, r := range e.rec.snapshot()[len(before):] {
			if r.Method != http.MethodGet {
				t.Errorf("bad input made %s %s", r.Method, r.Path)
			}
		}
		if n := nodesNamed(t, e, prefix+"-bad1") + nodesNamed(t, e, prefix+"-bad2") + nodesNamed(t, e, prefix+"-bad3"); n != 0 {
			t.Errorf("%d nodes created from bad specs", n)
		}
	})
}

// TestOperationsRealCloud runs the suite against the real cloud named by
// IRONLINK_E2E_CLOUDS_YAML / IRONLINK_E2E_CLOUD (the test bed in CI). The
// operations credential is created here: an application credential of the
// password cloud (IRONLINK_E2E_PASSWORD_CLOUD, default
// "testbed-agent-password") restricted to
// deploy/openstack/operations-access-rules.yaml.
func TestOperationsRealCloud(t *testing.T) {
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
	nova := ostest.NovaIronicRequired()
	novaMode := openstack.NovaOff
	if nova {
		novaMode = openstack.NovaOn
	}
	oc, _, err := operations.Connect(ctx, openstack.Config{CloudsYAML: opsYAML, Cloud: "operations", Nova: novaMode, WrapTransport: rec.wrap}, ostest.Logger(t))
	if err != nil {
		t.Fatalf("connect with the operations credential: %v", err)
	}
	e := &env{name: "testbed", clients: oc, rec: rec, admin: admin, nova: nova, image: "testbed-image",
		poll: time.Second, timeout: 5 * time.Minute, configDriveFails: true, goodStep: &ironlinkv1.CleanStep{Interface: "bios", Step: "factory_reset"}}
	runSuite(t, e)
}

// createOperationsCredential creates an application credential restricted
// to operations-access-rules.yaml for the user of cloud pw and writes a
// clouds.yaml with it as cloud "operations"; the credential is deleted when
// t ends.
func createOperationsCredential(t *testing.T, cloudsYAML, pw string) string {
	t.Helper()
	ctx := context.Background()
	ao, eo, tlsCfg, err := clouds.Parse(clouds.WithCloudName(pw), clouds.WithLocations(cloudsYAML))
	if err != nil {
		t.Fatalf("clouds.yaml %s has no cloud %q to create the operations credential with: %v", cloudsYAML, pw, err)
	}
	_ = eo
	pc, err := gcconfig.NewProviderClient(ctx, ao, gcconfig.WithTLSConfig(tlsCfg))
	if err != nil {
		t.Fatalf("authenticate %s: %v", pw, err)
	}
	userID := tokenUser(t, pc)
	b, err := os.ReadFile("../../deploy/openstack/operations-access-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := accessrules.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"application_credential": map[string]any{
		"name": "ironlink-operations-test-" + randHex(4), "access_rules": rules,
		"description": "ironlink operations test (deleted at the end)"}}
	var out struct {
		AC struct {
			ID     string `json:"id"`
			Secret string `json:"secret"`
		} `json:"application_credential"`
	}
	id := strings.TrimSuffix(ao.IdentityEndpoint, "/")
	if !strings.HasSuffix(id, "/v3") {
		id += "/v3"
	}
	_, err = pc.Request(ctx, http.MethodPost, id+"/users/"+userID+"/application_credentials", &gophercloud.RequestOpts{JSONBody: body, JSONResponse: &out, OkCodes: []int{201}})
	if err != nil {
		t.Fatalf("create the operations application credential: %v", err)
	}
	t.Cleanup(func() {
		_, _ = pc.Request(context.Background(), http.MethodDelete, id+"/users/"+userID+"/application_credentials/"+out.AC.ID, &gophercloud.RequestOpts{OkCodes: []int{204}})
	})
	y := fmt.Sprintf("clouds:\n  operations:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: %s\n      application_credential_id: %s\n      application_credential_secret: %q\n    region_name: %s\n    interface: public\n    identity_api_version: 3\n",
		id, out.AC.ID, out.AC.Secret, eo.Region)
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func tokenUser(t *testing.T, pc *gophercloud.ProviderClient) string {
	t.Helper()
	cr, ok := pc.GetAuthResult().(tokens.CreateResult)
	if !ok {
		t.Fatalf("unexpected auth result %T", pc.GetAuthResult())
	}
	u, err := cr.ExtractUser()
	if err != nil {
		t.Fatalf("read the user from the token: %v", err)
	}
	return u.ID
}
