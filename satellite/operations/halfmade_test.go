package operations_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/operations"
	"github.com/ironlink/ironlink/satellite/site"
)

// Issue 21: where Ironic's state machine allows the way the operation takes
// it, an operation leaves nothing half-made behind, and its steps say
// which request went out under which attempt and what Ironic answered.

var cleanParams = &ironlinkv1.OperationParams{CleanSteps: []*ironlinkv1.CleanStep{{Interface: "deploy", Step: "erase_devices_metadata"}}}

// hasMarker reports whether the node's extra still carries an operation
// marker.
func hasMarker(t *testing.T, f *site.Fixture, id string) bool {
	t.Helper()
	d, err := f.NodeDetail(context.Background(), id)
	if err != nil {
		t.Fatalf("read node %s: %v", id, err)
	}
	_, ok := d.Extra["ironlink_operation"]
	return ok
}

// stepNamed returns the first step called name, or nil.
func stepNamed(p *ironlinkv1.OperationProgress, name string) *ironlinkv1.OperationStep {
	for _, s := range p.GetSteps() {
		if s.GetName() == name {
			return s
		}
	}
	return nil
}

// hasRequest reports whether step s recorded method on a path ending in
// suffix with detail and status.
func hasRequest(s *ironlinkv1.OperationStep, method, suffix, detail string, status int32) bool {
	return slices.ContainsFunc(s.GetRequests(), func(r *ironlinkv1.StepRequest) bool {
		return r.GetMethod() == method && strings.HasSuffix(r.GetPath(), suffix) && r.GetDetail() == detail && r.GetStatus() == status
	})
}

func TestFixtureManageFirstFromCleanOrInspectFailed(t *testing.T) {
	for _, tc := range []struct {
		name, from, to, target string
		kind                   ironlinkv1.OperationKind
		params                 *ironlinkv1.OperationParams
	}{
		{"clean from clean failed", "clean failed", "manageable", "clean", ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, cleanParams},
		{"provide from clean failed", "clean failed", "available", "provide", ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE, nil},
		{"inspect from inspect failed", "inspect failed", "manageable", "inspect", ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, nil},
		{"clean from inspect failed", "inspect failed", "manageable", "clean", ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, cleanParams},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, r, got := fxRunner(t, tc.from)
			p := fxRun(t, r, got, ironicReq(tc.kind, fxNode, tc.params))
			wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
			if n, _ := f.Node(fxNode); n.ProvisionState != tc.to {
				t.Errorf("node ends in %q, want %q", n.ProvisionState, tc.to)
			}
			if m, a := provisions(f, "manage"), provisions(f, tc.target); m != 1 || a != 1 {
				t.Errorf("%d manage and %d %s requests, want 1 and 1; calls %v", m, a, tc.target, f.Calls())
			}
			s := stepNamed(p, "manage")
			if s == nil || s.GetObservedState() != tc.from || !strings.Contains(s.GetMessage(), "manage first") {
				t.Fatalf("no manage step from %s: %v", tc.from, p.GetSteps())
			}
			if !hasRequest(s, "PUT", "/states/provision", "target=manage", 202) || s.GetAttempt() != 1 {
				t.Errorf("manage step attempt %d, requests %v", s.GetAttempt(), s.GetRequests())
			}
			if hasMarker(t, f, fxNode) {
				t.Error("the operation's marker stays in the node's extra")
			}
		})
	}
}

// The operation's own failure is not "recovered": CLEAN from clean failed
// manages once, cleans once, and ends FAILED with Ironic's last_error when
// its own clean fails; a CLEAN from manageable that fails never manages.
func TestFixtureOwnFailureEndsTheOperation(t *testing.T) {
	for _, from := range []string{"clean failed", "manageable"} {
		t.Run(from, func(t *testing.T) {
			f, r, got := fxRunner(t, from)
			// The manage (from clean failed) succeeds; the clean fails.
			f.FailNextActionOf(fxNode, "clean", "erase failed on /dev/sda")
			p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, fxNode, cleanParams))
			wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
			wantManage := 0
			if from == "clean failed" {
				wantManage = 1
			}
			if m, c := provisions(f, "manage"), provisions(f, "clean"); m != wantManage || c != 1 {
				t.Errorf("%d manage, %d clean; want %d and 1", m, c, wantManage)
			}
			if p.GetFailureReason() != "CleanFailed" {
				t.Errorf("failed %s: %s", p.GetFailureReason(), p.GetError())
			}
			if hasMarker(t, f, fxNode) {
				t.Error("the marker stays after the failure")
			}
		})
	}
}

func TestFixtureMarkerRemovedWhenTheOperationEnds(t *testing.T) {
	for _, tc := range []struct {
		name, from string
		kind       ironlinkv1.OperationKind
		params     *ironlinkv1.OperationParams
	}{
		{"inspect", "manageable", ironlinkv1.OperationKind_OPERATION_KIND_INSPECT, nil},
		{"clean", "manageable", ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, cleanParams},
		{"provide", "manageable", ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, r, got := fxRunner(t, tc.from)
			p := fxRun(t, r, got, ironicReq(tc.kind, fxNode, tc.params))
			wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
			if hasMarker(t, f, fxNode) {
				t.Error("the marker stays after success")
			}
			last := p.GetSteps()[len(p.GetSteps())-1]
			if !hasRequest(last, "PATCH", "/v1/nodes/"+fxNode, "remove /extra/ironlink_operation, add /extra/ironlink_last_operation", 200) {
				t.Errorf("the last step does not record the marker's removal: %v", last.GetRequests())
			}
		})
	}
	t.Run("enrol", func(t *testing.T) {
		f, r, got := fxRunner(t, "available")
		p := fxRun(t, r, got, enrolReq("new-m", "52:54:00:00:0a:01"))
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		if hasMarker(t, f, p.GetDeviceId()) {
			t.Error("the marker stays after an enrolment")
		}
	})
}

func enrolReq(name, mac string) *ironlinkv1.OperationRequest {
	return &ironlinkv1.OperationRequest{OperationId: opID(), Attempt: 1, Kind: ironlinkv1.OperationKind_OPERATION_KIND_ENROL,
		Node: &ironlinkv1.NodeSpec{Name: name, Driver: "fake-hardware", Ports: []*ironlinkv1.PortSpec{{Address: mac, PxeEnabled: true}}}}
}

// An enrolment whose MAC another node's port has deletes the node it
// created and names the port's node; a node it took over stays, named.
func TestFixtureEnrolPortConflictLeavesNothing(t *testing.T) {
	const mac = "52:54:00:00:0b:01"
	t.Run("created by the operation: deleted", func(t *testing.T) {
		f, r, got := fxRunner(t, "available")
		owner := fxRun(t, r, got, enrolReq("owner-1", mac))
		wantState(t, owner, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		p := fxRun(t, r, got, enrolReq("dup-1", mac))
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
		for _, want := range []string{mac, owner.GetDeviceId(), "owner-1", p.GetDeviceId(), "was deleted"} {
			if !strings.Contains(p.GetError(), want) {
				t.Errorf("error %q does not name %q", p.GetError(), want)
			}
		}
		if p.GetFailureReason() != "PortConflict" {
			t.Errorf("reason %s", p.GetFailureReason())
		}
		if _, err := f.NodeDetail(context.Background(), "dup-1"); !errors.Is(err, ironic.ErrNodeNotFound) {
			t.Errorf("node dup-1 is still there: %v", err)
		}
		s := stepNamed(p, "delete-node")
		if s == nil || !hasRequest(s, "DELETE", "/v1/nodes/"+p.GetDeviceId(), "", 204) {
			t.Errorf("no delete-node step with its DELETE: %v", p.GetSteps())
		}
		if s := stepNamed(p, "create-ports"); s == nil || !hasRequest(s, "POST", "/v1/ports", "address="+mac+" node_uuid="+p.GetDeviceId(), 409) {
			t.Errorf("the refused port create is not recorded with Ironic's 409: %v", p.GetSteps())
		}
	})
	t.Run("taken over: left as it was, named", func(t *testing.T) {
		f, r, got := fxRunner(t, "available")
		owner := fxRun(t, r, got, enrolReq("owner-2", mac))
		wantState(t, owner, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		f.PutNode(ironic.Node{UUID: "00000000-0000-4000-8000-0000000000aa", Name: "existing-2", ProvisionState: "enroll"})
		p := fxRun(t, r, got, enrolReq("existing-2", mac))
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
		for _, want := range []string{owner.GetDeviceId(), "not created by this operation", "existing-2"} {
			if !strings.Contains(p.GetError(), want) {
				t.Errorf("error %q does not name %q", p.GetError(), want)
			}
		}
		if _, ok := f.Node("00000000-0000-4000-8000-0000000000aa"); !ok {
			t.Error("a node the operation did not create was deleted")
		}
	})
}

// A Nova create whose server goes to ERROR deletes the server, and its
// error names Nova's fault and the node's last_error.
func TestFixtureNovaCreateErrorDeletesTheServer(t *testing.T) {
	f, r, got := fxRunner(t, "available")
	f.PutFlavor(nova.Flavor{ID: "fl-1", Name: "baremetal-gpu", ExtraSpecs: map[string]string{"resources:CUSTOM_GPU": "1"}})
	const fault = "Exceeded maximum number of retries. Exhausted all hosts available for retrying build failures."
	const lastErr = "Node is associated with instance 0bad0000-0000-4000-8000-000000000000."
	f.FailNextBoot(fxNode, fault, lastErr)
	// Nova answers the first delete with a 500 (seen on the test bed):
	// the delete is tried again.
	f.Fail(site.MethodDeleteServer, "", gophercloud.ErrUnexpectedResponseCode{Method: "DELETE", URL: "/v2.1/servers/x", Actual: 500,
		Body: []byte(`{"computeFault": {"code": 500, "message": "Unexpected API Error."}}`)}, 1)
	p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, fxNode,
		&ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{Name: "vm-e", Image: "11111111-2222-4333-8444-555555555555"}}))
	wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_FAILED)
	for _, want := range []string{fault, lastErr, p.GetServerId(), "was deleted"} {
		if !strings.Contains(p.GetError(), want) {
			t.Errorf("error %q does not name %q", p.GetError(), want)
		}
	}
	if servers, _ := f.ListServers(context.Background()); len(servers) != 0 {
		t.Errorf("servers left in Nova: %v", servers)
	}
	s := stepNamed(p, "delete-failed-server")
	if s == nil || !hasRequest(s, "DELETE", "/servers/"+p.GetServerId(), "", 204) {
		t.Errorf("no delete-failed-server step with its DELETE: %v", p.GetSteps())
	}
}

// A satellite restart: the first runner asks for the clean (attempt 1),
// the second continues under attempt 2 without asking again. Each runner's
// steps carry its attempt; the first one's carry the PUT it sent (the hub
// keeps both: hub/store mergeSteps).
func TestFixtureStepsCarryAttemptsAndRequests(t *testing.T) {
	f, _, _ := fxRunner(t, "manageable")
	f.Hold(fxNode, true)
	req := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, fxNode, cleanParams)
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	got1 := make(chan *ironlinkv1.OperationProgress, 100)
	r1 := operations.NewOnSite(ctx1, operations.Site{Ironic: f}, operations.Config{PollInterval: time.Millisecond},
		func(p *ironlinkv1.OperationProgress) { got1 <- p }, nil)
	r1.Handle(req)
	var first *ironlinkv1.OperationProgress
	deadline := time.After(10 * time.Second)
	for first == nil {
		select {
		case p := <-got1:
			if p.GetProvisionState() == "clean wait" {
				first = p
			}
		case <-deadline:
			t.Fatal("never saw clean wait")
		}
	}
	cancel1()
	r1.Wait()
	s := stepNamed(first, "clean")
	if s == nil || s.GetAttempt() != 1 || !hasRequest(s, "PUT", "/v1/nodes/"+fxNode+"/states/provision", "target=clean", 202) {
		t.Fatalf("attempt 1's clean step %v", s)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got2 := make(chan *ironlinkv1.OperationProgress, 100)
	r2 := operations.NewOnSite(ctx, operations.Site{Ironic: f}, operations.Config{PollInterval: time.Millisecond},
		func(p *ironlinkv1.OperationProgress) { got2 <- p }, nil)
	again := ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_CLEAN, fxNode, cleanParams)
	again.OperationId, again.Attempt, again.Redelivery = req.GetOperationId(), 2, true
	f.Hold(fxNode, false)
	p := fxRun(t, r2, got2, again)
	wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	if n := provisions(f, "clean"); n != 1 {
		t.Errorf("clean asked for %d times across the restart, want 1", n)
	}
	for _, s := range p.GetSteps() {
		if s.GetAttempt() != 2 {
			t.Errorf("step %s of the second process has attempt %d", s.GetName(), s.GetAttempt())
		}
	}
	if hasMarker(t, f, fxNode) {
		t.Error("the marker stays after the restarted clean")
	}
}

// A Nova create on an available node whose instance_uuid names no Nova
// server: without force_clear it fails StaleInstance naming the
// instance_uuid and the way out, before anything is booted; with it the
// instance_uuid is removed as its own recorded step and the server boots.
func TestFixtureNovaCreateStaleInstance(t *testing.T) {
	const stale = "0bad0000-0000-4000-8000-0000000000aa"
	for _, force := range []bool{false, true} {
		f, r, got := fxRunner(t, "available")
		f.PutFlavor(nova.Flavor{ID: "fl-1", Name: "baremetal-gpu", ExtraSpecs: map[string]string{"resources:CUSTOM_GPU": "1"}})
		n, _ := f.Node(fxNode)
		n.InstanceUUID = stale
		f.PutNode(n)
		p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, fxNode,
			&ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{Name: "vm-s", Image: "11111111-2222-4333-8444-555555555555", ForceClear: force}}))
		booted := slices.ContainsFunc(f.Calls(), func(c site.Call) bool { return c.Method == site.MethodCreateServer })
		if !force {
			if p.GetFailureReason() != "StaleInstance" || !strings.Contains(p.GetError(), stale) || !strings.Contains(p.GetError(), "--force-clear") || booted {
				t.Errorf("without force_clear: %s %q, booted %v", p.GetFailureReason(), p.GetError(), booted)
			}
			continue
		}
		wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		s := stepNamed(p, "clear-stale-instance")
		if s == nil || !hasRequest(s, "PATCH", "/v1/nodes/"+fxNode, "remove /instance_uuid", 200) || !strings.Contains(s.GetMessage(), stale) {
			t.Errorf("no clear-stale-instance step with its PATCH: %v", p.GetSteps())
		}
		if n, _ := f.Node(fxNode); n.InstanceUUID != p.GetServerId() || n.ProvisionState != "active" {
			t.Errorf("node %s instance %s, server %s", n.ProvisionState, n.InstanceUUID, p.GetServerId())
		}
	}
}

// A NOVA_DELETE whose server delete Nova answers 500 (seen on the test bed
// under SQLite lock contention) deletes again and succeeds; both requests
// are on the record.
func TestFixtureNovaDeleteRetriesANova500(t *testing.T) {
	f, r, got := fxRunner(t, "available")
	f.PutFlavor(nova.Flavor{ID: "fl-1", Name: "baremetal-gpu", ExtraSpecs: map[string]string{"resources:CUSTOM_GPU": "1"}})
	p := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, fxNode,
		&ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{Name: "vm-d", Image: "11111111-2222-4333-8444-555555555555"}}))
	wantState(t, p, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	f.Fail(site.MethodDeleteServer, "", gophercloud.ErrUnexpectedResponseCode{Method: "DELETE", URL: "/v2.1/servers/x", Actual: 500,
		Body: []byte(`{"computeFault": {"code": 500, "message": "Unexpected API Error."}}`)}, 1)
	d := fxRun(t, r, got, ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE, fxNode, nil))
	wantState(t, d, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
	var statuses []int32
	for _, s := range d.GetSteps() {
		for _, q := range s.GetRequests() {
			if q.GetMethod() == "DELETE" {
				statuses = append(statuses, q.GetStatus())
			}
		}
	}
	if !slices.Equal(statuses, []int32{500, 204}) {
		t.Errorf("server deletes answered %v, want [500 204]: %v", statuses, d.GetSteps())
	}
}
