package agent_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ironlink/ironlink/internal/condition"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/internal/promtest"
	"github.com/ironlink/ironlink/satellite/agent"
	"github.com/ironlink/ironlink/satellite/ironic"
	"github.com/ironlink/ironlink/satellite/link"
	"github.com/ironlink/ironlink/satellite/metrics"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
)

// Ironic leaving fields out of later pages (the simulator answers as such
// Ironic versions and proxies do) is counted per kind on /metrics, degrades
// the poll (ListingConsistent=False/FieldsUnsent naming the fields) and
// still marks it polled; a failed listing sets InventoryPolled=False/
// PollFailed; a complete listing again clears both. Every poll re-sends
// the set (a fresh poll-success mark for the hub), even when nothing changed.
func TestListingHazardsCountedAndReported(t *testing.T) {
	ctx := context.Background()
	sim, c := ostest.ConnectSim(t, openstacksim.Options{})
	for i := range 20 {
		sim.AddNode(openstacksim.Node{Name: fmt.Sprintf("h-%02d", i), ProvisionState: "available", PowerState: "power off",
			Maintenance: i == 5, Fault: "power failure", Lessee: "customer-project"})
	}
	ir := ironic.New(c.Baremetal, ostest.Logger(t))
	ir.ReadRetry = ostest.FastRetry(2)
	ir.PageLimit = 3
	site := link.NewSiteState(nil)
	m := metrics.New()
	srv := httptest.NewServer(promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	a := agent.New(agent.Config{Observer: m}, agent.Clients{Ironic: ir}, link.NewOutbox(), site, ostest.Logger(t))
	scrape := func() float64 {
		v, _ := promtest.Scrape(t, srv.URL+"/metrics").Value("ironlink_satellite_listing_hazards_total", "kind", "unsent_field")
		return v
	}
	get := func(typ condition.Type) condition.Condition {
		c, ok := site.Get(typ)
		if !ok {
			t.Fatalf("site condition %s not set", typ)
		}
		return c
	}

	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if c := get(condition.ListingConsistent); c.Status != condition.True || c.Reason != condition.ReasonNoHazards {
		t.Fatalf("complete listing: %+v", c)
	}
	first := get(condition.InventoryPolled)
	if first.Status != condition.True || first.Reason != condition.ReasonPollSucceeded {
		t.Fatalf("complete listing: %+v", first)
	}
	if v := scrape(); v != 0 {
		t.Fatalf("hazards after a complete listing: %v", v)
	}

	sim.SetFieldLoss(openstacksim.FieldLoss{LaterPages: true, Drop: []string{"fault", "lessee"}})
	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	lc := get(condition.ListingConsistent)
	if lc.Status != condition.False || lc.Reason != condition.ReasonFieldsUnsent || !strings.Contains(lc.Message, "fault=") {
		t.Fatalf("listing with fields left out of pages 2+: %+v", lc)
	}
	// 20 nodes in pages of 3: 17 on pages 2+, each lacking two fields.
	if v := scrape(); v != 34 {
		t.Fatalf("unsent_field hazards = %v, want 34", v)
	}
	if p := get(condition.InventoryPolled); p.Status != condition.True || !p.ObservedTime.After(first.ObservedTime) {
		t.Fatalf("degraded poll: InventoryPolled %+v (first %v): want True, observed later", p, first.ObservedTime)
	}

	sim.InjectFault(openstacksim.Fault{Service: "baremetal", Method: "GET", PathContains: "/v1/nodes", Status: 500, Times: -1})
	if err := a.Poll(ctx); err == nil {
		t.Fatal("poll succeeded against a failing Ironic")
	}
	if p := get(condition.InventoryPolled); p.Status != condition.False || p.Reason != condition.ReasonPollFailed || p.Message == "" {
		t.Fatalf("failed poll: %+v", p)
	}
	sim.ClearFaults()
	sim.SetFieldLoss(openstacksim.FieldLoss{})
	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if p, lc := get(condition.InventoryPolled), get(condition.ListingConsistent); p.Status != condition.True || lc.Status != condition.True {
		t.Fatalf("complete listing again: %+v %+v", p, lc)
	}
}

// Ironic listing a node again on the next page (the simulator's
// RepeatMarker) is counted as duplicate_node per node on /metrics, degrades
// the poll (ListingConsistent=False/DuplicateNodes) and keeps each node
// once; a listing without repeats clears it.
func TestListingHazardDuplicateNode(t *testing.T) {
	ctx := context.Background()
	sim, c := ostest.ConnectSim(t, openstacksim.Options{})
	for i := range 10 {
		sim.AddNode(openstacksim.Node{Name: fmt.Sprintf("d-%02d", i), ProvisionState: "available", PowerState: "power off"})
	}
	ir := ironic.New(c.Baremetal, ostest.Logger(t))
	ir.ReadRetry = ostest.FastRetry(2)
	ir.PageLimit = 3
	site := link.NewSiteState(nil)
	m := metrics.New()
	srv := httptest.NewServer(promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	a := agent.New(agent.Config{Observer: m}, agent.Clients{Ironic: ir}, link.NewOutbox(), site, ostest.Logger(t))
	sim.SetFieldLoss(openstacksim.FieldLoss{RepeatMarker: true})
	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	lc, _ := site.Get(condition.ListingConsistent)
	if lc.Status != condition.False || lc.Reason != condition.ReasonDuplicateNodes || !strings.Contains(lc.Message, "nodes on more than one page") {
		t.Fatalf("listing with repeated markers: %+v", lc)
	}
	// 10 nodes in pages of 3, each later page starting with the previous
	// page's last node: 0-2, 2-4, 4-6, 6-8, 8-9: four nodes listed twice.
	v, _ := promtest.Scrape(t, srv.URL+"/metrics").Value("ironlink_satellite_listing_hazards_total", "kind", "duplicate_node")
	if v != 4 {
		t.Fatalf("duplicate_node hazards = %v, want 4", v)
	}
	if p, _ := site.Get(condition.InventoryPolled); p.Status != condition.True {
		t.Fatalf("degraded poll: InventoryPolled %+v, want True", p)
	}
	sim.SetFieldLoss(openstacksim.FieldLoss{})
	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if lc, _ := site.Get(condition.ListingConsistent); lc.Status != condition.True {
		t.Fatalf("listing without repeats: %+v", lc)
	}
	if v2, _ := promtest.Scrape(t, srv.URL+"/metrics").Value("ironlink_satellite_listing_hazards_total", "kind", "duplicate_node"); v2 != v {
		t.Fatalf("duplicate_node hazards grew to %v on a clean listing (was %v)", v2, v)
	}
}
