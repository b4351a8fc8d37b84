package openstacksim

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// addNodes adds n plain available nodes named bulk-0001….
func addNodes(c *Cloud, n int) {
	for i := 1; i <= n; i++ {
		c.AddNode(Node{Name: fmt.Sprintf("bulk-%04d", i), ProvisionState: "available", PowerState: "power off", ResourceClass: "gpu-h100"})
	}
}

// nextLinks returns the top-level "next" of every page, in order.
func listPages(t *testing.T, bm *gophercloud.ServiceClient, opts nodes.ListOpts) (pages []int, next []string, all []nodes.Node) {
	t.Helper()
	err := nodes.List(bm, opts).EachPage(testCtx(t), func(_ context.Context, p pagination.Page) (bool, error) {
		ns, err := nodes.ExtractNodes(p)
		if err != nil {
			return false, err
		}
		u, err := p.(nodes.NodePage).NextPageURL()
		if err != nil {
			return false, err
		}
		pages = append(pages, len(ns))
		next = append(next, u)
		all = append(all, ns...)
		return true, nil
	})
	if err != nil {
		t.Fatalf("EachPage: %v", err)
	}
	return pages, next, all
}

func TestListPagesWithFieldsAndLimit(t *testing.T) {
	c := startCloud(t, Options{})
	addNodes(c, 1003)
	_, bm, _ := simClients(t, c, false)
	fields := []string{"uuid", "name", "provision_state", "maintenance", "fault", "traits", "resource_class", "owner", "lessee", "provision_updated_at"}
	pages, next, all := listPages(t, bm, nodes.ListOpts{Fields: fields, Limit: 500})
	if !slices.Equal(pages, []int{500, 500, 3}) {
		t.Fatalf("page sizes = %v, want [500 500 3]", pages)
	}
	if next[0] == "" || next[1] == "" || next[2] != "" {
		t.Fatalf("next links = %q, want on full pages only", next)
	}
	if len(all) != 1003 || all[0].Name != "bulk-0001" || all[1002].Name != "bulk-1003" {
		t.Fatalf("listed %d nodes, first %q last %q", len(all), all[0].Name, all[len(all)-1].Name)
	}
	seen := map[string]bool{}
	for _, n := range all {
		if seen[n.UUID] {
			t.Fatalf("node %s listed twice", n.UUID)
		}
		seen[n.UUID] = true
		if n.ProvisionState != "available" || n.ResourceClass != "gpu-h100" || n.Traits == nil {
			t.Fatalf("fields not returned: %+v", n)
		}
		if n.PowerState != "" {
			t.Fatalf("power_state returned although not requested: %+v", n)
		}
	}
	u, err := url.Parse(next[0])
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.Path != "/baremetal/v1/nodes" || q.Get("limit") != "500" || q.Get("marker") != all[499].UUID ||
		q.Get("fields") != strings.Join(fields, ",") || q.Get("sort_key") != "id" || q.Get("sort_dir") != "asc" {
		t.Fatalf("next = %s", next[0])
	}

	// limit is capped at max_limit; a total that is a multiple of the limit
	// ends with an empty page
	c.ResetRequests()
	pages, next, _ = listPages(t, bm, nodes.ListOpts{Fields: []string{"uuid"}, Limit: 5000})
	if !slices.Equal(pages, []int{1000, 3}) || !strings.Contains(next[0], "limit=1000&") {
		t.Fatalf("capped pages = %v next = %q", pages, next)
	}
	for i := 0; i < 3; i++ {
		if err := c.DeleteNode(all[1000+i].UUID); err != nil {
			t.Fatal(err)
		}
	}
	pages, _, _ = listPages(t, bm, nodes.ListOpts{Fields: []string{"uuid"}, Limit: 500})
	if !slices.Equal(pages, []int{500, 500}) {
		t.Fatalf("pages for 1000 nodes = %v", pages)
	}
	var gets int
	for _, r := range c.Requests() {
		if q, _ := url.ParseQuery(r.Query); r.Path == "/v1/nodes" && q.Get("limit") == "500" {
			gets++
		}
	}
	if gets != 3 {
		t.Fatalf("requests for 1000 nodes at limit 500 = %d, want 3 (the last page is empty)", gets)
	}
}

func TestNextLinkDropsFiltersLikeIronic(t *testing.T) {
	_, _, bm, _ := seededCloud(t, 30)
	u := bm.ServiceURL("nodes") + "?provision_state=available&maintenance=true&associated=false&resource_class=gpu-h100&limit=1&fields=uuid,maintenance"
	_, body, err := rawJSON(t, bm, "GET", u, nil, 200)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(body["nodes"].([]any)); n != 1 {
		t.Fatalf("page has %d nodes", n)
	}
	next, _ := url.Parse(body["next"].(string))
	q := next.Query()
	if q.Get("maintenance") != "True" || q.Has("provision_state") || q.Has("associated") || q.Has("resource_class") || q.Get("fields") != "uuid,maintenance" {
		t.Fatalf("next = %s: want only sort, truthy maintenance, fields, limit, marker", next)
	}
	// following it yields nodes the original filter excluded
	_, body, err = rawJSON(t, bm, "GET", next.String(), nil, 200)
	if err != nil {
		t.Fatal(err)
	}
	n := body["nodes"].([]any)[0].(map[string]any)
	if n["maintenance"] != true {
		t.Fatalf("second page node = %v", n)
	}
	// the default field set travels in next links too
	_, body, _ = rawJSON(t, bm, "GET", bm.ServiceURL("nodes")+"?limit=2", nil, 200)
	if !strings.Contains(body["next"].(string), "fields=instance_uuid,maintenance,power_state,provision_state,uuid,name&limit=2&marker=") {
		t.Fatalf("default next = %v", body["next"])
	}
	first := body["nodes"].([]any)[0].(map[string]any)
	for _, k := range []string{"uuid", "instance_uuid", "maintenance", "power_state", "provision_state", "name", "links"} {
		if _, ok := first[k]; !ok {
			t.Errorf("default field set lacks %s: %v", k, first)
		}
	}
	if len(first) != 7 {
		t.Errorf("default field set = %v", first)
	}
}

func TestFiltersAreHonouredOnTheRequest(t *testing.T) {
	c := startCloud(t, Options{})
	c.SeedLikeTestbed(20)
	c.AddNode(Node{Name: "other", ProvisionState: "available", ResourceClass: "cpu", ConductorGroup: "rack9", Owner: "p1", Lessee: "p2"})
	_, bm, _ := simClients(t, c, false)
	count := func(query string) int {
		t.Helper()
		_, body, err := rawJSON(t, bm, "GET", bm.ServiceURL("nodes")+"?"+query, nil, 200)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return len(body["nodes"].([]any))
	}
	tests := []struct {
		query string
		want  int
	}{
		{"provision_state=available", 9},
		{"provision_state=clean%20failed", 2},
		{"maintenance=true", 4},
		{"maintenance=false", 17},
		{"associated=true", 4},
		{"associated=False", 17},
		{"resource_class=gpu-h100", 20},
		{"conductor_group=rack9", 1},
		{"owner=p1", 1},
		{"lessee=p2", 1},
		{"fault=power%20failure", 0},
		{"provision_state=available&maintenance=false", 7},
	}
	for _, tt := range tests {
		if got := count(tt.query); got != tt.want {
			t.Errorf("%s: %d nodes, want %d", tt.query, got, tt.want)
		}
	}
	// filters newer than the microversion are refused
	bm.Microversion = "1.40"
	_, _, err := rawJSON(t, bm, "GET", bm.ServiceURL("nodes")+"?fault=power%20failure", nil, 200)
	if !gophercloud.ResponseCodeIs(err, 406) {
		t.Fatalf("fault filter at 1.40: %v", err)
	}
	bm.Microversion = "1.65"
	_, _, err = rawJSON(t, bm, "GET", bm.ServiceURL("nodes")+"?provision_state=bogus", nil, 200)
	if !gophercloud.ResponseCodeIs(err, 400) {
		t.Fatalf("bad provision_state: %v", err)
	}
	_, _, err = rawJSON(t, bm, "GET", bm.ServiceURL("nodes")+"?bogus=1", nil, 200)
	if !gophercloud.ResponseCodeIs(err, 400) || ironicFault(t, errBody(t, err))["faultstring"] != "Unexpected arguments: bogus" {
		t.Fatalf("unknown argument: %v", err)
	}
}

func TestMarkerOfDeletedNodeIs404(t *testing.T) {
	c := startCloud(t, Options{})
	addNodes(c, 5)
	_, bm, _ := simClients(t, c, false)
	ns := c.Nodes()
	if err := c.DeleteNode(ns[1].UUID); err != nil {
		t.Fatal(err)
	}
	_, _, err := rawJSON(t, bm, "GET", bm.ServiceURL("nodes")+"?limit=2&marker="+ns[1].UUID, nil, 200)
	if !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		t.Fatalf("err = %v, want 404", err)
	}
	f := ironicFault(t, errBody(t, err))
	if f["faultstring"] != fmt.Sprintf("Node %s could not be found.", ns[1].UUID) || f["faultcode"] != "Client" || f["debuginfo"] != nil {
		t.Fatalf("404 body = %v", f)
	}
	// a live marker continues after it, also with other sort keys
	_, body, err := rawJSON(t, bm, "GET", bm.ServiceURL("nodes")+"?limit=2&marker="+ns[2].UUID, nil, 200)
	if err != nil {
		t.Fatal(err)
	}
	got := body["nodes"].([]any)
	if len(got) != 2 || got[0].(map[string]any)["uuid"] != ns[3].UUID {
		t.Fatalf("after marker: %v", got)
	}
	_, body, _ = rawJSON(t, bm, "GET", bm.ServiceURL("nodes")+"?sort_key=name&sort_dir=desc&limit=10", nil, 200)
	if first := body["nodes"].([]any)[0].(map[string]any)["name"]; first != "bulk-0005" {
		t.Fatalf("sort by name desc starts with %v", first)
	}
}

func TestFieldsAndMicroversions(t *testing.T) {
	_, _, bm, _ := seededCloud(t, 3)
	ctx := testCtx(t)

	resp, _, err := rawJSON(t, bm, "GET", bm.ServiceURL("nodes"), nil, 200)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("X-OpenStack-Ironic-API-Version") != "1.65" ||
		resp.Header.Get("X-OpenStack-Ironic-API-Minimum-Version") != "1.1" ||
		resp.Header.Get("X-OpenStack-Ironic-API-Maximum-Version") != "1.82" {
		t.Fatalf("version headers = %v", resp.Header)
	}

	tests := []struct {
		name    string
		version string
		fields  []string
		status  int
		fault   string
	}{
		{"owner at 1.49", "1.49", []string{"uuid", "owner"}, 406, "Request not acceptable."},
		{"lessee at 1.64", "1.64", []string{"uuid", "lessee"}, 406, "Request not acceptable."},
		{"fields at 1.7", "1.7", []string{"uuid"}, 406, "Request not acceptable."},
		{"updated_at", "1.65", []string{"uuid", "updated_at"}, 400, "Field updated_at is not a valid field."},
		// Ironic 21.4 fails inside the DB query for fields that are not
		// columns, including the API-computed conductor (seen on the test bed)
		{"bogus", "1.65", []string{"uuid", "bogus"}, 500, "type object 'Node' has no attribute 'bogus'"},
		{"conductor in a list", "1.65", []string{"uuid", "conductor"}, 500, "type object 'Node' has no attribute 'conductor'"},
		{"ok", "1.65", []string{"uuid", "lessee", "owner", "fault", "conductor_group", "retired"}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bm.Microversion = tt.version
			defer func() { bm.Microversion = "1.65" }()
			_, err := nodes.List(bm, nodes.ListOpts{Fields: tt.fields}).AllPages(ctx)
			if tt.status == 200 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !gophercloud.ResponseCodeIs(err, tt.status) {
				t.Fatalf("err = %v, want %d", err, tt.status)
			}
			if f := ironicFault(t, errBody(t, err)); f["faultstring"] != tt.fault {
				t.Fatalf("faultstring = %v", f["faultstring"])
			}
		})
	}

	// above the maximum: 406 from the version check, with the range headers
	bm.Microversion = "1.83"
	resp, _, err = rawJSON(t, bm, "GET", bm.ServiceURL("nodes"), nil, 200)
	if !gophercloud.ResponseCodeIs(err, 406) || resp.Header.Get("X-OpenStack-Ironic-API-Maximum-Version") != "1.82" {
		t.Fatalf("1.83: err = %v headers %v", err, resp.Header)
	}
	if f := ironicFault(t, errBody(t, err)); !strings.Contains(fmt.Sprint(f["description"]), "Version 1.83 was requested but the minor version is not supported") {
		t.Fatalf("406 body = %v", f)
	}
	bm.Microversion = "1.65"

	// detail=True needs 1.43 and excludes fields
	_, body, err := rawJSON(t, bm, "GET", bm.ServiceURL("nodes")+"?detail=True", nil, 200)
	if err != nil {
		t.Fatal(err)
	}
	n := body["nodes"].([]any)[0].(map[string]any)
	for _, k := range []string{"driver", "properties", "extra", "lessee", "traits", "created_at", "updated_at", "provision_updated_at", "ports", "states"} {
		if _, ok := n[k]; !ok {
			t.Errorf("detail lacks %s", k)
		}
	}
	if _, ok := n["shard"]; ok {
		t.Error("detail at 1.65 shows shard (1.82)")
	}
	_, _, err = rawJSON(t, bm, "GET", bm.ServiceURL("nodes")+"?detail=True&fields=uuid", nil, 200)
	if !gophercloud.ResponseCodeIs(err, 400) || ironicFault(t, errBody(t, err))["faultstring"] != "Can not specify ?detail=True and fields in the same request." {
		t.Fatalf("detail+fields: %v", err)
	}
	bm.Microversion = "1.42"
	_, _, err = rawJSON(t, bm, "GET", bm.ServiceURL("nodes")+"?detail=True", nil, 200)
	if !gophercloud.ResponseCodeIs(err, 400) {
		t.Fatalf("detail at 1.42: %v", err)
	}
	bm.Microversion = "1.65"

	// timestamps carry an offset and decode in gophercloud
	all, err := nodes.ListDetail(bm, nodes.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := nodes.ExtractNodes(all)
	if err != nil {
		t.Fatalf("ExtractNodes(detail): %v", err)
	}
	if ns[0].CreatedAt.IsZero() || ns[0].ProvisionUpdatedAt.IsZero() {
		t.Fatalf("timestamps not decoded: %+v", ns[0])
	}
	if s, _ := n["created_at"].(string); !strings.HasSuffix(s, "+00:00") {
		t.Fatalf("created_at = %q, want +00:00 offset", s)
	}
	// a single node accepts the API-computed fields
	_, body, err = rawJSON(t, bm, "GET", bm.ServiceURL("nodes", "node-001")+"?fields=uuid,conductor,allocation_uuid", nil, 200)
	if err != nil || body["conductor"] != "127.0.0.1" {
		t.Fatalf("single node with conductor: %v %v", body, err)
	}
	// get by name and uuid
	got, err := nodes.Get(ctx, bm, "node-002").Extract()
	if err != nil || got.ProvisionState != "active" || got.InstanceUUID == "" {
		t.Fatalf("get by name: %+v %v", got, err)
	}
	if _, err := nodes.Get(ctx, bm, "node-999").Extract(); !gophercloud.ResponseCodeIs(err, 404) {
		t.Fatalf("get missing: %v", err)
	}
}

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
