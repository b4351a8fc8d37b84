package nova_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/nova"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
)

func client(t *testing.T, opts openstacksim.Options) (*openstacksim.Cloud, *nova.Client) {
	t.Helper()
	sim, c := ostest.ConnectSim(t, opts)
	if c.Compute == nil {
		t.Fatal("no compute client for a simulator with Nova")
	}
	nc := nova.New(c.Compute, ostest.Logger(t))
	nc.ReadRetry = ostest.FastRetry(3)
	return sim, nc
}

// Every server of every project over several pages, each once, with the
// hypervisor it runs on; deleted servers are not listed.
func TestListServersPagesAllTenants(t *testing.T) {
	sim, nc := client(t, openstacksim.Options{NovaMaxLimit: 3})
	nc.PageLimit = 3
	want := map[string]string{}
	for i := range 7 {
		n := sim.AddNode(openstacksim.Node{ProvisionState: "active"})
		project := "p-a"
		if i%2 == 1 {
			project = "p-b"
		}
		s, err := sim.AddServer(openstacksim.Server{HypervisorHostname: n.UUID, TenantID: project})
		if err != nil {
			t.Fatal(err)
		}
		want[s.ID] = n.UUID
	}
	gone, err := sim.AddServer(openstacksim.Server{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.DeleteServer(gone.ID); err != nil {
		t.Fatal(err)
	}
	sim.ResetRequests()
	got, err := nc.ListServers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d servers, want %d", len(got), len(want))
	}
	for _, s := range got {
		if want[s.ID] != s.HypervisorHostname || !s.HypervisorVisible || s.TenantID == "" || s.Status != "ACTIVE" {
			t.Errorf("server %+v", s)
		}
	}
	pages := 0
	for _, r := range sim.Requests() {
		if r.Service == openstacksim.ServiceCompute {
			pages++
		}
	}
	if pages != 3 {
		t.Errorf("%d requests for 7 servers in pages of 3, want 3", pages)
	}
}

// A 503 is retried within the budget; a 404 for one server is
// ErrServerNotFound; a credential without the admin policy gets 403 for
// all_tenants and no hypervisor field on a single server.
func TestServerErrors(t *testing.T) {
	sim, nc := client(t, openstacksim.Options{})
	s, err := sim.AddServer(openstacksim.Server{HypervisorHostname: "0b3f9c2e-7d41-4c55-9a1e-3f2b8c7d6e5f"})
	if err != nil {
		t.Fatal(err)
	}
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceCompute, Status: http.StatusServiceUnavailable, Times: 2})
	if got, err := nc.ListServers(context.Background()); err != nil || len(got) != 1 {
		t.Fatalf("listing after two 503s: %v %v", got, err)
	}
	if _, err := nc.GetServer(context.Background(), "7a0c1f7e-5555-4c55-9a1e-3f2b8c7d6e5f"); !errors.Is(err, nova.ErrServerNotFound) {
		t.Fatalf("unknown server: %v", err)
	}
	if got, err := nc.GetServer(context.Background(), s.ID); err != nil || got.HypervisorHostname != "0b3f9c2e-7d41-4c55-9a1e-3f2b8c7d6e5f" {
		t.Fatalf("get: %+v %v", got, err)
	}
	sim.InjectFault(openstacksim.Fault{Service: openstacksim.ServiceCompute, Status: http.StatusServiceUnavailable, Times: -1})
	if _, err := nc.ListServers(context.Background()); !errors.Is(err, nova.ErrListingIncomplete) {
		t.Fatalf("listing with Nova down: %v", err)
	}

	sim2, na := client(t, openstacksim.Options{NovaNonAdmin: true})
	own, err := sim2.AddServer(openstacksim.Server{HypervisorHostname: "0b3f9c2e-7d41-4c55-9a1e-3f2b8c7d6e5f"})
	if err != nil {
		t.Fatal(err)
	}
	// The sweep tells this refusal (OrphanDetection AllTenantsForbidden)
	// by the 403 inside the error.
	if _, err := na.ListServers(context.Background()); openstack.StatusCode(err) != http.StatusForbidden {
		t.Fatalf("non-admin listing all tenants: %v, want a 403", err)
	}
	got, err := na.GetServer(context.Background(), own.ID)
	if err != nil || got.HypervisorVisible {
		t.Fatalf("non-admin get: %+v %v", got, err)
	}
}
