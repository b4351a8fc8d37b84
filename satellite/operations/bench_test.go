package operations_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/openstacksim"
	"github.com/ironlink/ironlink/satellite/openstack"
	"github.com/ironlink/ironlink/satellite/openstack/ostest"
	"github.com/ironlink/ironlink/satellite/operations"
)

// BenchmarkPollUnderOperations: does running operations delay the agent's
// 60 s poll? It times the poll's request (a 1000-node Ironic listing) on
// the simulator alone (the raw reference, measured in the same run) and
// while N operations are reconciled at the default 2 s pass interval, all
// held in "clean wait" (the steady state of a long cleaning), and reports
// the ratio (x-ref: 1.0 means no delay).
func BenchmarkPollUnderOperations(b *testing.B) {
	for _, n := range []int{8, 64, 256} {
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			sim, cfg := ostest.StartSim(b, openstacksim.Options{ProvisionStep: 50 * time.Millisecond})
			for i := 0; i < 1000; i++ {
				sim.AddNode(openstacksim.Node{Name: fmt.Sprintf("fleet-%04d", i), ProvisionState: "available", PowerState: "power off", ResourceClass: "gpu-h100"})
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			admin, err := openstack.Connect(ctx, cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			list := func() time.Duration {
				start := time.Now()
				var out struct {
					Nodes []map[string]any `json:"nodes"`
				}
				if _, err := admin.Baremetal.Get(ctx, admin.Baremetal.ServiceURL("nodes")+"?limit=1000&fields=uuid,name,provision_state,maintenance,power_state,traits", &out, nil); err != nil {
					b.Fatal(err)
				}
				if len(out.Nodes) < 1000 {
					b.Fatalf("listed %d nodes", len(out.Nodes))
				}
				return time.Since(start)
			}
			const refRuns = 20
			var ref time.Duration
			for i := 0; i < refRuns; i++ {
				ref += list()
			}
			ref /= refRuns

			oc, _, err := operations.Connect(ctx, cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			sim.HoldWaitStates(true)
			r := operations.New(ctx, oc, operations.Config{MaxConcurrent: n}, func(*ironlinkv1.OperationProgress) {}, nil)
			for i := 0; i < n; i++ {
				node := sim.AddNode(openstacksim.Node{Name: fmt.Sprintf("op-%04d", i), ProvisionState: "manageable", PowerState: "power off", ResourceClass: "gpu-h100"})
				r.Handle(ironicReq(ironlinkv1.OperationKind_OPERATION_KIND_PROVIDE, node.UUID, nil))
			}
			time.Sleep(3 * time.Second) // every operation past its first pass
			b.ResetTimer()
			var under time.Duration
			for i := 0; i < b.N; i++ {
				under += list()
			}
			b.StopTimer()
			under /= time.Duration(b.N)
			b.ReportMetric(float64(under)/float64(ref), "x-ref")
			b.ReportMetric(float64(ref.Microseconds()), "ref-µs")
			b.Logf("ops=%d: listing %s under operations vs %s alone (ratio %.2f); %d running", n, under, ref, float64(under)/float64(ref), r.Running())
		})
	}
}
