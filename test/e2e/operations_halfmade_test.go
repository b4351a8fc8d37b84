package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/test/harness"
)

// Issue 21's checks of the operations suite: the way through manage from
// clean failed, nothing half-made, every request on the record. What was
// and was not sent is proven by the simulator's request log, and on the
// test bed by Ironic's conductor log (every provision state change it made,
// $OS_TESTBED_DIR/log/ironic-conductor.log), independent of ironlink's own
// step record.

// hasMarker reports whether node id's extra still carries an operation
// marker, read from Ironic directly.
func (c *cloud) hasMarker(t *testing.T, id string) bool {
	t.Helper()
	var n struct {
		Extra map[string]any `json:"extra"`
	}
	if _, err := c.bm.Get(context.Background(), c.bm.ServiceURL("nodes", id), &n, nil); err != nil {
		t.Fatalf("get node %s: %v", id, err)
	}
	_, ok := n.Extra["ironlink_operation"]
	return ok
}

// nodeExists reports whether Ironic has a node of that name or UUID.
func (c *cloud) nodeExists(t *testing.T, ident string) bool {
	t.Helper()
	_, err := c.bm.Get(context.Background(), c.bm.ServiceURL("nodes", ident), nil, nil)
	if err == nil {
		return true
	}
	if !strings.Contains(err.Error(), "404") && !strings.Contains(err.Error(), "not be found") {
		t.Fatalf("get node %s: %v", ident, err)
	}
	return false
}

// conductorLog is the test bed's Ironic conductor log, "" elsewhere.
func conductorLog(t *testing.T) string {
	dir := os.Getenv("OS_TESTBED_DIR")
	if dir == "" {
		if os.Getenv("IRONLINK_E2E_REQUIRE_REAL") == "1" {
			t.Fatal("IRONLINK_E2E_REQUIRE_REAL=1 but OS_TESTBED_DIR is not set: Ironic's conductor log proves what the satellite asked for")
		}
		return ""
	}
	return filepath.Join(dir, "log", "ironic-conductor.log")
}

// logMark is the size of the conductor log now (0 without one).
func (e *opsEnv) logMark(t *testing.T) int64 {
	p := conductorLog(t)
	if p == "" || e.sim != nil {
		return 0
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatalf("conductor log: %v", err)
	}
	return st.Size()
}

var movedRe = regexp.MustCompile(`Node ([0-9a-f-]{36}) moved to provision state "([^"]+)" from state "([^"]+)"`)

// transitions lists node id's provision state changes ("from → to") the
// conductor logged since mark; nil without a conductor log.
func (e *opsEnv) transitions(t *testing.T, mark int64, id string) []string {
	t.Helper()
	p := conductorLog(t)
	if p == "" || e.sim != nil {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatalf("conductor log: %v", err)
	}
	defer f.Close()
	if _, err := f.Seek(mark, 0); err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := movedRe.FindStringSubmatch(sc.Text()); m != nil && m[1] == id {
			out = append(out, m[3]+" → "+m[2])
		}
	}
	return out
}

// countTransitions counts from → to in ts.
func countTransitions(ts []string, from, to string) int {
	n := 0
	for _, s := range ts {
		if s == from+" → "+to {
			n++
		}
	}
	return n
}

// satRequests counts the satellite's requests since mark with method and a
// path containing part, answered with a status below 300 when ok, else any;
// -1 without the simulator.
func (e *opsEnv) satRequests(mark int, method, part string, ok bool) int {
	if e.sim == nil {
		return -1
	}
	n := 0
	for _, r := range e.sim.Requests()[mark:] {
		if strings.HasPrefix(r.UserAgent, "ironlink-satellite") && r.Method == method && strings.Contains(r.Path, part) && (!ok || r.Status < 300) {
			n++
		}
	}
	return n
}

// stepRequest finds a recorded request of op's steps.
func stepRequest(op *ironlinkv1.Operation, step, method, detail string) *ironlinkv1.StepRequest {
	for _, s := range op.GetSteps() {
		if s.GetName() != step {
			continue
		}
		if i := slices.IndexFunc(s.GetRequests(), func(r *ironlinkv1.StepRequest) bool {
			return r.GetMethod() == method && (detail == "" || r.GetDetail() == detail)
		}); i >= 0 {
			return s.GetRequests()[i]
		}
	}
	return nil
}

// checkManageFirst checks an operation that started in clean failed on
// node id: one manage (Ironic: clean failed → manageable), recorded on a
// "manage" step with Ironic's 202, and then its own action once.
func checkManageFirst(t *testing.T, e *opsEnv, op *ironlinkv1.Operation, id string, mark int, logMark int64, action, actionTo string) {
	t.Helper()
	if r := stepRequest(op, "manage", http.MethodPut, "target=manage"); r == nil || r.GetStatus() != http.StatusAccepted || r.GetAttempt() < 1 {
		t.Errorf("no manage step with its PUT target=manage answered 202: %s", stepSummary(op))
	}
	if e.sim != nil {
		if n := e.satRequests(mark, http.MethodPut, "/nodes/"+id+"/states/provision", true); n != 2 {
			t.Errorf("the satellite sent %d accepted provision requests for %s, want 2 (manage, %s)", n, id, action)
		}
	}
	if ts := e.transitions(t, logMark, id); ts != nil {
		if countTransitions(ts, "clean failed", "manageable") != 1 || countTransitions(ts, "manageable", actionTo) != 1 {
			t.Errorf("Ironic's conductor logged %v for %s; want clean failed → manageable once, then manageable → %s once", ts, id, actionTo)
		}
	}
	if e.hasMarker(t, id) {
		t.Errorf("node %s keeps the operation marker in extra after %s", id, action)
	}
}

// configDriveImage uploads a 1 MiB raw image that requires a config drive
// (img_config_drive=mandatory), private to the project of the password
// cloud IRONLINK_E2E_PASSWORD_CLOUD (default testbed-agent-password, whose
// user the operations credential belongs to), and returns its id; it is
// deleted when t ends. The test bed's Ironic cannot build a config drive
// (no Swift: its README), so a server booted from it fails its deploy: a
// real ERROR.
func (c *cloud) configDriveImage(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	pw := os.Getenv("IRONLINK_E2E_PASSWORD_CLOUD")
	if pw == "" {
		pw = "testbed-agent-password"
	}
	owner := connectCloud(t, c.cloudsYAML, pw)
	ic, err := openstack.NewImageV2(owner.bm.ProviderClient, gophercloud.EndpointOpts{})
	if err != nil {
		t.Fatalf("glance: %v", err)
	}
	var img struct {
		ID string `json:"id"`
	}
	body := map[string]any{"name": "ironlink-e2e-configdrive-" + randID(), "disk_format": "raw", "container_format": "bare",
		"visibility": "private", "img_config_drive": "mandatory"}
	if _, err := ic.Post(ctx, ic.ServiceURL("images"), body, &img, &gophercloud.RequestOpts{OkCodes: []int{201}}); err != nil {
		t.Fatalf("create image: %v", err)
	}
	t.Cleanup(func() {
		_, _ = ic.Delete(ctx, ic.ServiceURL("images", img.ID), &gophercloud.RequestOpts{OkCodes: []int{204}})
	})
	if _, err := ic.Put(ctx, ic.ServiceURL("images", img.ID, "file"), nil, nil, &gophercloud.RequestOpts{
		RawBody: bytes.NewReader(make([]byte, 1<<20)), MoreHeaders: map[string]string{"Content-Type": "application/octet-stream"},
		OkCodes: []int{204}}); err != nil {
		t.Fatalf("upload image: %v", err)
	}
	return img.ID
}

// serverGone reports whether Nova no longer has server id (404 or DELETED).
func (c *cloud) serverGone(t *testing.T, id string) bool {
	t.Helper()
	var body struct {
		Server struct {
			Status string `json:"status"`
		} `json:"server"`
	}
	_, err := c.cp.Get(context.Background(), c.cp.ServiceURL("servers", id), &body, nil)
	if err != nil {
		return strings.Contains(err.Error(), "404") || strings.Contains(err.Error(), "could not be found")
	}
	return body.Server.Status == "DELETED" || body.Server.Status == "SOFT_DELETED"
}

// startFunc starts the operations of req (the suite's start).
type startFunc func(t *testing.T, oc ironlinkv1.OperationServiceClient, req *ironlinkv1.StartOperationRequest) []*ironlinkv1.Operation

// runFunc runs one operation to its end and checks its state (the suite's run).
type runFunc func(t *testing.T, oc ironlinkv1.OperationServiceClient, kind ironlinkv1.OperationKind, device string, params *ironlinkv1.OperationParams,
	want ironlinkv1.OperationState) *ironlinkv1.Operation

// killDuringNovaCreate starts a NOVA_CREATE of server name on the available
// node id and, once its record shows the server create (on the simulator
// with the deploy held in wait call-back), kills the satellite (kill -9)
// and starts it again: the restarted satellite finds the server by name
// instead of booting another (exactly one server create: the simulator's
// request log, or the servers of that name Nova has on a real cloud), the
// operation succeeds, and its record keeps the killed satellite's
// boot-server step with its POST (attempt 1) beside the restarted one's
// steps. The server is deleted at the end.
func killDuringNovaCreate(t *testing.T, h *opsHarness, id, name string, start startFunc, run runFunc) {
	e := h.e
	if e.sim != nil {
		e.sim.HoldWaitStates(true)
		defer e.sim.HoldWaitStates(false)
	}
	mark := e.mark()
	t0 := time.Now()
	ops := start(t, h.opsB, &ironlinkv1.StartOperationRequest{Kind: ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, Devices: []string{id},
		Params: &ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{Name: name, Image: e.image}}})
	harness.Eventually(t, 60*time.Second, func() error {
		r, err := h.opsB.GetOperation(context.Background(), &ironlinkv1.GetOperationRequest{OperationId: ops[0].GetOperationId()})
		if err != nil {
			return err
		}
		if stepRequest(r.GetOperation(), "boot-server", http.MethodPost, "") == nil {
			return fmt.Errorf("no server create on the record yet: %s", stepSummary(r.GetOperation()))
		}
		if opsFinal(r.GetOperation().GetState()) {
			t.Fatalf("the NOVA_CREATE ended before the kill: %s", stepSummary(r.GetOperation()))
		}
		return nil
	})
	h.sat.Kill()
	h.startSatellite()
	harness.Eventually(t, 60*time.Second, func() error {
		if !strings.Contains(h.sat.Output(), ops[0].GetOperationId()) {
			return fmt.Errorf("the restarted satellite has not received operation %s", ops[0].GetOperationId())
		}
		return nil
	})
	if e.sim != nil {
		e.sim.HoldWaitStates(false)
	}
	op := waitOp(t, h.opsB, ops[0].GetOperationId(), 10*time.Minute)
	wantOpState(t, op, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	if n := e.serverCreates(t, mark, name); n != 1 {
		t.Errorf("%d servers created across the kill, want 1", n)
	}
	if st, inst, _ := e.provisionState(t, id); st != "active" || inst != op.GetServerId() {
		t.Errorf("node is %q with instance %q, server %s", st, inst, op.GetServerId())
	}
	if op.GetAttempts() < 2 {
		t.Errorf("attempts %d: the restarted satellite did not get a redelivery", op.GetAttempts())
	}
	if !slices.ContainsFunc(op.GetSteps(), func(s *ironlinkv1.OperationStep) bool {
		return s.GetName() == "boot-server" && s.GetAttempt() == 1 && slices.ContainsFunc(s.GetRequests(), func(r *ironlinkv1.StepRequest) bool {
			return r.GetMethod() == http.MethodPost
		})
	}) {
		r := stepRequest(op, "boot-server", http.MethodPost, "")
		t.Errorf("attempt 1's boot-server step with its server create is not on the record (first POST's attempt %d): %s", r.GetAttempt(), stepSummary(op))
	}
	if !slices.ContainsFunc(op.GetSteps(), func(s *ironlinkv1.OperationStep) bool { return s.GetAttempt() >= 2 }) {
		t.Errorf("no step of the restarted satellite's attempt: %s", stepSummary(op))
	}
	t.Logf("MEASURE %s NOVA_CREATE across a satellite kill -9: %s, %d OpenStack requests (-1: not counted on a real cloud); steps %s",
		e.name, time.Since(t0).Round(time.Millisecond), e.opRequests(mark, id), stepSummary(op))
	run(t, h.opsB, ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE, id, nil, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
}

// serverCreates counts the servers named name created since mark: the
// satellite's POST /servers in the simulator's request log, or on a real
// cloud the servers of that name Nova lists (the test deletes its server only after counting).
func (e *opsEnv) serverCreates(t *testing.T, mark int, name string) int {
	t.Helper()
	if e.sim != nil {
		return e.satRequests(mark, http.MethodPost, "/servers", false)
	}
	var body struct {
		Servers []struct {
			Name string `json:"name"`
		} `json:"servers"`
	}
	if _, err := e.cp.Get(context.Background(), e.cp.ServiceURL("servers")+"?name="+name, &body, nil); err != nil {
		t.Fatalf("list servers named %s: %v", name, err)
	}
	n := 0
	for _, s := range body.Servers {
		if s.Name == name {
			n++
		}
	}
	return n
}
