package openstacksim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/utils"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// computeClient authenticates like the satellite and returns the Nova
// client from the catalog.
func computeClient(t *testing.T, c *Cloud) *gophercloud.ServiceClient {
	t.Helper()
	pc, _, _ := simClients(t, c, false)
	cp, err := openstack.NewComputeV2(pc, gophercloud.EndpointOpts{Region: "RegionOne"})
	if err != nil {
		t.Fatalf("NewComputeV2: %v", err)
	}
	return cp
}

// listServerPages lists with gophercloud page by page and returns the page
// sizes and all servers.
func listServerPages(t *testing.T, cp *gophercloud.ServiceClient, opts servers.ListOpts) ([]int, []servers.Server) {
	t.Helper()
	var sizes []int
	var all []servers.Server
	err := servers.List(cp, opts).EachPage(testCtx(t), func(_ context.Context, p pagination.Page) (bool, error) {
		ss, err := servers.ExtractServers(p)
		if err != nil {
			return false, err
		}
		sizes = append(sizes, len(ss))
		all = append(all, ss...)
		return true, nil
	})
	if err != nil {
		t.Fatalf("servers.List: %v", err)
	}
	return sizes, all
}

func TestNovaListPagesAllTenants(t *testing.T) {
	c := startCloud(t, Options{})
	other := "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	want := map[string]bool{}
	for i := range 7 {
		s := Server{HypervisorHostname: newUUID(), Created: base.Add(time.Duration(i%3) * time.Minute)}
		if i%2 == 1 {
			s.TenantID = other
		}
		got, err := c.AddServer(s)
		if err != nil {
			t.Fatal(err)
		}
		want[got.ID] = true
	}
	gone, _ := c.AddServer(Server{})
	if err := c.DeleteServer(gone.ID); err != nil {
		t.Fatal(err)
	}
	cp := computeClient(t, c)

	sizes, all := listServerPages(t, cp, servers.ListOpts{AllTenants: true, Limit: 3})
	// 7 live servers in pages of 3: a next link after each full page, so
	// gophercloud fetches a fourth (empty) page only when 3 divides 7 — it
	// does not, so the pages are 3, 3, 1.
	if fmtInts(sizes) != "[3,3,1]" {
		t.Fatalf("page sizes = %v, want [3 3 1]", sizes)
	}
	seen := map[string]bool{}
	for i, s := range all {
		if seen[s.ID] || !want[s.ID] {
			t.Fatalf("server %d %s listed twice or unexpected", i, s.ID)
		}
		seen[s.ID] = true
		if s.HypervisorHostname == "" || s.Host != SimComputeHost || s.Status != "ACTIVE" || s.VmState != "active" || s.TaskState != "" {
			t.Errorf("server %s decoded as %+v", s.ID, s)
		}
		if i > 0 && s.Created.After(all[i-1].Created) {
			t.Errorf("servers not newest first: %v after %v", s.Created, all[i-1].Created)
		}
	}
	if len(seen) != 7 {
		t.Fatalf("listed %d servers, want 7", len(seen))
	}
	// without all_tenants only the token's project
	_, own := listServerPages(t, cp, servers.ListOpts{})
	if len(own) != 4 {
		t.Fatalf("own project servers = %d, want 4", len(own))
	}

	var markers []string
	for _, r := range c.Requests() {
		if r.Service == ServiceCompute && r.Path == "/v2.1/servers/detail" && strings.Contains(r.Query, "marker=") {
			markers = append(markers, r.Query)
		}
	}
	if len(markers) != 2 {
		t.Fatalf("requests with marker = %q, want 2", markers)
	}
	if !strings.HasPrefix(markers[0], "all_tenants=true&limit=3&marker=") && !strings.HasPrefix(markers[0], "all_tenants=1&limit=3&marker=") {
		t.Errorf("next link query = %q", markers[0])
	}
}

func fmtInts(v []int) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestNovaNextLinkOnlyOnFullPage(t *testing.T) {
	c := startCloud(t, Options{NovaMaxLimit: 2})
	for range 4 {
		if _, err := c.AddServer(Server{}); err != nil {
			t.Fatal(err)
		}
	}
	cp := computeClient(t, c)
	_, body, err := rawJSON(t, cp, "GET", cp.ServiceURL("servers", "detail")+"?all_tenants=1&limit=5&node=x&zzz=1", nil, 200)
	if err != nil {
		t.Fatal(err)
	}
	// node=x filters everything out: an empty page has no link
	if len(body["servers"].([]any)) != 0 || body["servers_links"] != nil {
		t.Fatalf("node filter: %v", body)
	}
	_, body, err = rawJSON(t, cp, "GET", cp.ServiceURL("servers", "detail")+"?zzz=1&all_tenants=1&limit=5", nil, 200)
	if err != nil {
		t.Fatal(err)
	}
	// limit 5 is capped at max_limit 2: the page is full, so a next link
	// with the parameters sorted and the marker appended
	links, _ := body["servers_links"].([]any)
	if len(body["servers"].([]any)) != 2 || len(links) != 1 {
		t.Fatalf("capped page: %v", body)
	}
	href := links[0].(map[string]any)["href"].(string)
	last := body["servers"].([]any)[1].(map[string]any)["id"].(string)
	if want := c.URL() + "/compute/v2.1/servers/detail?all_tenants=1&limit=5&zzz=1&marker=" + last; href != want {
		t.Errorf("next = %q, want %q", href, want)
	}
	_, body, _ = rawJSON(t, cp, "GET", cp.ServiceURL("servers")+"?limit=1&marker="+last, nil, 200)
	if len(body["servers"].([]any)) != 1 {
		t.Fatalf("index page after marker: %v", body)
	}
	if s := body["servers"].([]any)[0].(map[string]any); len(s) != 3 || s["links"] == nil {
		t.Errorf("index entry = %v, want id, name, links", s)
	}
}

func TestNovaErrors(t *testing.T) {
	c := startCloud(t, Options{})
	s, _ := c.AddServer(Server{HypervisorHostname: "node-x"})
	cp := computeClient(t, c)
	ctx := testCtx(t)

	got, err := servers.Get(ctx, cp, s.ID).Extract()
	if err != nil || got.HypervisorHostname != "node-x" || got.TenantID != c.ProjectID() {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if err := c.DeleteServer(s.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{s.ID, "abc"} {
		_, err = servers.Get(ctx, cp, id).Extract()
		if !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			t.Fatalf("Get %s: %v, want 404", id, err)
		}
		var body map[string]map[string]any
		_ = json.Unmarshal(errBody(t, err), &body)
		if body["itemNotFound"]["message"] != "Instance "+id+" could not be found." || body["itemNotFound"]["code"] != float64(404) {
			t.Errorf("404 body = %v", body)
		}
	}
	if !errors.Is(c.DeleteServer(s.ID), ErrNotFound) || !errors.Is(c.UpdateServer(s.ID, func(*Server) {}), ErrNotFound) {
		t.Error("DeleteServer/UpdateServer of a deleted server: want ErrNotFound")
	}
	if _, err := c.AddServer(Server{ID: s.ID}); !errors.Is(err, ErrServerExists) {
		t.Errorf("AddServer with a used id: %v", err)
	}

	// an unknown marker is a 400; a deleted server is still a valid marker
	_, _, err = rawJSON(t, cp, "GET", cp.ServiceURL("servers", "detail")+"?marker=nope", nil, 200)
	if !gophercloud.ResponseCodeIs(err, http.StatusBadRequest) || !strings.Contains(string(errBody(t, err)), `"badRequest": {"code": 400, "message": "marker [nope] not found"}`) {
		t.Fatalf("bad marker: %v", err)
	}
	if _, _, err = rawJSON(t, cp, "GET", cp.ServiceURL("servers", "detail")+"?marker="+s.ID, nil, 200); err != nil {
		t.Fatalf("deleted server as marker: %v", err)
	}
	// admins see deleted servers with deleted=true
	_, body, _ := rawJSON(t, cp, "GET", cp.ServiceURL("servers", "detail")+"?deleted=true&all_tenants=1", nil, 200)
	if ss := body["servers"].([]any); len(ss) != 1 || ss[0].(map[string]any)["status"] != "DELETED" {
		t.Fatalf("deleted=true: %v", body)
	}
	for q, want := range map[string]string{
		"limit=-1":          `Invalid input for query parameters limit. Value: -1. '-1' does not match '^[0-9]*$'`,
		"all_tenants=maybe": `Unrecognized value 'maybe'`,
		"metadata=x":        `Invalid filter field: metadata.`,
	} {
		_, _, err = rawJSON(t, cp, "GET", cp.ServiceURL("servers", "detail")+"?"+q, nil, 200)
		if !gophercloud.ResponseCodeIs(err, http.StatusBadRequest) || !strings.Contains(string(errBody(t, err)), want) {
			t.Errorf("%s: %v", q, err)
		}
	}

	// 401 without or with an expired token, keystonemiddleware's body
	resp, err := http.Get(c.URL() + "/compute/v2.1/servers/detail?all_tenants=1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(b), "The request you have made requires authentication.") || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("no token: %d %s", resp.StatusCode, b)
	}
	c.ExpireTokens()
	_, err = servers.Get(ctx, cp, "abc").Extract()
	if !gophercloud.ResponseCodeIs(err, http.StatusUnauthorized) {
		t.Fatalf("expired token: %v", err)
	}
}

func TestNovaMicroversions(t *testing.T) {
	c := startCloud(t, Options{})
	cp := computeClient(t, c)
	if want := c.URL() + "/compute/v2.1/"; cp.Endpoint != want {
		t.Fatalf("compute endpoint = %q, want %q", cp.Endpoint, want)
	}
	ctx := testCtx(t)
	mv, err := utils.GetSupportedMicroversions(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	if mv.MinMajor != 2 || mv.MinMinor != 1 || mv.MaxMajor != 2 || mv.MaxMinor != 93 {
		t.Fatalf("microversions = %+v, want 2.1..2.93", mv)
	}
	c2, err := utils.RequireMicroversion(ctx, *cp, "2.60")
	if err != nil {
		t.Fatal(err)
	}
	resp, _, err := rawJSON(t, &c2, "GET", c2.ServiceURL("servers", "detail"), nil, 200)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("OpenStack-API-Version") != "compute 2.60" || resp.Header.Get("X-OpenStack-Nova-API-Version") != "2.60" ||
		strings.Join(resp.Header.Values("Vary"), ",") != "OpenStack-API-Version,X-OpenStack-Nova-API-Version" {
		t.Errorf("2.60 headers: %v", resp.Header)
	}
	for hdr, want := range map[[2]string]string{
		{"OpenStack-API-Version", "compute latest"}:   "compute 2.93",
		{"X-OpenStack-Nova-API-Version", "2.5"}:       "compute 2.5",
		{"OpenStack-API-Version", "placement 1.2"}:    "compute 2.1",
		{"OpenStack-API-Version", "compute 2.94"}:     "406",
		{"X-OpenStack-Nova-API-Version", "3.0"}:       "406",
		{"OpenStack-API-Version", "compute 2.x"}:      "400",
		{"OpenStack-API-Version", "compute 2.0"}:      "406",
		{"Openstack-Api-Version", "compute 2.3, x 1"}: "compute 2.3",
	} {
		req, _ := http.NewRequest("GET", c.URL()+"/compute/v2.1/", nil)
		req.Header.Set(hdr[0], hdr[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		switch want {
		case "406":
			if resp.StatusCode != 406 || !strings.Contains(string(b), `{"computeFault": {"code": 406, "message": "Version `) {
				t.Errorf("%v: %d %s", hdr, resp.StatusCode, b)
			}
		case "400":
			if resp.StatusCode != 400 || resp.Header.Get("OpenStack-API-Version") != "" {
				t.Errorf("%v: %d %v %s", hdr, resp.StatusCode, resp.Header, b)
			}
		default:
			if resp.StatusCode != 200 || resp.Header.Get("OpenStack-API-Version") != want {
				t.Errorf("%v: %d %q, want %q", hdr, resp.StatusCode, resp.Header.Get("OpenStack-API-Version"), want)
			}
		}
	}
	// the unversioned root lists v2.0 and v2.1, without a token
	resp, err = http.Get(c.URL() + "/compute/")
	if err != nil {
		t.Fatal(err)
	}
	var root struct {
		Versions []struct{ ID, Status, Version, MinVersion string } `json:"versions"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&root)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || len(root.Versions) != 2 || root.Versions[1].ID != "v2.1" || root.Versions[1].Version != "2.93" {
		t.Errorf("root = %d %+v", resp.StatusCode, root)
	}
}

func TestNovaNonAdmin(t *testing.T) {
	c := startCloud(t, Options{NovaNonAdmin: true})
	mine, _ := c.AddServer(Server{HypervisorHostname: newUUID()})
	theirs, _ := c.AddServer(Server{HypervisorHostname: newUUID(), TenantID: "someoneelse"})
	cp := computeClient(t, c)
	ctx := testCtx(t)

	_, err := servers.List(cp, servers.ListOpts{AllTenants: true}).AllPages(ctx)
	if !gophercloud.ResponseCodeIs(err, http.StatusForbidden) ||
		!strings.Contains(string(errBody(t, err)), `"forbidden": {"code": 403, "message": "Policy doesn't allow os_compute_api:servers:detail:get_all_tenants to be performed."}`) {
		t.Fatalf("all_tenants as non-admin: %v", err)
	}
	_, all := listServerPages(t, cp, servers.ListOpts{})
	if len(all) != 1 || all[0].ID != mine.ID || all[0].HypervisorHostname != "" || all[0].Host != "" {
		t.Fatalf("non-admin list = %+v", all)
	}
	// node= is silently dropped for a non-admin
	_, body, err := rawJSON(t, cp, "GET", cp.ServiceURL("servers", "detail")+"?node=nothing", nil, 200)
	if err != nil || len(body["servers"].([]any)) != 1 {
		t.Fatalf("node filter as non-admin: %v %v", body, err)
	}
	for k := range body["servers"].([]any)[0].(map[string]any) {
		if strings.HasPrefix(k, "OS-EXT-SRV-ATTR:") {
			t.Errorf("non-admin sees %s", k)
		}
	}
	if _, err := servers.Get(ctx, cp, theirs.ID).Extract(); !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		t.Errorf("other project's server as non-admin: %v", err)
	}
}

func TestNoNovaCatalog(t *testing.T) {
	for _, opts := range []Options{{NoNova: true}, {NoPlacement: true}} {
		c := startCloud(t, opts)
		pc, _, _ := simClients(t, c, false)
		if _, err := openstack.NewComputeV2(pc, gophercloud.EndpointOpts{Region: "RegionOne"}); err == nil {
			t.Fatalf("%+v: NewComputeV2 found an endpoint", opts)
		}
		resp, err := http.Get(c.URL() + "/compute/")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%+v: GET /compute/ = %d", opts, resp.StatusCode)
		}
		if _, err := c.AddServer(Server{}); !errors.Is(err, ErrNoNova) {
			t.Fatalf("%+v: AddServer = %v", opts, err)
		}
		if n := c.SeedLikeTestbed(10); len(n) != 10 || len(c.Servers()) != 0 {
			t.Fatalf("%+v: seeded servers on a site without Nova", opts)
		}
	}
}

func TestSeedAndChurnKeepNovaInStep(t *testing.T) {
	c := startCloud(t, Options{})
	c.SeedLikeTestbed(20)
	assertNoOrphans := func(when string) {
		t.Helper()
		live := map[string]Server{}
		for _, s := range c.Servers() {
			live[s.ID] = s
		}
		byNode := map[string]string{}
		for _, n := range c.Nodes() {
			byNode[n.UUID] = n.InstanceUUID
			if n.InstanceUUID == "" {
				continue
			}
			s, ok := live[n.InstanceUUID]
			if !ok || s.HypervisorHostname != n.UUID {
				t.Fatalf("%s: node %s points at instance %s, Nova has %+v", when, n.Name, n.InstanceUUID, s)
			}
		}
		for _, s := range live {
			if byNode[s.HypervisorHostname] != s.ID {
				t.Fatalf("%s: server %s on node %s, node points at %q", when, s.ID, s.HypervisorHostname, byNode[s.HypervisorHostname])
			}
		}
	}
	assertNoOrphans("seeded")
	if got := len(c.Servers()); got != 4 {
		t.Fatalf("seeded servers = %d, want 4 (roles 2 and 8)", got)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 60 {
		c.ChurnOnce(r)
		assertNoOrphans(fmt.Sprintf("churn tick %d", i))
	}
	ironic, nova, err := c.SeedOrphans(1, 2)
	if err != nil || len(ironic) != 1 || len(nova) != 2 {
		t.Fatalf("SeedOrphans = %v %v %v", ironic, nova, err)
	}
	n, _ := c.Node(ironic[0])
	if _, ok := c.Server(n.InstanceUUID); ok {
		t.Error("Ironic-side orphan still has its server")
	}
}
