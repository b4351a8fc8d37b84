package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/test/harness"
)

// This file is the operations suite's part on NOVA_CREATE refused early by
// the hub (issue 21), run on the simulator and on the real test bed alike:
// on a node the cloud already has (not one the suite enrolled) the hub
// refuses a NOVA_CREATE from its stored view (a stale instance_uuid Nova
// does not know, maintenance, an active node) with FailedPrecondition, no
// operation and no server create; with force_clear the stale instance_uuid
// is cleared as a recorded step and the server boots. Every node is left as
// found, also when the test fails.

// freeNode is an available node of the cloud not in maintenance, with no
// instance and a power state (Nova's Ironic driver needs one), the highest
// name first: the seeded nodes the other suites name (node-001 … node-010)
// are taken only when nothing else fits (the simulator's six).
func (e *opsEnv) freeNode(t *testing.T, skip string) (id, name string) {
	t.Helper()
	ns := e.nodes(t)
	slices.SortFunc(ns, func(a, b nodes.Node) int { return strings.Compare(b.Name, a.Name) })
	for _, n := range ns {
		if n.ProvisionState != "available" || n.Maintenance || n.InstanceUUID != "" || strings.HasPrefix(n.Name, skip) {
			continue
		}
		if _, _, pw := e.provisionState(t, n.UUID); pw != "" {
			return n.UUID, n.Name
		}
	}
	t.Skip("no free available node with a power state on this cloud")
	return "", ""
}

// activeNode is an active node not in maintenance carrying an instance
// (one of the seeded servers' on the test bed), the highest name first.
func (e *opsEnv) activeNode(t *testing.T) (id, name string) {
	t.Helper()
	ns := e.nodes(t)
	slices.SortFunc(ns, func(a, b nodes.Node) int { return strings.Compare(b.Name, a.Name) })
	for _, n := range ns {
		if n.ProvisionState == "active" && !n.Maintenance && n.InstanceUUID != "" {
			return n.UUID, n.Name
		}
	}
	t.Skip("no active node with an instance on this cloud")
	return "", ""
}

// waitHubDevice waits until the hub's stored view of device id satisfies ok.
func waitHubDevice(t *testing.T, fc ironlinkv1.FleetServiceClient, id string, timeout time.Duration, ok func(*ironlinkv1.Device) error) {
	t.Helper()
	harness.Eventually(t, timeout, func() error {
		r, err := fc.GetDevice(context.Background(), &ironlinkv1.GetDeviceRequest{DeviceId: id})
		if err != nil {
			return err
		}
		return ok(r.GetDevice())
	})
}

// deviceOps counts the operations the hub has on device id.
func deviceOps(t *testing.T, oc ironlinkv1.OperationServiceClient, id string) int {
	t.Helper()
	r, err := oc.ListOperations(context.Background(), &ironlinkv1.ListOperationsRequest{Device: id, PageSize: 100})
	if err != nil {
		t.Fatalf("ListOperations of %s: %v", id, err)
	}
	return len(r.GetOperations())
}

// refusedNovaCreate starts a NOVA_CREATE of server name on device id and
// wants the hub's FailedPrecondition with reason and every one of says in
// its message; then that no operation was created on the device and that
// no server of that name was created (the simulator's request log has no
// POST /servers of the satellite; on a real cloud Nova lists no server of
// that name).
func refusedNovaCreate(t *testing.T, e *opsEnv, oc ironlinkv1.OperationServiceClient, site, id, name, reason string, says ...string) {
	t.Helper()
	before, mark, t0 := deviceOps(t, oc, id), e.mark(), time.Now()
	_, err := oc.StartOperation(context.Background(), &ironlinkv1.StartOperationRequest{Site: site, Kind: ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE,
		Devices: []string{id}, Params: &ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{Name: name, Image: e.image}}, Reason: "e2e: refused"})
	took := time.Since(t0)
	if status.Code(err) != codes.FailedPrecondition || grpcerr.Reason(err) != reason {
		t.Fatalf("NOVA_CREATE on %s: %v (reason %q), want FailedPrecondition %s", id, err, grpcerr.Reason(err), reason)
	}
	msg := status.Convert(err).Message()
	for _, s := range says {
		if !strings.Contains(msg, s) {
			t.Errorf("refusal %q lacks %q", msg, s)
		}
	}
	// The refusal is the answer to StartOperation: no operation row, nothing
	// for the satellite to act on; the two checks below prove both at once.
	if n := deviceOps(t, oc, id); n != before {
		t.Errorf("the refused NOVA_CREATE left %d new operations on %s", n-before, id)
	}
	if n := e.serverCreates(t, mark, name); n != 0 {
		t.Errorf("the refused NOVA_CREATE created %d servers named %s", n, name)
	}
	t.Logf("MEASURE %s refusal in %s: %s", e.name, took.Round(time.Microsecond), msg)
}

// testNovaCreateRefusals is the suite's part of this file; skip is the
// name prefix of the suite's own nodes.
func testNovaCreateRefusals(t *testing.T, h *opsHarness, oc ironlinkv1.OperationServiceClient, run runFunc, skip string) {
	e, ctx := h.e, context.Background()
	if e.cp == nil {
		t.Skip("no Nova: NOVA_CREATE's refusals need it")
	}
	prefix := "refused-" + randID()

	t.Run("nova create on an active node is refused", func(t *testing.T) {
		id, name := e.activeNode(t)
		waitHubDevice(t, h.fcB, id, 60*time.Second, func(d *ironlinkv1.Device) error {
			if d.GetFacts().GetProvisionState() != "active" {
				return fmt.Errorf("hub shows %s as %q", name, d.GetFacts().GetProvisionState())
			}
			return nil
		})
		refusedNovaCreate(t, e, oc, h.site, id, prefix+"-active", "PROVISION_STATE", `is "active"`, "NOVA_CREATE starts from available")
	})

	id, name := e.freeNode(t, skip)
	t.Logf("free node %s (%s)", name, id)

	t.Run("nova create on a stale instance_uuid is refused; with force_clear it is cleared and boots", func(t *testing.T) {
		stale := uuid()
		patch := func(op string) error {
			body := []map[string]any{{"op": op, "path": "/instance_uuid"}}
			if op == "add" {
				body[0]["value"] = stale
			}
			_, err := e.bm.Patch(ctx, e.bm.ServiceURL("nodes", id), body, nil, &gophercloud.RequestOpts{OkCodes: []int{200}})
			return err
		}
		server := ""
		t.Cleanup(func() { leaveFound(t, e, id, stale, prefix+"-force", server) })
		if err := patch("add"); err != nil {
			t.Fatalf("set instance_uuid of %s: %v", name, err)
		}
		t0 := time.Now()
		waitHubDevice(t, h.fcB, id, 90*time.Second, func(d *ironlinkv1.Device) error {
			for _, c := range d.GetConditions() {
				if c.GetType() == "InstanceAllocated" && c.GetReason() == "InstanceRecordMismatch" {
					return nil
				}
			}
			return fmt.Errorf("hub does not show %s InstanceAllocated/InstanceRecordMismatch yet", name)
		})
		t.Logf("MEASURE %s stale instance_uuid seen by the hub after %s", e.name, time.Since(t0).Round(time.Millisecond))
		refusedNovaCreate(t, e, oc, h.site, id, prefix+"-stale", "INSTANCE_PRESENT", "instance_uuid "+stale+" that Nova does not know", "--force-clear")

		mark := e.mark()
		op := run(t, oc, ironlinkv1.OperationKind_OPERATION_KIND_NOVA_CREATE, id, &ironlinkv1.OperationParams{NovaCreate: &ironlinkv1.NovaCreateParams{
			Name: prefix + "-force", Image: e.image, ForceClear: true}}, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		server = op.GetServerId()
		cl := stepRequest(op, "clear-stale-instance", http.MethodPatch, "remove /instance_uuid")
		if cl == nil || cl.GetStatus() != http.StatusOK {
			t.Errorf("no clear-stale-instance step with Ironic's 200 to its PATCH: %s", stepSummary(op))
		}
		if msg := clearedBeforeBoot(op); msg != "" {
			t.Errorf("%s: %s", msg, stepSummary(op))
		}
		if n := e.serverCreates(t, mark, prefix+"-force"); n != 1 {
			t.Errorf("%d servers named %s, want 1", n, prefix+"-force")
		}
		if st, inst, _ := e.provisionState(t, id); st != "active" || inst != server {
			t.Errorf("after the force-clear NOVA_CREATE %s is %q with instance %q, want active with %s", name, st, inst, server)
		}
		t.Logf("force-clear steps: %s", stepSummary(op))
		run(t, oc, ironlinkv1.OperationKind_OPERATION_KIND_NOVA_DELETE, id, nil, ironlinkv1.OperationState_OPERATION_STATE_SUCCEEDED)
		server = ""
		if st, inst, _ := e.provisionState(t, id); st != "available" || inst != "" {
			t.Errorf("after NOVA_DELETE %s is %q with instance %q", name, st, inst)
		}
	})

	t.Run("nova create on a node in maintenance is refused", func(t *testing.T) {
		if st, _, _ := e.provisionState(t, id); st != "available" {
			t.Skipf("%s is %q, not available", name, st)
		}
		t.Cleanup(func() {
			_, _ = e.bm.Delete(ctx, e.bm.ServiceURL("nodes", id, "maintenance"), &gophercloud.RequestOpts{OkCodes: []int{202, 204}})
		})
		if _, err := e.bm.Put(ctx, e.bm.ServiceURL("nodes", id, "maintenance"), map[string]any{"reason": "ironlink e2e: refused NOVA_CREATE"}, nil,
			&gophercloud.RequestOpts{OkCodes: []int{202, 204}}); err != nil {
			t.Fatalf("set maintenance on %s: %v", name, err)
		}
		waitHubDevice(t, h.fcB, id, 60*time.Second, func(d *ironlinkv1.Device) error {
			if !d.GetFacts().GetMaintenance() {
				return fmt.Errorf("hub does not show %s in maintenance yet", name)
			}
			return nil
		})
		refusedNovaCreate(t, e, oc, h.site, id, prefix+"-maint", "NODE_IN_MAINTENANCE", "in maintenance", "maintenance unset "+id)
	})
}

// leaveFound puts node id back as the stale-instance test found it: the
// server name (or id) deleted, the stale instance_uuid removed, the node
// available again.
func leaveFound(t *testing.T, e *opsEnv, id, stale, name, server string) {
	ctx := context.Background()
	var body struct {
		Servers []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"servers"`
	}
	if _, err := e.cp.Get(ctx, e.cp.ServiceURL("servers")+"?name="+name, &body, nil); err == nil {
		for _, s := range body.Servers {
			if s.Name == name && s.ID != server {
				_, _ = e.cp.Delete(ctx, e.cp.ServiceURL("servers", s.ID), nil)
			}
		}
	}
	if server != "" {
		_, _ = e.cp.Delete(ctx, e.cp.ServiceURL("servers", server), nil)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		st, inst, _ := e.provisionState(t, id)
		if strings.EqualFold(inst, stale) {
			_, _ = e.bm.Patch(ctx, e.bm.ServiceURL("nodes", id), []map[string]any{{"op": "remove", "path": "/instance_uuid"}}, nil,
				&gophercloud.RequestOpts{OkCodes: []int{200}})
			continue
		}
		if st == "available" && inst == "" {
			return
		}
		time.Sleep(time.Second)
	}
	t.Errorf("cleanup: node %s is not available without an instance after 2 min", id)
}

// clearedBeforeBoot checks op's recorded requests, in order: the PATCH
// removing the stale instance_uuid (Ironic's 200) before any POST
// /servers, and exactly one POST /servers Nova accepted (202; a 400 while
// Nova has not listed the node as a hypervisor again creates nothing). ""
// when they hold, else what did not.
func clearedBeforeBoot(op *ironlinkv1.Operation) string {
	cleared, accepted := false, 0
	for _, st := range op.GetSteps() {
		for _, r := range st.GetRequests() {
			switch {
			case r.GetMethod() == http.MethodPatch && r.GetDetail() == "remove /instance_uuid" && r.GetStatus() == http.StatusOK:
				cleared = true
			case r.GetMethod() == http.MethodPost && strings.HasSuffix(r.GetPath(), "/servers"):
				if !cleared {
					return "a server create was sent before the stale instance_uuid was cleared"
				}
				if r.GetStatus() == http.StatusAccepted {
					accepted++
				}
			}
		}
	}
	if !cleared || accepted != 1 {
		return fmt.Sprintf("instance_uuid cleared %v, %d server creates accepted (want 1)", cleared, accepted)
	}
	return ""
}
