package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
)

// costSite is a simulated site of n nodes where every other node runs a
// Nova instance (a consistent pair: node.instance_uuid = server id,
// server.hypervisor_hostname = node), every provider and node carries
// CUSTOM_CUSTOMER_READY, and one listing has been made.
func costSite(b *testing.B, n int) *sweepSite {
	b.Helper()
	t := &testing.T{}
	s := newSweepSite(t, openstacksim.Options{IronicMaxLimit: 1000, NovaMaxLimit: 1000})
	b.Cleanup(func() { s.sim.Close() })
	for i := range n {
		node := s.sim.AddNode(openstacksim.Node{Name: fmt.Sprintf("n-%05d", i), ProvisionState: "available", PowerState: "power off",
			ResourceClass: "gpu-h100", Traits: []string{"CUSTOM_CUSTOMER_READY"}})
		s.sim.AddProvider(node.UUID, node.UUID, []string{"CUSTOM_CUSTOMER_READY"})
		if i%2 == 0 {
			srv, err := s.sim.AddServer(openstacksim.Server{HypervisorHostname: node.UUID, TenantID: "p-cust"})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.sim.UpdateNode(node.UUID, func(x *openstacksim.Node) { x.ProvisionState, x.InstanceUUID = "active", srv.ID }); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := s.a.Poll(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s
}

// requestsBy counts the simulator's requests per service since the last reset.
func requestsBy(sim *openstacksim.Cloud) (map[string]int, int) {
	by := map[string]int{}
	total := 0
	for _, r := range sim.Requests() {
		by[r.Service+" "+r.Method]++
		total++
	}
	return by, total
}

// BenchmarkSweepCost: one sweep of a 10,000-node site with 5,000 Nova
// instances: 5,000 single-node GETs (8 at a time), the server listing in
// pages of 1,000. Reports requests per sweep and the sweep's wall time.
func BenchmarkSweepCost(b *testing.B) {
	for _, n := range []int{20, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			s := costSite(b, n)
			ctx := context.Background()
			var reqs int
			var by map[string]int
			b.ResetTimer()
			for range b.N {
				s.sim.ResetRequests()
				if err := s.a.Sweep(ctx); err != nil {
					b.Fatal(err)
				}
				by, reqs = requestsBy(s.sim)
			}
			b.StopTimer()
			st := s.a.Stats().LastSweep
			if st.Candidates != 0 || !st.Judged {
				b.Fatalf("consistent site judged %d candidates (judged=%v)", st.Candidates, st.Judged)
			}
			b.ReportMetric(float64(reqs), "requests/sweep")
			b.ReportMetric(st.Duration.Seconds(), "s/sweep")
			b.Logf("nodes=%d: %d requests per sweep %v, last sweep %s", n, reqs, by, st.Duration.Round(time.Millisecond))
		})
	}
}

// BenchmarkResyncCost: one resync of a 10,000-node site where the hub has
// a desired state for every device (half quarantined, half released) and
// OpenStack already agrees: reads only. Reports requests and wall time.
func BenchmarkResyncCost(b *testing.B) {
	for _, n := range []int{20, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			s := costSite(b, n)
			ctx := context.Background()
			states := &ironlinkv1.DesiredStates{}
			for i, node := range s.sim.Nodes() {
				d := ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_RELEASED
				if i%2 == 1 {
					d = ironlinkv1.ImpairmentState_IMPAIRMENT_STATE_QUARANTINED
				}
				states.Devices = append(states.Devices, &ironlinkv1.DeviceDesiredState{DeviceId: node.UUID, Desired: d, Generation: 1})
			}
			// Converge once (the quarantined half loses its traits), then measure steady state.
			// A first application is not drift: it is counted in
			// Stats().ResyncFirstApplies and returns no drift report.
			if got := s.a.HandleDesiredStates(ctx, states); len(got) != 0 {
				b.Fatalf("first resync reported %d drifted devices, want 0 (first applications are not drift)", len(got))
			}
			if got := s.a.Stats().ResyncFirstApplies; got != n/2 {
				b.Fatalf("first resync applied %d desired states for the first time, want %d", got, n/2)
			}
			var reqs int
			var by map[string]int
			b.ResetTimer()
			for range b.N {
				s.sim.ResetRequests()
				if got := s.a.HandleDesiredStates(ctx, states); len(got) != 0 {
					b.Fatalf("steady-state resync corrected %d devices", len(got))
				}
				by, reqs = requestsBy(s.sim)
			}
			b.StopTimer()
			st := s.a.Stats()
			b.ReportMetric(float64(reqs), "requests/resync")
			b.ReportMetric(st.LastResyncDuration.Seconds(), "s/resync")
			b.Logf("nodes=%d: %d requests per resync %v, last resync %s", n, reqs, by, st.LastResyncDuration.Round(time.Millisecond))
		})
	}
}
