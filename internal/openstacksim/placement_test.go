package openstacksim

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/resourceproviders"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/traits"
)

type placementErrors struct {
	Errors []struct {
		Status    int    `json:"status"`
		Title     string `json:"title"`
		Detail    string `json:"detail"`
		Code      string `json:"code"`
		RequestID string `json:"request_id"`
	} `json:"errors"`
}

func decodePlacementError(t *testing.T, err error) placementErrors {
	t.Helper()
	var pe placementErrors
	if jerr := json.Unmarshal(errBody(t, err), &pe); jerr != nil || len(pe.Errors) != 1 {
		t.Fatalf("not a placement error body: %s", errBody(t, err))
	}
	return pe
}

func TestProviderTraitsGenerationConflict(t *testing.T) {
	c, seeded, _, pl := seededCloud(t, 3)
	rp := seeded[2].UUID // role 3: no READY trait
	ctx := testCtx(t)

	cur, err := resourceproviders.GetTraits(ctx, pl, rp).Extract()
	if err != nil {
		t.Fatal(err)
	}
	// another writer (nova-compute) changes the provider meanwhile
	if err := c.SetProviderTraits(rp, []string{"COMPUTE_NODE"}); err != nil {
		t.Fatal(err)
	}
	_, err = resourceproviders.UpdateTraits(ctx, pl, rp, resourceproviders.UpdateTraitsOpts{
		ResourceProviderGeneration: cur.ResourceProviderGeneration,
		Traits:                     append(cur.Traits, ReadyTrait),
	}).Extract()
	if !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		t.Fatalf("stale generation: %v, want 409", err)
	}
	pe := decodePlacementError(t, err)
	e := pe.Errors[0]
	if e.Code != "placement.concurrent_update" || e.Title != "Conflict" || !strings.HasPrefix(e.RequestID, "req-") ||
		e.Detail != "There was a conflict when trying to complete your request.\n\n Resource provider's generation already changed. Please update the generation and try again.  " {
		t.Fatalf("409 error = %+v", e)
	}

	// re-read, re-apply the delta, succeed
	cur, err = resourceproviders.GetTraits(ctx, pl, rp).Extract()
	if err != nil {
		t.Fatal(err)
	}
	got, err := resourceproviders.UpdateTraits(ctx, pl, rp, resourceproviders.UpdateTraitsOpts{
		ResourceProviderGeneration: cur.ResourceProviderGeneration,
		Traits:                     append(cur.Traits, ReadyTrait),
	}).Extract()
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got.ResourceProviderGeneration != cur.ResourceProviderGeneration+1 || !slices.Equal(got.Traits, []string{"COMPUTE_NODE", ReadyTrait}) {
		t.Fatalf("after PUT: %+v", got)
	}

	// below 1.23 the error has no code
	pl.Microversion = "1.22"
	_, err = resourceproviders.UpdateTraits(ctx, pl, rp, resourceproviders.UpdateTraitsOpts{ResourceProviderGeneration: 0, Traits: []string{}}).Extract()
	if !gophercloud.ResponseCodeIs(err, 409) || decodePlacementError(t, err).Errors[0].Code != "" {
		t.Fatalf("1.22 conflict: %v", err)
	}
	pl.Microversion = "1.39"

	// a fault's Before hook can play the concurrent writer
	cur, _ = resourceproviders.GetTraits(ctx, pl, rp).Extract()
	c.InjectFault(Fault{Service: ServicePlacement, Method: "PUT", PathContains: "/resource_providers/" + rp + "/traits",
		Before: func() { _ = c.BumpProviderGeneration(rp) }})
	_, err = resourceproviders.UpdateTraits(ctx, pl, rp, resourceproviders.UpdateTraitsOpts{ResourceProviderGeneration: cur.ResourceProviderGeneration, Traits: cur.Traits}).Extract()
	if !gophercloud.ResponseCodeIs(err, 409) {
		t.Fatalf("Before hook: %v, want 409", err)
	}

	// unknown trait → 400; unknown provider → 404
	cur, _ = resourceproviders.GetTraits(ctx, pl, rp).Extract()
	_, err = resourceproviders.UpdateTraits(ctx, pl, rp, resourceproviders.UpdateTraitsOpts{ResourceProviderGeneration: cur.ResourceProviderGeneration, Traits: []string{"CUSTOM_NOT_DEFINED"}}).Extract()
	if !gophercloud.ResponseCodeIs(err, 400) || !strings.Contains(decodePlacementError(t, err).Errors[0].Detail, "No such trait CUSTOM_NOT_DEFINED") {
		t.Fatalf("unknown trait: %v", err)
	}
	_, err = resourceproviders.GetTraits(ctx, pl, "00000000-0000-0000-0000-000000000000").Extract()
	if !gophercloud.ResponseCodeIs(err, 404) {
		t.Fatalf("missing provider traits: %v", err)
	}
	if err := resourceproviders.Get(ctx, pl, "00000000-0000-0000-0000-000000000000").Err; !gophercloud.ResponseCodeIs(err, 404) {
		t.Fatalf("missing provider: %v", err)
	}
	got2, err := resourceproviders.Get(ctx, pl, rp).Extract()
	if err != nil || got2.UUID != rp || got2.Name != rp || got2.RootProviderUUID != rp {
		t.Fatalf("get provider: %+v %v", got2, err)
	}
}

func TestTraitCreation(t *testing.T) {
	c := startCloud(t, Options{})
	_, _, pl := simClients(t, c, false)
	ctx := testCtx(t)
	if err := traits.Get(ctx, pl, ReadyTrait).Err; !gophercloud.ResponseCodeIs(err, 404) {
		t.Fatalf("GET undefined trait: %v, want 404", err)
	}
	for i, want := range []int{201, 204} {
		if err := traits.Create(ctx, pl, ReadyTrait).Err; err != nil {
			t.Fatalf("create #%d: %v", i, err)
		}
		reqs := c.Requests()
		if last := reqs[len(reqs)-1]; last.Method != "PUT" || last.Path != "/traits/"+ReadyTrait || last.Status != want {
			t.Fatalf("create #%d recorded %+v, want status %d", i, last, want)
		}
	}
	if err := traits.Get(ctx, pl, ReadyTrait).Err; err != nil {
		t.Fatalf("GET defined trait: %v", err)
	}
	if !c.TraitDefined(ReadyTrait) {
		t.Fatal("trait not defined")
	}
	err := traits.Create(ctx, pl, "NOT_CUSTOM").Err
	if !gophercloud.ResponseCodeIs(err, 400) || !strings.Contains(decodePlacementError(t, err).Errors[0].Detail, `start with the prefix "CUSTOM_"`) {
		t.Fatalf("non-custom trait: %v", err)
	}
}

func TestPlacementVersionsAndRequiredFilter(t *testing.T) {
	_, _, _, pl := seededCloud(t, 20)
	ctx := testCtx(t)

	resp, _, err := rawJSON(t, pl, "GET", pl.ServiceURL("resource_providers"), nil, 200)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("OpenStack-API-Version") != "placement 1.39" || resp.Header.Get("Vary") != "openstack-api-version" ||
		resp.Header.Get("Cache-Control") != "no-cache" || resp.Header.Get("Last-Modified") == "" {
		t.Fatalf("placement headers = %v", resp.Header)
	}
	pages, err := resourceproviders.List(pl, resourceproviders.ListOpts{Required: ReadyTrait}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rps, err := resourceproviders.ExtractResourceProviders(pages)
	if err != nil {
		t.Fatal(err)
	}
	if len(rps) != 6 {
		t.Fatalf("%d providers with READY, want 6 (nodes 1, 2, 10, 11, 12, 20)", len(rps))
	}
	_, body, err := rawJSON(t, pl, "GET", pl.ServiceURL("resource_providers")+"?required=!"+ReadyTrait, nil, 200)
	if err != nil || len(body["resource_providers"].([]any)) != 14 {
		t.Fatalf("forbidden trait: %v %v", len(body["resource_providers"].([]any)), err)
	}
	_, err = resourceproviders.List(pl, resourceproviders.ListOpts{Required: "CUSTOM_UNKNOWN"}).AllPages(ctx)
	if !gophercloud.ResponseCodeIs(err, 400) ||
		!strings.Contains(decodePlacementError(t, err).Errors[0].Detail, `Invalid trait(s) in "required" parameter: No such trait(s): CUSTOM_UNKNOWN.`) {
		t.Fatalf("unknown required trait: %v", err)
	}
	pl.Microversion = "1.17"
	_, err = resourceproviders.List(pl, resourceproviders.ListOpts{Required: ReadyTrait}).AllPages(ctx)
	if !gophercloud.ResponseCodeIs(err, 400) {
		t.Fatalf("required at 1.17: %v", err)
	}
	pl.Microversion = "1.40"
	_, _, err = rawJSON(t, pl, "GET", pl.ServiceURL("resource_providers"), nil, 200)
	if !gophercloud.ResponseCodeIs(err, 406) {
		t.Fatalf("1.40: %v", err)
	}
	e := decodePlacementError(t, err).Errors[0]
	if !strings.Contains(e.Detail, "Invalid microversion: Unacceptable version header: 1.40") {
		t.Fatalf("406 error = %+v", e)
	}
	pl.Microversion = "1.39"

	inv, err := resourceproviders.GetInventories(ctx, pl, rps[0].UUID).Extract()
	if err != nil || inv.Inventories["CUSTOM_GPU_H100"].Total != 1 {
		t.Fatalf("inventories: %+v %v", inv, err)
	}
}

func TestChurnKeepsTheAPIConsistent(t *testing.T) {
	c, _, bm, pl := seededCloud(t, 30)
	ctx := testCtx(t)
	r := rand.New(rand.NewPCG(1, 2))
	var changes int
	states := map[string]bool{}
	for i := 0; i < 200; i++ {
		changes += len(c.ChurnOnce(r))
		if i%20 != 0 {
			continue
		}
		_, _, all := listPages(t, bm, nodes.ListOpts{Fields: []string{"uuid", "provision_state", "maintenance", "fault", "power_state", "instance_uuid", "provision_updated_at"}, Limit: 7})
		if len(all) != 30 {
			t.Fatalf("tick %d: listed %d nodes", i, len(all))
		}
		for _, n := range all {
			if !ironicStates[n.ProvisionState] {
				t.Fatalf("tick %d: unknown state %q", i, n.ProvisionState)
			}
			states[n.ProvisionState] = true
			if n.Fault != "" && !n.Maintenance {
				t.Fatalf("fault %q without maintenance on %s", n.Fault, n.UUID)
			}
		}
	}
	if changes < 200 {
		t.Fatalf("only %d changes in 200 ticks", changes)
	}
	if len(states) < 5 {
		t.Fatalf("churn visited only %v", states)
	}
	if _, err := resourceproviders.List(pl, resourceproviders.ListOpts{Required: ReadyTrait}).AllPages(ctx); err != nil {
		t.Fatal(err)
	}
	// Churn returns when its context ends
	cctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Churn(cctx, 5e6, nil); close(done) }()
	cancel()
	<-done
}

// TestKeepFromChurn: the nodes KeepFromChurn names keep their state
// through 200 churn ticks while the others change.
func TestKeepFromChurn(t *testing.T) {
	c, _, _, _ := seededCloud(t, 30)
	nodes := c.Nodes()
	kept := []string{nodes[0].UUID, nodes[1].UUID, nodes[2].UUID}
	c.KeepFromChurn(kept...)
	before := map[string]Node{}
	for _, n := range nodes {
		before[n.UUID] = n
	}
	r := rand.New(rand.NewPCG(3, 4))
	changedOthers := 0
	for i := 0; i < 200; i++ {
		c.ChurnOnce(r)
	}
	for _, n := range c.Nodes() {
		b := before[n.UUID]
		same := n.ProvisionState == b.ProvisionState && n.PowerState == b.PowerState && n.Maintenance == b.Maintenance
		if slices.Contains(kept, n.UUID) && !same {
			t.Errorf("kept node %s changed: %s/%s/%v -> %s/%s/%v", n.UUID, b.ProvisionState, b.PowerState, b.Maintenance,
				n.ProvisionState, n.PowerState, n.Maintenance)
		}
		if !slices.Contains(kept, n.UUID) && !same {
			changedOthers++
		}
	}
	if changedOthers == 0 {
		t.Fatal("churn changed none of the other nodes in 200 ticks")
	}
}
