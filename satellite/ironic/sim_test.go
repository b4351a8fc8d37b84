package ironic_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
)

// newSimClient connects to a fresh simulator and returns an ironic Client
// with fast retries (4 attempts per call).
func newSimClient(t *testing.T, opts openstacksim.Options) (*openstacksim.Cloud, *ironic.Client, *openstack.Clients) {
	t.Helper()
	sim, c := ostest.ConnectSim(t, opts)
	ic := ironic.New(c.Baremetal, ostest.Logger(t))
	ic.ReadRetry = ostest.FastRetry(4)
	ic.WriteRetry = ostest.FastRetry(4)
	// Warm up: like the real Ironic 21.4, the simulator answers 500 to a list
	// asking for allocation_uuid; the client learns that on its first listing.
	// Tests below count the requests of their own listings only.
	if _, err := ic.ListNodes(context.Background()); err != nil {
		t.Fatalf("warm-up listing: %v", err)
	}
	sim.ResetRequests()
	return sim, ic, c
}

func addNodes(sim *openstacksim.Cloud, n int) []string {
	ids := make([]string, n)
	for i := range n {
		ids[i] = sim.AddNode(openstacksim.Node{
			Name: fmt.Sprintf("n-%05d", i), ProvisionState: "available", PowerState: "power off",
			ResourceClass: "gpu-h100", ProvisionUpdatedAt: time.Now().UTC().Add(-time.Hour),
		}).UUID
	}
	return ids
}

// listRequests returns the node-list requests the simulator answered.
func listRequests(sim *openstacksim.Cloud) []openstacksim.Request {
	var out []openstacksim.Request
	for _, r := range sim.Requests() {
		if r.Service == openstacksim.ServiceBaremetal && r.Method == http.MethodGet && r.Path == "/v1/nodes" {
			out = append(out, r)
		}
	}
	return out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSimListTwoPages(t *testing.T) {
	sim, ic, c := newSimClient(t, openstacksim.Options{IronicMaxLimit: 1000})
	if c.IronicVersion != "1.65" {
		t.Errorf("negotiated %s", c.IronicVersion)
	}
	ids := addNodes(sim, 1003)
	sim.ResetRequests()
	nodes, err := ic.ListNodes(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1003 {
		t.Fatalf("got %d nodes, want 1003", len(nodes))
	}
	for i, n := range nodes {
		if n.UUID != ids[i] {
			t.Fatalf("node %d is %s, want %s (order or duplicates)", i, n.UUID, ids[i])
		}
		if n.ProvisionState != "available" || n.ResourceClass != "gpu-h100" || n.Traits == nil || n.ProvisionUpdatedAt.IsZero() {
			t.Fatalf("node %d decoded badly: %+v", i, n)
		}
		// allocation_uuid is the one field Ironic 21.4 (and the simulator)
		// cannot list; everything else of 1.65 must be there.
		if len(n.Missing) != 1 || !n.Missing["allocation_uuid"] {
			t.Fatalf("node %d missing %v at 1.65, want only allocation_uuid", i, n.Missing)
		}
	}
	reqs := listRequests(sim)
	if len(reqs) != 2 {
		t.Fatalf("%d list requests, want 2: %+v", len(reqs), reqs)
	}
	// Each page carries the full query; page 2 adds the marker.
	for i, r := range reqs {
		if !strings.Contains(r.Query, "fields=uuid%2Cname%2Cprovision_state") || !strings.Contains(r.Query, "limit=1000") {
			t.Errorf("page %d query %q", i+1, r.Query)
		}
		q, _ := url.ParseQuery(r.Query)
		if slices.Contains(strings.Split(q.Get("fields"), ","), "updated_at") || q.Has("detail") {
			t.Errorf("page %d asks for updated_at or detail: %q", i+1, r.Query)
		}
	}
	if !strings.Contains(reqs[1].Query, "marker="+ids[999]) {
		t.Errorf("page 2 query %q lacks marker %s", reqs[1].Query, ids[999])
	}
}

// A total that is a multiple of the limit ends with an empty page.
func TestSimListExactMultipleOfLimit(t *testing.T) {
	sim, ic, _ := newSimClient(t, openstacksim.Options{IronicMaxLimit: 1000})
	addNodes(sim, 1000)
	sim.ResetRequests()
	nodes, err := ic.ListNodes(ctxT(t))
	if err != nil || len(nodes) != 1000 {
		t.Fatalf("%d nodes, %v", len(nodes), err)
	}
	if n := len(listRequests(sim)); n != 2 {
		t.Errorf("%d requests, want 2 (full page + empty page)", n)
	}
}

// A server whose max_limit is below the requested limit still lists
// everything (pages shorter than "limit" but with a next link).
func TestSimListServerCapsLimit(t *testing.T) {
	sim, ic, _ := newSimClient(t, openstacksim.Options{IronicMaxLimit: 100})
	addNodes(sim, 250)
	nodes, err := ic.ListNodes(ctxT(t))
	if err != nil || len(nodes) != 250 {
		t.Fatalf("%d nodes, %v", len(nodes), err)
	}
}

func TestSimEmptyListing(t *testing.T) {
	_, ic, _ := newSimClient(t, openstacksim.Options{})
	nodes, err := ic.ListNodes(ctxT(t))
	if err != nil || nodes == nil || len(nodes) != 0 {
		t.Fatalf("%v, %v", nodes, err)
	}
}

// Page 2 fails beyond the retry budget: an error and no partial list.
func TestSimListFailsHalfWayNoPartialList(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusGatewayTimeout} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			sim, ic, _ := newSimClient(t, openstacksim.Options{IronicMaxLimit: 1000})
			addNodes(sim, 1003)
			sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, Method: http.MethodGet, PathContains: "marker=", Status: status, Times: -1})
			sim.ResetRequests()
			nodes, err := ic.ListNodes(ctxT(t))
			if err == nil || nodes != nil {
				t.Fatalf("got %d nodes and err %v; want an error and nil", len(nodes), err)
			}
			if !errors.Is(err, ironic.ErrListingIncomplete) || openstack.StatusCode(err) != status {
				t.Errorf("error %v does not say incomplete/%d", err, status)
			}
			want := 1 + 4 // page 1, then 4 attempts at page 2
			if status == http.StatusInternalServerError {
				want = 1 + 1 // 500 is not retried
			}
			if n := len(listRequests(sim)); n != want {
				t.Errorf("%d list requests, want %d", n, want)
			}
		})
	}
}

// Transient failures within the budget are retried and the listing completes.
func TestSimListRetriesTransient(t *testing.T) {
	sim, ic, _ := newSimClient(t, openstacksim.Options{IronicMaxLimit: 1000})
	addNodes(sim, 1003)
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, Method: http.MethodGet, PathContains: "marker=", Status: http.StatusBadGateway, Times: 2})
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, Method: http.MethodGet, PathContains: "/v1/nodes?", Status: http.StatusServiceUnavailable, Times: 1})
	nodes, err := ic.ListNodes(ctxT(t))
	if err != nil || len(nodes) != 1003 {
		t.Fatalf("%d nodes, %v", len(nodes), err)
	}
}

// A slow page runs into the per-attempt timeout and is retried.
func TestSimListRetriesTimeout(t *testing.T) {
	sim, ic, _ := newSimClient(t, openstacksim.Options{})
	addNodes(sim, 5)
	ic.ReadRetry.AttemptTimeout = 200 * time.Millisecond
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, PathContains: "/v1/nodes?", Delay: time.Second, Times: 1})
	nodes, err := ic.ListNodes(ctxT(t))
	if err != nil || len(nodes) != 5 {
		t.Fatalf("%d nodes, %v", len(nodes), err)
	}
}

// The marker node is deleted between two pages: Ironic answers 404 and the
// listing restarts from the beginning.
func TestSimListMarkerVanishedRestarts(t *testing.T) {
	sim, ic, _ := newSimClient(t, openstacksim.Options{IronicMaxLimit: 1000})
	ids := addNodes(sim, 1003)
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, Method: http.MethodGet, PathContains: "marker=" + ids[999],
		Before: func() { _ = sim.DeleteNode(ids[999]) }})
	sim.ResetRequests()
	nodes, err := ic.ListNodes(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1002 || slices.ContainsFunc(nodes, func(n ironic.Node) bool { return n.UUID == ids[999] }) {
		t.Fatalf("%d nodes after restart", len(nodes))
	}
	if n := len(listRequests(sim)); n != 4 { // page 1, 404, page 1 again, page 2
		t.Errorf("%d list requests, want 4", n)
	}
}

// A marker that keeps vanishing gives up after MaxRestarts.
func TestSimListMarkerGoneForever(t *testing.T) {
	sim, ic, _ := newSimClient(t, openstacksim.Options{IronicMaxLimit: 10})
	addNodes(sim, 15)
	ic.MaxRestarts = 2
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, Method: http.MethodGet, PathContains: "marker=", Status: http.StatusNotFound, Times: -1})
	sim.ResetRequests()
	nodes, err := ic.ListNodes(ctxT(t))
	if err == nil || nodes != nil || !errors.Is(err, ironic.ErrListingIncomplete) {
		t.Fatalf("%d nodes, %v", len(nodes), err)
	}
	if n := len(listRequests(sim)); n != 6 { // 3 × (page 1 + 404)
		t.Errorf("%d list requests, want 6", n)
	}
}

// Ironic 21.4 answers 500 when a list asks for allocation_uuid (seen on
// the test bed); the client drops that field and goes on.
func TestSimListDropsRejectedField(t *testing.T) {
	sim, ic, _ := newSimClient(t, openstacksim.Options{})
	addNodes(sim, 3)
	body := `{"error_message": "{\"faultcode\": \"Server\", \"faultstring\": \"type object 'Node' has no attribute 'allocation_uuid'\", \"debuginfo\": null}"}`
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, PathContains: "allocation_uuid", Status: 500, Body: body, Times: -1})
	for range 2 {
		sim.ResetRequests()
		nodes, err := ic.ListNodes(ctxT(t))
		if err != nil || len(nodes) != 3 {
			t.Fatalf("%d nodes, %v", len(nodes), err)
		}
		if !nodes[0].Missing["allocation_uuid"] {
			t.Errorf("allocation_uuid not reported missing: %v", nodes[0].Missing)
		}
	}
	// The second listing did not ask again.
	if reqs := listRequests(sim); len(reqs) != 1 || strings.Contains(reqs[0].Query, "allocation_uuid") {
		t.Errorf("second listing requests: %+v", reqs)
	}
	// GetNode recovers the same way (the fault matches its query too).
	n, err := ic.GetNode(ctxT(t), sim.Nodes()[0].UUID)
	if err != nil || !n.Missing["allocation_uuid"] || n.ProvisionState != "available" {
		t.Fatalf("GetNode: %+v %v", n, err)
	}
}

// A node without a UTC offset in provision_updated_at decodes as UTC, and
// a garbage timestamp does not fail the page.
func TestSimOffsetlessTimestampIsUTC(t *testing.T) {
	sim, ic, _ := newSimClient(t, openstacksim.Options{})
	body := `{"nodes": [
	 {"uuid": "11111111-1111-1111-1111-111111111111", "provision_state": "active", "maintenance": false, "traits": [], "provision_updated_at": "2026-11-29T18:00:00.123456"},
	 {"uuid": "22222222-2222-2222-2222-222222222222", "provision_state": "active", "maintenance": false, "traits": [], "provision_updated_at": "2026-11-29 18:00:00"},
	 {"uuid": "33333333-3333-3333-3333-333333333333", "provision_state": "active", "maintenance": false, "traits": [], "provision_updated_at": "2026-11-29T20:00:00+02:00"},
	 {"uuid": "44444444-4444-4444-4444-444444444444", "provision_state": "active", "maintenance": false, "traits": [], "provision_updated_at": "yesterday"},
	 {"uuid": "55555555-5555-5555-5555-555555555555", "provision_state": "active", "maintenance": false, "traits": [], "provision_updated_at": null}
	]}`
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, Method: http.MethodGet, PathContains: "/v1/nodes?", Status: http.StatusOK, Body: body})
	nodes, err := ic.ListNodes(ctxT(t))
	if err != nil || len(nodes) != 5 {
		t.Fatalf("%d nodes, %v", len(nodes), err)
	}
	want := time.Date(2026, 11, 29, 18, 0, 0, 123456000, time.UTC)
	if got := nodes[0].ProvisionUpdatedAt; !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("offset-less: %v", got)
	}
	if got := nodes[1].ProvisionUpdatedAt; !got.Equal(want.Truncate(time.Second)) {
		t.Errorf("space separated: %v", got)
	}
	if got := nodes[2].ProvisionUpdatedAt; !got.Equal(want.Truncate(time.Second)) || got.Location() != time.UTC {
		t.Errorf("+02:00: %v", got)
	}
	if !nodes[3].ProvisionUpdatedAt.IsZero() || !nodes[4].ProvisionUpdatedAt.IsZero() {
		t.Errorf("garbage/null: %v %v", nodes[3].ProvisionUpdatedAt, nodes[4].ProvisionUpdatedAt)
	}
}

func TestParseTimestamp(t *testing.T) {
	for in, w := range map[string]time.Time{
		"2026-11-29T18:00:00":              time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC),
		"2026-11-29T18:00:00.5":            time.Date(2026, 11, 29, 18, 0, 0, 500000000, time.UTC),
		"2026-11-29T18:00:00+00:00":        time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC),
		"2026-11-29T18:00:00.000001+0000":  time.Date(2026, 11, 29, 18, 0, 0, 1000, time.UTC),
		"2026-11-29T18:00:00Z":             time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC),
		"2026-11-29 19:00:00.000000+01:00": time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC),
	} {
		got, ok := ironic.ParseTimestamp(in)
		if !ok || !got.Equal(w) || got.Location() != time.UTC {
			t.Errorf("ParseTimestamp(%q) = %v, %v", in, got, ok)
		}
	}
	for _, bad := range []string{"", "yesterday", "2026-13-40T00:00:00"} {
		if _, ok := ironic.ParseTimestamp(bad); ok {
			t.Errorf("ParseTimestamp(%q) ok", bad)
		}
	}
}

// At an older microversion the newer fields are neither requested (no
// 406) nor guessed: they are reported missing.
func TestSimOlderMicroversion(t *testing.T) {
	sim, ic, c := newSimClient(t, openstacksim.Options{IronicMaxVersion: "1.46"})
	if c.IronicVersion != "1.46" {
		t.Fatalf("negotiated %s", c.IronicVersion)
	}
	id := sim.AddNode(openstacksim.Node{ProvisionState: "available", Owner: "p1", Lessee: "p2", ConductorGroup: "pool", Fault: "power failure", Maintenance: true}).UUID
	nodes, err := ic.ListNodes(ctxT(t))
	if err != nil || len(nodes) != 1 {
		t.Fatalf("%v %v", nodes, err)
	}
	n := nodes[0]
	for _, f := range []string{"owner", "lessee", "allocation_uuid"} {
		if !n.Missing[f] {
			t.Errorf("%s not missing at 1.46: %v", f, n.Missing)
		}
	}
	if n.Missing["fault"] || n.Fault != "power failure" || n.ConductorGroup != "pool" || n.Owner != "" {
		t.Errorf("node %+v", n)
	}
	g, err := ic.GetNode(ctxT(t), id)
	if err != nil || !g.Missing["lessee"] || g.ConductorGroup != "pool" {
		t.Errorf("GetNode %+v %v", g, err)
	}
}

func TestSimGetNode(t *testing.T) {
	sim, ic, _ := newSimClient(t, openstacksim.Options{})
	seeded := sim.SeedLikeTestbed(10)
	n, err := ic.GetNode(ctxT(t), seeded[1].UUID)
	if err != nil {
		t.Fatal(err)
	}
	if n.ProvisionState != "active" || n.InstanceUUID == "" || n.Name != "node-002" {
		t.Errorf("node-002 %+v", n)
	}
	if _, err := ic.GetNode(ctxT(t), "00000000-0000-0000-0000-000000000000"); !errors.Is(err, ironic.ErrNodeNotFound) {
		t.Errorf("unknown node: %v", err)
	}
}

func TestSimTraits(t *testing.T) {
	sim, ic, _ := newSimClient(t, openstacksim.Options{})
	id := sim.AddNode(openstacksim.Node{ProvisionState: "available", Traits: []string{"CUSTOM_GPU"}}).UUID
	ctx := ctxT(t)
	const tr = "CUSTOM_CUSTOMER_READY"
	for range 2 { // idempotent
		if err := ic.AddTrait(ctx, id, tr); err != nil {
			t.Fatal(err)
		}
	}
	ts, err := ic.NodeTraits(ctx, id)
	if err != nil || !slices.Equal(ts, []string{"CUSTOM_GPU", tr}) {
		t.Fatalf("traits %v %v", ts, err)
	}
	for range 2 { // removing an absent trait is a success
		if err := ic.RemoveTrait(ctx, id, tr); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := sim.Node(id); !slices.Equal(n.Traits, []string{"CUSTOM_GPU"}) {
		t.Fatalf("sim traits %v", n.Traits)
	}
	const gone = "00000000-0000-0000-0000-000000000000"
	if err := ic.RemoveTrait(ctx, gone, tr); !errors.Is(err, ironic.ErrNodeNotFound) {
		t.Errorf("remove on unknown node: %v", err)
	}
	if err := ic.AddTrait(ctx, gone, tr); !errors.Is(err, ironic.ErrNodeNotFound) {
		t.Errorf("add on unknown node: %v", err)
	}
	if _, err := ic.NodeTraits(ctx, gone); !errors.Is(err, ironic.ErrNodeNotFound) {
		t.Errorf("traits of unknown node: %v", err)
	}
	if err := ic.AddTrait(ctx, id, "lower_case"); err == nil {
		t.Error("invalid trait name accepted")
	}
}

// 409 NodeLocked on a trait write is retried and then succeeds; a lock that
// never goes away fails with a clear error.
func TestSimNodeLocked(t *testing.T) {
	sim, ic, _ := newSimClient(t, openstacksim.Options{})
	id := sim.AddNode(openstacksim.Node{ProvisionState: "available"}).UUID
	ctx := ctxT(t)
	const tr = "CUSTOM_CUSTOMER_READY"

	// Injected 409s (Ironic's NodeLocked body), twice.
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceBaremetal, Method: http.MethodPut, PathContains: "/traits/", Status: http.StatusConflict, Times: 2})
	if err := ic.AddTrait(ctx, id, tr); err != nil {
		t.Fatalf("AddTrait after 2 × 409: %v", err)
	}

	// A real reservation that the "conductor" releases after a while.
	_ = sim.UpdateNode(id, func(n *openstacksim.Node) { n.Reservation = "conductor-1" })
	ic.WriteRetry = openstack.RetryPolicy{InitialInterval: 20 * time.Millisecond, MaxInterval: 50 * time.Millisecond, MaxAttempts: 20, Budget: 10 * time.Second}
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = sim.UpdateNode(id, func(n *openstacksim.Node) { n.Reservation = "" })
	}()
	if err := ic.RemoveTrait(ctx, id, tr); err != nil {
		t.Fatalf("RemoveTrait while locked for 100ms: %v", err)
	}

	// Locked for good.
	_ = sim.UpdateNode(id, func(n *openstacksim.Node) { n.Reservation = "conductor-1" })
	ic.WriteRetry = ostest.FastRetry(3)
	err := ic.AddTrait(ctx, id, tr)
	if !errors.Is(err, ironic.ErrNodeLocked) || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "3 attempts") {
		t.Fatalf("persistent lock: %v", err)
	}
	t.Logf("persistent lock error: %v", err)
}

// A token that expires during a long run is renewed without a failed call:
// by the proactive margin when the expiry is known, and by gophercloud's
// re-authentication on a 401 when Keystone revokes it early.
func TestSimTokenRenewal(t *testing.T) {
	// 2 s tokens: the margin is a quarter of the life, 500 ms, and a request
	// is refused with 401 if more than the margin passes between
	// gophercloud's expiry check and the simulator's; with 1 s tokens that
	// was 250 ms, within reach of a CPU-starved CI machine's stalls.
	sim, ic, c := newSimClient(t, openstacksim.Options{TokenTTL: 2 * time.Second})
	addNodes(sim, 3)
	ctx := ctxT(t)
	if c.Provider.ReauthBeforeTokenExpiration >= 2*time.Second || c.Provider.ReauthBeforeTokenExpiration <= 0 {
		t.Errorf("reauth margin %v for a 2s token", c.Provider.ReauthBeforeTokenExpiration)
	}
	issued := sim.TokensIssued()
	sim.ResetRequests()
	deadline := time.Now().Add(5 * time.Second)
	calls := 0
	for time.Now().Before(deadline) {
		if _, err := ic.ListNodes(ctx); err != nil {
			t.Fatalf("call %d failed: %v", calls, err)
		}
		calls++
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d calls, %d tokens issued", calls, sim.TokensIssued()-issued)
	// Renewed before expiry: Ironic never saw an expired token.
	for _, r := range sim.Requests() {
		if r.Status == http.StatusUnauthorized {
			t.Errorf("a request was refused with 401 although the token's expiry was known: %+v", r)
		}
	}
	if sim.TokensIssued() <= issued {
		t.Errorf("no new token in 5s of 2s tokens")
	}

}

// Keystone revokes the token early (expiry not known in advance): the next
// call gets a 401, gophercloud re-authenticates and the call succeeds.
func TestSimTokenRevoked(t *testing.T) {
	sim, ic, _ := newSimClient(t, openstacksim.Options{})
	addNodes(sim, 3)
	ctx := ctxT(t)
	if _, err := ic.ListNodes(ctx); err != nil {
		t.Fatal(err)
	}
	issued := sim.TokensIssued()
	sim.ExpireTokens()
	sim.ResetRequests()
	if _, err := ic.ListNodes(ctx); err != nil {
		t.Fatalf("call after ExpireTokens: %v", err)
	}
	var statuses []int
	for _, r := range sim.Requests() {
		if r.Service == openstacksim.ServiceBaremetal {
			statuses = append(statuses, r.Status)
		}
	}
	if !slices.Contains(statuses, http.StatusUnauthorized) || statuses[len(statuses)-1] != http.StatusOK {
		t.Errorf("statuses %v: want a 401 then 200", statuses)
	}
	if sim.TokensIssued() != issued+1 {
		t.Errorf("%d new tokens, want 1", sim.TokensIssued()-issued)
	}
}

// BenchmarkSimListNodes10k lists 10,000 nodes (10 pages) from the simulator.
func BenchmarkSimListNodes10k(b *testing.B) {
	sim, c := ostest.ConnectSim(b, openstacksim.Options{})
	addNodes(sim, 10000)
	ic := ironic.New(c.Baremetal, nil)
	ctx := context.Background()
	for b.Loop() {
		if nodes, err := ic.ListNodes(ctx); err != nil || len(nodes) != 10000 {
			b.Fatal(len(nodes), err)
		}
	}
}

// Pages 2+ that lack fields (Ironic ignoring ?fields= on later pages, or a
// proxy stripping them) are reported per node in Unsent; page 1 is
// complete; a single-node read that lacks them likewise.
func TestListReportsFieldsLeftOutOfLaterPages(t *testing.T) {
	sim, c := ostest.ConnectSim(t, openstacksim.Options{})
	for i := range 7 {
		sim.AddNode(openstacksim.Node{Name: fmt.Sprintf("n-%d", i), ProvisionState: "available", Maintenance: true, Fault: "power failure"})
	}
	ic := ironic.New(c.Baremetal, ostest.Logger(t))
	ic.PageLimit = 3
	sim.SetFieldLoss(openstacksim.FieldLoss{LaterPages: true, SingleNode: true})
	nodes, err := ic.ListNodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 7 {
		t.Fatalf("%d nodes, want 7", len(nodes))
	}
	for i, n := range nodes {
		switch {
		case i < 3 && (len(n.Unsent) > 0 || n.Fault != "power failure"):
			t.Errorf("page 1 node %s: unsent %v fault %q", n.Name, n.Unsent, n.Fault)
		case i >= 3 && (!n.Unsent["fault"] || !n.Unsent["traits"] || !n.Missing["fault"] || n.Unsent["maintenance"] || !n.Maintenance):
			t.Errorf("page %d node %s: unsent %v missing %v maintenance %v", i/3+1, n.Name, n.Unsent, n.Missing, n.Maintenance)
		}
	}
	n, err := ic.GetNode(context.Background(), nodes[0].UUID)
	if err != nil {
		t.Fatal(err)
	}
	if !n.Unsent["fault"] || !n.Unsent["lessee"] {
		t.Errorf("single read: unsent %v", n.Unsent)
	}
	sim.SetFieldLoss(openstacksim.FieldLoss{})
	if n, err = ic.GetNode(context.Background(), nodes[0].UUID); err != nil || len(n.Unsent) > 0 {
		t.Errorf("complete single read: unsent %v, %v", n.Unsent, err)
	}
}
