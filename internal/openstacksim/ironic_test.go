package openstacksim

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

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
}

func TestDetailListAndSingleNodeGet(t *testing.T) {
	_, _, bm, _ := seededCloud(t, 3)
	ctx := testCtx(t)
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
