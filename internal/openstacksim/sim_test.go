package openstacksim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/utils"
)

// startCloud starts a simulator on a free loopback port for one test.
func startCloud(t *testing.T, opts Options) *Cloud {
	t.Helper()
	c := New(opts)
	if err := c.Start("127.0.0.1:0"); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// seededCloud starts a simulator seeded like the test bed with n nodes and
// returns it, the seeded nodes and its Ironic and Placement clients.
func seededCloud(t *testing.T, n int) (*Cloud, []Node, *gophercloud.ServiceClient, *gophercloud.ServiceClient) {
	t.Helper()
	c := startCloud(t, Options{})
	seeded := c.SeedLikeTestbed(n)
	_, bm, pl := simClients(t, c, false)
	return c, seeded, bm, pl
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// simClients authenticates with gophercloud the way the satellite does:
// clouds.yaml → clouds.Parse → config.NewProviderClient, then the Ironic
// client at 1.65 and the Placement client at 1.39.
func simClients(t *testing.T, c *Cloud, reauth bool) (*gophercloud.ProviderClient, *gophercloud.ServiceClient, *gophercloud.ServiceClient) {
	t.Helper()
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := c.WriteCloudsYAML(path, "sim"); err != nil {
		t.Fatal(err)
	}
	ao, eo, tlsConfig, err := clouds.Parse(clouds.WithCloudName("sim"), clouds.WithLocations(path))
	if err != nil {
		t.Fatalf("clouds.Parse: %v", err)
	}
	ao.AllowReauth = reauth
	pc, err := config.NewProviderClient(ctx, ao, config.WithTLSConfig(tlsConfig))
	if err != nil {
		t.Fatalf("NewProviderClient: %v", err)
	}
	bm, err := openstack.NewBareMetalV1(pc, eo)
	if err != nil {
		t.Fatalf("NewBareMetalV1: %v", err)
	}
	bm.Microversion = "1.65"
	var pl *gophercloud.ServiceClient
	if !c.opts.NoPlacement {
		pl, err = openstack.NewPlacementV1(pc, eo)
		if err != nil {
			t.Fatalf("NewPlacementV1: %v", err)
		}
		pl.Microversion = "1.39"
	}
	return pc, bm, pl
}

// rawJSON does one request with the client's token and microversion and
// decodes the JSON body (if any) into a map.
func rawJSON(t *testing.T, sc *gophercloud.ServiceClient, method, url string, body any, okCodes ...int) (*http.Response, map[string]any, error) {
	t.Helper()
	var out map[string]any
	opts := &gophercloud.RequestOpts{OkCodes: okCodes, KeepResponseBody: true}
	if body != nil {
		opts.JSONBody = body
	}
	resp, err := sc.Request(testCtx(t), method, url, opts)
	if resp != nil && resp.Body != nil {
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if len(bytes.TrimSpace(b)) > 0 {
			_ = json.Unmarshal(b, &out)
		}
	}
	return resp, out, err
}

// errBody returns the body of a gophercloud unexpected-response error.
func errBody(t *testing.T, err error) []byte {
	t.Helper()
	var ue gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &ue) {
		t.Fatalf("want ErrUnexpectedResponseCode, got %T: %v", err, err)
	}
	return ue.Body
}

// ironicFault decodes Ironic's error envelope: the error_message string
// holds another JSON document.
func ironicFault(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var env struct {
		ErrorMessage string `json:"error_message"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.ErrorMessage == "" {
		t.Fatalf("not an Ironic error envelope: %s", body)
	}
	var inner map[string]any
	if err := json.Unmarshal([]byte(env.ErrorMessage), &inner); err != nil {
		t.Fatalf("error_message is not JSON: %q", env.ErrorMessage)
	}
	return inner
}

func TestStartRefusesNonLoopback(t *testing.T) {
	c := New(Options{})
	for _, addr := range []string{"0.0.0.0:0", ":0", "10.1.2.3:0", "[::]:0"} {
		if err := c.Start(addr); err == nil {
			_ = c.Close()
			t.Fatalf("Start(%q) succeeded, want refusal", addr)
		}
	}
	if c.URL() != "" {
		t.Fatalf("URL before start = %q", c.URL())
	}
}

func TestCloudsYAMLAuthenticatesWithGophercloud(t *testing.T) {
	c := startCloud(t, Options{})
	pc, bm, pl := simClients(t, c, false)
	if pc.TokenID == "" {
		t.Fatal("no token after authentication")
	}
	if got := c.TokensIssued(); got != 1 {
		t.Fatalf("TokensIssued = %d, want 1", got)
	}
	if want := c.URL() + "/baremetal/v1/nodes"; bm.ServiceURL("nodes") != want {
		t.Errorf("baremetal nodes URL = %q, want %q", bm.ServiceURL("nodes"), want)
	}
	if want := c.URL() + "/placement/"; pl.Endpoint != want {
		t.Errorf("placement endpoint = %q, want %q", pl.Endpoint, want)
	}
	ctx := testCtx(t)
	mv, err := utils.GetSupportedMicroversions(ctx, bm)
	if err != nil {
		t.Fatalf("ironic microversions: %v", err)
	}
	if mv.MinMajor != 1 || mv.MinMinor != 1 || mv.MaxMajor != 1 || mv.MaxMinor != 82 {
		t.Errorf("ironic microversions = %+v, want 1.1..1.82", mv)
	}
	mv, err = utils.GetSupportedMicroversions(ctx, pl)
	if err != nil {
		t.Fatalf("placement microversions: %v", err)
	}
	if mv.MinMinor != 0 || mv.MaxMinor != 39 {
		t.Errorf("placement microversions = %+v, want 1.0..1.39", mv)
	}
}

func TestStandaloneSiteHasNoPlacement(t *testing.T) {
	c := startCloud(t, Options{NoPlacement: true})
	pc, _, _ := simClients(t, c, false)
	if _, err := openstack.NewPlacementV1(pc, gophercloud.EndpointOpts{Region: "RegionOne"}); err == nil {
		t.Fatal("NewPlacementV1 found an endpoint on a standalone-Ironic site")
	}
	resp, err := http.Get(c.URL() + "/placement/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /placement/ = %d, want 404", resp.StatusCode)
	}
}

func postToken(t *testing.T, c *Cloud, body string) (*http.Response, map[string]any) {
	t.Helper()
	resp, err := http.Post(c.URL()+"/identity/v3/auth/tokens", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp, out
}

func TestKeystoneApplicationCredentialTokens(t *testing.T) {
	c := startCloud(t, Options{})
	id, secret := c.ApplicationCredential()
	appCred := func(id, secret string, extra string) string {
		return `{"auth":{"identity":{"methods":["application_credential"],"application_credential":{"id":"` + id + `","secret":"` + secret + `"}}` + extra + `}}`
	}

	resp, body := postToken(t, c, appCred(id, secret, ""))
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("X-Subject-Token") == "" {
		t.Fatalf("token request = %d (subject token %q)", resp.StatusCode, resp.Header.Get("X-Subject-Token"))
	}
	tok := body["token"].(map[string]any)
	if tok["project"].(map[string]any)["id"] != c.ProjectID() {
		t.Errorf("token project = %v", tok["project"])
	}
	types := map[string]bool{}
	for _, s := range tok["catalog"].([]any) {
		svc := s.(map[string]any)
		types[svc["type"].(string)] = true
		if n := len(svc["endpoints"].([]any)); n != 3 {
			t.Errorf("%s has %d endpoints, want public/internal/admin", svc["type"], n)
		}
	}
	for _, typ := range []string{"identity", "baremetal", "placement"} {
		if !types[typ] {
			t.Errorf("catalog lacks %s", typ)
		}
	}

	tests := []struct {
		name    string
		body    string
		status  int
		message string
	}{
		{"wrong secret", appCred(id, "nope", ""), 401, "The request you have made requires authentication."},
		{"scope with app cred", appCred(id, secret, `,"scope":{"project":{"id":"x"}}`), 401,
			"Error authenticating with application credential: Application credentials cannot request a scope."},
		{"unknown credential", appCred("0123456789abcdef0123456789abcdef", secret, ""), 404,
			"Could not find Application Credential: 0123456789abcdef0123456789abcdef."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := postToken(t, c, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			e, _ := body["error"].(map[string]any)
			if e == nil || e["message"] != tt.message || int(e["code"].(float64)) != tt.status {
				t.Fatalf("error body = %v", body)
			}
			if tt.status == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Keystone uri=") {
				t.Errorf("401 without WWW-Authenticate: %v", resp.Header)
			}
		})
	}
	if got := c.TokensIssued(); got != 1 {
		t.Fatalf("TokensIssued = %d, want 1 (failures issue none)", got)
	}
}

func TestUnauthenticatedAndExpiredTokensGet401(t *testing.T) {
	c := startCloud(t, Options{})
	for _, path := range []string{"/baremetal/v1/nodes", "/placement/resource_providers"} {
		resp, err := http.Get(c.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 401 || !strings.Contains(string(b), `"title": "Unauthorized"`) {
			t.Fatalf("GET %s without token = %d %s", path, resp.StatusCode, b)
		}
	}
	// version documents are public
	for _, path := range []string{"/baremetal/", "/baremetal/v1", "/placement/", "/identity/v3"} {
		resp, err := http.Get(c.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s = %d, want 200 without token", path, resp.StatusCode)
		}
	}

	_, bm, _ := simClients(t, c, false)
	ctx := testCtx(t)
	if _, err := nodes.List(bm, nodes.ListOpts{}).AllPages(ctx); err != nil {
		t.Fatalf("list with fresh token: %v", err)
	}
	c.ExpireTokens()
	_, err := nodes.List(bm, nodes.ListOpts{}).AllPages(ctx)
	if !gophercloud.ResponseCodeIs(err, http.StatusUnauthorized) {
		t.Fatalf("list with expired token and no AllowReauth: err = %v, want 401", err)
	}
}

func TestReauthAfterTokenExpiry(t *testing.T) {
	c := startCloud(t, Options{})
	c.SeedLikeTestbed(3)
	_, bm, pl := simClients(t, c, true)
	ctx := testCtx(t)
	c.ExpireTokens()
	if _, err := nodes.List(bm, nodes.ListOpts{}).AllPages(ctx); err != nil {
		t.Fatalf("list after ExpireTokens with AllowReauth: %v", err)
	}
	if got := c.TokensIssued(); got != 2 {
		t.Fatalf("TokensIssued = %d, want 2 (one re-authentication)", got)
	}
	var saw401 bool
	for _, r := range c.Requests() {
		if r.Service == ServiceBaremetal && r.Status == 401 {
			saw401 = true
		}
	}
	if !saw401 {
		t.Fatal("the client never saw the 401 that triggers re-authentication")
	}
	// a short TTL expires by itself
	c2 := startCloud(t, Options{TokenTTL: 300 * time.Millisecond})
	_, _, pl2 := simClients(t, c2, true)
	time.Sleep(400 * time.Millisecond)
	if _, _, err := rawJSON(t, pl2, "GET", pl2.ServiceURL("resource_providers"), nil, 200); err != nil {
		t.Fatalf("placement after TTL with AllowReauth: %v", err)
	}
	if got := c2.TokensIssued(); got != 2 {
		t.Fatalf("TokensIssued after TTL = %d, want 2", got)
	}
	_ = pl
}

func TestFaultInjection(t *testing.T) {
	c, seeded, bm, pl := seededCloud(t, 2)
	ctx := testCtx(t)

	c.InjectFault(Fault{Service: ServiceBaremetal, Method: "GET", PathContains: "/v1/nodes", Status: 503, Times: 2})
	for i := 0; i < 2; i++ {
		_, err := nodes.List(bm, nodes.ListOpts{}).AllPages(ctx)
		if !gophercloud.ResponseCodeIs(err, http.StatusServiceUnavailable) {
			t.Fatalf("attempt %d: err = %v, want 503", i, err)
		}
		if f := ironicFault(t, errBody(t, err)); f["faultcode"] != "Server" {
			t.Fatalf("503 body = %v", f)
		}
	}
	if _, err := nodes.List(bm, nodes.ListOpts{}).AllPages(ctx); err != nil {
		t.Fatalf("third attempt: %v", err)
	}

	// default 409 body of Ironic names the node and the lock holder
	id := seeded[0].UUID
	c.InjectFault(Fault{Service: ServiceBaremetal, Method: "PUT", PathContains: "/traits/", Status: 409})
	_, err := bm.Put(ctx, bm.ServiceURL("nodes", id, "traits", ReadyTrait), nil, nil, &gophercloud.RequestOpts{OkCodes: []int{204}})
	if !gophercloud.ResponseCodeIs(err, http.StatusConflict) {
		t.Fatalf("err = %v, want 409", err)
	}
	if f := ironicFault(t, errBody(t, err)); !strings.Contains(f["faultstring"].(string), "is locked by host") {
		t.Fatalf("409 body = %v", f)
	}

	// custom body, delay and placement errors
	c.InjectFault(Fault{Service: ServicePlacement, PathContains: "/resource_providers", Status: 502, Body: `{"proxy": "down"}`, Delay: 50 * time.Millisecond})
	start := time.Now()
	_, _, err = rawJSON(t, pl, "GET", pl.ServiceURL("resource_providers"), nil, 200)
	if !gophercloud.ResponseCodeIs(err, http.StatusBadGateway) || string(errBody(t, err)) != `{"proxy": "down"}` {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Fatal("fault delay not applied")
	}
	c.InjectFault(Fault{Service: ServicePlacement, Method: "PUT", Status: 409})
	_, _, err = rawJSON(t, pl, "PUT", pl.ServiceURL("traits", "CUSTOM_X"), nil, 201, 204)
	var pe struct {
		Errors []struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(errBody(t, err), &pe); err != nil || len(pe.Errors) != 1 || pe.Errors[0].Code != "placement.concurrent_update" || pe.Errors[0].Status != 409 {
		t.Fatalf("placement 409 body = %+v (%v)", pe, err)
	}

	// every request was recorded with its status
	var statuses []int
	for _, r := range c.Requests() {
		if r.Service == ServiceBaremetal && r.Method == "GET" && r.Path == "/v1/nodes" {
			statuses = append(statuses, r.Status)
		}
	}
	if len(statuses) != 3 || statuses[0] != 503 || statuses[1] != 503 || statuses[2] != 200 {
		t.Fatalf("recorded statuses = %v", statuses)
	}
	c.ResetRequests()
	if len(c.Requests()) != 0 {
		t.Fatal("ResetRequests kept requests")
	}

	// unlimited until cleared
	c.InjectFault(Fault{Service: ServiceBaremetal, Status: 500, Times: -1})
	for i := 0; i < 3; i++ {
		if _, err := nodes.Get(ctx, bm, id).Extract(); !gophercloud.ResponseCodeIs(err, 500) {
			t.Fatalf("unlimited fault, attempt %d: %v", i, err)
		}
	}
	c.ClearFaults()
	if _, err := nodes.Get(ctx, bm, id).Extract(); err != nil {
		t.Fatalf("after ClearFaults: %v", err)
	}
}
