package site_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/site"
)

// statesOf reads node id until its transition ends and returns the states
// seen, the first one (set when the action was accepted) included.
func statesOf(t *testing.T, f *site.Fixture, id string) []string {
	t.Helper()
	n, _ := f.Node(id)
	seen := []string{n.ProvisionState}
	for range 10 {
		if !f.Advance(id) {
			return seen
		}
		n, _ = f.Node(id)
		seen = append(seen, n.ProvisionState)
	}
	t.Fatalf("node %s never rests: %v", id, seen)
	return nil
}

// The fixture walks Ironic's provision state machine: each action from the
// states that allow it, one state per step; a target the state does not
// allow answers 400 with Ironic's faultstring; a held node stays in its
// wait state until released or aborted; a locked node answers 409
// NodeLocked; an injected failure ends in the failure state with
// last_error.
func TestFixtureProvisionStateMachine(t *testing.T) {
	ctx := context.Background()
	const id = "n1"
	f := site.NewFixture()
	f.PutNode(ironic.Node{UUID: id, Name: "one", ProvisionState: "enroll"})
	for _, step := range []struct {
		target string
		want   []string
	}{
		{"manage", []string{"verifying", "manageable"}},
		{"inspect", []string{"inspecting", "inspect wait", "manageable"}},
		{"provide", []string{"cleaning", "clean wait", "available"}},
	} {
		if err := f.SetProvisionState(ctx, id, step.target, nil); err != nil {
			t.Fatalf("%s: %v", step.target, err)
		}
		if got := statesOf(t, f, id); !slices.Equal(got, step.want) {
			t.Errorf("%s went through %v, want %v", step.target, got, step.want)
		}
	}
	err := f.SetProvisionState(ctx, id, "active", nil)
	if openstack.StatusCode(err) != 400 || ironic.Message(err) == "" {
		t.Errorf("deploy without image_source: %v", err)
	}
	err = f.SetProvisionState(ctx, id, "inspect", nil)
	if openstack.StatusCode(err) != 400 {
		t.Errorf("inspect from available: %v", err)
	}

	f.PutNode(ironic.Node{UUID: "n2", ProvisionState: "manageable"})
	f.Hold("n2", true)
	if err := f.SetProvisionState(ctx, "n2", "clean", nil); err != nil {
		t.Fatal(err)
	}
	f.Advance("n2")
	if f.Advance("n2") {
		t.Error("a held node left clean wait")
	}
	if err := f.SetProvisionState(ctx, "n2", "abort", nil); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.Node("n2"); n.ProvisionState != "clean failed" {
		t.Errorf("abort from clean wait: %s", n.ProvisionState)
	}

	f.Lock("n2", "conductor-1")
	if err := f.SetProvisionState(ctx, "n2", "manage", nil); openstack.StatusCode(err) != 409 || !ironic.IsNodeLocked(err) {
		t.Errorf("locked node: %v", err)
	}
	f.Lock("n2", "")
	f.FailNextAction("n2", "BMC unreachable")
	if err := f.SetProvisionState(ctx, "n2", "manage", nil); err != nil {
		t.Fatal(err)
	}
	statesOf(t, f, "n2")
	if d, _ := f.NodeDetail(ctx, "n2"); d.ProvisionState != "enroll" || d.LastError != "BMC unreachable" {
		t.Errorf("failed manage: %s %q", d.ProvisionState, d.LastError)
	}

	// Nova on a node: boot deploys it, delete undeploys it.
	f.PutNode(ironic.Node{UUID: "n3", ProvisionState: "available", PowerState: "power off"})
	sid, err := f.CreateServer(ctx, nova.CreateServerOpts{Name: "vm", NodeUUID: "n3", ImageID: "img"})
	if err != nil {
		t.Fatal(err)
	}
	statesOf(t, f, "n3")
	if s, _ := f.GetServer(ctx, sid); s.Status != "ACTIVE" {
		t.Errorf("server %s after deploy", s.Status)
	}
	if err := f.DeleteServer(ctx, sid); err != nil {
		t.Fatal(err)
	}
	statesOf(t, f, "n3")
	if n, _ := f.Node("n3"); n.ProvisionState != "available" || n.InstanceUUID != "" {
		t.Errorf("after delete: %s %q", n.ProvisionState, n.InstanceUUID)
	}
	if _, err := f.GetServer(ctx, sid); !errors.Is(err, nova.ErrServerNotFound) {
		t.Errorf("deleted server: %v", err)
	}
	if err := f.DeleteServer(ctx, sid); err != nil {
		t.Errorf("deleting again: %v", err)
	}
}
