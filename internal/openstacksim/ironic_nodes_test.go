package openstacksim

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

func TestNodeTraits(t *testing.T) {
	c, seeded, bm, _ := seededCloud(t, 1)
	id := seeded[0].UUID
	ctx := testCtx(t)
	traitURL := bm.ServiceURL("nodes", id, "traits", ReadyTrait)
	before, _ := c.Node(id)
	time.Sleep(2 * time.Millisecond)

	resp, err := bm.Put(ctx, traitURL, nil, nil, &gophercloud.RequestOpts{OkCodes: []int{204}})
	if err != nil {
		t.Fatalf("PUT trait: %v", err)
	}
	if resp.Header.Get("Location") != traitURL {
		t.Errorf("Location = %q", resp.Header.Get("Location"))
	}
	// idempotent
	if _, err := bm.Put(ctx, traitURL, nil, nil, &gophercloud.RequestOpts{OkCodes: []int{204}}); err != nil {
		t.Fatalf("PUT trait again: %v", err)
	}
	_, body, err := rawJSON(t, bm, "GET", bm.ServiceURL("nodes", id, "traits"), nil, 200)
	if err != nil || fmt.Sprint(body["traits"]) != "["+ReadyTrait+"]" {
		t.Fatalf("GET traits = %v %v", body, err)
	}
	after, _ := c.Node(id)
	if !after.UpdatedAt.After(before.UpdatedAt) {
		t.Fatalf("updated_at not bumped: %v -> %v", before.UpdatedAt, after.UpdatedAt)
	}
	n, err := nodes.Get(ctx, bm, id).Extract()
	if err != nil || !slices.Contains(n.Traits, ReadyTrait) {
		t.Fatalf("node traits field = %v %v", n.Traits, err)
	}

	if _, err := bm.Delete(ctx, traitURL, &gophercloud.RequestOpts{OkCodes: []int{204}}); err != nil {
		t.Fatalf("DELETE trait: %v", err)
	}
	_, err = bm.Delete(ctx, traitURL, &gophercloud.RequestOpts{OkCodes: []int{204}})
	if !gophercloud.ResponseCodeIs(err, 404) {
		t.Fatalf("DELETE absent trait: %v, want 404", err)
	}
	if f := ironicFault(t, errBody(t, err)); f["faultstring"] != fmt.Sprintf("Node %s doesn't have a trait '%s'", id, ReadyTrait) {
		t.Fatalf("404 body = %v", f)
	}

	// validation: lower case and non-CUSTOM names are refused; standard ones pass
	_, err = bm.Put(ctx, bm.ServiceURL("nodes", id, "traits", "CUSTOM_lower"), nil, nil, &gophercloud.RequestOpts{OkCodes: []int{204}})
	if !gophercloud.ResponseCodeIs(err, 400) || !strings.HasPrefix(ironicFault(t, errBody(t, err))["faultstring"].(string), "Schema error for trait:") {
		t.Fatalf("bad trait: %v", err)
	}
	if _, err := bm.Put(ctx, bm.ServiceURL("nodes", id, "traits", "HW_CPU_X86_AVX2"), nil, nil, &gophercloud.RequestOpts{OkCodes: []int{204}}); err != nil {
		t.Fatalf("standard trait: %v", err)
	}
	// at most 50 traits
	have, _ := c.Node(id)
	for i := len(have.Traits); i < 50; i++ {
		if _, err := bm.Put(ctx, bm.ServiceURL("nodes", id, "traits", fmt.Sprintf("CUSTOM_T%02d", i)), nil, nil, &gophercloud.RequestOpts{OkCodes: []int{204}}); err != nil {
			t.Fatalf("trait %d: %v", i, err)
		}
	}
	_, err = bm.Put(ctx, bm.ServiceURL("nodes", id, "traits", "CUSTOM_ONE_TOO_MANY"), nil, nil, &gophercloud.RequestOpts{OkCodes: []int{204}})
	if !gophercloud.ResponseCodeIs(err, 400) || !strings.Contains(ironicFault(t, errBody(t, err))["faultstring"].(string), "(51 vs. 50)") {
		t.Fatalf("51st trait: %v", err)
	}
	// traits need 1.37
	bm.Microversion = "1.36"
	_, err = bm.Delete(ctx, bm.ServiceURL("nodes", id, "traits", "HW_CPU_X86_AVX2"), &gophercloud.RequestOpts{OkCodes: []int{204}})
	if !gophercloud.ResponseCodeIs(err, 404) {
		t.Fatalf("trait DELETE at 1.36: %v", err)
	}
}

func TestNodeLockedConflicts(t *testing.T) {
	c, seeded, bm, _ := seededCloud(t, 2)
	id := seeded[0].UUID
	ctx := testCtx(t)
	if err := c.UpdateNode(id, func(n *Node) { n.Reservation = "conductor-7" }); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Node %s is locked by host conductor-7, please retry after the current operation is completed.", id)
	calls := []struct {
		name string
		do   func() error
	}{
		{"trait put", func() error {
			_, err := bm.Put(ctx, bm.ServiceURL("nodes", id, "traits", ReadyTrait), nil, nil, &gophercloud.RequestOpts{OkCodes: []int{204}})
			return err
		}},
		{"trait delete", func() error {
			_, err := bm.Delete(ctx, bm.ServiceURL("nodes", id, "traits", ReadyTrait), &gophercloud.RequestOpts{OkCodes: []int{204}})
			return err
		}},
		{"maintenance", func() error {
			return nodes.SetMaintenance(ctx, bm, id, nodes.MaintenanceOpts{Reason: "x"}).ExtractErr()
		}},
		{"delete", func() error { return nodes.Delete(ctx, bm, id).ExtractErr() }},
	}
	for _, call := range calls {
		err := call.do()
		if !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
			t.Fatalf("%s: %v, want 409", call.name, err)
		}
		if f := ironicFault(t, errBody(t, err)); f["faultstring"] != want {
			t.Fatalf("%s: faultstring %q", call.name, f["faultstring"])
		}
	}
	// reads still work, and the lock shows
	n, err := nodes.Get(ctx, bm, id).Extract()
	if err != nil || n.Reservation != "conductor-7" {
		t.Fatalf("get locked node: %+v %v", n.Reservation, err)
	}
	_ = c.UpdateNode(id, func(n *Node) { n.Reservation = "" })
	if err := nodes.SetMaintenance(ctx, bm, id, nodes.MaintenanceOpts{Reason: "disk"}).ExtractErr(); err != nil {
		t.Fatalf("maintenance after unlock: %v", err)
	}
	got, _ := c.Node(id)
	if !got.Maintenance || got.MaintenanceReason != "disk" {
		t.Fatalf("maintenance not set: %+v", got)
	}
	if err := nodes.UnsetMaintenance(ctx, bm, id).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if got, _ = c.Node(id); got.Maintenance || got.MaintenanceReason != "" {
		t.Fatalf("maintenance not cleared: %+v", got)
	}
}

func TestCreateAndDeleteNodes(t *testing.T) {
	_, seeded, bm, _ := seededCloud(t, 2)
	ctx := testCtx(t)
	n, err := nodes.Create(ctx, bm, nodes.CreateOpts{Name: "new-1", Driver: "fake-hardware", ResourceClass: "gpu-h100"}).Extract()
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if n.ProvisionState != "enroll" || n.UUID == "" || n.PowerState != "" {
		t.Fatalf("created node = %+v", n)
	}
	_, err = nodes.Create(ctx, bm, nodes.CreateOpts{Name: "new-1", Driver: "fake-hardware"}).Extract()
	if !gophercloud.ResponseCodeIs(err, 409) {
		t.Fatalf("duplicate name: %v", err)
	}
	_, err = nodes.Create(ctx, bm, nodes.CreateOpts{Name: "new-2", Driver: "ipmi"}).Extract()
	if !gophercloud.ResponseCodeIs(err, 400) {
		t.Fatalf("unknown driver: %v", err)
	}
	if err := nodes.Delete(ctx, bm, n.UUID).ExtractErr(); err != nil {
		t.Fatalf("delete enroll node: %v", err)
	}
	// active with instance → 409
	err = nodes.Delete(ctx, bm, seeded[1].UUID).ExtractErr()
	if !gophercloud.ResponseCodeIs(err, 409) || !strings.Contains(ironicFault(t, errBody(t, err))["faultstring"].(string), "is associated with instance") {
		t.Fatalf("delete active node: %v", err)
	}
	// PATCH extra, and traits cannot be patched
	up, err := nodes.Update(ctx, bm, seeded[0].UUID, nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.AddOp, Path: "/extra/ironlink", Value: "seen"}}).Extract()
	if err != nil || up.Extra["ironlink"] != "seen" {
		t.Fatalf("patch extra: %v %v", up.Extra, err)
	}
	_, err = nodes.Update(ctx, bm, seeded[0].UUID, nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.AddOp, Path: "/traits", Value: []string{"CUSTOM_X"}}}).Extract()
	if !gophercloud.ResponseCodeIs(err, 400) {
		t.Fatalf("patch traits: %v", err)
	}
}

func TestSeedLikeTestbedRoles(t *testing.T) {
	c, seeded, bm, _ := seededCloud(t, 20)
	_, _, all := listPages(t, bm, nodes.ListOpts{Fields: []string{"uuid", "name", "provision_state", "target_provision_state",
		"power_state", "maintenance", "maintenance_reason", "instance_uuid", "last_error", "resource_class", "fault", "traits"}})
	if len(all) != 20 || len(seeded) != 20 {
		t.Fatalf("listed %d, seeded %d", len(all), len(seeded))
	}
	type want struct {
		state, target, power string
		maint                bool
		reasonPrefix         string
		instance             bool
	}
	roles := []want{
		{"available", "", "power off", false, "", false},
		{"active", "", "power on", false, "", true},
		{"available", "", "power off", true, "testbed: PSU 2 failed", false},
		{"enroll", "", "", false, "", false},
		{"clean failed", "manageable", "power off", false, "", false},
		{"manageable", "", "power off", false, "", false},
		{"deploy failed", "active", "power off", false, "", false},
		{"active", "", "power on", true, "testbed: correctable ECC errors", true},
		{"available", "", "power off", false, "", false},
		{"available", "", "power off", false, "", false},
	}
	for i, n := range all {
		w := roles[i%10]
		if n.Name != fmt.Sprintf("node-%03d", i+1) || n.ProvisionState != w.state || n.TargetProvisionState != w.target ||
			n.PowerState != w.power || n.Maintenance != w.maint || !strings.HasPrefix(n.MaintenanceReason, w.reasonPrefix) ||
			(n.InstanceUUID != "") != w.instance || n.LastError != "" || n.ResourceClass != "gpu-h100" || n.Fault != "" || len(n.Traits) != 0 {
			t.Errorf("node %d (%s) = %+v, want %+v", i+1, SeedRole(i+1), n, w)
		}
		traits, gen, ok := c.ProviderTraits(n.UUID)
		ready := slices.Contains(traits, ReadyTrait)
		wantReady := i%10 == 0 || i%10 == 1 || i%10 == 9
		if !ok || ready != wantReady || gen < 1 {
			t.Errorf("provider of node %d: traits %v gen %d ok %v", i+1, traits, gen, ok)
		}
	}
	if !c.TraitDefined(ReadyTrait) {
		t.Fatal("READY trait not defined")
	}
	// seeding again leaves existing nodes alone
	again := c.SeedLikeTestbed(20)
	if again[0].UUID != seeded[0].UUID || len(c.Nodes()) != 20 {
		t.Fatal("re-seeding created nodes")
	}
}

// A node enrolled through the API and made available gets its resource
// provider, as nova-compute's Ironic driver creates one for every node it
// can schedule to; without Nova it gets none.
func TestProvideRegistersTheResourceProviderLikeNova(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want bool
	}{
		{"with Nova", Options{ProvisionStep: time.Millisecond}, true},
		{"without Nova", Options{ProvisionStep: time.Millisecond, NoNova: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCloud(t, tc.opts)
			c.DefineTrait("CUSTOM_CUSTOMER_READY")
			n := c.AddNode(Node{Name: "new-1", ProvisionState: "manageable", PowerState: "power off", ResourceClass: "gpu-h100",
				Traits: []string{"CUSTOM_CUSTOMER_READY"}})
			if _, _, ok := c.ProviderTraits(n.UUID); ok {
				t.Fatal("a manageable node already has a provider")
			}
			_, bm, _ := simClients(t, c, false)
			if err := nodes.ChangeProvisionState(testCtx(t), bm, n.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetProvide}).ExtractErr(); err != nil {
				t.Fatalf("provide: %v", err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				got, err := nodes.Get(testCtx(t), bm, n.UUID).Extract()
				if err != nil {
					t.Fatal(err)
				}
				if got.ProvisionState == "available" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("still %s", got.ProvisionState)
				}
				time.Sleep(5 * time.Millisecond)
			}
			traits, _, ok := c.ProviderTraits(n.UUID)
			if ok != tc.want {
				t.Fatalf("provider exists: %v, want %v", ok, tc.want)
			}
			if ok && !slices.Contains(traits, "CUSTOM_CUSTOMER_READY") {
				t.Fatalf("provider traits %v lack the node's trait", traits)
			}
		})
	}
}
