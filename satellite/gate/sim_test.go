package gate_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/gate"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
	"github.com/ironlink/ironlink/satellite/placement"
)

const ready = gate.DefaultTrait

func newApplier(t *testing.T, opts openstacksim.Options) (*openstacksim.Cloud, *gate.Applier) {
	t.Helper()
	sim, c := ostest.ConnectSim(t, opts)
	log := ostest.Logger(t)
	ic := ironic.New(c.Baremetal, log)
	ic.ReadRetry, ic.WriteRetry = ostest.FastRetry(3), ostest.FastRetry(3)
	a := &gate.Applier{Ironic: ic}
	if c.Placement != nil {
		pc := placement.New(c.Placement, log)
		pc.ReadRetry, pc.WriteRetry = ostest.FastRetry(3), ostest.FastRetry(3)
		pc.ConflictBackoff = openstack.RetryPolicy{InitialInterval: time.Millisecond, MaxInterval: 2 * time.Millisecond}
		a.Placement = pc
	}
	return sim, a
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sides returns whether the node and its provider carry the trait.
func sides(t *testing.T, sim *openstacksim.Cloud, id string) (node, rp bool) {
	t.Helper()
	n, ok := sim.Node(id)
	if !ok {
		t.Fatalf("node %s gone", id)
	}
	ts, _, _ := sim.ProviderTraits(id)
	return slices.Contains(n.Traits, ready), slices.Contains(ts, ready)
}

func TestSimQuarantineRelease(t *testing.T) {
	sim, a := newApplier(t, openstacksim.Options{})
	nodes := sim.SeedLikeTestbed(10)
	id := nodes[0].UUID // available, READY on the provider only (seed default)
	ctx := ctxT(t)
	ts, _, _ := sim.ProviderTraits(id)
	_ = sim.SetProviderTraits(id, append(ts, "COMPUTE_NODE")) // Nova's own trait

	st, err := a.State(ctx, id)
	if err != nil || st.NodeHasTrait || !st.ProviderHasTrait || !st.Drift {
		t.Fatalf("initial state %+v %v", st, err)
	}

	r, err := a.Apply(ctx, id, true)
	if err != nil || r.NodeChanged || !r.ProviderChanged || r.ProviderGeneration == 0 {
		t.Fatalf("quarantine: %+v %v", r, err)
	}
	if n, p := sides(t, sim, id); n || p {
		t.Fatalf("after quarantine node=%v rp=%v", n, p)
	}
	if r, err := a.Apply(ctx, id, true); err != nil || r.NodeChanged || r.ProviderChanged {
		t.Fatalf("quarantine again: %+v %v", r, err)
	}

	r, err = a.Apply(ctx, id, false)
	if err != nil || !r.NodeChanged || !r.ProviderChanged {
		t.Fatalf("release: %+v %v", r, err)
	}
	if n, p := sides(t, sim, id); !n || !p {
		t.Fatalf("after release node=%v rp=%v", n, p)
	}
	t.Logf("release detail: %s", r.Detail)
	if r, err := a.Apply(ctx, id, false); err != nil || r.NodeChanged || r.ProviderChanged {
		t.Fatalf("release again: %+v %v", r, err)
	}
	st, err = a.State(ctx, id)
	if err != nil || !st.NodeHasTrait || !st.ProviderHasTrait || st.Drift {
		t.Fatalf("final state %+v %v", st, err)
	}
	// Nova's own traits on the provider survive both writes.
	if ts, _, _ := sim.ProviderTraits(id); !slices.Contains(ts, "COMPUTE_NODE") {
		t.Errorf("provider traits %v lost COMPUTE_NODE", ts)
	}
	for _, r := range sim.Requests() {
		if r.Method == http.MethodDelete && r.Service == openstacksim.ServicePlacement {
			t.Errorf("DELETE on Placement: %s", r.Path)
		}
	}
}

// A release on a site whose Placement lacks CUSTOM_CUSTOMER_READY creates
// the trait first and succeeds.
func TestSimReleaseCreatesTrait(t *testing.T) {
	sim, a := newApplier(t, openstacksim.Options{})
	id := sim.SeedLikeTestbed(10)[8].UUID // role 9: available, no trait
	sim.UndefineTrait(ready)
	sim.ResetRequests()
	r, err := a.Apply(ctxT(t), id, false)
	if err != nil || !r.NodeChanged || !r.ProviderChanged {
		t.Fatalf("release: %+v %v", r, err)
	}
	if !sim.TraitDefined(ready) {
		t.Fatal("trait not created")
	}
	if n, p := sides(t, sim, id); !n || !p {
		t.Fatalf("node=%v rp=%v", n, p)
	}
	// The trait was created before any provider write.
	created, wrote := -1, -1
	for i, r := range sim.Requests() {
		if r.Method == http.MethodPut && r.Path == "/traits/"+ready && created < 0 {
			created = i
		}
		if r.Method == http.MethodPut && strings.HasSuffix(r.Path, "/traits") && strings.HasPrefix(r.Path, "/resource_providers/") && wrote < 0 {
			wrote = i
		}
	}
	if created < 0 || wrote < 0 || created > wrote {
		t.Errorf("trait created at request %d, provider written at %d", created, wrote)
	}
}

// Standalone site: only the Ironic node trait is used.
func TestSimStandalone(t *testing.T) {
	sim, a := newApplier(t, openstacksim.Options{NoPlacement: true})
	if a.Placement != nil {
		t.Fatal("placement client on a standalone site")
	}
	id := sim.AddNode(openstacksim.Node{ProvisionState: "available"}).UUID
	ctx := ctxT(t)
	r, err := a.Apply(ctx, id, false)
	if err != nil || !r.NodeChanged || r.ProviderChanged || r.ProviderGeneration != 0 {
		t.Fatalf("release: %+v %v", r, err)
	}
	if n, _ := sim.Node(id); !slices.Contains(n.Traits, ready) {
		t.Fatal("trait not on node")
	}
	r, err = a.Apply(ctx, id, true)
	if err != nil || !r.NodeChanged {
		t.Fatalf("quarantine: %+v %v", r, err)
	}
	if n, _ := sim.Node(id); slices.Contains(n.Traits, ready) {
		t.Fatal("trait still on node")
	}
	st, err := a.State(ctx, id)
	if err != nil || st.NodeHasTrait || st.ProviderExists || st.Drift {
		t.Fatalf("state %+v %v", st, err)
	}
}

// A quarantine closes Placement even when the Ironic write fails (locked),
// and reports the failure; a release does not open Placement when the
// Ironic write fails.
func TestSimFailClosed(t *testing.T) {
	sim, a := newApplier(t, openstacksim.Options{})
	nodes := sim.SeedLikeTestbed(10)
	ctx := ctxT(t)

	id := nodes[0].UUID
	if err := a.Ironic.AddTrait(ctx, id, ready); err != nil {
		t.Fatal(err)
	}
	_ = sim.UpdateNode(id, func(n *openstacksim.Node) { n.Reservation = "conductor-1" })
	r, err := a.Apply(ctx, id, true)
	if !errors.Is(err, ironic.ErrNodeLocked) || r.NodeChanged || !r.ProviderChanged {
		t.Fatalf("quarantine of a locked node: %+v %v", r, err)
	}
	if n, p := sides(t, sim, id); !n || p {
		t.Fatalf("node=%v rp=%v: want node still set, provider closed", n, p)
	}
	t.Logf("detail: %s", r.Detail)

	id = nodes[8].UUID // no trait anywhere
	_ = sim.UpdateNode(id, func(n *openstacksim.Node) { n.Reservation = "conductor-1" })
	r, err = a.Apply(ctx, id, false)
	if !errors.Is(err, ironic.ErrNodeLocked) || r.ProviderChanged {
		t.Fatalf("release of a locked node: %+v %v", r, err)
	}
	if n, p := sides(t, sim, id); n || p {
		t.Fatalf("node=%v rp=%v: nothing may be opened", n, p)
	}
	// The lock goes away; the retry (as the hub or the resync would do) converges.
	_ = sim.UpdateNode(id, func(n *openstacksim.Node) { n.Reservation = "" })
	if _, err := a.Apply(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	if n, p := sides(t, sim, id); !n || !p {
		t.Fatalf("after retry node=%v rp=%v", n, p)
	}
}

// Placement 409s from a concurrent writer during a quarantine are absorbed.
func TestSimQuarantineDuringConcurrentWriter(t *testing.T) {
	sim, a := newApplier(t, openstacksim.Options{})
	id := sim.SeedLikeTestbed(2)[1].UUID // active, READY on provider
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServicePlacement, Method: http.MethodPut, PathContains: "/resource_providers/", Status: http.StatusConflict, Times: 2,
		Before: func() {
			ts, _, _ := sim.ProviderTraits(id)
			_ = sim.SetProviderTraits(id, append(ts, "COMPUTE_STATUS_DISABLED"))
		}})
	r, err := a.Apply(ctxT(t), id, true)
	if err != nil || !r.ProviderChanged {
		t.Fatalf("%+v %v", r, err)
	}
	ts, _, _ := sim.ProviderTraits(id)
	if slices.Contains(ts, ready) || !slices.Contains(ts, "COMPUTE_STATUS_DISABLED") {
		t.Fatalf("provider traits %v", ts)
	}
}

// A node Nova has not registered yet (no provider) is not an error.
func TestSimNoProvider(t *testing.T) {
	sim, a := newApplier(t, openstacksim.Options{})
	id := sim.AddNode(openstacksim.Node{ProvisionState: "available"}).UUID
	r, err := a.Apply(ctxT(t), id, false)
	if err != nil || !r.NodeChanged || r.ProviderChanged || !strings.Contains(r.Detail, "no resource provider") {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := a.Apply(ctxT(t), "00000000-0000-4000-8000-00000000dead", true); !errors.Is(err, ironic.ErrNodeNotFound) {
		t.Fatalf("unknown node: %v", err)
	}
}
