package placement_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
	"github.com/ironlink/ironlink/satellite/placement"
)

const ready = "CUSTOM_CUSTOMER_READY"

func newSim(t *testing.T, opts openstacksim.Options) (*openstacksim.Cloud, *placement.Client, *openstack.Clients) {
	t.Helper()
	sim, c := ostest.ConnectSim(t, opts)
	if c.Placement == nil {
		t.Fatal("no placement client")
	}
	pc := placement.New(c.Placement, ostest.Logger(t))
	pc.ReadRetry = ostest.FastRetry(4)
	pc.WriteRetry = ostest.FastRetry(4)
	pc.ConflictBackoff = openstack.RetryPolicy{InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond}
	return sim, pc, c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// noTraitDeletes fails t if the client ever called DELETE on a provider's
// trait list (docs/design/openstack.md §3.1: never).
func noTraitDeletes(t *testing.T, sim *openstacksim.Cloud) {
	t.Helper()
	for _, r := range sim.Requests() {
		if r.Service == openstacksim.ServicePlacement && r.Method == http.MethodDelete {
			t.Errorf("client sent DELETE %s", r.Path)
		}
	}
}

func TestSimProviders(t *testing.T) {
	sim, pc, c := newSim(t, openstacksim.Options{})
	if c.PlacementVersion != "1.39" {
		t.Errorf("negotiated %s", c.PlacementVersion)
	}
	nodes := sim.SeedLikeTestbed(10)
	ctx := ctxT(t)
	all, err := pc.Providers(ctx)
	if err != nil || len(all) != 10 {
		t.Fatalf("Providers: %d %v", len(all), err)
	}
	for _, n := range nodes {
		if !all[n.UUID] {
			t.Errorf("provider %s missing", n.UUID)
		}
	}
	set, defined, err := pc.ProvidersWithTrait(ctx, ready)
	if err != nil || !defined {
		t.Fatalf("ProvidersWithTrait: %v %v", defined, err)
	}
	want := map[string]bool{nodes[0].UUID: true, nodes[1].UUID: true, nodes[9].UUID: true} // roles 1, 2, 10
	if len(set) != len(want) {
		t.Errorf("ready set %v, want %v", set, want)
	}
	for id := range want {
		if !set[id] {
			t.Errorf("%s not in ready set", id)
		}
	}
	// An unknown trait: traitDefined false, no error.
	sim.UndefineTrait(ready)
	set, defined, err = pc.ProvidersWithTrait(ctx, ready)
	if err != nil || defined || len(set) != 0 {
		t.Fatalf("undefined trait: %v %v %v", set, defined, err)
	}
	// Old Placement without required= (1.17): same answer the slow way.
	sim2, pc2, c2 := newSim(t, openstacksim.Options{PlacementMaxVersion: "1.17"})
	if c2.PlacementVersion != "1.17" {
		t.Fatalf("negotiated %s", c2.PlacementVersion)
	}
	n2 := sim2.SeedLikeTestbed(10)
	set, defined, err = pc2.ProvidersWithTrait(ctx, ready)
	if err != nil || !defined || len(set) != 3 || !set[n2[0].UUID] {
		t.Fatalf("1.17: %v %v %v", set, defined, err)
	}
}

func TestSimEnsureTrait(t *testing.T) {
	sim, pc, _ := newSim(t, openstacksim.Options{})
	ctx := ctxT(t)
	if sim.TraitDefined(ready) {
		t.Fatal("fresh simulator already knows the trait")
	}
	for range 2 {
		if err := pc.EnsureTrait(ctx, ready); err != nil {
			t.Fatal(err)
		}
	}
	if !sim.TraitDefined(ready) {
		t.Fatal("trait not created")
	}
	if err := pc.EnsureTrait(ctx, "HW_CPU_X86_AVX2"); err == nil {
		t.Error("EnsureTrait accepted a non-custom trait")
	}
}

func TestSimSetProviderTraitAddRemoveKeepsOthers(t *testing.T) {
	sim, pc, _ := newSim(t, openstacksim.Options{})
	ctx := ctxT(t)
	rp := "9d1f0000-0000-4000-8000-000000000001"
	sim.AddProvider(rp, rp, []string{"COMPUTE_NODE", "CUSTOM_GPU_H100"})
	sim.DefineTrait(ready)

	r, err := pc.SetProviderTrait(ctx, rp, ready, true)
	if err != nil || !r.Changed || r.Attempts != 1 {
		t.Fatalf("add: %+v %v", r, err)
	}
	ts, gen, _ := sim.ProviderTraits(rp)
	if !slices.Equal(ts, []string{"COMPUTE_NODE", "CUSTOM_CUSTOMER_READY", "CUSTOM_GPU_H100"}) || gen != r.Generation {
		t.Fatalf("after add: %v gen %d (result %+v)", ts, gen, r)
	}
	r, err = pc.SetProviderTrait(ctx, rp, ready, true)
	if err != nil || r.Changed || r.Generation != gen {
		t.Fatalf("second add: %+v %v", r, err)
	}
	r, err = pc.SetProviderTrait(ctx, rp, ready, false)
	if err != nil || !r.Changed || slices.Contains(r.Traits, ready) || len(r.Traits) != 2 {
		t.Fatalf("remove: %+v %v", r, err)
	}
	r, err = pc.SetProviderTrait(ctx, rp, ready, false)
	if err != nil || r.Changed {
		t.Fatalf("second remove: %+v %v", r, err)
	}
	ts, _, _ = sim.ProviderTraits(rp)
	if !slices.Equal(ts, []string{"COMPUTE_NODE", "CUSTOM_GPU_H100"}) {
		t.Fatalf("after remove: %v", ts)
	}
	noTraitDeletes(t, sim)
}

// Adding a trait Placement does not know creates it first.
func TestSimSetProviderTraitCreatesUnknownTrait(t *testing.T) {
	sim, pc, _ := newSim(t, openstacksim.Options{})
	rp := "9d1f0000-0000-4000-8000-000000000002"
	sim.AddProvider(rp, rp, nil)
	sim.UndefineTrait(ready)
	r, err := pc.SetProviderTrait(ctxT(t), rp, ready, true)
	if err != nil || !r.Changed {
		t.Fatalf("%+v %v", r, err)
	}
	if !sim.TraitDefined(ready) {
		t.Fatal("trait not created")
	}
	// Removing a trait that is not defined at all is a no-op success.
	sim.UndefineTrait(ready)
	if r, err := pc.SetProviderTrait(ctxT(t), rp, ready, false); err != nil || r.Changed {
		t.Fatalf("remove undefined: %+v %v", r, err)
	}
}

// Another writer bumps the generation and adds its own trait just before our
// PUT: Placement answers 409, we re-read and re-apply, and the result keeps
// the other writer's trait and adds ours.
func TestSimSetProviderTraitConflictKeepsOtherWriter(t *testing.T) {
	sim, pc, _ := newSim(t, openstacksim.Options{})
	rp := "9d1f0000-0000-4000-8000-000000000003"
	sim.AddProvider(rp, rp, []string{"COMPUTE_NODE"})
	sim.DefineTrait(ready)
	sim.InjectFault(openstacksim.Fault{
		Service: openstacksim.ServicePlacement, Method: http.MethodPut, PathContains: "/resource_providers/" + rp + "/traits",
		Status: http.StatusConflict,
		Before: func() { _ = sim.SetProviderTraits(rp, []string{"COMPUTE_NODE", "CUSTOM_NOVA_OWN"}) },
	})
	r, err := pc.SetProviderTrait(ctxT(t), rp, ready, true)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Changed || r.Attempts != 2 {
		t.Errorf("result %+v: want changed after 2 rounds", r)
	}
	ts, gen, _ := sim.ProviderTraits(rp)
	if !slices.Equal(ts, []string{"COMPUTE_NODE", "CUSTOM_CUSTOMER_READY", "CUSTOM_NOVA_OWN"}) {
		t.Fatalf("traits %v: the other writer's trait must survive", ts)
	}
	if gen != r.Generation || !slices.Contains(r.Traits, "CUSTOM_NOVA_OWN") {
		t.Errorf("result %+v vs generation %d", r, gen)
	}
	noTraitDeletes(t, sim)
}

// The real generation race: the simulator's own 409 for a stale generation
// (no injected body), produced by a bump between our read and our write.
func TestSimSetProviderTraitStaleGeneration(t *testing.T) {
	sim, pc, _ := newSim(t, openstacksim.Options{})
	rp := "9d1f0000-0000-4000-8000-000000000004"
	sim.AddProvider(rp, rp, []string{"COMPUTE_NODE", ready})
	bumped := false
	sim.InjectFault(openstacksim.Fault{
		Service: openstacksim.ServicePlacement, Method: http.MethodPut, PathContains: "/traits",
		Before: func() { bumped = true; _ = sim.BumpProviderGeneration(rp) },
	})
	r, err := pc.SetProviderTrait(ctxT(t), rp, ready, false)
	if err != nil || !r.Changed || r.Attempts != 2 || !bumped {
		t.Fatalf("%+v %v (bumped %v)", r, err, bumped)
	}
}

func TestSimSetProviderTraitPersistentConflict(t *testing.T) {
	sim, pc, _ := newSim(t, openstacksim.Options{})
	rp := "9d1f0000-0000-4000-8000-000000000005"
	sim.AddProvider(rp, rp, nil)
	sim.DefineTrait(ready)
	pc.ConflictAttempts = 3
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServicePlacement, Method: http.MethodPut, PathContains: "/resource_providers/", Status: http.StatusConflict, Times: -1})
	r, err := pc.SetProviderTrait(ctxT(t), rp, ready, true)
	if !errors.Is(err, placement.ErrGenerationConflict) || r.Attempts != 3 {
		t.Fatalf("%+v %v", r, err)
	}
	t.Logf("error: %v", err)
	// A 409 with another code is not a generation race: no retry.
	sim.ClearFaults()
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServicePlacement, Method: http.MethodPut, PathContains: "/resource_providers/", Status: http.StatusConflict,
		Body: `{"errors": [{"status": 409, "title": "Conflict", "detail": "other", "code": "placement.inventory.inuse"}]}`})
	r, err = pc.SetProviderTrait(ctxT(t), rp, ready, true)
	if err == nil || errors.Is(err, placement.ErrGenerationConflict) || r.Attempts != 1 {
		t.Fatalf("other 409: %+v %v", r, err)
	}
}

func TestSimProviderNotFound(t *testing.T) {
	_, pc, _ := newSim(t, openstacksim.Options{})
	ctx := ctxT(t)
	const rp = "00000000-0000-4000-8000-00000000dead"
	if _, err := pc.SetProviderTrait(ctx, rp, ready, true); !errors.Is(err, placement.ErrProviderNotFound) {
		t.Errorf("SetProviderTrait: %v", err)
	}
	if _, _, err := pc.ProviderTraits(ctx, rp); !errors.Is(err, placement.ErrProviderNotFound) {
		t.Errorf("ProviderTraits: %v", err)
	}
}

func TestSimPlacementTransientRetried(t *testing.T) {
	sim, pc, _ := newSim(t, openstacksim.Options{})
	rp := "9d1f0000-0000-4000-8000-000000000006"
	sim.AddProvider(rp, rp, nil)
	sim.DefineTrait(ready)
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServicePlacement, Method: http.MethodGet, Status: http.StatusServiceUnavailable, Times: 2})
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServicePlacement, Method: http.MethodPut, Status: http.StatusBadGateway, Times: 1})
	r, err := pc.SetProviderTrait(ctxT(t), rp, ready, true)
	if err != nil || !r.Changed {
		t.Fatalf("%+v %v", r, err)
	}
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServicePlacement, Method: http.MethodGet, Status: http.StatusServiceUnavailable, Times: -1})
	if _, err := pc.Providers(ctxT(t)); err == nil || openstack.StatusCode(err) != 503 {
		t.Fatalf("persistent 503: %v", err)
	}
}
